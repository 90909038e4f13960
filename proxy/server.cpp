// `toktier serve`'s lifecycle: the acceptor (with a back-off when the
// process is out of descriptors), the I/O threads (each a thread boundary
// that no exception crosses), graceful drain. The connections themselves are
// HttpConn (http_conn.h).
#include "proxy/server.h"

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>

#include <cstdio>
#include <pthread.h>

#include "proxy/http_conn.h"
#include "http/http.h"

namespace toktier::proxy {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

Server::Impl::Impl(Config c)
    : config(std::move(c)),
      service(config, &metrics),
      backends(config, &metrics),
      ioc(std::max(1, config.io_threads)),
      acceptor(asio::make_strand(ioc)),
      accept_backoff(acceptor.get_executor()) {}

void Server::Impl::DoAccept() {
  acceptor.async_accept(asio::make_strand(ioc), beast::bind_front_handler(&Impl::OnAccept, this));
}

void Server::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
  if (ec && http1::IsResourceExhausted(ec)) {
    // Out of descriptors (EMFILE/ENFILE) or buffers: accepting again at once
    // would spin on the same error. Wait (10 ms, doubling to 1 s); the
    // connections wait in the listen backlog meanwhile.
    metrics.counter(metrics::Id::kResourceExhausted, {"accept"}).Inc();
    if (accept_backoff_delay.count() == 0) {
      std::fprintf(stderr, "toktier: cannot accept connections (%s); retrying with back-off\n",
                   ec.message().c_str());
    }
    accept_backoff_delay = std::min(std::chrono::milliseconds(1000),
                                    std::max(std::chrono::milliseconds(10), accept_backoff_delay * 2));
    accept_backoff.expires_after(accept_backoff_delay);
    accept_backoff.async_wait([this](beast::error_code e) {
      if (!e) DoAccept();
    });
    return;
  }
  if (ec) return DoAccept();  // e.g. a connection reset while in the backlog
  if (accept_backoff_delay.count() != 0) {
    std::fprintf(stderr, "toktier: accepting connections again\n");
    accept_backoff_delay = std::chrono::milliseconds(0);
  }
  if (draining) return;
  beast::error_code e2;
  socket.set_option(tcp::no_delay(true), e2);
  auto conn = std::make_shared<HttpConn>(this, std::move(socket));
  {
    std::lock_guard<std::mutex> lock(conns_mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->expired()) it = conns.erase(it); else ++it;
    }
    conns.push_back(conn);
  }
  conn->Run();
  DoAccept();
}

// An I/O thread's boundary: a handler that throws (an allocation failure,
// anything a library throws) must not end the process. It is logged and
// counted, its connection is dropped with the handler, and the thread runs
// the io_context again.
void Server::Impl::RunIoThread() {
  pthread_setname_np(pthread_self(), "toktier-io");
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "toktier: exception on an I/O thread: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "toktier: exception on an I/O thread\n");
    }
    metrics.counter(metrics::Id::kThreadExceptions, {"io"}).Inc();
  }
}

void Server::Impl::Drain() {
  std::lock_guard<std::mutex> lock(conns_mu);
  for (auto& w : conns) {
    if (auto c = w.lock()) c->CloseIfIdle();
  }
}

Server::Server(Config config) : impl_(std::make_shared<Impl>(std::move(config))) {}

Server::~Server() { Shutdown(); }

core::Status Server::Start() {
  using core::Status;
  using core::StatusCode;
  Impl& s = *impl_;
  // The one bound --check-config reports that a running proxy relies on for
  // its stacks (api/json_limits.h): checked here too.
  if (std::string why = JsonMaxDepthProblem(s.config.json_max_depth); !why.empty()) {
    return Status::Error(std::move(why));
  }
  if (Status st = s.service.Init(); !st.ok()) return st;
  if (Status st = s.backends.Init(&s.service); !st.ok()) return st;
  s.service.Start();
  s.backends.Start();
  beast::error_code ec;
  auto addr = asio::ip::make_address(s.config.listen_address, ec);
  if (ec) return Status::Error("bad listen address: " + s.config.listen_address);
  tcp::endpoint ep(addr, s.config.port);
  s.acceptor.open(ep.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(ep, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Error(StatusCode::kIoError, "cannot listen on " + s.config.listen_address + ":" +
                                                   std::to_string(s.config.port) + ": " + ec.message());
  }
  s.bound_port = s.acceptor.local_endpoint(ec).port();
  // Before the first accept: every connection can hand work to the pool.
  s.prepare_pool = std::make_unique<asio::thread_pool>(static_cast<size_t>(std::max(1, s.config.workers)));
  s.work.emplace(s.ioc.get_executor());
  s.DoAccept();
  for (int i = 0; i < std::max(1, s.config.io_threads); ++i) {
    s.threads.emplace_back([&s] { s.RunIoThread(); });
  }
  return Status::Ok();
}

uint16_t Server::port() const { return impl_->bound_port; }

void Server::RunUntilSignal() {
  asio::io_context sig_ioc;
  asio::signal_set signals(sig_ioc, SIGINT, SIGTERM);
  signals.async_wait([](beast::error_code, int sig) {
    std::fprintf(stderr, "toktier: signal %d: draining\n", sig);
  });
  sig_ioc.run();
  Shutdown();
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.stopped.exchange(true)) return;
  s.draining = true;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ec;
    s.acceptor.close(ec);
    s.accept_backoff.cancel();
  });
  auto deadline = Clock::now() + std::chrono::milliseconds(s.config.drain_timeout_ms);
  while (Clock::now() < deadline) {
    s.Drain();
    if (s.connections.load() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.threads) t.join();
  s.threads.clear();
  // Jobs still queued are dropped; a running one finishes, and its answer,
  // posted to the stopped io_context, is never run.
  if (s.prepare_pool) {
    s.prepare_pool->stop();
    s.prepare_pool->join();
  }
  s.backends.Stop();
  s.service.Stop();
}

const Config& Server::config() const { return impl_->config; }
metrics::Metrics& Server::metrics() { return impl_->metrics; }
TokenizeService& Server::service() { return impl_->service; }
Backends& Server::backends() { return impl_->backends; }

}  // namespace toktier::proxy
