// Issue 13: `toktier bench encode --threads N` pairs each timed N-thread run
// with one one-thread run on each of the first N CPUs it may use (pinned),
// and reports the per-CPU medians and both speedups. The command runs as a
// separate process (it sets its own CPU affinity).
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "test_support.h"

namespace {

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

bool SetAllowedCpus(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0;
}

// Runs the command (inheriting this thread's CPU mask) and parses its one
// JSON line; a null json when it fails.
nlohmann::json RunBench(const std::string& args) {
  const std::string cmd = std::string(TOKTIER_BINARY) + " bench encode " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return nullptr;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  if (::pclose(p) != 0) return nullptr;
  return nlohmann::json::parse(out, nullptr, false);
}

// About 200 KB of code-like lines: above the 64 KiB parallel threshold, with
// many places to cut.
std::string WriteText() {
  std::string text;
  for (int i = 0; text.size() < 200000; ++i) {
    text += "static int value_" + std::to_string(i) + " = compute(" + std::to_string(i * 7 % 1000) +
            ", \"label\");  // why: step " + std::to_string(i) + "\n";
  }
  const auto path = std::filesystem::temp_directory_path() / ("toktier-bench-encode-" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

void CheckPaired(const nlohmann::json& j, const std::vector<int>& want_cpus, size_t want_tokens) {
  REQUIRE(j.is_object());
  CHECK(j.at("threads") == 2);
  CHECK(j.at("tokens") == want_tokens);
  CHECK(j.at("chunks").get<int>() >= 2);
  CHECK(j.at("pair_cpus") == nlohmann::json(want_cpus));
  const auto& per_cpu = j.at("single_ms_median_per_cpu");
  REQUIRE(per_cpu.size() == want_cpus.size());
  for (const auto& ms : per_cpu) CHECK(ms.get<double>() > 0);
  // The group's one-thread time is the harmonic mean of its runs: between
  // the fastest and the slowest CPU's, so never below the fastest's ratio.
  const double mean_cpu = j.at("speedup_paired_median").get<double>();
  const double fastest_cpu = j.at("speedup_vs_fastest_cpu_median").get<double>();
  CHECK(fastest_cpu > 0);
  CHECK(mean_cpu >= fastest_cpu);
  if (want_cpus.size() == 1) CHECK(mean_cpu == doctest::Approx(fastest_cpu));
  CHECK(j.at("single_ms_median").get<double>() > 0);
  CHECK(j.at("check") == "skipped");
}

}  // namespace

TEST_CASE("bench encode --threads 2 pairs each run with a pinned one-thread run per CPU") {
  const std::string tok_path = toktier::test::TokenizerPath("llama3");
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  const std::string text_path = WriteText();
  std::vector<uint32_t> ids;
  tok->Encode(*toktier::test::ReadFile(text_path), false, ids);
  const std::string args = "--tokenizer " + tok_path + " --text " + text_path + " --runs 3 --no-check";
  const std::vector<int> allowed = AllowedCpus();
  REQUIRE_FALSE(allowed.empty());

  SUBCASE("the first two CPUs the process may use") {
    std::vector<int> want(allowed.begin(), allowed.begin() + std::min<size_t>(2, allowed.size()));
    CheckPaired(RunBench(args + " --threads 2"), want, ids.size());
  }
  SUBCASE("confined to one CPU: one one-thread run per group, on that CPU") {
    const int cpu = allowed.back();
    REQUIRE(SetAllowedCpus({cpu}));
    const nlohmann::json j = RunBench(args + " --threads 2");
    REQUIRE(SetAllowedCpus(allowed));
    CheckPaired(j, {cpu}, ids.size());
  }
  SUBCASE("one thread: no paired fields") {
    const nlohmann::json j = RunBench(args + " --threads 1");
    REQUIRE(j.is_object());
    CHECK(j.at("tokens") == ids.size());
    CHECK_FALSE(j.contains("pair_cpus"));
    CHECK_FALSE(j.contains("speedup_paired_median"));
  }
  std::filesystem::remove(text_path);
}
