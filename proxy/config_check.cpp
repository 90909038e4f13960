#include "proxy/server.h"

#include <set>

#include <boost/asio/ip/address.hpp>
#include <nlohmann/json.hpp>

#include "proxy/backends.h"
#include "api/api.h"

namespace toktier::proxy {
namespace {

using core::Status;
using nlohmann::ordered_json;

// An HTTP field name is a token (RFC 9110 5.1): a session header that is not
// one could never match a request.
bool IsToken(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (c <= 0x20 || c >= 0x7f) return false;
    if (std::string_view("\"(),/:;<=>?@[\\]{}").find(static_cast<char>(c)) != std::string_view::npos) return false;
  }
  return true;
}

Status CheckUrls(const std::vector<std::string>& urls, const std::string& where) {
  for (const auto& u : urls) {
    std::string host;
    uint16_t port = 0;
    if (!ParseBackendUrl(u, &host, &port)) {
      return Status::Error(where + ": backend URL must be http://host:port: '" + u + "'");
    }
  }
  return Status::Ok();
}

}  // namespace

core::Status CheckConfig(const Config& c, std::string* summary) {
  boost::system::error_code ec;
  boost::asio::ip::make_address(c.listen_address, ec);
  if (ec) {
    return Status::Error("listen: not an IP address: '" + c.listen_address + "'");
  }
  if (Status st = config::CheckOptionRanges(c); !st.ok()) return st;
  if (c.health_path.empty() || c.health_path[0] != '/') {
    return Status::Error("health.path: must start with '/'");
  }
  for (const auto& h : c.session_headers) {
    if (!IsToken(h)) {
      return Status::Error("session_headers: not an HTTP field name: '" + h + "'");
    }
  }
  if (c.backends.empty()) {
    return Status::Error("backends: the default pool is empty");
  }
  if (Status st = CheckUrls(c.backends, "backends"); !st.ok()) return st;

  ordered_json tokenizers = ordered_json::array();
  std::set<std::string> names;
  for (const auto& m : c.models) {
    if (m.name.empty() || m.tokenizer.empty()) {
      return Status::Error("models: an entry needs 'name' and 'tokenizer'");
    }
    if (Status st = CheckUrls(m.backends, "model " + m.name); !st.ok()) return st;
    if (!names.insert(m.name).second) {
      return Status::Error("models: the name '" + m.name + "' is used twice");
    }
    for (const auto& a : m.aliases) {
      if (!names.insert(a).second) {
        return Status::Error("models: the name '" + a + "' (an alias of " + m.name + ") is used twice");
      }
    }
    std::shared_ptr<const core::Tokenizer> tok;
    if (Status st = LoadTokenizerFile(m.tokenizer, m.encoding, &tok); !st.ok()) {
      return Status::Error(st.code(), "model " + m.name + ": " + st.message());
    }
    tokenizers.push_back({{"model", m.name},
                          {"tokenizer", m.tokenizer},
                          {"version_hash", tok->version_hash()},
                          {"vocab_size", tok->vocab_size()}});
  }
  ordered_json out = {{"config", ordered_json::parse(config::ConfigToJson(c))}, {"tokenizers", tokenizers}};
  *summary = out.dump(2);
  return Status::Ok();
}

}  // namespace toktier::proxy
