// `toktier bench encode`: full-tokenization throughput of one text file,
// after checking the IDs once against the reference encoder
// (node tools/ref_encode.js: HF tokenizers / tiktoken).
//
//   toktier bench encode --tokenizer PATH [--encoding NAME] --text FILE
//                        [--runs N] [--threads N] [--parallel-min-bytes B]
//                        [--pin-cpu K] [--add-special-tokens] [--no-check]
//                        [--ref-script PATH] [--node PATH]
//
// --threads N (default 1): N > 1 encodes through a core::EncodePool(N) (the
// calling thread and N - 1 workers) for texts of at least
// --parallel-min-bytes (default core's 64 KiB). Before timing, the IDs of the
// untimed first run are checked against the reference, and with N > 1 also
// against a one-thread Encode of the same text (exit 5 if they differ); every
// timed run must give the first run's IDs.
// --pin-cpu K pins the calling thread to CPU K (sched_setaffinity) with
// --threads 1 only; with N > 1 it is ignored with a warning (see below).
//
// With --threads N > 1 the runs are paired, because the speed of a small
// shared machine drifts by tens of percent over seconds and its CPUs can
// differ from each other by as much (one vCPU 25-58% slower than the other
// here, for minutes): the whole command is confined to the first N CPUs it
// may use (the pool's workers inherit that mask), and every timed N-thread
// run follows one one-thread run on each of those CPUs, made by a thread
// pinned to it for the whole command (its thread-local caches, scratch and
// output stay on that CPU, as in a `taskset` run: moving one thread from
// CPU to CPU made its runs up to 45% slower, every line of its scratch
// taken back from the other core's cache). Such
// a group's one-thread time is the harmonic mean of its one-thread runs
// (the time of a CPU of the CPUs' mean speed: N threads cannot beat the sum
// of the CPUs' one-thread speeds, and comparing with the fastest CPU alone
// or the slowest alone would move the ratio with whichever the scheduler
// picked). Every timed run of a group, one-thread or N-thread, follows an
// untimed run of its own kind on the same thread(s), as the back-to-back
// runs of --threads 1 do: without it each N-thread run started on caches
// that the pinned one-thread runs had just filled with their own text,
// scratch and output, and read 2-3% slower (1.87-1.89x against 1.91-1.92x
// on Llama 3 code, measured side by side). If the CPUs cannot be pinned,
// each group has one one-thread run on an unpinned thread and a warning
// says so.
//
// Prints one JSON line:
//   {"chars":..,"bytes":..,"tokens":..,"ms_median":..,"ms_p90":..,"ms_p99":..,
//    "ms_min":..,"mb_per_s":..,"runs":..,"threads":N,"chunks":..,
//    "threads_used":..,["pair_cpus":[..],"single_ms_median_per_cpu":[..],
//    "single_ms_median":..,"speedup_paired_median":..,
//    "speedup_vs_fastest_cpu_median":..,]["pool_busy":true,]["uncut":true,]
//    "check":"ok"|"skipped", ["warning":"..."]}
// chars counts code points; mb_per_s is UTF-8 bytes / 1e6 per second at the
// median; chunks / threads_used / pool_busy / uncut are the EncodeOutcome of
// the last timed run (chunks 0: the text was not cut; threads_used 1: one
// thread encoded it). With --threads > 1: pair_cpus are the CPUs (empty when
// not pinned) and single_ms_median_per_cpu the median one-thread time on
// each; single_ms_median is the median of the groups' one-thread times,
// speedup_paired_median the median over groups of (the group's one-thread
// time) / (its N-thread time), and speedup_vs_fastest_cpu_median the same
// with the group's fastest one-thread run (the conservative figure: below
// 2x for perfect scaling once the CPUs differ, and the fastest of noisy runs
// is biased fast; close to the first on CPUs of one speed). Exit codes: 2 usage/load errors,
// 4 reference failed, 5 IDs differ.
#include <sched.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/cli_parse.h"
#include "proxy/server.h"

#ifndef TOKTIER_SOURCE_DIR
#define TOKTIER_SOURCE_DIR "."
#endif

namespace toktier::cli {
namespace {

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Finds an executable on PATH ("" if none).
std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

// Runs argv with stdin from in_path and stdout to out_path; returns the exit status.
int RunProcess(const std::vector<std::string>& argv, const std::string& in_path, const std::string& out_path) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!std::freopen(in_path.c_str(), "rb", stdin)) _exit(126);
    if (!std::freopen(out_path.c_str(), "wb", stdout)) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Fmt3(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", x);
  return buf;
}

// Milliseconds since `since`, at least 1 ns (the speedups divide by it).
double ElapsedMs(std::chrono::steady_clock::time_point since) {
  return std::max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count(), 1e-6);
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The first n CPUs of the calling thread's affinity mask (all of them when
// it has fewer; none when the mask cannot be read).
std::vector<int> FirstAllowedCpus(int n) {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < n; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Confines the calling thread (and the threads it starts later) to `cpus`.
[[nodiscard]] bool PinTo(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// A thread pinned to one CPU (cpu < 0: not pinned) that encodes the text
// when asked and checks the IDs against `expected` itself, after the clock
// stops: its thread-local state and its output never leave that CPU.
class PinnedEncoder {
 public:
  struct Result {
    double ms = 0;
    bool ids_match = false;
  };
  PinnedEncoder(int cpu, std::function<void(std::vector<uint32_t>&)> encode, const std::vector<uint32_t>& expected)
      : encode_(std::move(encode)), expected_(expected), thread_([this, cpu] { Loop(cpu); }) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return started_; });
  }
  ~PinnedEncoder() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  PinnedEncoder(const PinnedEncoder&) = delete;
  PinnedEncoder& operator=(const PinnedEncoder&) = delete;
  [[nodiscard]] bool pinned() const { return pinned_; }
  // One encoding on the thread; the time excludes its wake-up.
  Result Run() {
    std::unique_lock lock(mu_);
    requested_ = true;
    done_ = false;
    cv_.notify_all();
    cv_.wait(lock, [this] { return done_; });
    return result_;
  }
  // The last run's IDs (read them only to report a mismatch: reading pulls
  // them into this core's cache).
  const std::vector<uint32_t>& ids() const { return ids_; }

 private:
  void Loop(int cpu) {
    const bool pinned = cpu >= 0 && PinTo({cpu});
    std::unique_lock lock(mu_);
    pinned_ = pinned;
    started_ = true;
    cv_.notify_all();
    for (;;) {
      cv_.wait(lock, [this] { return requested_ || quit_; });
      if (quit_) return;
      requested_ = false;
      lock.unlock();
      ids_.clear();
      const auto t0 = std::chrono::steady_clock::now();
      encode_(ids_);
      Result r;
      r.ms = ElapsedMs(t0);
      r.ids_match = ids_ == expected_;
      lock.lock();
      result_ = r;
      done_ = true;
      cv_.notify_all();
    }
  }
  std::function<void(std::vector<uint32_t>&)> encode_;
  const std::vector<uint32_t>& expected_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false, pinned_ = false, requested_ = false, done_ = false, quit_ = false;
  Result result_;
  std::vector<uint32_t> ids_;
  std::thread thread_;  // last: it starts once the members above exist
};

std::string JsonList(const std::vector<double>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ",";
    out += Fmt3(v[i]);
  }
  return out + "]";
}

}  // namespace

int RunBenchEncode(int argc, char** argv) {
  CLI::App app{"Time full tokenization of a text file (IDs checked once against the reference)"};
  std::string tokenizer_path, encoding, text_path;
  std::string ref_script = std::string(TOKTIER_SOURCE_DIR) + "/tools/ref_encode.js";
  std::string node = "node";
  int runs = 10;
  int threads = 1;
  size_t parallel_min_bytes = core::EncodeOptions{}.parallel_min_bytes;
  int pin_cpu = -1;
  bool add_special = false, no_check = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json, tiktoken encoder JSON, or .tiktoken rank file")
      ->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file");
  app.add_option("--text", text_path, "UTF-8 text file to encode")->required();
  app.add_option("--runs", runs, "timed runs (after one untimed run)")->check(CLI::Range(1, 100000));
  app.add_option("--threads", threads, "encode threads (the caller included; > 1: core::EncodePool)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--parallel-min-bytes", parallel_min_bytes,
                 "shortest text (bytes) the pool encodes in parallel (default 65536)");
  app.add_option("--pin-cpu", pin_cpu, "pin the calling thread to this CPU (--threads 1 only)")
      ->check(CLI::Range(0, CPU_SETSIZE - 1));
  app.add_flag("--add-special-tokens", add_special, "encode with add_special_tokens");
  app.add_flag("--no-check", no_check, "skip the reference check (reported in the output)");
  app.add_option("--ref-script", ref_script, "reference encoder script");
  app.add_option("--node", node, "node executable");
  TOKTIER_CLI_PARSE(app, argc, argv)
  auto tok = LoadTokenizerForCommand("bench encode", {tokenizer_path, encoding});
  if (!tok) return 2;
  std::string text;
  if (core::Status st = proxy::ReadWholeFile(text_path, &text); !st.ok()) {
    std::fprintf(stderr, "toktier bench encode: %s\n", st.message().c_str());
    return 2;
  }
  size_t bad = core::FindInvalidUtf8(text);
  if (bad != std::string::npos) {
    std::fprintf(stderr, "toktier bench encode: %s is not valid UTF-8 (first invalid byte at offset %zu)\n",
                 text_path.c_str(), bad);
    return 2;
  }

  std::string check = "ok", warning;
  auto add_warning = [&warning](const std::string& w) { warning += (warning.empty() ? "" : "; ") + w; };
  if (pin_cpu >= 0) {
    if (threads > 1) {
      add_warning("--pin-cpu ignored with --threads > 1");
    } else {
      if (!PinTo({pin_cpu})) {
        std::fprintf(stderr, "toktier bench encode: cannot pin to CPU %d\n", pin_cpu);
        return 2;
      }
    }
  }
  // Paired runs (see the top of the file): the pool's workers inherit the
  // mask set here.
  std::vector<int> pair_cpus;
  if (threads > 1) {
    pair_cpus = FirstAllowedCpus(threads);
    if (pair_cpus.empty() || !PinTo(pair_cpus)) {
      pair_cpus.clear();
      add_warning("CPUs not pinned (the affinity mask cannot be set): one unpinned one-thread run per group");
    }
  }
  std::unique_ptr<core::EncodePool> pool;
  core::EncodeOptions options;
  if (threads > 1) {
    pool = std::make_unique<core::EncodePool>(threads);
    options.pool = pool.get();
    options.parallel_min_bytes = parallel_min_bytes;
  }
  core::EncodeOutcome outcome;
  auto encode = [&](std::vector<uint32_t>& out) {
    if (pool) {
      tok->Encode(text, add_special, out, options, &outcome);
    } else {
      tok->Encode(text, add_special, out);
    }
  };
  // Prints where `got` first differs from `want` (IDs, 12 from there).
  auto report_diff = [](const char* what, const std::vector<uint32_t>& got, const char* got_name,
                        const std::vector<uint32_t>& want, const char* want_name) {
    size_t i = 0;
    while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
    std::fprintf(stderr, "toktier bench encode: %s at position %zu (%s %zu tokens, %s %zu tokens)\n  %s: ", what,
                 i, got_name, got.size(), want_name, want.size(), got_name);
    for (size_t k = i; k < std::min(got.size(), i + 12); ++k) std::fprintf(stderr, "%u ", got[k]);
    std::fprintf(stderr, "\n  %s: ", want_name);
    for (size_t k = i; k < std::min(want.size(), i + 12); ++k) std::fprintf(stderr, "%u ", want[k]);
    std::fprintf(stderr, "\n");
  };

  std::vector<uint32_t> ids;
  encode(ids);  // untimed first run; its IDs are checked
  const std::vector<uint32_t> first = ids;
  if (pool) {
    // The parallel IDs must be the one-thread IDs.
    std::vector<uint32_t> single;
    tok->Encode(text, add_special, single);
    if (single != first) {
      report_diff("parallel IDs differ from the one-thread IDs", first, "parallel", single, "one-thread");
      return 5;
    }
  }

  // Reference check, once.
  std::string node_path = FindOnPath(node);
  if (no_check) {
    check = "skipped";
    add_warning("reference check disabled (--no-check)");
  } else if (node_path.empty()) {
    check = "skipped";
    add_warning("reference check skipped: node not found");
  } else if (!std::filesystem::exists(ref_script)) {
    check = "skipped";
    add_warning("reference check skipped: " + ref_script + " not found");
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toktier-bench-XXXXXX").string();
    std::vector<char> dir(tmpl.begin(), tmpl.end());
    dir.push_back('\0');
    if (!mkdtemp(dir.data())) {
      std::fprintf(stderr, "toktier bench encode: cannot create a temporary directory\n");
      return 4;
    }
    std::string d = dir.data();
    std::string in = d + "/in.jsonl", out = d + "/out.jsonl";
    {
      std::ofstream f(in, std::ios::binary);
      f << nlohmann::json({{"text", text}, {"add_special_tokens", add_special}}).dump() << "\n";
    }
    std::vector<std::string> args = {node_path, ref_script, "--tokenizer", tokenizer_path};
    if (!encoding.empty()) {
      args.push_back("--encoding");
      args.push_back(encoding);
    }
    int rc = RunProcess(args, in, out);
    std::vector<uint32_t> ref;
    bool parsed = false;
    if (rc == 0) {
      std::ifstream f(out, std::ios::binary);
      std::string line;
      if (std::getline(f, line)) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_array()) {
          ref.reserve(j.size());
          for (const auto& v : j) ref.push_back(v.get<uint32_t>());
          parsed = true;
        }
      }
    }
    std::filesystem::remove_all(d);
    if (rc != 0 || !parsed) {
      std::fprintf(stderr, "toktier bench encode: reference encoder failed (exit %d): %s %s\n", rc,
                   node_path.c_str(), ref_script.c_str());
      return 4;
    }
    if (ref != first) {
      report_diff("IDs differ from the reference", first, "toktier", ref, "reference");
      return 5;
    }
  }

  // With --threads > 1 every timed run is paired with one-thread runs made
  // right before it, one on each CPU of pair_cpus (see the top of the file).
  std::vector<std::unique_ptr<PinnedEncoder>> single_encoders;
  if (pool) {
    auto encode_one_thread = [&](std::vector<uint32_t>& out) { tok->Encode(text, add_special, out); };
    if (pair_cpus.empty()) single_encoders.push_back(std::make_unique<PinnedEncoder>(-1, encode_one_thread, first));
    for (int cpu : pair_cpus) {
      single_encoders.push_back(std::make_unique<PinnedEncoder>(cpu, encode_one_thread, first));
      if (!single_encoders.back()->pinned()) {
        std::fprintf(stderr, "toktier bench encode: cannot pin a thread to CPU %d\n", cpu);
        return 2;
      }
    }
  }
  std::vector<double> ms, group_single_ms, group_fastest_ms;
  std::vector<std::vector<double>> single_ms_per_cpu(pair_cpus.size());
  ms.reserve(runs);
  for (int r = 0; r < runs; ++r) {
    // With a pool, each timed run follows an untimed one of its own kind
    // (see the top of the file); every run's IDs are checked.
    const int passes = pool ? 2 : 1;
    if (pool) {
      double inverse_sum = 0, fastest = 0;
      for (size_t c = 0; c < single_encoders.size(); ++c) {
        PinnedEncoder::Result single;
        for (int pass = 0; pass < passes; ++pass) {
          single = single_encoders[c]->Run();
          if (!single.ids_match) {
            report_diff("a one-thread run gave other IDs than the first run", single_encoders[c]->ids(), "one-thread",
                        first, "first run");
            return 5;
          }
        }
        if (!pair_cpus.empty()) single_ms_per_cpu[c].push_back(single.ms);
        inverse_sum += 1 / single.ms;
        fastest = c == 0 ? single.ms : std::min(fastest, single.ms);
      }
      group_single_ms.push_back(static_cast<double>(single_encoders.size()) / inverse_sum);
      group_fastest_ms.push_back(fastest);
    }
    for (int pass = 0; pass < passes; ++pass) {
      ids.clear();
      auto t0 = std::chrono::steady_clock::now();
      encode(ids);
      const double elapsed = ElapsedMs(t0);
      if (ids != first) {
        std::string what = (pass + 1 < passes ? "the untimed run before timed run " : "timed run ") + std::to_string(r) +
                           " gave other IDs than the first run";
        report_diff(what.c_str(), ids, "this run", first, "first run");
        return 5;
      }
      if (pass + 1 == passes) ms.push_back(elapsed);
    }
  }
  const std::vector<double> ms_unsorted = ms;
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  const double median = Median(ms);
  auto quantile = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(n)));
    return ms[std::min(i == 0 ? 0 : i - 1, n - 1)];
  };
  double p90 = quantile(0.9), p99 = quantile(0.99);
  double mbps = median > 0 ? static_cast<double>(text.size()) / 1e6 / (median / 1e3) : 0;

  std::string outj = "{\"chars\":" + std::to_string(CountCodePoints(text)) +
                     ",\"bytes\":" + std::to_string(text.size()) + ",\"tokens\":" + std::to_string(first.size()) +
                     ",\"ms_median\":" + Fmt3(median) + ",\"ms_p90\":" + Fmt3(p90) + ",\"ms_p99\":" + Fmt3(p99) + ",\"ms_min\":" + Fmt3(ms[0]) +
                     ",\"mb_per_s\":" + Fmt3(mbps) + ",\"runs\":" + std::to_string(runs) +
                     ",\"threads\":" + std::to_string(threads) + ",\"chunks\":" + std::to_string(outcome.chunks) +
                     ",\"threads_used\":" + std::to_string(outcome.threads);
  if (pool) {
    std::vector<double> per_cpu, ratios, fastest_ratios;
    for (const auto& v : single_ms_per_cpu) per_cpu.push_back(Median(v));
    for (size_t i = 0; i < ms_unsorted.size(); ++i) {
      ratios.push_back(group_single_ms[i] / ms_unsorted[i]);
      fastest_ratios.push_back(group_fastest_ms[i] / ms_unsorted[i]);
    }
    outj += ",\"pair_cpus\":" + nlohmann::json(pair_cpus).dump() + ",\"single_ms_median_per_cpu\":" + JsonList(per_cpu) +
            ",\"single_ms_median\":" + Fmt3(Median(group_single_ms)) +
            ",\"speedup_paired_median\":" + Fmt3(Median(ratios)) +
            ",\"speedup_vs_fastest_cpu_median\":" + Fmt3(Median(fastest_ratios));
  }
  if (outcome.pool_busy) outj += ",\"pool_busy\":true";
  if (outcome.uncut) outj += ",\"uncut\":true";
  outj += ",\"check\":\"" + check + "\"";
  if (!warning.empty()) outj += ",\"warning\":" + nlohmann::json(warning).dump();
  outj += "}\n";
  std::fputs(outj.c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace toktier::cli
