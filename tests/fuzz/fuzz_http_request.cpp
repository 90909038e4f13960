// The proxy's request-side rules on hostile bytes: Beast's request parser
// with the server's limits (every header byte counted), then the same checks
// the connection applies (http/http.h: framing, Host, target, hop-by-hop)
// and, for a complete /v1/completions body, the JSON body parser and the
// error JSON. Pipelined requests are parsed one after another, as the
// server does. Invariants are asserted; ASan/UBSan catch the rest.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "fuzz_support.h"
#include "http_feed.h"
#include "http/http.h"

namespace http = boost::beast::http;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_http_request", what); }

void CheckBody(const std::string& body) {
  std::string padded = body;
  padded.reserve(body.size() + toktier::api::JsonPadding());
  toktier::api::CompletionRequest req;
  toktier::api::RequestError err;
  if (toktier::api::ParseCompletionRequest(padded, &req, &err)) {
    Check(req.prompt_begin <= req.prompt_end && req.prompt_end <= padded.size(), "prompt range inside the body");
    for (const auto& r : req.prompts) Check(r.begin <= r.end && r.end <= padded.size(), "raw prompt range");
    Check(!req.prompts.empty() || req.kind == toktier::api::PromptKind::kTokens, "a text prompt has strings");
  } else {
    Check(err.status >= 400 && err.status < 600, "error status");
    Check(!nlohmann::json::parse(toktier::api::ErrorJson(err), nullptr, false).is_discarded(),
          "error body is JSON");
  }
  (void)toktier::api::ModelOfJsonBody(padded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeaderLimit = 8 * 1024;  // small, so the fuzzer reaches it
  constexpr size_t kBodyLimit = 64 * 1024;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  for (int message = 0; message < 8 && !in.empty(); ++message) {
    http::request_parser<http::string_body> parser;
    parser.header_limit(kHeaderLimit);
    parser.body_limit(kBodyLimit);
    parser.eager(true);
    boost::system::error_code ec;
    size_t used = toktier::fuzz::FeedMessage(parser, in, ec, [] { return false; });
    if (ec || !parser.is_header_done()) return 0;
    Check(used <= kHeaderLimit + kBodyLimit + in.size(), "consumed bytes");
    auto& req = parser.get();
    std::string_view framing = toktier::http1::FramingProblem(req, req.version());
    if (framing.empty()) {
      Check(!(req.chunked() && req.has_content_length()), "sound framing is never both chunked and sized");
    }
    if (toktier::http1::HostProblem(req, req.version()).empty()) {
      // Accepted: at most one Host (exactly one in HTTP/1.1), no userinfo,
      // path, query or whitespace in it.
      size_t hosts = 0;
      for (const auto& f : req) {
        if (f.name() != http::field::host) continue;
        ++hosts;
        Check(f.value().find_first_of("/?#@ \t\\") == std::string_view::npos, "an accepted Host is uri-host[:port]");
      }
      Check(hosts == 1 || (hosts == 0 && req.version() < 11), "an accepted request has one Host (HTTP/1.1)");
    }
    std::string_view target(req.target().data(), req.target().size());
    if (toktier::http1::TargetProblem(target).empty()) {
      Check(!target.empty() && target[0] == '/', "accepted targets are origin-form");
      std::string_view path = target.substr(0, target.find('?'));
      Check(path.find("/../") == std::string_view::npos && path.find("/./") == std::string_view::npos &&
                !path.ends_with("/..") && path.find('\\') == std::string_view::npos,
            "accepted paths have no dot segments");
    }
    // Hop-by-hop: nothing named in Connection survives the strip.
    http::fields copy = req.base();
    toktier::http1::HopByHop hop(copy);
    toktier::http1::StripHopByHop(copy);
    for (const auto& f : copy) Check(!hop.Contains(f.name(), f.name_string()), "hop-by-hop field stripped");
    Check(copy.find(http::field::connection) == copy.end(), "Connection stripped");
    Check(copy.find(http::field::transfer_encoding) == copy.end(), "Transfer-Encoding stripped");
    if (!parser.is_done()) return 0;
    if (framing.empty() && target.starts_with("/v1/completions")) CheckBody(req.body());
    in.remove_prefix(used);
  }
  return 0;
}
