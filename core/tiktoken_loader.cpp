// Loading tiktoken encodings: the npm package's encoders/*.json and raw
// .tiktoken rank files with a named encoding.
#include <algorithm>
#include <charconv>
#include <map>

#include <nlohmann/json.hpp>

#include "core/tokenizer_impl.h"
#include "core/version_hash.h"

namespace toktier::core {
namespace {

using nlohmann::json;

constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct NamedEncoding {
  std::string_view pattern;
  std::vector<std::pair<std::string, uint32_t>> specials;
};

bool LookupEncoding(std::string_view name, NamedEncoding* out) {
  if (name == "r50k_base" || name == "p50k_base") {
    *out = {kGpt2Pattern, {{"<|endoftext|>", 50256}}};
  } else if (name == "p50k_edit") {
    *out = {kGpt2Pattern,
            {{"<|endoftext|>", 50256}, {"<|fim_prefix|>", 50281}, {"<|fim_middle|>", 50282}, {"<|fim_suffix|>", 50283}}};
  } else if (name == "cl100k_base") {
    *out = {kCl100kPattern,
            {{"<|endoftext|>", 100257},
             {"<|fim_prefix|>", 100258},
             {"<|fim_middle|>", 100259},
             {"<|fim_suffix|>", 100260},
             {"<|endofprompt|>", 100276}}};
  } else if (name == "o200k_base") {
    *out = {kO200kPattern, {{"<|endoftext|>", 199999}, {"<|endofprompt|>", 200018}}};
  } else if (name == "o200k_harmony") {
    out->pattern = kO200kPattern;
    out->specials = {{"<|endoftext|>", 199999},     {"<|endofprompt|>", 200018}, {"<|startoftext|>", 199998},
                     {"<|reserved_200000|>", 200000}, {"<|reserved_200001|>", 200001}, {"<|return|>", 200002},
                     {"<|constrain|>", 200003},       {"<|reserved_200004|>", 200004}, {"<|channel|>", 200005},
                     {"<|start|>", 200006},           {"<|end|>", 200007},           {"<|message|>", 200008},
                     {"<|reserved_200009|>", 200009}, {"<|reserved_200010|>", 200010},
                     {"<|reserved_200011|>", 200011}, {"<|call|>", 200012}};
    for (uint32_t i = 200013; i < 201088; ++i) {
      out->specials.emplace_back("<|reserved_" + std::to_string(i) + "|>", i);
    }
  } else {
    return false;
  }
  return true;
}

int Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool Base64Decode(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    if (c == '=') break;
    int v = Base64Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

bool ParseUint(std::string_view s, uint32_t* v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// Both the plain format ("base64 rank" per line) and the npm package's
// compressed lines ("! offset base64 base64 ..." with consecutive ranks).
Status ParseRanks(std::string_view text, std::map<uint32_t, std::string>& ranks) {
  size_t line_no = 0;
  std::string bytes;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::vector<std::string_view> parts;
    size_t i = 0;
    while (i <= line.size()) {
      size_t sp = line.find(' ', i);
      if (sp == std::string_view::npos) sp = line.size();
      parts.push_back(line.substr(i, sp - i));
      i = sp + 1;
    }
    if (parts[0] == "!") {
      uint32_t offset = 0;
      if (parts.size() < 2 || !ParseUint(parts[1], &offset)) {
        return Status::Error("rank file line " + std::to_string(line_no) + ": bad offset");
      }
      for (size_t k = 2; k < parts.size(); ++k) {
        if (!Base64Decode(parts[k], bytes)) return Status::Error("rank file line " + std::to_string(line_no) + ": bad base64");
        ranks[offset + static_cast<uint32_t>(k - 2)] = bytes;
      }
      continue;
    }
    uint32_t rank = 0;
    if (parts.size() != 2 || !ParseUint(parts[1], &rank) || !Base64Decode(parts[0], bytes)) {
      return Status::Error("rank file line " + std::to_string(line_no) + ": expected 'base64 rank'");
    }
    ranks[rank] = bytes;
  }
  if (ranks.empty()) return Status::Error("rank file has no tokens");
  return Status::Ok();
}

Status Build(const std::map<uint32_t, std::string>& ranks, std::string_view pattern,
             const std::vector<std::pair<std::string, uint32_t>>& specials, TokenizerImpl& t) {
  uint32_t max_id = ranks.rbegin()->first;
  for (const auto& s : specials) max_id = std::max(max_id, s.second);
  if (max_id > (1u << 24)) return Status::Error("ranks too large");
  std::vector<std::string> tokens(max_id + 1);
  std::vector<bool> present(max_id + 1, false);
  for (const auto& [rank, bytes] : ranks) {
    tokens[rank] = bytes;
    present[rank] = true;
  }
  bool has_byte[256] = {};
  for (const auto& [rank, bytes] : ranks) {
    if (bytes.size() == 1) has_byte[static_cast<unsigned char>(bytes[0])] = true;
  }
  for (int b = 0; b < 256; ++b) {
    if (!has_byte[b]) return Status::Error("rank file lacks the single byte " + std::to_string(b));
  }
  BpeOptions o;
  o.byte_units = true;
  o.ignore_merges = true;  // tiktoken returns a whole piece that is a token
  Status st = t.bpe_.Init(std::move(tokens), std::move(present), o);
  if (!st.ok()) return st;
  t.bpe_.DeriveMergesFromRanks();
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kSplit;
  step.pattern = std::string(pattern);
  step.pattern_is_regex = true;
  // tiktoken drops text its pattern does not match.
  step.behavior = SplitBehavior::kRemoved;
  step.invert = true;
  t.steps_.push_back(step);
  t.tables_ = unicode::Tables::kTiktoken;
  std::vector<AddedToken> added;
  t.added_token_text_.assign(max_id + 1, std::string());
  t.special_ids_.assign(max_id + 1, false);
  for (const auto& [content, id] : specials) {
    added.push_back(AddedToken{content, id, true, false, false, false, false});
    if (t.added_token_text_[id].empty()) t.added_token_text_[id] = content;
    t.special_ids_[id] = true;
  }
  t.concat_decoder_ = true;
  t.raw_added_.Build(std::move(added));
  t.tiktoken_ = true;
  t.vocab_size_ = max_id + 1;
  t.format_ = TokenizerFormat::kTiktokenJson;
  return Status::Ok();
}

std::shared_ptr<const Tokenizer> Finish(std::unique_ptr<TokenizerImpl> impl, Status st, Status* status) {
  if (st.ok()) st = impl->Finish();
  if (!st.ok()) {
    if (status) *status = st;
    return nullptr;
  }
  if (status) *status = Status::Ok();
  return TokenizerImpl::Wrap(std::move(impl));
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::FromTiktokenJson(std::string_view text, Status* status) {
  auto impl = std::make_unique<TokenizerImpl>();
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  Status st;
  if (j.is_discarded() || !j.is_object() || !j.contains("pat_str") || !j.contains("bpe_ranks") ||
      !j["pat_str"].is_string() || !j["bpe_ranks"].is_string()) {
    st = Status::Error("not a tiktoken encoder JSON (needs pat_str, bpe_ranks, special_tokens)");
    return Finish(std::move(impl), st, status);
  }
  std::map<uint32_t, std::string> ranks;
  st = ParseRanks(j["bpe_ranks"].get_ref<const std::string&>(), ranks);
  std::vector<std::pair<std::string, uint32_t>> specials;
  if (st.ok() && j.contains("special_tokens") && j["special_tokens"].is_object()) {
    for (auto it = j["special_tokens"].begin(); it != j["special_tokens"].end(); ++it) {
      if (!it.value().is_number_unsigned()) {
        st = Status::Error("special token id is not an unsigned integer: " + it.key());
        break;
      }
      specials.emplace_back(it.key(), it.value().get<uint32_t>());
    }
  }
  if (st.ok()) st = Build(ranks, j["pat_str"].get<std::string>(), specials, *impl);
  impl->format_ = TokenizerFormat::kTiktokenJson;
  impl->name_ = "tiktoken-json";
  impl->version_hash_ = VersionHash("tiktoken-json", "", text);
  return Finish(std::move(impl), st, status);
}

std::shared_ptr<const Tokenizer> Tokenizer::FromTiktokenRanks(std::string_view text, std::string_view encoding_name,
                                                             Status* status) {
  auto impl = std::make_unique<TokenizerImpl>();
  NamedEncoding enc;
  if (!LookupEncoding(encoding_name, &enc)) {
    return Finish(std::move(impl),
                  Status::Error("unknown encoding '" + std::string(encoding_name) +
                                "' (known: r50k_base, p50k_base, p50k_edit, cl100k_base, o200k_base, o200k_harmony)"),
                  status);
  }
  std::map<uint32_t, std::string> ranks;
  Status st = ParseRanks(text, ranks);
  if (st.ok()) st = Build(ranks, enc.pattern, enc.specials, *impl);
  impl->format_ = TokenizerFormat::kTiktokenRanks;
  impl->name_ = "tiktoken:" + std::string(encoding_name);
  impl->version_hash_ = VersionHash("tiktoken-ranks", encoding_name, text);
  return Finish(std::move(impl), st, status);
}

}  // namespace toktier::core
