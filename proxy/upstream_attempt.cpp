#include "proxy/upstream_attempt.h"

#include <unistd.h>

namespace toktier::proxy {

UpstreamAttempt::UpstreamAttempt(const boost::asio::any_io_executor& strand, Backend* backend, uint64_t tenant,
                                 boost::beast::flat_buffer& buffer)
    : backend_(backend), tenant_(tenant), buffer_(buffer), stream_(strand) {
  buffer_.clear();
}

bool UpstreamAttempt::TakePooled() {
  const int fd = backend_->TakeIdle(tenant_);
  if (fd < 0) return false;
  boost::beast::error_code ec;
  stream_.socket().assign(backend_->v6 ? tcp::v6() : tcp::v4(), fd, ec);
  if (ec) {
    ::close(fd);  // not adopted by the socket: ours to close
    return false;
  }
  reused_ = true;
  return true;
}

void UpstreamAttempt::SetNoDelay() {
  boost::beast::error_code ec;
  stream_.socket().set_option(tcp::no_delay(true), ec);
}

void UpstreamAttempt::Finish() {
  boost::beast::error_code ec;
  if (parser_ && parser_->is_done() && keep_alive_ && buffer_.size() == 0) {
    const size_t pending = stream_.socket().available(ec);
    if (!ec && pending == 0) {
      stream_.expires_never();
      const int fd = stream_.release_socket().release(ec);
      if (!ec && fd >= 0) {
        backend_->PutIdle(fd, tenant_);
        return;
      }
    }
  }
  stream_.socket().close(ec);
}

void UpstreamAttempt::Cancel() {
  boost::beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
  stream_.close();
}

void UpstreamAttempt::Close() { stream_.close(); }

}  // namespace toktier::proxy
