// A plain blocking TCP socket to 127.0.0.1 for tests that must control every
// byte and every pause (slow headers, half requests, smuggling attempts) and
// see exactly when the proxy closes the connection.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace toktier::test {

class RawSocket {
 public:
  explicit RawSocket(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd_);
      fd_ = -1;
      return;
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawSocket() { Close(); }
  RawSocket(RawSocket&& o) noexcept : fd_(o.fd_), closed_by_peer_(o.closed_by_peer_) { o.fd_ = -1; }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  bool ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Writes all bytes; false when the peer is gone.
  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Ends our side of the stream (FIN): the peer reads EOF after the bytes sent.
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  // Bounds each send: a peer that stops reading cannot block Send forever.
  void SetSendTimeout(int timeout_ms) {
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }

  // Reads until the peer closes, `until` has been seen, or timeout_ms passed.
  std::string Read(int timeout_ms, std::string_view until = {}) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    char b[16384];
    for (;;) {
      if (!until.empty() && out.find(until) != std::string::npos) break;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      int pr = ::poll(&p, 1, static_cast<int>(left.count()));
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) break;
      ssize_t n = ::recv(fd_, b, sizeof b, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        closed_by_peer_ = true;
        break;
      }
      out.append(b, static_cast<size_t>(n));
    }
    return out;
  }

  // True when the peer has closed (EOF or reset) within timeout_ms; bytes
  // that arrive meanwhile are discarded.
  bool WaitClosed(int timeout_ms) {
    Read(timeout_ms);
    return closed_by_peer_;
  }
  bool closed_by_peer() const { return closed_by_peer_; }

 private:
  int fd_ = -1;
  bool closed_by_peer_ = false;
};

// The status code of the first response in raw bytes (0 if none).
inline int RawStatus(std::string_view raw) {
  if (raw.size() < 12 || raw.substr(0, 5) != "HTTP/") return 0;
  return std::atoi(std::string(raw.substr(9, 3)).c_str());
}

// The body of the first response in raw bytes (after the blank line).
inline std::string RawBody(const std::string& raw) {
  size_t at = raw.find("\r\n\r\n");
  return at == std::string::npos ? "" : raw.substr(at + 4);
}

// A POST with a Content-Length; extra: "Name: v\r\n"...
inline std::string RawPost(const std::string& target, const std::string& body, const std::string& extra = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

}  // namespace toktier::test
