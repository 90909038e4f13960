// Internal to `toktier serve`: the state every connection shares
// (Server::Impl: config, metrics, workers, backends, the io_context and the
// acceptor). server.cpp runs it; http_conn.cpp and upstream.cpp use it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core/error.hpp>

#include <atomic>
#include <chrono>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "metrics/metrics.h"
#include "proxy/backends.h"
#include "proxy/server.h"
#include "proxy/server.h"
#include "proxy/tokenize_service.h"

namespace toktier::proxy {

class HttpConn;

struct Server::Impl {
  explicit Impl(Config c);

  // Declared before ioc: handlers destroyed with ioc touch `connections`.
  std::atomic<bool> draining{false};
  std::atomic<bool> stopped{false};
  std::atomic<int> connections{0};
  std::atomic<uint64_t> passthrough_counter{0};
  Config config;
  metrics::Metrics metrics;
  TokenizeService service;
  Backends backends;
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acceptor;
  // Out of descriptors on accept: wait, then accept again (never spin, never
  // end the process). The wait doubles from 10 ms up to 1 s while it lasts.
  boost::asio::steady_timer accept_backoff;
  std::chrono::milliseconds accept_backoff_delay{0};
  std::vector<std::thread> threads;
  // Parsing and rendering large chat bodies (HttpConn::Prepare), off the I/O
  // threads; config.workers threads. After ioc: destroyed (joined) first.
  std::unique_ptr<boost::asio::thread_pool> prepare_pool;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  uint16_t bound_port = 0;

  std::mutex conns_mu;
  std::list<std::weak_ptr<HttpConn>> conns;

  void DoAccept();
  void OnAccept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);
  void RunIoThread();
  void Drain();
};

}  // namespace toktier::proxy
