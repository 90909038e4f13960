// The /v1/completions body parser and the worker's JSON string unescaper:
// any bytes are accepted or rejected without crashing, and every accepted
// prompt string unescapes exactly as nlohmann's parser reads it (or both
// reject it), from the start and from every checkpoint.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "fuzz_support.h"
#include "api/api.h"

namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_completion_request: %s\n", what);
    std::abort();
  }
}

}  // namespace

// Accepted prompt strings checked (printed at exit: a campaign that checks none is useless).
static size_t g_checked = 0;
static struct Report {
  ~Report() { std::fprintf(stderr, "fuzz_completion_request: %zu prompt strings checked\n", g_checked); }
} g_report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace toktier::api;
  std::string body;
  body = toktier::fuzz::ExpandNesting({reinterpret_cast<const char*>(data), size});
  body.reserve(body.size() + JsonPadding());
  (void)ModelOfJsonBody(body);
  CompletionRequest req;
  RequestError err;
  if (!ParseCompletionRequest(body, &req, &err)) {
    Check(err.status == 400 && !err.message.empty(), "rejected without a 400 message");
    return 0;
  }
  Check(req.prompt_begin < req.prompt_end && req.prompt_end <= body.size(), "prompt range outside the body");
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    std::string_view raw = RawPrompt(body, req, i);
    Check(req.prompts[i].begin >= req.prompt_begin && req.prompts[i].end <= req.prompt_end, "item outside prompt");
    std::string text;
    std::vector<JsonStringCheckpoint> cps;
    const bool ok = UnescapeJsonString(raw, &text, 0, &cps).ok();
    auto ref = nlohmann::json::parse("\"" + std::string(raw) + "\"", nullptr, false);
    Check(ok == (!ref.is_discarded() && ref.is_string()), "unescaper and nlohmann disagree on validity");
    if (!ok) continue;
    ++g_checked;
    Check(text == ref.get<std::string>(), "unescaped text differs from nlohmann's");
    for (const auto& c : cps) {
      std::string resumed = text.substr(0, c.text_offset);
      Check(UnescapeJsonString(raw.substr(c.raw_offset), &resumed, c.raw_offset, nullptr).ok() && resumed == text,
            "resuming at a checkpoint changed the text");
    }
  }
  return 0;
}
