// `toktier bench repair`: incremental repair latency on long agent contexts
// built by chaining the real workload sessions, beside full tokenization
// (ours and, when Node is present, HF's) in the same run.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/cli_parse.h"
#include "proxy/server.h"

namespace toktier::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

size_t CharBoundary(const std::string& s, size_t n) {
  n = std::min(n, s.size());
  while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return n;
}

size_t RssKb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmRSS:") {
      size_t kb = 0;
      in >> kb;
      return kb;
    }
  }
  return 0;
}

// One real call: drop `drop` bytes from the end of the prompt, then append.
struct Edit {
  size_t drop = 0;
  std::string append;
};

// HF's full tokenization time through the Node reference (single thread).
double HfFullMs(const std::string& tokenizer_path, const std::string& text, int runs, bool add_special) {
  std::string tmp = (std::filesystem::temp_directory_path() / "toktier_bench_repair_ctx.txt").string();
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
  }
  std::string cmd = "node '" + std::string(TOKTIER_SOURCE_DIR) + "/tools/ref_encode.js' --tokenizer '" +
                    tokenizer_path + "' --bench '" + tmp + "' --runs " + std::to_string(runs) +
                    (add_special ? " --add-special-tokens" : "") + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int rc = pclose(p);
  std::filesystem::remove(tmp);
  if (rc != 0) return -1;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("ms_median")) return -1;
  return j["ms_median"].get<double>();
}

}  // namespace

int RunBenchRepair(int argc, char** argv) {
  CLI::App app{"Repair latency by context size on chained workload sessions"};
  std::string tokenizer_path, encoding, sessions_dir, sizes_arg = "100000,500000,1000000,3000000";
  size_t appends = 300;
  int full_runs = 5;
  bool add_special = true, no_hf = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer file")->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file");
  app.add_option("--sessions", sessions_dir, "folder of session .jsonl files (searched recursively)")->required();
  app.add_option("--sizes", sizes_arg, "context sizes in characters, comma-separated");
  app.add_option("--appends", appends, "real calls replayed onto each context");
  app.add_option("--full-runs", full_runs, "runs of each full tokenization timing");
  app.add_flag("--no-hf", no_hf, "skip the HF (Node) full tokenization timing");
  TOKTIER_CLI_PARSE(app, argc, argv)
  auto tok = LoadTokenizerForCommand("bench repair", {tokenizer_path, encoding});
  if (!tok) return 2;
  // Load every session: final prompts (for building contexts) and real edits.
  std::vector<std::string> files;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(sessions_dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file() && it->path().extension() == ".jsonl") files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "toktier bench repair: no .jsonl sessions under '%s'\n", sessions_dir.c_str());
    return 2;
  }
  std::string corpus;
  std::vector<Edit> edits;
  for (const auto& f : files) {
    std::vector<SessionCall> calls;
    if (core::Status st = ReadSessionCalls(f, &calls); !st.ok()) {
      std::fprintf(stderr, "toktier bench repair: %s\n", st.message().c_str());
      return 2;
    }
    size_t len = 0;
    std::string prompt;
    for (const auto& c : calls) {
      if (c.keep > prompt.size()) break;
      if (!prompt.empty()) edits.push_back(Edit{prompt.size() - c.keep, c.append});
      prompt.resize(c.keep);
      prompt += c.append;
      len = prompt.size();
    }
    corpus += prompt.substr(0, len);
  }
  std::vector<size_t> sizes;
  for (size_t i = 0; i < sizes_arg.size();) {
    size_t j = sizes_arg.find(',', i);
    if (j == std::string::npos) j = sizes_arg.size();
    sizes.push_back(std::stoul(sizes_arg.substr(i, j - i)));
    i = j + 1;
  }
  std::mt19937 rng(12345);
  std::vector<uint32_t> ids;
  for (size_t target : sizes) {
    std::string base;
    while (base.size() < target) base += corpus;
    base.resize(CharBoundary(base, target));
    // Full tokenization, ours (median of runs).
    std::vector<double> full_ms;
    for (int r = 0; r < full_runs; ++r) {
      auto t0 = Clock::now();
      tok->Encode(base, add_special, ids);
      full_ms.push_back(Ms(Clock::now() - t0));
    }
    double hf_ms = no_hf ? -1 : HfFullMs(tokenizer_path, base, std::max(1, full_runs / 2), add_special);
    core::TokenState state;
    core::Repairer::Update(*tok, state, base, add_special);
    std::string text = base;
    std::vector<double> lat;
    size_t counts[4] = {};
    size_t start = rng() % edits.size();
    for (size_t k = 0; k < appends; ++k) {
      const Edit& e = edits[(start + k) % edits.size()];
      // Never cut into the chained base: the edit applies to the session tail.
      size_t drop = std::min(e.drop, text.size() - base.size() / 2);
      std::string next = text.substr(0, CharBoundary(text, text.size() - drop)) + e.append;
      auto t0 = Clock::now();
      core::RepairOutcome o = core::Repairer::Update(*tok, state, next, add_special);
      lat.push_back(Ms(Clock::now() - t0));
      ++counts[static_cast<int>(o.path)];
      text.swap(next);
    }
    // Check the final state once against a full tokenization.
    tok->Encode(text, add_special, ids);
    bool exact = ids == state.ids();
    std::printf(
        "{\"context_chars\":%zu,\"appends\":%zu,\"p50_ms\":%.4f,\"p90_ms\":%.4f,\"p99_ms\":%.4f,\"first_try\":%zu,"
        "\"widened\":%zu,\"full\":%zu,\"unchanged\":%zu,\"full_ms_median\":%.3f,\"hf_full_ms_median\":%.1f,"
        "\"exact\":%s}\n",
        base.size(), appends, Percentile(lat, 0.5), Percentile(lat, 0.9), Percentile(lat, 0.99), counts[1],
        counts[2], counts[3], counts[0], Percentile(full_ms, 0.5), hf_ms, exact ? "true" : "false");
    std::fflush(stdout);
    if (!exact) {
      std::fprintf(stderr, "toktier bench repair: final state differs from a full tokenization\n");
      return 1;
    }
  }
  // Large appends into a 1M-character context.
  {
    std::string base;
    while (base.size() < 1000000) base += corpus;
    base.resize(CharBoundary(base, 1000000));
    for (size_t append_chars : {1000u, 10000u, 100000u}) {
      std::vector<double> lat;
      for (int r = 0; r < 7; ++r) {
        core::TokenState state;
        core::Repairer::Update(*tok, state, base, add_special);
        size_t from = rng() % (corpus.size() - append_chars - 1);
        std::string next = base + corpus.substr(CharBoundary(corpus, from), append_chars);
        next.resize(CharBoundary(next, next.size()));
        if (core::FindInvalidUtf8(next) != std::string::npos) continue;
        auto t0 = Clock::now();
        core::Repairer::Update(*tok, state, next, add_special);
        lat.push_back(Ms(Clock::now() - t0));
      }
      std::printf("{\"context_chars\":%zu,\"append_chars\":%zu,\"runs\":%zu,\"ms_median\":%.3f}\n", base.size(),
                  append_chars, lat.size(), Percentile(lat, 0.5));
    }
  }
  // Memory of a 500K-token session: its accounted bytes, the bytes its
  // containers actually hold, and the process RSS before and after building it.
  {
    std::string text;
    std::vector<uint32_t> ends;
    while (true) {
      text += corpus;
      tok->EncodeWithEnds(text, add_special, ids, ends);
      if (ids.size() >= 500000) break;
    }
    text.resize(ends[499999]);
    ids = {};
    ends = {};
    // Return freed heap to the OS so the RSS delta shows the state alone.
    malloc_trim(0);
    size_t rss0 = RssKb();
    core::TokenState state;
    core::Repairer::Update(*tok, state, text, add_special);
    size_t rss1 = RssKb();
    size_t held = state.ids().capacity() * 4 + state.ends().capacity() * 4 + state.text().capacity() +
                  state.added_spans().capacity() * sizeof(core::TextSpan);
    std::printf("{\"session_tokens\":%zu,\"session_chars\":%zu,\"accounted_bytes\":%zu,\"bytes_per_token\":%.2f,"
                "\"held_bytes_per_token\":%.2f,\"rss_mb\":%.1f,\"rss_delta_mb\":%.1f}\n",
                state.ids().size(), state.text().size(), state.AccountedBytes(),
                static_cast<double>(state.AccountedBytes()) / static_cast<double>(state.ids().size()),
                static_cast<double>(held) / static_cast<double>(state.ids().size()),
                static_cast<double>(rss1) / 1024.0, static_cast<double>(rss1 - std::min(rss1, rss0)) / 1024.0);
  }
  return 0;
}

}  // namespace toktier::cli
