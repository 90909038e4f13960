#include <doctest/doctest.h>

#include <atomic>
#include <mutex>

#include "core/core.h"
#include "test_support.h"

using namespace toktier::core;

TEST_CASE("shadow: correct results pass, a wrong one quarantines the version") {
  auto t = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  std::mutex mu;
  std::vector<ShadowEvent> events;
  ShadowOptions opt;
  opt.sample_rate = 1.0;
  ShadowVerifier v(opt, [&](const ShadowEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(e);
  });
  std::string text = "Hello world, it's a fine day <|eot_id|> for 12345 tests.\n";
  std::vector<uint32_t> ids;
  t->Encode(text, true, ids);
  CHECK(v.MaybeSubmit(t, text, true, ids) == ShadowSubmit::kQueued);
  v.Drain();
  CHECK_FALSE(v.IsQuarantined(t->version_hash()));
  auto wrong = ids;
  wrong[3] += 1;
  CHECK(v.Submit(t, text, true, wrong) == ShadowSubmit::kQueued);
  v.Drain();
  REQUIRE(events.size() == 2);
  CHECK(events[0].match);
  CHECK_FALSE(events[1].match);
  CHECK(events[1].first_difference == 3);
  CHECK(events[1].quarantined_now);
  CHECK(events[1].text_hash != 0);
  CHECK(v.IsQuarantined(t->version_hash()));
  CHECK(v.Submit(t, text, true, ids) == ShadowSubmit::kQuarantined);
  auto c = v.counters();
  CHECK(c.checked == 2);
  CHECK(c.mismatches == 1);
}

TEST_CASE("shadow: sampling rate and a bounded queue") {
  auto t = toktier::test::LoadTokenizer("qwen3");
  REQUIRE_MESSAGE(t, "tokenizer files missing: run tools/dev.sh setup");
  ShadowOptions opt;
  opt.sample_rate = 0.05;
  opt.queue_capacity = 4;
  std::atomic<int> seen{0};
  ShadowVerifier v(opt, [&](const ShadowEvent& e) { seen += e.match ? 1 : 1000; });
  std::string text(200000, 'a');
  text += " and a tail";
  std::vector<uint32_t> ids;
  t->Encode(text, false, ids);
  int queued = 0, dropped = 0, not_sampled = 0;
  for (int i = 0; i < 4000; ++i) {
    switch (v.MaybeSubmit(t, text, false, ids)) {
      case ShadowSubmit::kQueued: ++queued; break;
      case ShadowSubmit::kDropped: ++dropped; break;
      case ShadowSubmit::kNotSampled: ++not_sampled; break;
      default: break;
    }
  }
  v.Drain();
  double sampled = static_cast<double>(queued + dropped) / 4000.0;
  MESSAGE("sampled " << sampled << " queued " << queued << " dropped " << dropped);
  CHECK(sampled > 0.03);
  CHECK(sampled < 0.07);
  CHECK(dropped > 0);
  CHECK(v.counters().dropped == static_cast<uint64_t>(dropped));
  CHECK(seen.load() == queued);  // all matched
}
