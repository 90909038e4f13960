#include "cli/cli.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/core.h"

namespace toktier::cli {

core::Status ReadSessionCalls(const std::string& path, std::vector<SessionCall>* calls) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::Status::Error(core::StatusCode::kIoError, "cannot open session file '" + path + "'");
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("keep") || !j.contains("append") ||
        !j["keep"].is_number_unsigned() || !j["append"].is_string()) {
      return core::Status::Error(path + ":" + std::to_string(line_no) +
                                 ": expected {\"keep\": BYTES, \"append\": \"TEXT\"}");
    }
    calls->push_back(SessionCall{j["keep"].get<size_t>(), j["append"].get<std::string>()});
  }
  return core::Status::Ok();
}

core::Status ReadSessionPrompts(const std::string& path, std::vector<std::string>* prompts) {
  std::vector<SessionCall> calls;
  if (core::Status st = ReadSessionCalls(path, &calls); !st.ok()) return st;
  std::string prev;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].keep > prev.size()) {
      return core::Status::Error(path + ":" + std::to_string(i + 1) + ": keep " + std::to_string(calls[i].keep) +
                                 " exceeds the previous prompt (" + std::to_string(prev.size()) + " bytes)");
    }
    std::string cur = prev.substr(0, calls[i].keep) + calls[i].append;
    size_t bad = core::FindInvalidUtf8(cur);
    if (bad != std::string::npos) {
      return core::Status::Error(path + ":" + std::to_string(i + 1) + ": prompt is not valid UTF-8 at byte " +
                                 std::to_string(bad));
    }
    prompts->push_back(cur);
    prev = std::move(cur);
  }
  return core::Status::Ok();
}

}  // namespace toktier::cli
