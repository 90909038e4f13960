// http/: the HTTP/1.1 message rules the proxy enforces on both sides
// (clients and engines), as pure functions over Beast's parsed headers
// (message framing, Host, the request target, hop-by-hop fields, which
// socket errors are local), and a header read that counts every header byte.
// No connections or state live here; proxy/ owns those. docs/security.md
// ("HTTP data plane") says which rule answers which attack.
#pragma once

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace toktier::http1 {

namespace http = boost::beast::http;

// Framing (RFC 9112 6): a message has at most one Content-Length, made of
// digits only; a Transfer-Encoding must be exactly "chunked" (a single
// coding, the only one Beast decodes: anything else cannot be forwarded with
// a Content-Length), never together with a Content-Length, and never in an
// HTTP/1.0 message. "" when the framing is sound, else why not.
std::string_view FramingProblem(const http::fields& fields, unsigned version);

// Host (RFC 9112 3.2, a MUST): an HTTP/1.1 request has exactly one Host
// field, an HTTP/1.0 request at most one, and its value is empty or
// uri-host[":" port] (RFC 3986: a bracketed IP literal, or registered-name
// characters and percent escapes; the port digits only). "" when sound,
// else why not (the caller answers 400 and closes).
std::string_view HostProblem(const http::fields& fields, unsigned version);

// Request targets (RFC 9112 3.2 and RFC 3986 5.2.4): only origin-form
// ("/path[?query]") is accepted, and its path must not contain a dot segment
// ("." or "..", also percent-encoded, also followed by ";params"), a
// backslash, a percent-encoded "/", "\" or control byte, or a malformed
// percent escape. Such paths are rejected, not normalised: a normalised path
// is not what the client wrote, and no client that follows RFC 3986 sends
// them. "" when acceptable, else why not.
std::string_view TargetProblem(std::string_view target);

// The hop-by-hop fields of one message (RFC 9110 7.6.1): the fixed list
// (Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Transfer-Encoding,
// Upgrade, Proxy-Authorization, Proxy-Authenticate) plus every field named
// in the message's Connection header(s).
class HopByHop {
 public:
  explicit HopByHop(const http::fields& fields);
  bool Contains(http::field id, std::string_view name) const;

 private:
  std::vector<std::string> named_;  // lower-case field names listed in Connection
};

// Removes the hop-by-hop fields of `fields` (HopByHop above).
void StripHopByHop(http::fields& fields);

// True for socket errors that mean this process (or the system) is out of
// descriptors or buffers: EMFILE, ENFILE, ENOBUFS, ENOMEM. These are local
// conditions: back off, never blame the peer.
bool IsResourceExhausted(const boost::system::error_code& ec);

// True for errors from Beast's HTTP parser about malformed input (not an
// end of stream).
bool IsParseError(const boost::system::error_code& ec);

// Reads a message header into `parser` counting every byte of the start
// line and all fields against `limit` (Beast's header_limit applies to the
// unparsed bytes of one parse step only, so many small fields would add up
// without bound). Completes with (ec, header bytes read so far) on the
// stream's executor; http::error::header_limit when over the limit.
template <class Stream, class Parser, class Handler>
class ReadHeaderWithinOp {
 public:
  ReadHeaderWithinOp(Stream& stream, boost::beast::flat_buffer& buffer, Parser& parser, size_t limit, Handler handler)
      : stream_(&stream), buffer_(&buffer), parser_(&parser), limit_(limit), handler_(std::move(handler)) {}

  void Start() {
    if (parser_->is_header_done()) return handler_(boost::system::error_code{}, used_);
    if (used_ >= limit_) return handler_(boost::system::error_code(http::error::header_limit), used_);
    parser_->header_limit(static_cast<std::uint32_t>(std::min<size_t>(limit_ - used_, UINT32_MAX)));
    Stream& stream = *stream_;
    boost::beast::flat_buffer& buffer = *buffer_;
    Parser& parser = *parser_;
    http::async_read_some(stream, buffer, parser, std::move(*this));
  }

  void operator()(boost::system::error_code ec, size_t n) {
    used_ += n;
    if (ec) return handler_(ec, used_);
    if (used_ > limit_) return handler_(boost::system::error_code(http::error::header_limit), used_);
    Start();
  }

 private:
  Stream* stream_;
  boost::beast::flat_buffer* buffer_;
  Parser* parser_;
  size_t limit_;
  size_t used_ = 0;
  Handler handler_;
};

template <class Stream, class Parser, class Handler>
void AsyncReadHeaderWithin(Stream& stream, boost::beast::flat_buffer& buffer, Parser& parser, size_t limit,
                           Handler&& handler) {
  ReadHeaderWithinOp<Stream, Parser, std::decay_t<Handler>>(stream, buffer, parser, limit,
                                                           std::forward<Handler>(handler))
      .Start();
}

}  // namespace toktier::http1
