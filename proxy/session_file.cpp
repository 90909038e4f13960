#include "proxy/session_file.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/core.h"

namespace toktier::cli {

bool ReadSessionCalls(const std::string& path, std::vector<SessionCall>* calls, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open session file '" + path + "'";
    return false;
  }
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("keep") || !j.contains("append") ||
        !j["keep"].is_number_unsigned() || !j["append"].is_string()) {
      *error = path + ":" + std::to_string(line_no) + ": expected {\"keep\": BYTES, \"append\": \"TEXT\"}";
      return false;
    }
    calls->push_back(SessionCall{j["keep"].get<size_t>(), j["append"].get<std::string>()});
  }
  return true;
}

bool ReadSessionPrompts(const std::string& path, std::vector<std::string>* prompts, std::string* error) {
  std::vector<SessionCall> calls;
  if (!ReadSessionCalls(path, &calls, error)) return false;
  std::string prev;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].keep > prev.size()) {
      *error = path + ":" + std::to_string(i + 1) + ": keep " + std::to_string(calls[i].keep) +
               " exceeds the previous prompt (" + std::to_string(prev.size()) + " bytes)";
      return false;
    }
    std::string cur = prev.substr(0, calls[i].keep) + calls[i].append;
    size_t bad = core::FindInvalidUtf8(cur);
    if (bad != std::string::npos) {
      *error = path + ":" + std::to_string(i + 1) + ": prompt is not valid UTF-8 at byte " + std::to_string(bad);
      return false;
    }
    prompts->push_back(cur);
    prev = std::move(cur);
  }
  return true;
}

}  // namespace toktier::cli
