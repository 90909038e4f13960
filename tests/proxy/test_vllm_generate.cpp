// Issue 11, chat_forward "vllm": vLLM's tokens-in/tokens-out generate API
// (POST /inference/v1/generate). The proxy sends the rendered prompt's IDs
// and decodes the IDs of the answer itself, so:
// - decoding equals the reference decoders (npm tokenizers' decode, tiktoken)
//   on every family, with and without special tokens, on random ID sequences
//   that split and break UTF-8, and streamed in any split;
// - stop strings end the text as vLLM's detokenizer ends it;
// - the answer comes back in the chat format (reasoning, tool calls, usage),
//   plain and streamed, and parses with the openai npm client.
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "api/api.h"
#include "proxy_fixture.h"

using namespace toktier;
using namespace toktier::test;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

namespace {

std::string DecodeWhole(const std::shared_ptr<const core::Tokenizer>& tok, const std::vector<uint32_t>& ids,
                        api::TokenTextOptions o) {
  api::TokenTextStream s(tok, std::move(o));
  std::string out;
  REQUIRE(s.Feed(ids, &out));
  s.Finish(&out);
  return out;
}

// The same IDs fed in random pieces (0 to 4 IDs each).
std::string DecodeSplit(const std::shared_ptr<const core::Tokenizer>& tok, const std::vector<uint32_t>& ids,
                        api::TokenTextOptions o, std::mt19937& rng) {
  api::TokenTextStream s(tok, std::move(o));
  std::string out;
  for (size_t at = 0; at < ids.size();) {
    size_t n = std::min<size_t>(rng() % 5, ids.size() - at);
    REQUIRE(s.Feed(std::span<const uint32_t>(ids.data() + at, n), &out));
    at += n;
  }
  s.Finish(&out);
  return out;
}

std::vector<uint32_t> Encode(const core::Tokenizer& tok, const std::string& text) {
  std::vector<uint32_t> ids;
  tok.Encode(text, false, ids);
  return ids;
}

}  // namespace

TEST_CASE("token IDs decode exactly as the reference decoders, whole and streamed in any split") {
  const std::vector<std::string> texts = {
      "def main():\n    print(\"Hello, world!\")\n",
      "Grüße aus Köln — naïve café, 東京タワー, 🙂🚀 and a zero\u200bwidth space.",
      "<think>\nLet me see.\n</think>\n\nThe answer is 42.",
      "   leading spaces\ttabs\r\nand CRLF\n\n\n",
  };
  size_t sequences = 0;
  for (const std::string name : {"llama3_1", "qwen3", "deepseek_v3", "gptoss", "gpt4o", "tiktoken:cl100k_base",
                                 "tiktoken:o200k_base"}) {
    auto tok = LoadTokenizer(name);
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    INFO(name);
    REQUIRE(tok->DecodesByConcatenation());
    std::vector<uint32_t> specials;
    for (uint32_t id = 0; id < tok->vocab_size(); ++id) {
      if (tok->IsSpecialToken(id)) specials.push_back(id);
    }
    REQUIRE(!specials.empty());
    std::mt19937 rng(0x11d0c0de);
    std::vector<std::vector<uint32_t>> cases;
    for (const auto& t : texts) cases.push_back(Encode(*tok, t));
    // Special tokens inside text (and alone).
    for (size_t i = 0; i < specials.size() && i < 40; ++i) {
      std::vector<uint32_t> ids = Encode(*tok, "Hi");
      ids.push_back(specials[i]);
      for (uint32_t id : Encode(*tok, " there")) ids.push_back(id);
      cases.push_back(ids);
      cases.push_back({specials[i]});
    }
    // Random IDs: byte tokens that split and break UTF-8 characters.
    for (int k = 0; k < 150; ++k) {
      std::vector<uint32_t> ids;
      for (int n = 1 + rng() % 12; n > 0; --n) {
        uint32_t id = rng() % tok->vocab_size();
        if (!tok->TokenBytes(id).empty()) ids.push_back(id);
      }
      cases.push_back(ids);
    }
    std::string ref_in;
    for (const auto& ids : cases) {
      for (bool skip : {false, true}) ref_in += json{{"ids", ids}, {"skip_special_tokens", skip}}.dump() + "\n";
    }
    auto ref = RunNodeTool("ref_encode.js --tokenizer '" + TokenizerPath(name) + "' --decode", ref_in);
    REQUIRE(ref.has_value());
    REQUIRE(ref->size() == 2 * cases.size());
    size_t line = 0;
    for (const auto& ids : cases) {
      for (bool skip : {false, true}) {
        api::TokenTextOptions o;
        o.skip_special_tokens = skip;
        const std::string expected = json::parse(ref->at(line++)).get<std::string>();
        INFO("ids " << json(ids).dump() << " skip " << skip);
        CHECK(DecodeWhole(tok, ids, o) == expected);
        CHECK(DecodeSplit(tok, ids, o, rng) == expected);
        ++sequences;
      }
    }
  }
  // SentencePiece-style decoders are not a concatenation: "vllm" mode refuses them.
  for (const std::string name : {"gemma3", "llama2"}) {
    if (auto tok = LoadTokenizer(name)) CHECK_MESSAGE(!tok->DecodesByConcatenation(), name);
  }
  MESSAGE(sequences << " ID sequences decoded equal to the reference");
}

TEST_CASE("stop strings end the decoded text before the stop (or after it), also when split across IDs") {
  auto tok = LoadTokenizer("qwen3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  const std::vector<uint32_t> ids = Encode(*tok, "Hello wörld. STOP here, and more STOP");
  std::mt19937 rng(7);
  for (int k = 0; k < 20; ++k) {
    api::TokenTextOptions o;
    o.stop = {"STOP", "", "xyz"};
    CHECK(DecodeSplit(tok, ids, o, rng) == "Hello wörld. ");
    o.include_stop_str_in_output = true;
    CHECK(DecodeSplit(tok, ids, o, rng) == "Hello wörld. STOP");
    o.stop = {"ld. ST", "wö"};  // the one that begins first wins
    o.include_stop_str_in_output = false;
    CHECK(DecodeSplit(tok, ids, o, rng) == "Hello ");
    o.stop = {"nowhere"};
    CHECK(DecodeSplit(tok, ids, o, rng) == "Hello wörld. STOP here, and more STOP");
  }
  // Stopped: later IDs add nothing.
  api::TokenTextOptions o;
  o.stop = {"wör"};
  api::TokenTextStream s(tok, o);
  std::string out;
  CHECK(s.matched_stop().empty());
  REQUIRE(s.Feed(ids, &out));
  CHECK(s.stopped());
  CHECK(s.matched_stop() == "wör");  // what the choice's stop_reason names
  REQUIRE(s.Feed(ids, &out));
  s.Finish(&out);
  CHECK(out == "Hello ");
  // An ID outside the vocabulary is refused, nothing appended.
  api::TokenTextStream bad(tok, {});
  std::string none;
  std::vector<uint32_t> outside = {1, static_cast<uint32_t>(tok->vocab_size())};
  CHECK(!bad.Feed(outside, &none));
  CHECK(none.empty());
}

TEST_CASE("invalid and incomplete UTF-8 becomes U+FFFD per maximal subpart, as the reference writes it") {
  auto lossy = [](std::string_view b, bool final) {
    std::string out;
    size_t used = api::AppendUtf8Lossy(b, final, &out);
    return std::make_pair(out, used);
  };
  const std::string r = "\xEF\xBF\xBD";
  CHECK(lossy("abc", false) == std::make_pair(std::string("abc"), size_t{3}));
  CHECK(lossy("a\xF0\x9F\x98", false) == std::make_pair(std::string("a"), size_t{1}));  // still arriving
  CHECK(lossy("a\xF0\x9F\x98", true) == std::make_pair("a" + r, size_t{4}));            // one subpart
  CHECK(lossy("\xC0\x80", true).first == r + r);                                        // C0 never leads
  CHECK(lossy("\xED\xA0\x80", true).first == r + r + r);                                // a surrogate
  CHECK(lossy("\xE2\x82x", false).first == r + "x");                                   // broken, not arriving
  CHECK(lossy("\xF4\x90\x80\x80", true).first == r + r + r + r);                        // above U+10FFFF
}

TEST_CASE("vllm mode answers come back in the chat format (reasoning, tool calls, stop, usage, stream) "
          "and parse with the openai client") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  auto qwen = LoadTokenizer("qwen3");
  MockEngine engine;
  proxy::Config c = TestConfig(engine);
  c.chat_forward = api::ChatForward::kVllm;
  for (auto& m : c.models) {
    if (m.name == "qwen3") {
      m.tool_parser = api::ToolCallFormat::kHermes;
      m.reasoning = true;
    }
  }
  Proxy p(c);
  HttpClient client(p.port());
  // The model's answer as IDs, ending in <|im_end|> (special: left out).
  std::vector<uint32_t> answer = Encode(*qwen, "<think>\nhm\n</think>\n\nGrüße, wörld ✓ done");
  std::vector<uint32_t> im_end;
  qwen->Encode("<|im_end|>", true, im_end);
  REQUIRE(im_end.size() == 1);
  answer.push_back(im_end[0]);
  engine.SetGenerateIds(answer, "stop");
  const ojson msgs = {{{"role", "user"}, {"content", "hi"}}};

  auto r = client.Request("POST", "/v1/chat/completions",
                          ojson{{"model", "qwen3"}, {"messages", msgs}, {"max_completion_tokens", 64}}.dump());
  REQUIRE_MESSAGE(r.status == 200, r.body);
  json ans = json::parse(r.body);
  CHECK(ans["object"] == "chat.completion");
  CHECK(ans["model"] == "qwen3");
  CHECK(ans["choices"][0]["message"]["content"] == "Grüße, wörld ✓ done");
  CHECK(ans["choices"][0]["message"]["reasoning_content"] == "\nhm\n");
  CHECK(ans["choices"][0]["finish_reason"] == "stop");
  CHECK(ans["usage"]["completion_tokens"] == answer.size());
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  json fwd = json::parse(reqs[0].body);
  CHECK(fwd["sampling_params"]["max_tokens"] == 64);
  std::vector<uint32_t> prompt_ids;
  for (const auto& x : fwd["token_ids"]) prompt_ids.push_back(x.get<uint32_t>());
  std::vector<uint32_t> expected_prompt;
  qwen->Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false, expected_prompt);
  CHECK(prompt_ids == expected_prompt);

  // A stop string: the engine stopped on it; the text ends before it, and
  // the choice names it (vLLM's stop_reason), also streamed.
  r = client.Request("POST", "/v1/chat/completions",
                     ojson{{"model", "qwen3"}, {"messages", msgs}, {"stop", {"nowhere", "wörld"}}}.dump());
  REQUIRE(r.status == 200);
  ans = json::parse(r.body);
  CHECK(ans["choices"][0]["message"]["content"] == "Grüße, ");
  CHECK(ans["choices"][0]["finish_reason"] == "stop");
  CHECK(ans["choices"][0]["stop_reason"] == "wörld");
  CHECK(json::parse(engine.Requests().back().body)["sampling_params"]["stop"] == (json{"nowhere", "wörld"}));
  CHECK(json::parse(engine.Requests().back().body)["sampling_params"]["max_tokens"].is_null());
  {
    auto stopped = client.Stream(
        "/v1/chat/completions",
        ojson{{"model", "qwen3"}, {"messages", msgs}, {"stop", {"wörld"}}, {"stream", true}}.dump());
    REQUIRE(stopped.status == 200);
    CHECK(ReadChatStream(stopped.body).content == "Grüße, ");
    bool named = false;
    for (const std::string& data : SseData(stopped.body)) {
      json chunk = json::parse(data, nullptr, false);
      if (chunk.is_object() && chunk.contains("choices") && !chunk["choices"].empty() &&
          chunk["choices"][0].value("stop_reason", json()) == "wörld") {
        named = chunk["choices"][0]["finish_reason"] == "stop";
      }
    }
    CHECK(named);
  }
  // Anthropic's terms: stop_sequence, in the vllm mode too.
  r = client.Request("POST", "/v1/messages",
                     ojson{{"model", "qwen3"}, {"max_tokens", 50}, {"stop_sequences", {"wörld"}},
                           {"messages", {{{"role", "user"}, {"content", "hi"}}}}}.dump());
  REQUIRE_MESSAGE(r.status == 200, r.body);
  ans = json::parse(r.body);
  CHECK(ans["stop_reason"] == "stop_sequence");
  CHECK(ans["stop_sequence"] == "wörld");

  // Streamed, two IDs an event (characters split across events): the deltas
  // add up to the plain answer; the usage chunk is passed on.
  auto s = client.Stream("/v1/chat/completions",
                         ojson{{"model", "qwen3"},
                               {"messages", msgs},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}}}
                             .dump());
  REQUIRE(s.status == 200);
  ChatStreamRead read = ReadChatStream(s.body);
  CHECK(read.all_chunks);
  CHECK(read.done);
  CHECK(read.usage["completion_tokens"] == answer.size());
  CHECK(read.content == "Grüße, wörld ✓ done");
  CHECK(read.reasoning == "\nhm\n");
  CHECK(read.finish == "stop");

  // An engine answer with an ID outside the vocabulary is a bad response
  // (502, counted), never text made up: a whole answer is translated before
  // its head goes out.
  engine.SetGenerateIds({1, 0xFFFFFFF0u}, "stop");
  r = client.Request("POST", "/v1/chat/completions", ojson{{"model", "qwen3"}, {"messages", msgs}}.dump());
  CHECK(r.status == 502);
  CHECK(json::parse(r.body)["error"]["message"].get<std::string>().find("translated") != std::string::npos);
  CHECK(MetricValue(client.Request("GET", "/metrics", "").body,
                    R"(toktier_backend_requests_total{outcome="bad_response"})") == 1);

  // Tool calls, read by the openai npm client, plain and streamed.
  engine.SetGenerateIds(Encode(*qwen, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
                                      "</tool_call>"),
                        "stop");
  auto lines = RunNodeTool("../tests/proxy/data/openai_chat_check.mjs http://127.0.0.1:" + std::to_string(p.port()) +
                               "/v1 qwen3",
                           "");
  REQUIRE(lines.has_value());
  REQUIRE(lines->size() == 2);
  for (const auto& line : *lines) {
    json got = json::parse(line);
    INFO(line);
    CHECK(got["finish_reason"] == "tool_calls");
    REQUIRE(got["tool_calls"].size() == 1);
    CHECK(got["tool_calls"][0]["name"] == "get_weather");
    CHECK(json::parse(got["tool_calls"][0]["arguments"].get<std::string>()) == json{{"city", "Paris"}});
  }

  std::string metrics = client.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_requests_total{endpoint="chat",outcome="ok"})") >= 3);
}

TEST_CASE("vllm mode needs a vocabulary that decodes by concatenation; logit_bias is relayed") {
  MockEngine engine;
  proxy::Config c = TestConfig(engine);
  c.chat_forward = api::ChatForward::kVllm;
  proxy::ModelConfig gemma;
  gemma.name = "gemma3";
  gemma.tokenizer = TokenizerPath("gemma3");
  REQUIRE_MESSAGE((LoadTokenizer("gemma3") && TokenizersPresent()), "tokenizer files missing: run tools/dev.sh setup");
  proxy::Config with_gemma = c;
  with_gemma.models.push_back(gemma);
  proxy::Server server(with_gemma);
  const core::Status started = server.Start();
  CHECK(!started.ok());
  CHECK_MESSAGE(started.message().find("chat_forward vllm needs") != std::string::npos, started.message());

  Proxy p(c);
  HttpClient client(p.port());
  ojson body = {{"model", "qwen3"},
                {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                {"logit_bias", {{"123", 5}}}};
  auto r = client.Request("POST", "/v1/chat/completions", body.dump());
  CHECK(r.status == 200);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].target == "/v1/chat/completions");
  CHECK(reqs[0].body == body.dump());
  CHECK(MetricValue(client.Request("GET", "/metrics", "").body, R"(toktier_passthrough_total{reason="chat_logit_bias"})") ==
        1);
}
