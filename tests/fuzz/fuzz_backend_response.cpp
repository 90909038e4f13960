// The proxy's response-side rules on hostile engine bytes: interim 1xx
// answers read and dropped before the final one (101 refused), framing
// checked, hop-by-hop fields stripped, and the pool rule: a connection is
// reusable only after a complete, well-formed response with nothing after it.
// Mirrors proxy/upstream.cpp's sequence on one buffer; invariants asserted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "fuzz_support.h"
#include "http_feed.h"
#include "http/http.h"

namespace http = boost::beast::http;

namespace {

void Check(bool ok, const char* what) { toktier::fuzz::Check(ok, "fuzz_backend_response", what); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kHeaderLimit = 8 * 1024;
  std::string_view in(reinterpret_cast<const char*>(data), size);
  size_t header_bytes = 0;
  for (int interim = 0; interim < 16; ++interim) {
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 20);
    if (header_bytes >= kHeaderLimit) return 0;  // the proxy answers 502
    parser.header_limit(static_cast<uint32_t>(kHeaderLimit - header_bytes));
    parser.eager(true);
    boost::system::error_code ec;
    // An interim answer ends at its header.
    size_t used = toktier::fuzz::FeedMessage(parser, in, ec, [&] {
      return !parser.is_done() && parser.is_header_done() && parser.get().result_int() / 100 == 1;
    });
    if (used >= in.size() && !parser.is_done() && !ec) parser.put_eof(ec);
    if (ec && !parser.is_header_done()) return 0;  // 502 (malformed or truncated header)
    if (!parser.is_header_done()) return 0;
    auto& res = parser.get();
    const unsigned code = res.result_int();
    if (code == 101) return 0;  // 502: no upgrade was asked for
    if (code / 100 == 1) {      // interim: dropped, the final response follows
      header_bytes += used;
      in.remove_prefix(used);
      continue;
    }
    std::string_view framing = toktier::http1::FramingProblem(res, res.version());
    if (!framing.empty()) return 0;  // 502
    const bool complete = parser.is_done() && !ec;
    const bool keep_alive = res.keep_alive() && !parser.need_eof();
    const bool leftover = used < in.size();
    const bool reusable = complete && keep_alive && !leftover;
    // The rule the pool applies: bytes after the declared body (or a body
    // that ends only at EOF) never leave a connection reusable.
    if (leftover) Check(!reusable, "extra bytes after the body forbid reuse");
    if (parser.need_eof()) Check(!reusable, "an EOF-delimited body forbids reuse");
    http::fields copy = res.base();
    toktier::http1::HopByHop hop(copy);
    toktier::http1::StripHopByHop(copy);
    for (const auto& f : copy) Check(!hop.Contains(f.name(), f.name_string()), "hop-by-hop field stripped");
    return 0;
  }
  return 0;
}
