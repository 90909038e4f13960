// cli/: the toktier binary's subcommands and what the tools around them
// share (agent session files, percentiles). The one header other folders
// (tests, bench) include from here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "core/core.h"

namespace toktier::cli {

// ---- Subcommands -------------------------------------------------------------
// Each takes argv starting at the subcommand's own name and returns the
// process exit code.
int RunEncode(int argc, char** argv);       // toktier encode
int RunInfo(int argc, char** argv);         // toktier info
int RunBenchEncode(int argc, char** argv);  // toktier bench encode
int RunReplay(int argc, char** argv);       // toktier replay
int RunBenchRepair(int argc, char** argv);  // toktier bench repair
int RunServe(int argc, char** argv);        // toktier serve (the proxy)
int RunConfigReference(int argc, char** argv);  // toktier config-reference: the serve options
int RunRender(int argc, char** argv);       // toktier render (chat template)

// ---- Agent session files (shared/workloads) ------------------------------------
// One JSON object per LLM call, {"keep": BYTES, "append": "TEXT"}; the call's
// prompt is the first `keep` bytes of the previous prompt followed by
// `append`.

// Reads a session file and reconstructs every call's prompt. An error
// naming the line on unreadable files, malformed lines, a keep beyond the
// previous prompt, or a prompt that is not valid UTF-8.
[[nodiscard]] core::Status ReadSessionPrompts(const std::string& path, std::vector<std::string>* prompts);

// The (keep, append) pairs themselves, for tools that chain sessions.
struct SessionCall {
  size_t keep = 0;
  std::string append;
};
[[nodiscard]] core::Status ReadSessionCalls(const std::string& path, std::vector<SessionCall>* calls);

// ---- Percentiles for the benchmarks -------------------------------------------
// (`toktier bench repair`, the load generator): nearest rank on the sorted
// samples, index round(q * (n - 1)).
inline double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace toktier::cli
