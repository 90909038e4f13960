#include "http/http.h"

#include <boost/asio/error.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>

namespace toktier::http1 {
namespace {

namespace asio = boost::asio;

bool IsOws(char c) { return c == ' ' || c == '\t'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

// Calls fn(token) for each element of a comma-separated list (empty
// elements included, so "chunked," is not "chunked").
template <class Fn>
void ForEachListElement(std::string_view list, Fn&& fn) {
  for (;;) {
    size_t comma = list.find(',');
    fn(Trim(list.substr(0, comma)));
    if (comma == std::string_view::npos) return;
    list.remove_prefix(comma + 1);
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 reg-name: unreserved, sub-delims, and '%' of a percent escape.
bool IsRegNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("-._~!$&'()*+,;=%").find(c) != std::string_view::npos;
}

bool IsFixedHopByHop(http::field f) {
  switch (f) {
    case http::field::connection:
    case http::field::keep_alive:
    case http::field::proxy_connection:
    case http::field::te:
    case http::field::trailer:
    case http::field::transfer_encoding:
    case http::field::upgrade:
    case http::field::proxy_authorization:
    case http::field::proxy_authenticate:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view FramingProblem(const http::fields& fields, unsigned version) {
  size_t lengths = 0, encodings = 0;
  bool only_chunked = true;
  for (const auto& f : fields) {
    if (f.name() == http::field::content_length) {
      ++lengths;
      std::string_view v = Trim(f.value());
      if (v.empty() || v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return "invalid Content-Length";
    } else if (f.name() == http::field::transfer_encoding) {
      ForEachListElement(f.value(), [&](std::string_view coding) {
        ++encodings;
        if (!boost::beast::iequals(coding, "chunked")) only_chunked = false;
      });
    }
  }
  if (lengths > 1) return "more than one Content-Length";
  if (encodings == 0) return "";
  if (version < 11) return "Transfer-Encoding in an HTTP/1.0 message";
  if (lengths) return "both Transfer-Encoding and Content-Length";
  if (encodings != 1 || !only_chunked) return "Transfer-Encoding other than chunked";
  return "";
}

std::string_view HostProblem(const http::fields& fields, unsigned version) {
  size_t count = 0;
  std::string_view value;
  for (const auto& f : fields) {
    if (f.name() != http::field::host) continue;
    if (++count > 1) return "more than one Host field";
    value = Trim(f.value());
  }
  if (count == 0) return version >= 11 ? "an HTTP/1.1 request must have a Host field" : "";
  std::string_view host = value;
  std::string_view port;
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == std::string_view::npos) return "invalid Host field";
    const std::string_view literal = host.substr(1, close - 1);
    if (literal.empty() || !std::all_of(literal.begin(), literal.end(),
                                        [](char c) { return HexValue(c) >= 0 || c == ':' || c == '.'; })) {
      return "invalid Host field";
    }
    std::string_view rest = host.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') return "invalid Host field";
    port = rest.empty() ? rest : rest.substr(1);
  } else {
    if (size_t colon = host.find(':'); colon != std::string_view::npos) {
      port = host.substr(colon + 1);
      host = host.substr(0, colon);
    }
    // reg-name (IPv4 addresses are made of its characters too).
    if (!std::all_of(host.begin(), host.end(), IsRegNameChar)) return "invalid Host field";
  }
  if (port.size() > 5 || !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return "invalid Host field";
  }
  return "";
}

std::string_view TargetProblem(std::string_view target) {
  if (target.empty() || target.front() != '/') return "the request target must be an absolute path";
  if (target.find('#') != std::string_view::npos) return "the request target must not contain a fragment";
  const std::string_view path = target.substr(0, target.find('?'));
  // Segment by segment (the path starts with '/': the first one is empty).
  size_t at = 1;
  for (;;) {
    const size_t end = std::min(path.find('/', at), path.size());
    // The segment as the engine's router may decode it, up to ";params".
    std::string decoded;
    for (size_t i = at; i < end; ++i) {
      char c = path[i];
      if (c == '\\') return "the request path must not contain a backslash";
      if (c == '%') {
        const int hi = i + 2 < end ? HexValue(path[i + 1]) : -1;
        const int lo = hi >= 0 ? HexValue(path[i + 2]) : -1;
        if (lo < 0) return "malformed percent escape in the request path";
        c = static_cast<char>(hi * 16 + lo);
        i += 2;
        if (c == '/' || c == '\\') return "the request path must not contain an encoded slash or backslash";
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          return "the request path must not contain an encoded control character";
      }
      decoded.push_back(c);
    }
    const std::string_view seg = std::string_view(decoded).substr(0, decoded.find(';'));
    if (seg == "." || seg == "..") return "the request path must not contain dot segments";
    if (end == path.size()) return "";
    at = end + 1;
  }
}

HopByHop::HopByHop(const http::fields& fields) {
  for (const auto& f : fields) {
    if (f.name() != http::field::connection) continue;
    ForEachListElement(f.value(), [&](std::string_view token) {
      if (token.empty()) return;
      std::string lower(token);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      named_.push_back(std::move(lower));
    });
  }
}

bool HopByHop::Contains(http::field id, std::string_view name) const {
  if (IsFixedHopByHop(id)) return true;
  for (const auto& n : named_) {
    if (boost::beast::iequals(n, name)) return true;
  }
  return false;
}

void StripHopByHop(http::fields& fields) {
  const HopByHop hop(fields);
  for (auto it = fields.begin(); it != fields.end();) {
    if (hop.Contains(it->name(), it->name_string())) it = fields.erase(it); else ++it;
  }
}

bool IsResourceExhausted(const boost::system::error_code& ec) {
  if (ec.category() != boost::system::system_category()) return false;
  const int e = ec.value();
  return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM;
}

bool IsParseError(const boost::system::error_code& ec) {
  if (ec.category() != boost::system::error_code(http::error::bad_version).category()) return false;
  return ec != http::error::end_of_stream && ec != http::error::partial_message && ec != http::error::need_buffer &&
         ec != http::error::need_more;
}

}  // namespace toktier::http1
