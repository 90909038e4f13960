#include "test_support.h"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace toktier::test {

namespace {
std::atomic<bool> skipped_for_missing_data{false};
}  // namespace

void SkipForMissingData(const std::string& what) {
  MESSAGE("SKIPPED (missing " << what << ")");
  std::printf("SKIPPED: missing %s\n", what.c_str());
  skipped_for_missing_data = true;
}

bool SkippedForMissingData() { return skipped_for_missing_data; }

void RequireNode() {
  static const bool node = std::system("node --version > /dev/null 2>&1") == 0;
  REQUIRE_MESSAGE(node, "node missing: run tools/dev.sh setup (the references run on it)");
  const std::filesystem::path probe = std::filesystem::path(TOKTIER_SOURCE_DIR) / "tools/node_modules/tokenizers/package.json";
  std::error_code ec;
  REQUIRE_MESSAGE(std::filesystem::exists(probe, ec), "tools/node_modules missing: run tools/dev.sh setup");
}

std::shared_ptr<const core::Tokenizer> LoadTokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const core::Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto bytes = ReadFile(TokenizerPath(name));
  // The README's test command (tools/dev.sh test, CI too) installs these
  // files: a missing one is an error, never a silent pass.
  REQUIRE_MESSAGE(bytes.has_value(),
                  "tokenizer files missing: run tools/dev.sh setup (no " << TokenizerPath(name) << ")");
  core::Status st;
  auto tok = core::Tokenizer::FromBytes(*bytes, "", &st);
  if (!st.ok()) FAIL("loading " << name << ": " << st.message());
  cache[name] = tok;
  return tok;
}

nlohmann::ordered_json ChatmlMessages(const std::string& prompt) {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  const std::string start = "<|im_start|>", end = "<|im_end|>\n";
  size_t pos = 0;
  while ((pos = prompt.find(start, pos)) != std::string::npos) {
    pos += start.size();
    size_t nl = prompt.find('\n', pos);
    if (nl == std::string::npos) break;
    std::string role = prompt.substr(pos, nl - pos);
    size_t stop = prompt.find(end, nl + 1);
    if (stop == std::string::npos) break;  // the trailing generation prompt
    messages.push_back({{"role", role}, {"content", prompt.substr(nl + 1, stop - nl - 1)}});
    pos = stop + end.size();
  }
  return messages;
}

}  // namespace toktier::test
