// Helpers for the store tests: session replay and temporary directories.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/core.h"
#include "store/store.h"
#include "test_support.h"

namespace toktier::store::testing {

// Prompts of a session file ({"keep", "append"} per line); empty if missing.
inline std::vector<std::string> SessionPrompts(const std::string& path, size_t max_calls = SIZE_MAX) {
  std::vector<std::string> prompts;
  std::ifstream in(path);
  std::string line, prev;
  while (prompts.size() < max_calls && std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    size_t keep = j.at("keep").get<size_t>();
    std::string p = prev.substr(0, keep) + j.at("append").get<std::string>();
    prompts.push_back(p);
    prev = std::move(p);
  }
  return prompts;
}

// The first session file of a workload ("swe-agent", "llama3"), sorted.
inline std::vector<std::string> SessionFiles(const std::string& workload, const std::string& format) {
  std::vector<std::string> files;
  std::string dir = toktier::test::SharedWorkloadsDir();
  if (dir.empty()) return files;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir + "/" + workload + "/" + format, ec)) {
    if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// kept_text_bytes for Commit after a repair.
inline size_t KeptBytes(const core::RepairOutcome& o, size_t text_size) {
  switch (o.path) {
    case core::RepairPath::kUnchanged: return text_size;
    case core::RepairPath::kFull: return 0;
    default: return o.sync_point;
  }
}

// One proxy-like step: acquire, repair (or full), commit. Returns the state.
inline std::shared_ptr<core::TokenState> Step(StateStore& store, const core::Tokenizer& tok, const std::string& key,
                                              const std::string& prompt, LookupResult* result = nullptr) {
  LookupResult r;
  auto st = store.Acquire(key, tok.version_hash(), &r);
  if (result) *result = r;
  size_t kept = 0;
  if (!st) {
    st = std::make_shared<core::TokenState>();
    core::Repairer::Reset(tok, *st, prompt, true);
  } else {
    auto o = core::Repairer::Update(tok, *st, prompt, true);
    kept = KeptBytes(o, prompt.size());
  }
  store.Commit(key, st, kept);
  return st;
}

// A fresh temporary directory, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / ("toktier-store-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string db() const { return (path / "db").string(); }
};

// A settable clock for TTL tests.
struct FakeClock {
  std::shared_ptr<std::chrono::system_clock::time_point> now =
      std::make_shared<std::chrono::system_clock::time_point>(std::chrono::system_clock::now());
  std::function<std::chrono::system_clock::time_point()> fn() const {
    auto n = now;
    return [n] { return *n; };
  }
  void Advance(std::chrono::seconds s) { *now += s; }
};

inline bool SameState(const core::TokenState& a, const core::TokenState& b) {
  return a.text() == b.text() && a.ids() == b.ids() && a.ends() == b.ends() && a.added_spans() == b.added_spans() &&
         a.version_hash() == b.version_hash() && a.add_special_tokens() == b.add_special_tokens();
}

}  // namespace toktier::store::testing
