// Agent session files (shared/workloads): one JSON object per LLM call,
// {"keep": BYTES, "append": "TEXT"}; the call's prompt is the first `keep`
// bytes of the previous prompt followed by `append`.
#pragma once

#include <string>
#include <vector>

namespace toktier::cli {

// Reads a session file and reconstructs every call's prompt. False (and
// *error naming the line) on unreadable files, malformed lines, a keep
// beyond the previous prompt, or a prompt that is not valid UTF-8.
bool ReadSessionPrompts(const std::string& path, std::vector<std::string>* prompts, std::string* error);

// The (keep, append) pairs themselves, for tools that chain sessions.
struct SessionCall {
  size_t keep = 0;
  std::string append;
};
bool ReadSessionCalls(const std::string& path, std::vector<SessionCall>* calls, std::string* error);

}  // namespace toktier::cli
