// Issue 4 regression: prompts are unescaped in the worker, resuming from a
// checkpoint inside the raw (escaped) prefix shared with the session's
// previous request. Edits anywhere (inside escapes, surrogate pairs,
// at the start), identical resends, truncations, a rejected request between
// two good ones and both escaping styles must give the reference IDs.
#include <doctest/doctest.h>

#include <random>

#include "proxy_fixture.h"

namespace toktier::test {

TEST_CASE("incremental unescaping of session prompts stays exact") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  HttpClient client(p.port());
  auto tok = LoadTokenizer("qwen3");
  std::mt19937_64 rng(44);
  static const char* const kPieces[] = {"def f(x):\n", "    return \"x\"\n", "\t", "é", "😀", "\\", "中文", " ", "ok.",
                                        "\r\n", "<|im_start|>user\n", "\x01"};
  auto piece = [&] { return std::string(kPieces[rng() % (sizeof kPieces / sizeof kPieces[0])]); };
  std::string text;
  while (text.size() < 120000) text += piece();  // over 64 KiB: the direct body read
  size_t steps = 0;
  for (int step = 0; step < 60; ++step) {
    switch (step % 6) {
      case 0: text += piece() + piece(); break;                                       // append
      case 1: break;                                                                   // unchanged resend
      case 2: {                                                                         // edit in the middle
        size_t at = rng() % text.size();
        while (at > 0 && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) --at;
        text.insert(at, piece());
        break;
      }
      case 3: text.resize(text.size() * 9 / 10); break;                                // truncate
      case 4: text = piece() + text; break;                                            // edit at the start
      case 5: text += "\n"; break;
    }
    while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
    if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
    const bool ascii = step % 4 >= 2;  // both escaping styles within one session
    nlohmann::json j = {{"model", "qwen3"}, {"prompt", text}, {"max_tokens", 1}};
    std::string body = j.dump(-1, ' ', ascii);
    engine.ClearRequests();
    auto r = client.Request("POST", "/v1/completions", body, {{"X-Session-Id", "raw-prompt"}});
    REQUIRE(r.status == 200);
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    std::vector<uint32_t> want;
    tok->Encode(text, true, want);
    INFO("step " << step);
    CHECK(nlohmann::json::parse(reqs[0].body)["prompt"].get<std::vector<uint32_t>>() == want);
    ++steps;
    if (step % 10 == 9) {
      // A rejected request in between: the session's prefix, then a bad escape.
      std::string half = text.substr(0, text.size() / 2);
      while (!half.empty() && (static_cast<unsigned char>(half.back()) & 0xC0) == 0x80) half.pop_back();
      if (!half.empty() && static_cast<unsigned char>(half.back()) >= 0xC0) half.pop_back();
      std::string esc = nlohmann::json(half).dump();
      std::string bad = R"({"model":"qwen3","prompt":)" + esc.substr(0, esc.size() - 1) + R"(\q"})";
      CHECK(client.Request("POST", "/v1/completions", bad, {{"X-Session-Id", "raw-prompt"}}).status == 400);
    }
  }
  MESSAGE("checked " << steps << " session steps");
  // Two large requests pipelined in one write: the bytes after the first
  // body (read straight into its buffer) are the second request.
  engine.ClearRequests();
  std::string t1 = text + "first", t2 = text + "second";
  std::string b1 = nlohmann::json({{"model", "qwen3"}, {"prompt", t1}}).dump();
  std::string b2 = nlohmann::json({{"model", "qwen3"}, {"prompt", t2}}).dump();
  HttpClient raw(p.port());
  const std::string session = "X-Session-Id: raw-prompt\r\n";
  std::string out = raw.Raw(RawCompletionRequest(b1, session) + RawCompletionRequest(b2, session), 2000);
  size_t first = out.find("HTTP/1.1 200");
  CHECK(first != std::string::npos);
  CHECK(out.find("HTTP/1.1 200", first + 1) != std::string::npos);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    std::vector<uint32_t> want;
    tok->Encode(i == 0 ? t1 : t2, true, want);
    CHECK(nlohmann::json::parse(reqs[i].body)["prompt"].get<std::vector<uint32_t>>() == want);
  }
}

}  // namespace toktier::test
