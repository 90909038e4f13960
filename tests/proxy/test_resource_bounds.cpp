// Issue 9, resources and sessions: bounded cost for every prompt (one
// repeated character is not 40x slower than text, and its scratch memory is
// given back), big prompts do not hold up small requests of other sessions
// (a large lane; a session's own requests stay in order), everything kept
// per session is charged against the memory budget and RSS follows it, and
// content-addressed sessions survive a kill -9 and restart without ever
// naming another conversation's state.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <unordered_map>

#include "core/bpe.h"
#include "proxy/tokenize_service.h"
#include "proxy_fixture.h"
#include "serve_process.h"

namespace toktier::test {
namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Resident set size of this process (the proxy runs in it).
size_t RssBytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

double Metric(uint16_t port, const std::string& series) {
  HttpClient c(port);
  return MetricValue(c.Request("GET", "/metrics", "").body, series);
}

// Bytes charged against the budget, as /metrics reports them (-3 when the
// series do not exist).
double Accounted(uint16_t port) {
  HttpClient c(port);
  std::string m = c.Request("GET", "/metrics", "").body;
  double sum = 0;
  for (const char* part : {"state", "cache", "index"}) {
    sum += MetricValue(m, std::string("toktier_memory_bytes{part=\"") + part + "\"}");
  }
  return sum;
}

// Varied text of about n bytes (words, numbers, punctuation, newlines).
std::string Text(size_t n, uint32_t seed) {
  static const char* kWords[] = {"the", "proxy", "keeps", "state", "(x)", "{y: 1}", "42", "foo_bar", "Zeta",
                                 "tokens", "\n", "=>", "if", "else", "return", "ok;"};
  std::mt19937 rng(seed);
  std::string s;
  s.reserve(n + 16);
  while (s.size() < n) {
    s += kWords[rng() % 16];
    s += rng() % 7 ? " " : ", ";
  }
  s.resize(n);
  return s;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

// The large-piece merge keeps HF's order (lowest rank first, leftmost on
// ties) while reading rank buckets in order; checked against the plain
// quadratic definition on synthetic vocabularies, including tiktoken-style
// derived merges whose ranks are not monotone along a merge chain.
TEST_CASE("bpe: long pieces merge exactly like the quadratic definition") {
  std::mt19937 rng(7);
  for (int vocab_kind = 0; vocab_kind < 2; ++vocab_kind) {
    // Tokens over the alphabet "abc": every byte, then random concatenations.
    std::vector<std::string> tokens;
    for (int b = 0; b < 256; ++b) tokens.emplace_back(1, static_cast<char>(b));
    std::vector<std::pair<size_t, size_t>> made;  // (left, right) of each merged token
    while (tokens.size() < 256 + 400) {
      size_t l = 'a' + rng() % 3, r = 'a' + rng() % 3;
      if (tokens.size() > 256 + 3) {
        l = rng() % 2 ? l : 256 + rng() % (tokens.size() - 256);
        r = rng() % 2 ? r : 256 + rng() % (tokens.size() - 256);
      }
      std::string t = tokens[l] + tokens[r];
      if (t.size() > 12 || std::find(tokens.begin(), tokens.end(), t) != tokens.end()) continue;
      tokens.push_back(t);
      made.emplace_back(l, r);
    }
    core::BpeModel model;
    std::vector<bool> present(tokens.size(), true);
    REQUIRE(model.Init(tokens, present, core::BpeOptions{}).ok());
    // (left << 32 | right) -> (rank, merged id)
    std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> merges;
    auto pair_key = [](uint32_t l, uint32_t r) { return (uint64_t{l} << 32) | r; };
    if (vocab_kind == 0) {
      // HF merges with shuffled ranks: a merge may rank below the merges
      // that build its parts (allowed by the format, rare in real files).
      std::vector<uint32_t> rank(made.size());
      for (size_t i = 0; i < rank.size(); ++i) rank[i] = static_cast<uint32_t>(i);
      std::shuffle(rank.begin(), rank.end(), rng);
      for (size_t i = 0; i < made.size(); ++i) {
        REQUIRE(model.AddMerge(tokens[made[i].first], tokens[made[i].second], rank[i]).ok());
        merges.emplace(pair_key(static_cast<uint32_t>(made[i].first), static_cast<uint32_t>(made[i].second)),
                       std::make_pair(rank[i], static_cast<uint32_t>(256 + i)));
      }
    } else {
      model.DeriveMergesFromRanks();
      for (uint32_t id = 256; id < tokens.size(); ++id) {
        for (size_t k = 1; k < tokens[id].size(); ++k) {
          auto l = std::find(tokens.begin(), tokens.end(), tokens[id].substr(0, k));
          auto r = std::find(tokens.begin(), tokens.end(), tokens[id].substr(k));
          if (l == tokens.end() || r == tokens.end()) continue;
          auto key = pair_key(static_cast<uint32_t>(l - tokens.begin()), static_cast<uint32_t>(r - tokens.begin()));
          if (!merges.count(key)) merges.emplace(key, std::make_pair(id, id));
        }
      }
    }
    auto naive = [&](const std::string& piece) {
      std::vector<uint32_t> s;
      for (unsigned char c : piece) s.push_back(c);
      for (;;) {
        uint32_t best = UINT32_MAX, id = 0;
        size_t at = 0;
        for (size_t i = 0; i + 1 < s.size(); ++i) {
          auto it = merges.find(pair_key(s[i], s[i + 1]));
          if (it != merges.end() && it->second.first < best) best = it->second.first, id = it->second.second, at = i;
        }
        if (best == UINT32_MAX) return s;
        s[at] = id;
        s.erase(s.begin() + static_cast<std::ptrdiff_t>(at) + 1);
      }
    };
    for (int trial = 0; trial < 60; ++trial) {
      std::string piece;
      const size_t n = 100 + rng() % 700;
      const int kind = trial % 3;
      for (size_t i = 0; i < n; ++i) {
        piece.push_back(kind == 0 ? 'a' : kind == 1 ? "ab"[(i / (1 + rng() % 4)) % 2] : static_cast<char>('a' + rng() % 3));
      }
      std::vector<uint32_t> got, lens;
      model.EncodePiece(piece, got, &lens);
      INFO("vocab " << vocab_kind << " trial " << trial << " n " << n);
      REQUIRE(got == naive(piece));
      size_t covered = 0;
      for (uint32_t len : lens) covered += len;
      CHECK(covered == piece.size());
    }
  }
}

TEST_CASE("a repeated-character prompt costs about what text costs, and its scratch memory goes back") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine(0, /*record=*/false);
  auto config = TestConfig(engine);
  config.shadow_sample_rate = 0;
  Proxy p(config);
  HttpClient c(p.port());
  constexpr size_t kBytes = size_t{6} << 20;
  const std::string text_body = CompletionBody("llama3", Text(kBytes, 1));
  const std::string rep_body = CompletionBody("llama3", std::string(kBytes, 'a'));
  REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("llama3", Text(4096, 2)), {{"X-Session-Id", "w"}})
              .status == 200);
  auto t0 = Clock::now();
  REQUIRE(c.Request("POST", "/v1/completions", text_body, {{"X-Session-Id", "text"}}).status == 200);
  const double t_text = Since(t0);
  const double rss0 = static_cast<double>(RssBytes()), acc0 = Accounted(p.port());
  t0 = Clock::now();
  REQUIRE(c.Request("POST", "/v1/completions", rep_body, {{"X-Session-Id", "rep"}}).status == 200);
  const double t_rep = Since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double rss1 = static_cast<double>(RssBytes()), acc1 = Accounted(p.port());
  MESSAGE("6 MiB prompt: text " << t_text << " s, one repeated character " << t_rep << " s; RSS +"
                                << (rss1 - rss0) / 1048576 << " MiB, accounted +" << (acc1 - acc0) / 1048576
                                << " MiB");
  // Old code: 1 us per character in one binary heap (about 6 s here, 40x
  // text); now rank buckets read in order.
  if (!kSanitizedBuild) CHECK(t_rep < 8 * t_text + 1.0);
  // Old code kept the BPE's per-thread symbol array and heap (about 56 bytes
  // per character) for the life of the thread. What stays now is what the
  // budget accounts for (the state and the session's cache) plus slack for
  // allocator pages.
  CHECK(acc1 >= acc0);
  if (!kSanitizedBuild) CHECK(rss1 - rss0 <= (acc1 - acc0) + 48.0 * 1048576);
}

TEST_CASE("small requests of other sessions are not held up by big prompts; a session stays in order" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto config = TestConfig(engine);
  config.workers = 1;  // every session shares the one worker: head-of-line blocking is certain without a lane
  config.io_threads = 2;
  // Under the sanitizers every size (the large lane's threshold included)
  // is kSanitizerShrink times smaller: the same paths, minutes less.
  config.large_prompt_bytes /= kSanitizerShrink;
  Proxy p(config);
  auto tok = LoadTokenizer("llama3");
  // Big: a full tokenization of about 1 s each (6 MiB of one character).
  const std::string big_prompt((size_t{6} << 20) / kSanitizerShrink, 'x');
  const std::string big_body = CompletionBody("llama3", big_prompt);
  std::atomic<bool> done{false};
  std::vector<std::vector<double>> lat(4);
  std::vector<std::string> last_prompt(4);
  std::vector<std::thread> smalls;
  const auto start = Clock::now() + std::chrono::milliseconds(300);
  for (int i = 0; i < 4; ++i) {
    smalls.emplace_back([&, i] {
      HttpClient c(p.port());
      std::string prompt = Text(3000, 10 + static_cast<uint32_t>(i));
      // Open loop, 20 per second: latency from the scheduled time, so a
      // stall counts for every request that should have gone meanwhile.
      for (int k = 0; !done; ++k) {
        auto sched = start + std::chrono::milliseconds(50 * k);
        std::this_thread::sleep_until(sched);
        prompt += " turn " + std::to_string(k);
        auto r = c.Request("POST", "/v1/completions", CompletionBody("llama3", prompt),
                           {{"X-Session-Id", "small-" + std::to_string(i)}});
        if (r.status != 200) break;
        lat[i].push_back(std::chrono::duration<double>(Clock::now() - sched).count());
      }
      last_prompt[i] = prompt;
    });
  }
  double big_s = 0;
  {
    HttpClient c(p.port());
    std::this_thread::sleep_until(start + std::chrono::milliseconds(500));
    // At least 3 big prompts and 3 s of small traffic (enough samples for a P99).
    const auto t_begin = Clock::now();
    for (int k = 0; k < 3 || Since(t_begin) < 3.0; ++k) {
      auto t0 = Clock::now();
      REQUIRE(c.Request("POST", "/v1/completions", big_body, {{"X-Session-Id", "big-" + std::to_string(k)}}).status ==
              200);
      big_s += Since(t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  done = true;
  for (auto& t : smalls) t.join();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  REQUIRE(all.size() > 100);
  const double p99 = Percentile(all, 0.99);
  MESSAGE(all.size() << " small requests while big prompts took " << big_s << " s: P50 "
                     << Percentile(all, 0.5) * 1000 << " ms, P99 " << p99 * 1000 << " ms, max "
                     << Percentile(all, 1.0) * 1000 << " ms");
  // Old code: each small request on the worker waited for the whole big job
  // (seconds). The bound is loose for a shared 2-core machine.
  if (!kSanitizedBuild) CHECK(p99 < 0.3);
  // The small sessions' last IDs are exact.
  std::map<std::string, std::string> last_body;
  for (const auto& r : engine.Requests()) {
    auto it = r.headers.find("x-session-id");
    if (it != r.headers.end() && it->second.rfind("small-", 0) == 0) last_body[it->second] = r.body;
  }
  for (int i = 0; i < 4; ++i) {
    std::vector<uint32_t> want;
    tok->Encode(last_prompt[i], true, want);
    CHECK(json::parse(last_body["small-" + std::to_string(i)])["prompt"].get<std::vector<uint32_t>>() == want);
  }
  engine.ClearRequests();

  // One session: a big request goes to the large lane, its next requests
  // arrive while it runs (on other connections); they wait for it and run in
  // order, on its state (hits, not full tokenizations), with exact IDs.
  std::string m0 = HttpClient(p.port()).Request("GET", "/metrics", "").body;
  const std::string hit_series = R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})";
  const std::string full_series = R"(toktier_repair_outcomes_total{path="full"})";
  const std::map<std::string, std::string> h = {{"X-Session-Id", "ordered"}};
  std::string base = Text((size_t{8} << 20) / kSanitizerShrink, 5);
  std::vector<std::string> prompts = {base, base + " one", base + " one two", base + " one two three"};
  std::vector<std::thread> senders;
  std::vector<int> status(prompts.size(), 0);
  for (size_t k = 0; k < prompts.size(); ++k) {
    senders.emplace_back([&, k] {
      HttpClient c(p.port());
      status[k] = c.Request("POST", "/v1/completions", CompletionBody("llama3", prompts[k]), h).status;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(k == 0 ? 80 : 15));  // arrive in this order
  }
  for (auto& t : senders) t.join();
  for (int s : status) CHECK(s == 200);
  std::string m1 = HttpClient(p.port()).Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m1, hit_series) - MetricValue(m0, hit_series) == 3);
  CHECK(MetricValue(m1, full_series) - MetricValue(m0, full_series) == 1);
  auto reqs = engine.Requests();
  REQUIRE(reqs.size() == prompts.size());
  std::vector<std::vector<uint32_t>> got;
  for (const auto& r : reqs) got.push_back(json::parse(r.body)["prompt"].get<std::vector<uint32_t>>());
  for (size_t k = 0; k < prompts.size(); ++k) {
    std::vector<uint32_t> want;
    tok->Encode(prompts[k], true, want);
    CHECK(std::count(got.begin(), got.end(), want) == 1);
  }
}

// Issue 37: a chat turn's body is parsed, mapped and rendered off the I/O
// thread (HttpConn::Prepare). One I/O thread serves every connection here,
// and the big conversation has tens of thousands of short messages, so its
// render (per-message work in the template) takes a few hundred ms: on the
// I/O thread it stalled every small chat request that arrived meanwhile.
TEST_CASE("a large chat turn is rendered off the I/O thread: small chat requests on other connections are not held up" *
          doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto config = ChatConfig(engine, "completions");
  config.io_threads = 1;
  config.workers = 2;
  Proxy p(config);
  const size_t n_big = 24000 / kSanitizerShrink;
  ojson big = {{"model", "qwen3"}, {"max_tokens", 1}, {"messages", ojson::array()}};
  for (size_t i = 0; i < n_big; ++i) {
    big["messages"].push_back({{"role", i % 2 ? "assistant" : "user"}, {"content", Text(40, static_cast<uint32_t>(i))}});
  }
  std::atomic<bool> done{false};
  std::vector<std::vector<double>> lat(3);
  std::vector<std::thread> smalls;
  const auto start = Clock::now() + std::chrono::milliseconds(300);
  for (int i = 0; i < 3; ++i) {
    smalls.emplace_back([&, i] {
      HttpClient c(p.port());
      ojson body = {{"model", "qwen3"}, {"max_tokens", 1},
                    {"messages", {{{"role", "user"}, {"content", Text(2000, 100 + static_cast<uint32_t>(i))}}}}};
      for (int k = 0; !done; ++k) {
        auto sched = start + std::chrono::milliseconds(50 * k);
        std::this_thread::sleep_until(sched);
        auto r = c.Request("POST", "/v1/chat/completions", body.dump(), {{"X-Session-Id", "small-" + std::to_string(i)}});
        if (r.status != 200) break;
        lat[i].push_back(std::chrono::duration<double>(Clock::now() - sched).count());
      }
    });
  }
  double big_s = 0;
  int big_turns = 0;
  {
    HttpClient c(p.port());
    std::this_thread::sleep_until(start + std::chrono::milliseconds(200));
    const auto t_begin = Clock::now();
    for (int k = 0; k < 3 || Since(t_begin) < 3.0; ++k, ++big_turns) {
      big["messages"].push_back({{"role", k % 2 ? "user" : "assistant"}, {"content", "turn " + std::to_string(k)}});
      auto t0 = Clock::now();
      auto r = c.Request("POST", "/v1/chat/completions", big.dump(), {{"X-Session-Id", "big"}});
      REQUIRE(r.status == 200);
      big_s += Since(t0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  done = true;
  for (auto& t : smalls) t.join();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  REQUIRE(all.size() > 60);
  const double p99 = Percentile(all, 0.99);
  MESSAGE(all.size() << " small chat requests while " << big_turns << " big turns took " << big_s / big_turns * 1000
                     << " ms each: P50 " << Percentile(all, 0.5) * 1000 << " ms, P99 " << p99 * 1000 << " ms");
  // Old code: a small request that arrived during a big turn's render waited
  // for it on the one I/O thread (P99 about the render time). The bound is
  // loose for a shared 2-core machine, where the render competes for CPU.
  if (!kSanitizedBuild) CHECK(p99 < 0.5 * big_s / big_turns);
  // The big turn's IDs (the render took the messages out of the body) are
  // the tokenization of the plain rendering of the same request.
  std::string last_big;
  for (const auto& r : engine.Requests()) {
    auto it = r.headers.find("x-session-id");
    if (it != r.headers.end() && it->second == "big") last_big = r.body;
  }
  REQUIRE(!last_big.empty());
  api::ChatRequest req;
  api::RequestError err;
  REQUIRE(api::ParseChatRequest(big.dump(), &req, &err));
  std::string prompt;
  REQUIRE(api::RenderChatPrompt(*p.server.service().FindModel("qwen3")->chat, req, 0, &prompt).ok());
  std::vector<uint32_t> want;
  LoadTokenizer("qwen3")->Encode(prompt, false, want);
  CHECK(json::parse(last_big)["prompt"].get<std::vector<uint32_t>>() == want);
}

TEST_CASE("everything kept per session stays within the memory budget, and RSS follows it") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine(0, /*record=*/false);
  auto config = TestConfig(engine);
  config.memory_budget_bytes = size_t{64} << 20;
  Proxy p(config);
  // 24 sessions of 3 MiB (half named by a header, half content-addressed):
  // far more than the budget holds.
  std::vector<std::string> bodies;
  for (int i = 0; i < 24; ++i) bodies.push_back(CompletionBody("llama3", "session " + std::to_string(i) + " " + Text(size_t{3} << 20, 100 + i)));
  HttpClient c(p.port());
  REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("llama3", Text(8192, 3)), {{"X-Session-Id", "w"}})
              .status == 200);
  const double rss0 = static_cast<double>(RssBytes());
  double peak = 0;
  for (int i = 0; i < 24; ++i) {
    std::map<std::string, std::string> h;
    if (i % 2 == 0) h["X-Session-Id"] = "m" + std::to_string(i);
    REQUIRE(c.Request("POST", "/v1/completions", bodies[i], h).status == 200);
    const double acc = Accounted(p.port());
    peak = std::max(peak, static_cast<double>(RssBytes()));
    INFO("after prompt " << i);
    CHECK(acc >= 0);
    CHECK(acc <= static_cast<double>(config.memory_budget_bytes));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double rss1 = static_cast<double>(RssBytes());
  HttpClient m(p.port());
  std::string metrics = m.Request("GET", "/metrics", "").body;
  MESSAGE("budget 64 MiB, 24 x 3 MiB prompts: RSS +" << (rss1 - rss0) / 1048576 << " MiB after (peak +"
                                                     << (peak - rss0) / 1048576 << " MiB); accounted state "
                                                     << MetricValue(metrics, R"(toktier_memory_bytes{part="state"})")
                                                     << ", cache "
                                                     << MetricValue(metrics, R"(toktier_memory_bytes{part="cache"})")
                                                     << ", index "
                                                     << MetricValue(metrics, R"(toktier_memory_bytes{part="index"})"));
  CHECK(MetricValue(metrics, "toktier_memory_budget_bytes") == static_cast<double>(config.memory_budget_bytes));
  CHECK(MetricValue(metrics, R"(toktier_memory_bytes{part="index"})") <= config.memory_budget_bytes / 32.0);
  // Tolerance (docs/security.md): allocator pages and the per-thread caches
  // of the tokenizer, 64 MiB. Old code: the store's budget plus half of it
  // again for the caches, and freed prompt buffers kept by malloc (+300 MiB).
  if (!kSanitizedBuild) CHECK(rss1 - rss0 <= static_cast<double>(config.memory_budget_bytes) + 64.0 * 1048576);
}

// The bytes of shadow samples waiting for verification are capped
// (min(256 MiB, budget / 4)); each verdict gives its sample's bytes back, so
// sampling goes on. Here the cap (16 MiB) holds three 1 MiB samples at once:
// six samples in a row are all checked only if every verdict returns its bytes.
TEST_CASE("proxy: shadow samples go on under the byte cap (each verdict returns its bytes)" * doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine(0, /*record=*/false);
  auto config = TestConfig(engine);
  config.memory_budget_bytes = size_t{64} << 20;
  config.shadow_sample_rate = 1.0;
  Proxy p(config);
  HttpClient c(p.port());
  const std::string series = R"(toktier_shadow_checks_total{model="llama3"})";
  for (int i = 0; i < 6; ++i) {
    REQUIRE(c.Request("POST", "/v1/completions",
                      CompletionBody("llama3", Text((size_t{1} << 20) / kSanitizerShrink, 200 + i))).status ==
            200);
    for (int w = 0; w < 500 && Metric(p.port(), series) < i + 1; ++w) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(Metric(p.port(), series) == i + 1);
  }
}

TEST_CASE("content-addressed sessions survive kill -9 and restart; new keys never name old states") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  auto tok = LoadTokenizer("llama3");
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("toktier_resource_bounds_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  WriteServeConfig(engine, dir);
  // No session header anywhere. A: one conversation, two calls. C: another
  // conversation with the same first 1 KiB (same system prompt), then its own.
  const std::string system = Text(1024, 42);
  const std::string a1 = system + Text(6000, 43), a2 = a1 + "\nuser: and then?\n", a3 = a2 + "assistant: done.\n";
  const std::string c1 = system + Text(5000, 44);
  auto send = [&](uint16_t port, const std::string& prompt) {
    engine.ClearRequests();
    HttpClient c(port);
    REQUIRE(c.Request("POST", "/v1/completions", CompletionBody("llama3", prompt)).status == 200);
    auto reqs = engine.Requests();
    REQUIRE(reqs.size() == 1);
    std::vector<uint32_t> want;
    tok->Encode(prompt, true, want);
    CHECK(json::parse(reqs[0].body)["prompt"].get<std::vector<uint32_t>>() == want);
  };
  {
    ServeProcess first((dir / "config.json").string(), (dir / "first.log").string());
    send(first.port, a1);
    send(first.port, a2);
    CHECK(Metric(first.port, R"(toktier_state_lookups_total{result="hit",session="implicit",tenant="anonymous"})") ==
          1);
    // Wait until both commits are in RocksDB (its WAL survives a process kill).
    for (int i = 0; i < 200 && Metric(first.port, "toktier_store_writes_total") < 2; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    REQUIRE(Metric(first.port, "toktier_store_writes_total") >= 2);
    first.Kill9();
  }
  ServeProcess second((dir / "config.json").string(), (dir / "second.log").string());
  // C first: a new conversation. Old code: its new key restarted the counter
  // ("...-0") and named A's state on disk (a hit on another conversation).
  send(second.port, c1);
  HttpClient m(second.port);
  std::string metrics = m.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="miss",session="implicit",tenant="anonymous"})") ==
        1);
  const double disk_after_c = MetricValue(metrics, R"(toktier_store_hits_total{tier="disk"})");
  CHECK(disk_after_c <= 0);
  // A continues: the rebuilt index finds its state on disk (old code: the
  // index was empty after the restart, so a new key and a full tokenization).
  send(second.port, a3);
  metrics = m.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(metrics, R"(toktier_store_hits_total{tier="disk"})") - std::max(0.0, disk_after_c) == 1);
  CHECK(MetricValue(metrics, R"(toktier_state_lookups_total{result="hit",session="implicit",tenant="anonymous"})") ==
        1);
  CHECK(MetricValue(metrics, R"(toktier_full_tokenizations_total{reason="no_state"})") == 1);  // C only
  second.Kill9();
  std::filesystem::remove_all(dir);
}

TEST_CASE("a prompt list without a session header is not counted as an explicit session") {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  MockEngine engine;
  Proxy p(TestConfig(engine));
  HttpClient c(p.port());
  const std::string body = R"({"model":"llama3","prompt":["first prompt","second prompt"],"max_tokens":1})";
  REQUIRE(c.Request("POST", "/v1/completions", body).status == 200);
  REQUIRE(c.Request("POST", "/v1/completions", body, {{"X-Session-Id", "named"}}).status == 200);
  std::string m = c.Request("GET", "/metrics", "").body;
  CHECK(MetricValue(m, R"(toktier_state_lookups_total{result="miss",session="none",tenant="anonymous"})") == 2);
  CHECK(MetricValue(m, R"(toktier_state_lookups_total{result="miss",session="explicit",tenant="anonymous"})") == 2);
  CHECK(MetricValue(m, R"(toktier_full_tokenizations_total{reason="no_session"})") == 2);
}

}  // namespace toktier::test
