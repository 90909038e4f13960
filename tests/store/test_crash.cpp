// store/: kill -9 during a stream of writes; every surviving state must be
// valid (its IDs equal a full tokenization of its text).
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "store_test_util.h"

using namespace toktier;
using namespace toktier::store;
using namespace toktier::store::testing;

TEST_CASE("kill -9 during a stream of commits leaves only valid states") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  if (!toktier::test::SharedWorkloadsPresent()) return toktier::test::SkipForMissingData("../shared/workloads");
  auto files = SessionFiles("swe-agent", "llama3");
  REQUIRE_MESSAGE(!files.empty(), "no swe-agent llama3 session in " << toktier::test::SharedWorkloadsDir());
  std::vector<std::vector<std::string>> sessions;
  for (size_t i = 0; i < files.size() && i < 4; ++i) sessions.push_back(SessionPrompts(files[i], 40));
  TempDir d;
  StoreOptions o;
  o.path = d.db();
  o.chunk_bytes = 2048;
  std::mt19937 rng(std::random_device{}());
  size_t total_checked = 0;
  for (int round = 0; round < 4; ++round) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: commit forever, mixing appends, truncations and restarts of
      // sessions under a dozen keys; never flushes on purpose.
      core::Status s;
      auto store = StateStore::Open(o, &s);
      if (!store) _exit(3);
      std::mt19937 crng(static_cast<unsigned>(getpid()));
      std::vector<size_t> step(12, 0);
      for (;;) {
        size_t k = crng() % step.size();
        const auto& sess = sessions[k % sessions.size()];
        std::string prompt = sess[step[k] % sess.size()];
        if (crng() % 4 == 0) prompt = prompt.substr(0, prompt.size() - std::min<size_t>(prompt.size(), crng() % 500));
        while (!prompt.empty() && (static_cast<unsigned char>(prompt.back()) & 0x80)) prompt.pop_back();
        Step(*store, *tok, "key" + std::to_string(k), prompt);
        ++step[k];
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300 + rng() % 900));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    core::Status s;
    auto store = StateStore::Open(o, &s);
    REQUIRE_MESSAGE(store, s.message());
    size_t hits = 0;
    for (int k = 0; k < 12; ++k) {
      LookupResult r;
      auto st = store->Acquire("key" + std::to_string(k), tok->version_hash(), &r);
      CHECK((r == LookupResult::kDiskHit || r == LookupResult::kMiss));
      if (!st) continue;
      ++hits;
      std::vector<uint32_t> ids, ids2, ends;
      tok->Encode(st->text(), st->add_special_tokens(), ids);
      CHECK(ids == st->ids());
      tok->EncodeWithEnds(st->text(), st->add_special_tokens(), ids2, ends);
      CHECK(ends == st->ends());
    }
    CHECK(store->Stats().corrupt == 0);
    MESSAGE("round " << round << ": " << hits << " surviving states, all valid");
    total_checked += hits;
  }
  CHECK(total_checked > 0);
}
