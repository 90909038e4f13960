// Feeds one HTTP message from a buffer to a Beast parser, as the server's
// reads would: stops when the message is done, the parser wants more input
// (ec cleared), on an error (ec set), or when stop() says so after a step.
// Returns the bytes the parser consumed.
#pragma once

#include <cstddef>
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace toktier::fuzz {

template <class Parser, class Stop>
size_t FeedMessage(Parser& parser, std::string_view in, boost::system::error_code& ec, Stop stop) {
  size_t used = 0;
  while (used < in.size() && !parser.is_done()) {
    size_t n = parser.put(boost::asio::buffer(in.data() + used, in.size() - used), ec);
    if (ec == boost::beast::http::error::need_more) {
      ec = {};
      break;
    }
    if (ec || n == 0) break;
    used += n;
    if (stop()) break;
  }
  return used;
}

}  // namespace toktier::fuzz
