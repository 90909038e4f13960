// The option table (config/config_options.cpp) is the one description of every
// `toktier serve` option: the JSON file, the environment and the printed
// configuration all follow it, values outside an option's range are refused
// wherever they come from, and docs/proxy.md's option table is its output.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "config/config_options.h"
#include "proxy/server.h"

namespace toktier::config {
namespace {

using nlohmann::json;

// Sets an environment variable for one scope.
struct ScopedEnv {
  std::string name;
  ScopedEnv(std::string n, const char* value) : name(std::move(n)) { ::setenv(name.c_str(), value, 1); }
  ~ScopedEnv() { ::unsetenv(name.c_str()); }
};

TEST_CASE("every option has one JSON path, environment variable and flag of its own") {
  std::set<std::string_view> paths, envs, flags;
  for (const auto& o : ConfigOptions()) {
    INFO(o.path);
    CHECK(paths.insert(o.path).second);
    if (!o.env.empty()) CHECK(envs.insert(o.env).second);
    if (!o.flag.empty()) CHECK(flags.insert(o.flag).second);
    CHECK(!o.doc.empty());
    if (o.type == "integer" || o.type == "number") CHECK(o.min <= o.max);
  }
  CHECK(paths.size() == ConfigOptions().size());
  for (const auto& o : ModelOptions()) CHECK(!o.doc.empty());
}

TEST_CASE("the printed configuration loads back into the same configuration") {
  Config c;
  c.port = 9123;
  c.max_body_bytes = 12345;
  c.chat_forward = api::ChatForward::kSglang;
  c.guard_extra_canaries = {"a b", "c"};
  ModelConfig m;
  m.name = "qwen3";
  m.tokenizer = "/x/tokenizer.json";
  m.tool_parser = api::ToolCallFormat::kHermes;
  m.chat_forward = api::ChatForward::kVllm;
  m.forward_mode = ForwardMode::kText;
  c.models.push_back(m);
  const std::string printed = ConfigToJson(c);
  Config loaded;
  REQUIRE(ApplyConfigJson(printed, &loaded).ok());
  CHECK(ConfigToJson(loaded) == printed);
  CHECK(loaded.port == 9123);
  CHECK(loaded.models.at(0).tool_parser == api::ToolCallFormat::kHermes);
  CHECK(loaded.models.at(0).chat_forward == api::ChatForward::kVllm);
  CHECK(loaded.models.at(0).forward_mode == ForwardMode::kText);
}

TEST_CASE("a JSON value of the wrong type or outside its range is refused and changes nothing") {
  struct Bad {
    const char* doc;
    const char* message;
  };
  const Bad cases[] = {
      {R"({"workers": 0})", "workers: must be within [1, 256] (is 0)"},
      {R"({"workers": "2"})", "workers: expected an integer"},
      {R"({"workers": 2.5})", "workers: expected an integer"},
      {R"({"limits": {"body_bytes": -1}})", "limits.body_bytes: must be positive (is -1)"},
      {R"({"limits": {"body_bytes": 0}})", "limits.body_bytes: must be positive (is 0)"},
      {R"({"limits": {"json_max_depth": 4}})", "limits.json_max_depth: must be within [16, 256] (is 4)"},
      {R"({"limits": {"bodybytes": 1}})", "unknown field 'limits.bodybytes'"},
      {R"({"limits": 5})", "'limits' must be an object"},
      {R"({"port": 70000})", "port: must be within [0, 65535] (is 70000)"},
      {R"({"shadow_sample_rate": 1.5})", "shadow_sample_rate: must be within [0, 1] (is 1.5)"},
      {R"({"state": "yes"})", "state: expected true or false"},
      {R"({"chat_forward": "grpc"})", "chat_forward: must be \"text\", \"completions\""},
      {R"({"backends": ["http://a:1", 2]})", "backends: expected an array of strings"},
      {R"({"models": [{"name": "m", "tokenizer": "t", "tool_parser": "xml"}]})", "tool_parser: must be \"none\""},
      {R"({"models": [{"name": "m", "tokenizer": "t", "forward_mode": "tokens"}]})", "forward_mode: must be"},
      {R"({"models": [{"name": "m", "tokenizer": "t", "chat_forwad": ""}]})", "unknown field in a model entry"},
      {R"({"models": [{"name": "m"}]})", "needs 'name' and 'tokenizer'"},
  };
  for (const Bad& b : cases) {
    Config c;
    c.workers = 7;
    const std::string before = ConfigToJson(c);
    core::Status st = ApplyConfigJson(std::string(R"({"io_threads": 3, )") + (b.doc + 1), &c);
    INFO(b.doc);
    INFO(st.message());
    CHECK_FALSE(st.ok());
    CHECK(st.message().find(b.message) != std::string::npos);
    CHECK(ConfigToJson(c) == before);  // the valid io_threads before the error is not applied either
  }
}

TEST_CASE("environment variables follow the table, with the same types and ranges") {
  Config c;
  {
    ScopedEnv body("TOKTIER_LIMITS_BODY_BYTES", "4096");
    ScopedEnv fwd("TOKTIER_CHAT_FORWARD", "completions");
    ScopedEnv gpu("TOKTIER_GPU", "off");
    ScopedEnv backends("TOKTIER_BACKENDS", "http://a:1,http://b:2");
    REQUIRE(ApplyConfigEnv(&c).ok());
  }
  CHECK(c.max_body_bytes == 4096);
  CHECK(c.chat_forward == api::ChatForward::kCompletions);
  CHECK_FALSE(c.gpu_enabled);
  CHECK(c.backends == std::vector<std::string>{"http://a:1", "http://b:2"});
  {
    ScopedEnv workers("TOKTIER_WORKERS", "0");
    core::Status st = ApplyConfigEnv(&c);
    CHECK(st.message() == "TOKTIER_WORKERS: workers: must be within [1, 256] (is 0)");
  }
  {
    ScopedEnv rate("TOKTIER_SHADOW_SAMPLE_RATE", "0.5x");
    CHECK(ApplyConfigEnv(&c).message() == "TOKTIER_SHADOW_SAMPLE_RATE: shadow_sample_rate: expected a number");
  }
}

TEST_CASE("--check-config refuses a programmatic configuration outside the table's ranges") {
  Config c;
  std::string summary;
  REQUIRE(proxy::CheckConfig(c, &summary).ok());
  c.chunk_bytes = 0;
  CHECK(proxy::CheckConfig(c, &summary).message() == "store.chunk_bytes: must be positive (is 0)");
  c.chunk_bytes = 1024;
  c.large_workers = 300;
  CHECK(proxy::CheckConfig(c, &summary).message() == "large_workers: must be within [0, 256] (is 300)");
}

TEST_CASE("docs/proxy.md's option table is the table's own output") {
  std::ifstream in(std::string(TOKTIER_SOURCE_DIR) + "/docs/proxy.md");
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- config-reference: begin (toktier config-reference) -->\n";
  const std::string end = "<!-- config-reference: end -->";
  size_t b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  const std::string table = doc.substr(b + begin.size(), e - b - begin.size());
  CHECK_MESSAGE(table == ConfigReferenceMarkdown(),
                "regenerate the table in docs/proxy.md with `toktier config-reference`");
}

}  // namespace
}  // namespace toktier::config
