// Issue 5 end to end: token state outlives a proxy restart. Replay half of a
// workload session, stop the proxy (its store flushes to RocksDB), start a new
// proxy on the same data directory, replay the rest: the continuation calls
// are hits served from disk, not full tokenizations, and the IDs stay exact.
#include <doctest/doctest.h>

#include <filesystem>
#include <random>

#include "cli/cli.h"
#include "proxy_fixture.h"

namespace toktier::test {

TEST_CASE("proxy: state survives a restart (RocksDB) and the rest of the session hits" *
          doctest::test_suite("concurrency")) {
  REQUIRE_MESSAGE(TokenizersPresent(), "tokenizer files missing: run tools/dev.sh setup");
  if (!SharedWorkloadsPresent()) return SkipForMissingData("../shared/workloads");
  const std::string dir = SharedWorkloadsDir();
  std::string session;
  for (auto& e : std::filesystem::directory_iterator(dir + "/swe-agent/llama3")) {
    if (session.empty() || e.path().string() < session) session = e.path().string();
  }
  std::vector<std::string> prompts;
  const auto read = cli::ReadSessionPrompts(session, &prompts);
    REQUIRE_MESSAGE(read.ok(), read.message());
  REQUIRE(prompts.size() >= 4);
  const size_t half = prompts.size() / 2;
  auto tok = LoadTokenizer("llama3");
  std::filesystem::path data = std::filesystem::temp_directory_path() /
                               ("toktier_restart_" + std::to_string(std::random_device{}()));
  std::filesystem::remove_all(data);
  MockEngine engine;
  auto config = TestConfig(engine);
  config.data_dir = data.string();
  const std::map<std::string, std::string> headers = {{"X-Session-Id", "restart-session"}};
  auto replay = [&](HttpClient& client, size_t from, size_t to) {
    for (size_t s = from; s < to; ++s) {
      engine.ClearRequests();
      auto r = client.Request("POST", "/v1/completions", CompletionBody("llama3", prompts[s]), headers);
      REQUIRE(r.status == 200);
      auto reqs = engine.Requests();
      REQUIRE(reqs.size() == 1);
      std::vector<uint32_t> want;
      tok->Encode(prompts[s], true, want);
      INFO("step " << s);
      CHECK(nlohmann::json::parse(reqs[0].body)["prompt"].get<std::vector<uint32_t>>() == want);
    }
  };
  {
    Proxy first(config);
    HttpClient client(first.port());
    replay(client, 0, half);
    std::string m = client.Request("GET", "/metrics", "").body;
    CHECK(MetricValue(m, R"(toktier_repair_outcomes_total{path="full"})") == 1);
  }  // shutdown: the store flushes its write-behind queue and closes RocksDB
  {
    Proxy second(config);
    HttpClient client(second.port());
    replay(client, half, prompts.size());
    std::string m = client.Request("GET", "/metrics", "").body;
    // The first call after the restart is answered from disk; none is full.
    CHECK(MetricValue(m, R"(toktier_store_hits_total{tier="disk"})") == 1);
    CHECK(MetricValue(m, R"(toktier_repair_outcomes_total{path="full"})") <= 0);
    CHECK(MetricValue(m, R"(toktier_state_lookups_total{result="hit",session="explicit",tenant="anonymous"})") ==
          static_cast<double>(prompts.size() - half));
  }
  std::filesystem::remove_all(data);
}

}  // namespace toktier::test
