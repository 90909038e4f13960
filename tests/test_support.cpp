#include "test_support.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

namespace toktier::test {

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

}  // namespace toktier::test
