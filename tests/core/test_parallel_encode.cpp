// Issue 13: full tokenization cut into regions (core/parallel_encode.cpp,
// TokenizerImpl::IsRegionSplit) gives exactly the one-thread result.
//  (a) The cut rule, exhaustively: every string up to 5 characters over a
//      representative alphabet (plus added tokens), encoded with regions of
//      one byte (a cut at EVERY accepted point) on a 2-thread pool, equals
//      the generic path's encoding (the in-project reference, which never
//      cuts), IDs, ends and added spans; and every string up to 3 symbols
//      between fillers longer than the rule's reach, split at every point
//      the rule accepts, equals it too, also with added tokens that overlap.
//  (b) Long texts (the shared workloads, synthetic code/prose, texts that are
//      not NFC in places, long pieces without a cut point) on 2 and 3
//      threads with the default and small regions equal the one-thread fast
//      path; the outcome reports the regions and threads, or why not.
//  (c) The pool: concurrent callers never share a run (a busy pool makes the
//      caller encode alone, counted), and Run covers every task once.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/tokenizer_impl.h"
#include "test_support.h"

namespace core = toktier::core;

namespace {

struct Encoded {
  std::vector<uint32_t> ids, ends;
  std::vector<core::TextSpan> added;
  bool operator==(const Encoded&) const = default;
};

Encoded EncodeGeneric(const core::Tokenizer& tok, std::string_view text, bool add_special) {
  Encoded e;
  tok.impl().EncodeFull(text, add_special, core::TokenizerImpl::Path::kGeneric, {e.ids, &e.ends, &e.added});
  return e;
}

Encoded EncodeWith(const core::Tokenizer& tok, std::string_view text, bool add_special,
                   const core::EncodeOptions* options, core::EncodeOutcome* outcome = nullptr) {
  Encoded e;
  tok.impl().EncodeFull(text, add_special, core::TokenizerImpl::Path::kFast, {e.ids, &e.ends, &e.added}, options,
                        outcome);
  return e;
}

// Appends every string of exactly `len` symbols over `alphabet`.
void Enumerate(const std::vector<std::string>& alphabet, size_t len, std::string& prefix, std::vector<std::string>& out) {
  if (len == 0) {
    out.push_back(prefix);
    return;
  }
  for (const std::string& a : alphabet) {
    const size_t keep = prefix.size();
    prefix += a;
    Enumerate(alphabet, len - 1, prefix, out);
    prefix.resize(keep);
  }
}

struct Case {
  const char* name;
  std::vector<std::string> alphabet;
};

// The alphabet: classes every family's rules distinguish (letters of both
// cases, digits, punctuation, apostrophe, space, newline, tab, a non-ASCII
// letter, a combining mark, CJK, a character NFC rewrites) and, per
// tokenizer, a piece of an added token.
std::vector<std::string> BaseAlphabet() {
  return {"a", "B", "1", ".", "'", " ", "\n", "\t", "\xC3\xA9" /* é */, "\xCC\x81" /* U+0301 */,
          "\xE4\xB8\x80" /* 一 */, "s"};
}

}  // namespace

TEST_CASE("cutting at every accepted point equals the uncut reference (exhaustive)") {
  const std::vector<std::pair<std::string, std::string>> tokenizers = {
      {"llama3", "<|eot_id|>"},
      {"qwen3", "<|im_end|>"},
      {"tiktoken:o200k_base", "<|endoftext|>"},
      {"deepseek_v3", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>"},  // a normalized added token
      {"tiktoken:r50k_base", "<|endoftext|>"},                             // GPT-2 pattern
      {"llama2", ""},                                                      // no pre-tokenizer
  };
  core::EncodePool pool(2);
  core::EncodeOptions opt;
  opt.pool = &pool;
  opt.parallel_min_bytes = 0;
  opt.chunk_bytes = 1;
  for (const auto& [name, added] : tokenizers) {
    auto tok = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    std::vector<std::string> alphabet = BaseAlphabet();
    if (!added.empty()) alphabet.push_back(added);
    std::vector<std::string> texts;
    std::string prefix;
    const size_t max_len = name == "llama2" ? 4 : 5;
    for (size_t len = 3; len <= max_len; ++len) Enumerate(alphabet, len, prefix, texts);
    size_t checked = 0, cut_texts = 0, failures = 0;
    for (const std::string& text : texts) {
      for (bool add_special : {false, true}) {
        core::EncodeOutcome oc;
        const Encoded got = EncodeWith(*tok, text, add_special, &opt, &oc);
        const Encoded want = EncodeGeneric(*tok, text, add_special);
        ++checked;
        cut_texts += oc.chunks > 1;
        if (!(got == want) && failures++ < 5) {
          FAIL_CHECK(name << ": cut encoding differs for " << nlohmann::json(text).dump()
                          << " add_special=" << add_special);
        }
      }
    }
    MESSAGE(name << ": " << checked << " encodings, " << cut_texts << " cut into several regions");
    CHECK(failures == 0);
    CHECK(cut_texts > checked / 4);  // the enumeration really exercises cuts
  }
}

namespace {

// The generic path's encoding of the whole text (no post-processor).
Encoded EncodeWhole(const core::TokenizerImpl& impl, std::string_view text, bool match_added) {
  Encoded e;
  impl.EncodeFrom(text, 0, false, match_added, core::TokenizerImpl::Path::kGeneric, {e.ids, &e.ends, &e.added});
  return e;
}

// Whether text[:p] encoded, then text encoded from p continuing its
// segment, equals `whole` (what a region split at p must give).
bool SplitAtMatches(const core::TokenizerImpl& impl, std::string_view text, size_t p, bool match_added,
                    const Encoded& whole) {
  Encoded got;
  const core::TokenizerImpl::Sink sink{got.ids, &got.ends, &got.added};
  impl.EncodeFrom(text.substr(0, p), 0, false, match_added, core::TokenizerImpl::Path::kFast, sink);
  impl.EncodeFrom(text, p, /*continue_segment=*/true, match_added, core::TokenizerImpl::Path::kFast, sink);
  return got == whole;
}

}  // namespace

TEST_CASE("a region split decided from the bytes around it holds inside a long segment (exhaustive)") {
  // IsRegionSplit sees only kRegionReach bytes either side of a point. Every
  // string up to 3 symbols (plus an added token per tokenizer) is put between
  // two fillers longer than that reach, so the window is a slice of a longer
  // segment; at every point of the string that the rule accepts, encoding
  // the text before the point and continuing from it must give the generic
  // path's encoding of the whole text (IDs and ends).
  const std::vector<std::pair<std::string, std::string>> tokenizers = {
      {"llama3", "<|eot_id|>"},
      {"qwen3", "<|im_end|>"},
      {"tiktoken:o200k_base", "<|endoftext|>"},
      {"deepseek_v3", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>"},
      {"llama2", ""},
  };
  const size_t reach = core::TokenizerImpl::kRegionReach;
  auto repeat = [&](const std::string& unit) {
    std::string r;
    while (r.size() < reach + 100) r += unit;
    return r;
  };
  // One long word, spaces, ordinary code, text that NFC rewrites.
  const std::vector<std::pair<std::string, std::string>> fillers = {
      {repeat("x"), repeat("y")},
      {repeat(" "), repeat("\n")},
      {repeat("int a = 1; // b\n"), repeat(" c d, e")},
      {repeat("e\xCC\x81 "), repeat("\xE2\x84\xAB" "1")},
  };
  for (const auto& [name, added] : tokenizers) {
    auto tok = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    const core::TokenizerImpl& impl = tok->impl();
    std::vector<std::string> alphabet = BaseAlphabet();
    if (!added.empty()) alphabet.push_back(added);
    std::vector<std::string> middles;
    std::string prefix;
    for (size_t len = 1; len <= 3; ++len) Enumerate(alphabet, len, prefix, middles);
    size_t accepted = 0, failures = 0;
    for (const auto& [left, right] : fillers) {
      for (const std::string& middle : middles) {
        const std::string text = left + middle + right;
        for (bool add_special : {false, true}) {
          const bool match_added = impl.MatchesAddedTokens(add_special);
          const Encoded want = EncodeWhole(impl, text, match_added);
          for (size_t p = left.size(); p <= left.size() + middle.size(); ++p) {
            if (!impl.IsRegionSplit(text, p, match_added)) continue;
            ++accepted;
            if (!SplitAtMatches(impl, text, p, match_added, want) && failures++ < 5) {
              FAIL_CHECK(name << ": split at " << p - left.size() << " of " << nlohmann::json(middle).dump()
                              << " between fillers " << nlohmann::json(left.substr(0, 12)).dump() << "... and "
                              << nlohmann::json(right.substr(0, 12)).dump() << "... add_special=" << add_special);
            }
          }
        }
      }
    }
    MESSAGE(name << ": " << accepted << " region splits checked");
    CHECK(failures == 0);
    CHECK(accepted > middles.size());
  }
}

TEST_CASE("an added-token start that another occurrence straddles is not a region split") {
  // Llama 3 with two added tokens that overlap ("zab", "abq"): in "zabq"
  // the scan matches "zab" at 0, so "abq" at 1 is no segment start, and
  // splitting there would match it. Every string up to 4 symbols over an
  // alphabet that builds such overlaps, between fillers, split at every
  // accepted point, must equal the generic path's encoding of the whole.
  const std::string path = toktier::test::TokenizerPath("llama3");
  auto json_text = path.empty() ? std::nullopt : toktier::test::ReadFile(path);
  REQUIRE_MESSAGE(json_text.has_value(), "tokenizer files missing: run tools/dev.sh setup");
  nlohmann::json j = nlohmann::json::parse(*json_text);
  uint32_t next_id = 0;
  for (const auto& a : j["added_tokens"]) next_id = std::max<uint32_t>(next_id, a["id"].get<uint32_t>() + 1);
  for (const char* content : {"zab", "abq"}) {
    j["added_tokens"].push_back({{"id", next_id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  core::Status st;
  auto tok = core::Tokenizer::FromHuggingFaceJson(j.dump(), &st);
  REQUIRE(tok);
  const core::TokenizerImpl& impl = tok->impl();
  const std::string filler(core::TokenizerImpl::kRegionReach + 50, 'x');
  {
    const std::string text = filler + " zabq " + filler;
    const size_t at = filler.size() + 1;
    CHECK(impl.IsRegionSplit(text, at, true));           // "zab" starts here, nothing straddles
    CHECK_FALSE(impl.IsRegionSplit(text, at + 1, true));  // "abq" starts inside "zab"
  }
  const std::vector<std::string> alphabet = {"z", "a", "b", "q", " ", "zab", "abq"};
  std::vector<std::string> middles;
  std::string prefix;
  for (size_t len = 1; len <= 4; ++len) Enumerate(alphabet, len, prefix, middles);
  size_t accepted = 0, token_splits = 0, failures = 0;
  for (const std::string& middle : middles) {
    const std::string text = filler + middle + filler;
    const Encoded want = EncodeWhole(impl, text, true);
    for (size_t p = filler.size(); p <= filler.size() + middle.size(); ++p) {
      if (!impl.IsRegionSplit(text, p, true)) continue;
      ++accepted;
      token_splits += impl.raw_added().FirstOccurrence(text, p, p + 1) == p;
      if (!SplitAtMatches(impl, text, p, true, want) && failures++ < 5) {
        FAIL_CHECK("split at " << p - filler.size() << " of " << nlohmann::json(middle).dump());
      }
    }
  }
  MESSAGE(accepted << " region splits checked, " << token_splits << " at added-token starts");
  CHECK(failures == 0);
  CHECK(token_splits > 100);
}

namespace {

std::vector<std::string> LongTexts() {
  std::vector<std::string> texts;
  const std::string dir = toktier::test::SharedWorkloadsDir();
  if (!dir.empty()) {
    size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file() || e.file_size() < (size_t{64} << 10) || n >= 6) continue;
      auto t = toktier::test::ReadFile(e.path().string());
      if (t && core::FindInvalidUtf8(*t) == std::string::npos) {
        texts.push_back(std::move(*t));
        ++n;
      }
    }
  }
  std::mt19937 rng(13);
  const std::vector<std::string> words = {"int", " main", "(", "void", ")", " {\n", "    return", " 0", ";\n", "}\n",
                                          " The", " tokenizer", "'s", " state", ",", " caf\xC3\xA9", " 123456",
                                          "\n\n", "  ", "\xE4\xB8\x80\xE4\xBA\x8C", " naïve", "<|im_end|>",
                                          "<|eot_id|>", "\t", "!!!", " don't", " HTTP", "Server"};
  std::string synth;
  while (synth.size() < (size_t{600} << 10)) synth += words[rng() % words.size()];
  texts.push_back(synth);
  // Not NFC in a few places (e + U+0301, Angstrom sign, Greek oxia): only
  // those chunks are normalized.
  std::string nonnfc = synth;
  for (size_t at = 1000; at < nonnfc.size(); at += 97 * 1024) {
    while ((static_cast<unsigned char>(nonnfc[at]) & 0xC0) == 0x80) ++at;
    nonnfc.insert(at, " e\xCC\x81\xE2\x84\xAB\xE1\xBD\xB1 ");
  }
  texts.push_back(nonnfc);
  // One long piece without any cut point, then ordinary text.
  texts.push_back(std::string(200000, 'x') + " " + synth.substr(0, 100000));
  // Runs of spaces and newlines far longer than a chunk.
  texts.push_back(std::string(150000, ' ') + "a" + std::string(150000, '\n') + "b");
  return texts;
}

}  // namespace

TEST_CASE("long texts on 2 and 3 threads equal one thread") {
  const auto texts = LongTexts();
  REQUIRE(texts.size() >= 4);
  for (const std::string name : {"llama3", "qwen3", "tiktoken:o200k_base", "deepseek_v3", "tiktoken:cl100k_base"}) {
    auto tok = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    for (int threads : {2, 3}) {
      core::EncodePool pool(threads);
      for (size_t chunk : {size_t{0}, size_t{4096}}) {
        core::EncodeOptions opt;
        opt.pool = &pool;
        opt.chunk_bytes = chunk;
        for (size_t i = 0; i < texts.size(); ++i) {
          const Encoded one = EncodeWith(*tok, texts[i], true, nullptr);
          core::EncodeOutcome oc;
          const Encoded par = EncodeWith(*tok, texts[i], true, &opt, &oc);
          CHECK_MESSAGE(par == one, name << " threads=" << threads << " chunk=" << chunk << " text " << i);
          CHECK_FALSE(oc.pool_busy);
          // The last two texts are mostly one uncuttable piece or run.
          // (Groups are claimed by whichever thread is free: on a busy
          // machine a worker may find none left.)
          CHECK(oc.threads >= 1);
          CHECK(oc.threads <= threads);
          if (i + 2 < texts.size()) CHECK(oc.chunks > 1);
        }
      }
    }
    // Below the threshold: the caller alone, not cut.
    core::EncodePool pool(2);
    core::EncodeOptions opt;
    opt.pool = &pool;
    core::EncodeOutcome oc;
    EncodeWith(*tok, texts.back().substr(0, 1000), false, &opt, &oc);
    CHECK(oc.threads == 1);
    CHECK(oc.chunks == 0);
  }
}

TEST_CASE("the pool's group buffers, kept between runs, carry nothing into the next run") {
  // Runs of different sizes, group counts and sinks (ids only, ids + ends +
  // added spans) alternate on the same calling thread and pool; each must
  // equal its one-thread encoding, so nothing a longer earlier run left in
  // the kept buffers shows up.
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  const auto texts = LongTexts();
  core::EncodePool pool(2);
  core::EncodeOptions opt;
  opt.pool = &pool;
  std::string added_text;
  while (added_text.size() < (size_t{300} << 10)) added_text += "say <|eot_id|> then 1234 more words.\n";
  const std::vector<std::string> order = {texts[0], texts[1].substr(0, 70000), added_text, texts[1],
                                          texts[0].substr(0, 100000), added_text.substr(0, 90000)};
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < order.size(); ++i) {
      const bool with_ends = (i + round) % 2 == 0;
      opt.chunk_bytes = i % 3 == 0 ? 0 : 4096;
      core::EncodeOutcome oc;
      if (with_ends) {
        const Encoded par = EncodeWith(*tok, order[i], true, &opt, &oc);
        CHECK_MESSAGE(par == EncodeWith(*tok, order[i], true, nullptr), "round " << round << " text " << i);
      } else {
        std::vector<uint32_t> par, one;
        tok->Encode(order[i], true, par, opt, &oc);
        tok->Encode(order[i], true, one);
        CHECK_MESSAGE(par == one, "round " << round << " text " << i << " (ids only)");
      }
      CHECK(oc.chunks > 1);
    }
  }
}

TEST_CASE("the group buffers are the pool's: calling threads that share it, at once, get their own results") {
  // One pool, several calling threads encoding different texts at the same
  // time: one of them holds the pool (and its buffers) for a whole run,
  // including the appends after the groups; the others encode alone
  // (pool_busy). Every result equals its one-thread encoding. Under TSan
  // (tools/dev.sh runs the pool cases in unit_core_pool) a buffer touched
  // outside the run is reported: releasing the pool right after the groups,
  // before the last appends, was.
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  const auto texts = LongTexts();
  REQUIRE(texts.size() >= 2);
  std::string added_text;
  while (added_text.size() < (size_t{200} << 10)) added_text += "say <|eot_id|> then 1234 more words.\n";
  const std::vector<std::string> inputs = {texts[0], texts[1].substr(0, 150000), added_text};
  std::vector<Encoded> expected;
  for (const std::string& t : inputs) expected.push_back(EncodeWith(*tok, t, true, nullptr));
  core::EncodePool pool(2);
  std::atomic<int> mismatches{0}, pooled{0}, alone{0};
  std::vector<std::thread> callers;
  for (size_t c = 0; c < inputs.size(); ++c) {
    callers.emplace_back([&, c] {
      core::EncodeOptions opt;
      opt.pool = &pool;
      opt.chunk_bytes = c == 1 ? 4096 : 0;
      for (int round = 0; round < 12; ++round) {
        const size_t i = (c + static_cast<size_t>(round)) % inputs.size();
        core::EncodeOutcome oc;
        if (EncodeWith(*tok, inputs[i], true, &opt, &oc) != expected[i]) mismatches.fetch_add(1);
        (oc.pool_busy ? alone : pooled).fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  CHECK(mismatches.load() == 0);
  CHECK(pooled.load() + alone.load() == 36);
  CHECK(pooled.load() >= 1);
}

TEST_CASE("the generic path and the one-thread path agree on the long texts") {
  // The single-thread plan cuts too (32 KiB chunks); the generic path does not.
  const auto texts = LongTexts();
  for (const std::string name : {"llama3", "qwen3", "tiktoken:o200k_base", "deepseek_v3"}) {
    auto tok = toktier::test::LoadTokenizer(name);
    REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
    for (size_t i = 0; i < texts.size(); ++i) {
      CHECK_MESSAGE(EncodeWith(*tok, texts[i], false, nullptr) == EncodeGeneric(*tok, texts[i], false),
                    name << " text " << i);
    }
  }
}

TEST_CASE("under Unicode forms, a window the forms leave as it is is tested unnormalized, as without them") {
  // IsContentBoundary tests the source window when the normalizer leaves
  // both sides of it unchanged. On text already in NFC, Qwen3's NFC is the
  // identity, so every cut it accepts must be one that the same tokenizer
  // without a normalizer accepts on the whole segment; on ASCII text the
  // NFC checks (split points, windows) hold everywhere, so the two agree.
  const std::string path = toktier::test::TokenizerPath("qwen3");
  auto json_text = path.empty() ? std::nullopt : toktier::test::ReadFile(path);
  REQUIRE_MESSAGE(json_text.has_value(), "tokenizer files missing: run tools/dev.sh setup");
  auto nfc = toktier::test::LoadTokenizer("qwen3");
  nlohmann::json j = nlohmann::json::parse(*json_text);
  REQUIRE(!j["normalizer"].is_null());
  j["normalizer"] = nullptr;
  core::Status st;
  auto plain = core::Tokenizer::FromHuggingFaceJson(j.dump(), &st);
  REQUIRE(nfc);
  REQUIRE(plain);
  REQUIRE_FALSE(nfc->impl().normalizer().identity());
  std::vector<std::string> texts;
  std::mt19937 rng(1313);
  const std::vector<std::string> ascii_words = {"int", " main", "(", "void", ")", " {\n", "    ", "return", " 0", ";\n",
                                                "}\n", " The", "'s", "'ll", " 123456", "\n\n", "  ", "\t", "!!!",
                                                " don't", "HTTP", "Server", "x", "  \n", "--", "==", " ", "A1b2"};
  const std::vector<std::string> nfc_words = {" caf\xC3\xA9", "\xE4\xB8\x80\xE4\xBA\x8C", " na\xC3\xAFve", "\xC3\x85",
                                              " \xCE\xB1\xCE\xB2", "\xE2\x80\x83", "\xEF\xBC\x91"};
  for (int t = 0; t < 6; ++t) {
    std::string s;
    const bool ascii_only = t % 2 == 0;
    while (s.size() < 4000) {
      s += (ascii_only || rng() % 4) ? ascii_words[rng() % ascii_words.size()] : nfc_words[rng() % nfc_words.size()];
    }
    texts.push_back(s);
  }
  size_t accepted = 0;
  for (size_t t = 0; t < texts.size(); ++t) {
    const std::string& text = texts[t];
    REQUIRE(nfc->impl().normalizer().LeavesUnchanged(text));
    const bool ascii_only = t % 2 == 0;
    for (size_t p = 1; p < text.size(); ++p) {
      if ((static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) continue;
      const bool by_nfc = nfc->impl().IsContentBoundary(text, p, true);
      const bool by_plain = plain->impl().IsContentBoundary(text, p, true);
      accepted += by_nfc;
      if (by_nfc) REQUIRE_MESSAGE(by_plain, "text " << t << " p " << p);
      if (ascii_only) REQUIRE_MESSAGE(by_nfc == by_plain, "text " << t << " p " << p);
    }
  }
  CHECK(accepted > 1000);
}

TEST_CASE("a text with no cut point is one chunk, reported") {
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  core::EncodePool pool(2);
  core::EncodeOptions opt;
  opt.pool = &pool;
  const std::string piece(300000, 'q');
  core::EncodeOutcome oc;
  const Encoded par = EncodeWith(*tok, piece, false, &opt, &oc);
  CHECK(oc.uncut);
  CHECK(oc.chunks == 1);
  CHECK(par == EncodeWith(*tok, piece, false, nullptr));
}

TEST_CASE("the pool runs every task once and refuses a second concurrent run") {
  core::EncodePool pool(3);
  CHECK(pool.threads() == 3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(37);
    REQUIRE(pool.Run(hits.size(), [&](size_t i) { hits[i].fetch_add(1); }));
    for (auto& h : hits) REQUIRE(h.load() == 1);
  }
  // Loaded before the second thread starts, so that a missing file fails
  // the case here and not while that thread holds the pool.
  auto tok = toktier::test::LoadTokenizer("llama3");
  REQUIRE_MESSAGE(tok, "tokenizer files missing: run tools/dev.sh setup");
  std::atomic<bool> inside{false}, release{false};
  std::thread first([&] {
    CHECK(pool.Run(1, [&](size_t) {
      inside = true;
      while (!release) std::this_thread::yield();
    }));
  });
  while (!inside) std::this_thread::yield();
  CHECK_FALSE(pool.Run(1, [](size_t) {}));
  // A tokenization meanwhile runs alone and says so.
  {
    core::EncodeOptions opt;
    opt.pool = &pool;
    std::string text;
    while (text.size() < (size_t{200} << 10)) text += "The quick brown fox jumps over the lazy dog. ";
    core::EncodeOutcome oc;
    const Encoded got = EncodeWith(*tok, text, false, &opt, &oc);
    CHECK(oc.pool_busy);
    CHECK(oc.threads == 1);
    CHECK(got == EncodeWith(*tok, text, false, nullptr));
  }
  release = true;
  first.join();
  // A task that outlasts the caller's spin (0.5 ms) is still waited for:
  // Run returns only after every task has finished.
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> finished_tasks{0};
    REQUIRE(pool.Run(3, [&](size_t i) {
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(round % 2 ? 3 : 0));
      if (i == 2) std::this_thread::sleep_for(std::chrono::microseconds(round % 3 ? 200 : 2000));
      finished_tasks.fetch_add(1);
    }));
    REQUIRE(finished_tasks.load() == 3);
  }
  core::EncodePool single(1);
  CHECK(single.threads() == 1);
  size_t ran = 0;
  CHECK(single.Run(5, [&](size_t) { ++ran; }));
  CHECK(ran == 5);
}
