// api/json_string: the worker's JSON string unescaper against nlohmann's
// parser, and its checkpoints.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "api/api.h"

namespace toktier::test {
namespace {

using api::JsonStringCheckpoint;

std::string Unescape(std::string_view raw, bool* ok, std::vector<JsonStringCheckpoint>* cps = nullptr) {
  std::string out;
  core::Status st = api::UnescapeJsonString(raw, &out, 0, cps);
  *ok = st.ok();
  if (!*ok) CHECK(st.message().find("at byte") != std::string::npos);
  return out;
}

// Random text drawn from a mix that exercises every escape: quotes,
// backslashes, controls, ASCII, 2/3/4-byte UTF-8 (the non-BMP ones become
// surrogate pairs when escaped as ASCII).
std::string RandomText(std::mt19937_64& rng, size_t n) {
  static const char* const kPieces[] = {"a", "b", " ", "\n", "\t", "\r", "\"", "\\", "/", "\b", "\f", "\x01",
                                        "\x1f", "\x7f", "é", "中", "€", "😀", "𝔘", "\\n", "\\u00e9", "def f():\n"};
  std::string s;
  std::uniform_int_distribution<size_t> pick(0, sizeof kPieces / sizeof kPieces[0] - 1);
  while (s.size() < n) s += kPieces[pick(rng)];
  return s;
}

// The JSON string contents (between the quotes) of text.
std::string Escaped(const std::string& text, bool ensure_ascii) {
  std::string j = nlohmann::json(text).dump(-1, ' ', ensure_ascii);
  return j.substr(1, j.size() - 2);
}

}  // namespace

TEST_CASE("json_string: escapes and errors") {
  bool ok;
  CHECK(Unescape(R"(a\"b\\c\/d\be\ff\ng\rh\ti)", &ok) == "a\"b\\c/d\be\ff\ng\rh\ti");
  CHECK(ok);
  CHECK(Unescape(R"(\u00e9\u4E2D\ud83d\ude00)", &ok) == "é中😀");
  CHECK(ok);
  CHECK(Unescape("", &ok).empty());
  CHECK(ok);
  for (const char* bad : {R"(\x)", R"(\u12G4)", R"(\u12)", R"(\ud800)", R"(\ud800x)", R"(\ud800\u0041)",
                          R"(\udc00)", R"(a\)", "a\x01z", "\x1f"}) {
    INFO(bad);
    Unescape(bad, &ok);
    CHECK_FALSE(ok);
  }
}

TEST_CASE("json_string: random texts round-trip through nlohmann's escaping") {
  std::mt19937_64 rng(4);
  for (int iter = 0; iter < 2000; ++iter) {
    std::string text = RandomText(rng, 1 + rng() % 300);
    for (bool ascii : {false, true}) {
      bool ok;
      std::string raw = Escaped(text, ascii);
      CHECK(Unescape(raw, &ok) == text);
      CHECK(ok);
      // The reference parser agrees on the raw form too.
      CHECK(nlohmann::json::parse("\"" + raw + "\"").get<std::string>() == text);
    }
  }
}

TEST_CASE("json_string: checkpoints map raw prefixes to text prefixes at escape boundaries") {
  std::mt19937_64 rng(11);
  for (int iter = 0; iter < 40; ++iter) {
    std::string text = RandomText(rng, 20000 + rng() % 30000);
    std::string raw = Escaped(text, iter % 2 == 0);
    std::vector<JsonStringCheckpoint> cps;
    bool ok;
    REQUIRE(Unescape(raw, &ok, &cps) == text);
    REQUIRE(ok);
    REQUIRE(cps.size() >= raw.size() / api::kJsonCheckpointSpacing - 1);
    size_t prev = 0;
    for (const auto& c : cps) {
      CHECK(c.raw_offset > prev);
      prev = c.raw_offset;
      // Resuming at a checkpoint gives the same text.
      std::string resumed = text.substr(0, c.text_offset);
      REQUIRE(api::UnescapeJsonString(std::string_view(raw).substr(c.raw_offset), &resumed, c.raw_offset, nullptr)
                  .ok());
      CHECK(resumed == text);
    }
  }
}


}  // namespace toktier::test
