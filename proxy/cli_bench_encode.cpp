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
// --threads 1 only; with N > 1 nothing is pinned (workers would inherit the
// mask) and a warning says so. Pin whole runs with `taskset -c K` instead.
//
// Prints one JSON line:
//   {"chars":..,"bytes":..,"tokens":..,"ms_median":..,"ms_p90":..,"ms_p99":..,
//    "ms_min":..,"mb_per_s":..,"runs":..,"threads":N,"chunks":..,
//    "threads_used":..,["single_ms_median":..,"speedup_paired_median":..,]
//    ["pool_busy":true,]["uncut":true,]
//    "check":"ok"|"skipped", ["warning":"..."]}
// chars counts code points; mb_per_s is UTF-8 bytes / 1e6 per second at the
// median; chunks / threads_used / pool_busy / uncut are the EncodeOutcome of
// the last timed run (chunks 0: the text was not cut; threads_used 1: one
// thread encoded it). With --threads > 1 each timed run follows a one-thread
// run of the same text: single_ms_median is their median and
// speedup_paired_median the median of the per-pair ratios. Exit codes: 2
// usage/load errors, 4 reference failed, 5 IDs differ.
#include <sched.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "proxy/cli.h"
#include "proxy/cli_parse.h"
#include "proxy/tokenizer_files.h"

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
  std::string error;
  auto tok = LoadTokenizerForCommand("bench encode", {tokenizer_path, encoding});
  if (!tok) return 2;
  auto text_opt = ReadWholeFile(text_path, &error);
  if (!text_opt) {
    std::fprintf(stderr, "toktier bench encode: %s\n", error.c_str());
    return 2;
  }
  const std::string& text = *text_opt;
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
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(pin_cpu, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) {
        std::fprintf(stderr, "toktier bench encode: cannot pin to CPU %d\n", pin_cpu);
        return 2;
      }
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

  // With --threads > 1 every timed run is paired with a one-thread run of
  // the same text right before it, so the speedup compares runs made under
  // the same conditions (this kind of machine's speed drifts by tens of
  // percent over seconds, more than a 2-thread gain is worth).
  std::vector<double> ms, single_ms;
  ms.reserve(runs);
  std::vector<uint32_t> single_ids;
  for (int r = 0; r < runs; ++r) {
    if (pool) {
      single_ids.clear();
      auto s0 = std::chrono::steady_clock::now();
      tok->Encode(text, add_special, single_ids);
      single_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
    }
    ids.clear();
    auto t0 = std::chrono::steady_clock::now();
    encode(ids);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (ids != first) {
      std::string what = "timed run " + std::to_string(r) + " gave other IDs than the first run";
      report_diff(what.c_str(), ids, "this run", first, "first run");
      return 5;
    }
  }
  const std::vector<double> ms_unsorted = ms;
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
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
  if (!single_ms.empty()) {
    std::vector<double> ratios;  // per pair: one thread / N threads
    for (size_t i = 0; i < single_ms.size(); ++i) ratios.push_back(ms_unsorted[i] > 0 ? single_ms[i] / ms_unsorted[i] : 0);
    std::sort(single_ms.begin(), single_ms.end());
    std::sort(ratios.begin(), ratios.end());
    const size_t m = single_ms.size();
    const double single_median = m % 2 ? single_ms[m / 2] : (single_ms[m / 2 - 1] + single_ms[m / 2]) / 2;
    const double ratio_median = m % 2 ? ratios[m / 2] : (ratios[m / 2 - 1] + ratios[m / 2]) / 2;
    outj += ",\"single_ms_median\":" + Fmt3(single_median) + ",\"speedup_paired_median\":" + Fmt3(ratio_median);
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
