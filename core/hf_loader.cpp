// Loading Hugging Face tokenizer.json files. Every component that changes
// IDs is either implemented exactly or rejected with an error naming it.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/byte_level.h"
#include "core/regex_split.h"
#include "core/tokenizer_impl.h"
#include "core/version_hash.h"

namespace toktier::core {
namespace {

using nlohmann::json;

std::string TypeOf(const json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"].get<std::string>();
  return "";
}

Status ParseNormalizer(const json& j, Normalizer& out) {
  if (j.is_null()) return Status::Ok();
  std::string type = TypeOf(j);
  if (type == "Sequence") {
    for (const json& n : j.value("normalizers", json::array())) {
      Status st = ParseNormalizer(n, out);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  NormalizerOp op;
  if (type == "NFC") op.kind = NormalizerOp::Kind::kNFC;
  else if (type == "NFD") op.kind = NormalizerOp::Kind::kNFD;
  else if (type == "NFKC") op.kind = NormalizerOp::Kind::kNFKC;
  else if (type == "NFKD") op.kind = NormalizerOp::Kind::kNFKD;
  else if (type == "Prepend") {
    op.kind = NormalizerOp::Kind::kPrepend;
    op.content = j.value("prepend", std::string());
  } else if (type == "Replace") {
    op.kind = NormalizerOp::Kind::kReplace;
    const json& pat = j.value("pattern", json::object());
    if (!pat.contains("String")) return Status::Error("unsupported normalizer: Replace with a Regex pattern");
    op.pattern = pat["String"].get<std::string>();
    op.content = j.value("content", std::string());
  } else if (type == "Strip") {
    op.kind = NormalizerOp::Kind::kStrip;
    op.strip_left = j.value("strip_left", false);
    op.strip_right = j.value("strip_right", false);
  } else {
    return Status::Error("unsupported normalizer: " + (type.empty() ? j.dump().substr(0, 80) : type));
  }
  out.Add(std::move(op));
  return Status::Ok();
}

// Metaspace (as the whole pre-tokenizer or the first step of a Sequence)
// becomes what it does: Replace ' ' by the replacement, prefix it per
// prepend_scheme, and split before each replacement (MergedWithNext). Removes
// it from `pre`.
Status ExtractMetaspace(json& pre, TokenizerImpl& t) {
  json meta;
  if (TypeOf(pre) == "Metaspace") {
    meta = pre;
    pre = json();
  } else if (TypeOf(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
             !pre["pretokenizers"].empty()) {
    auto& list = pre["pretokenizers"];
    for (size_t i = 1; i < list.size(); ++i) {
      if (TypeOf(list[i]) == "Metaspace") {
        return Status::Error("unsupported pre-tokenizer: Metaspace after other pre-tokenizer steps");
      }
    }
    if (TypeOf(list[0]) == "Metaspace") {
      meta = list[0];
      list.erase(list.begin());
    }
  }
  if (meta.is_null()) return Status::Ok();
  std::string replacement = meta.value("replacement", std::string("\xE2\x96\x81"));
  std::string scheme;
  if (meta.contains("prepend_scheme") && meta["prepend_scheme"].is_string()) {
    scheme = meta["prepend_scheme"].get<std::string>();
  } else {
    scheme = meta.value("add_prefix_space", true) ? "always" : "never";
  }
  if (scheme != "always" && scheme != "first" && scheme != "never") {
    return Status::Error("unsupported Metaspace prepend_scheme: '" + scheme + "'");
  }
  NormalizerOp replace;
  replace.kind = NormalizerOp::Kind::kReplace;
  replace.pattern = " ";
  replace.content = replacement;
  t.normalizer_.Add(replace);
  if (scheme != "never") {
    NormalizerOp prefix;
    prefix.kind = NormalizerOp::Kind::kMetaspacePrepend;
    prefix.content = replacement;
    prefix.first_only = scheme == "first";
    t.normalizer_.Add(prefix);
  }
  if (meta.value("split", true)) {
    PreTokenizerStep step;
    step.kind = PreTokenizerStep::Kind::kSplit;
    step.pattern = replacement;
    step.pattern_is_regex = false;
    step.behavior = SplitBehavior::kMergedWithNext;
    t.steps_.push_back(step);
  }
  t.metaspace_ = true;
  return Status::Ok();
}

// ByteLevel's add_prefix_space (true when absent, as in HF) puts a space
// before each split it sees that does not start with one. As the first step
// those splits are the segments: a segment prefix like Metaspace's. Later in
// a Sequence it would act per piece, which is not supported.
Status ExtractByteLevelPrefixSpace(json& pre, TokenizerImpl& t) {
  auto wants_prefix = [](const json& p) {
    return TypeOf(p) == "ByteLevel" && (!p.contains("add_prefix_space") || p["add_prefix_space"].get<bool>());
  };
  json* first = nullptr;
  if (TypeOf(pre) == "ByteLevel") {
    first = &pre;
  } else if (TypeOf(pre) == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    auto& list = pre["pretokenizers"];
    for (size_t i = 1; i < list.size(); ++i) {
      if (wants_prefix(list[i])) {
        return Status::Error("unsupported pre-tokenizer: ByteLevel with add_prefix_space after other steps");
      }
    }
    if (!list.empty()) first = &list[0];
  }
  if (first == nullptr || !wants_prefix(*first)) return Status::Ok();
  (*first)["add_prefix_space"] = false;
  NormalizerOp prefix;
  prefix.kind = NormalizerOp::Kind::kMetaspacePrepend;
  prefix.content = " ";
  t.normalizer_.Add(prefix);
  return Status::Ok();
}

Status SpecialIdsOf(const json& specials, const std::string& name, std::vector<uint32_t>& out) {
  if (!specials.contains(name)) return Status::Error("TemplateProcessing: unknown special token '" + name + "'");
  for (const json& id : specials[name].value("ids", json::array())) out.push_back(id.get<uint32_t>());
  return Status::Ok();
}

// Adds the post-processor's specials for a single sequence around the content.
Status ParsePostProcessor(const json& j, std::vector<uint32_t>& prefix, std::vector<uint32_t>& suffix) {
  if (j.is_null()) return Status::Ok();
  std::string type = TypeOf(j);
  if (type == "ByteLevel") return Status::Ok();  // offsets only
  if (type == "Sequence") {
    for (const json& p : j.value("processors", json::array())) {
      Status st = ParsePostProcessor(p, prefix, suffix);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  std::vector<uint32_t> pre, post;
  if (type == "TemplateProcessing") {
    const json& specials = j.value("special_tokens", json::object());
    bool seen_sequence = false;
    for (const json& item : j.value("single", json::array())) {
      if (item.contains("SpecialToken")) {
        Status st = SpecialIdsOf(specials, item["SpecialToken"].value("id", std::string()), seen_sequence ? post : pre);
        if (!st.ok()) return st;
      } else if (item.contains("Sequence")) {
        if (seen_sequence) return Status::Error("TemplateProcessing: single template with two sequences");
        seen_sequence = true;
      } else {
        return Status::Error("TemplateProcessing: unsupported template item " + item.dump().substr(0, 60));
      }
    }
    if (!seen_sequence) return Status::Error("TemplateProcessing: single template without the sequence");
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    pre.push_back(j.at("cls").at(1).get<uint32_t>());
    post.push_back(j.at("sep").at(1).get<uint32_t>());
  } else {
    return Status::Error("unsupported post-processor: " + (type.empty() ? j.dump().substr(0, 80) : type));
  }
  // This processor wraps whatever earlier processors produced.
  prefix.insert(prefix.begin(), pre.begin(), pre.end());
  suffix.insert(suffix.end(), post.begin(), post.end());
  return Status::Ok();
}

Status LoadModel(const json& model, bool byte_level, const std::vector<AddedToken>& added, TokenizerImpl& t) {
  std::string type = TypeOf(model);
  if (type.empty() && model.contains("merges")) type = "BPE";
  if (type != "BPE") return Status::Error("unsupported model type: " + (type.empty() ? "(none)" : type));
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0.0) {
    return Status::Error("unsupported BPE option: dropout (non-deterministic)");
  }
  const json& vocab = model.value("vocab", json::object());
  if (!vocab.is_object() || vocab.empty()) return Status::Error("BPE model without a vocab");
  uint32_t max_id = 0;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) max_id = std::max(max_id, it.value().get<uint32_t>());
  for (const AddedToken& a : added) max_id = std::max(max_id, a.id);
  if (max_id > (1u << 24)) return Status::Error("vocab ids too large");
  std::vector<std::string> tokens(max_id + 1);
  std::vector<bool> present(max_id + 1, false);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    uint32_t id = it.value().get<uint32_t>();
    if (byte_level) {
      auto raw = byte_level::DecodeVocabString(it.key());
      if (!raw) {
        tokens[id] = it.key();  // e.g. an added token listed in the vocab
        continue;
      }
      tokens[id] = std::move(*raw);
    } else {
      tokens[id] = it.key();
    }
    present[id] = true;
  }
  BpeOptions o;
  o.byte_units = byte_level;
  o.ignore_merges = model.value("ignore_merges", false);
  o.byte_fallback = model.value("byte_fallback", false);
  o.fuse_unk = model.value("fuse_unk", false);
  if (model.contains("continuing_subword_prefix") && model["continuing_subword_prefix"].is_string()) {
    o.continuing_subword_prefix = model["continuing_subword_prefix"].get<std::string>();
  }
  if (model.contains("end_of_word_suffix") && model["end_of_word_suffix"].is_string()) {
    o.end_of_word_suffix = model["end_of_word_suffix"].get<std::string>();
  }
  if (model.contains("unk_token") && model["unk_token"].is_string()) {
    std::string unk = model["unk_token"].get<std::string>();
    if (!vocab.contains(unk)) return Status::Error("unk_token '" + unk + "' is not in the vocab");
    o.unk_id = vocab[unk].get<uint32_t>();
  }
  if (byte_level) {
    // Prefix and suffix are written in the byte-level alphabet too.
    auto dec = [](std::string& s) {
      if (auto raw = byte_level::DecodeVocabString(s)) s = *raw;
    };
    dec(o.continuing_subword_prefix);
    dec(o.end_of_word_suffix);
  }
  Status st = t.bpe_.Init(tokens, present, o);
  if (!st.ok()) return st;
  const json& merges = model.value("merges", json::array());
  uint32_t rank = 0;
  for (const json& m : merges) {
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Status::Error("malformed merge: '" + s + "'");
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return Status::Error("malformed merge: " + m.dump().substr(0, 60));
    }
    if (byte_level) {
      auto l = byte_level::DecodeVocabString(left), r = byte_level::DecodeVocabString(right);
      if (!l || !r) return Status::Error("merge outside the byte-level alphabet: '" + left + " " + right + "'");
      left = std::move(*l);
      right = std::move(*r);
    }
    st = t.bpe_.AddMerge(left, right, rank++);
    if (!st.ok()) return st;
  }
  t.vocab_size_ = max_id + 1;
  t.added_token_text_.assign(max_id + 1, std::string());
  t.special_ids_.assign(max_id + 1, false);
  for (const AddedToken& a : added) {
    t.added_token_text_[a.id] = a.content;
    t.special_ids_[a.id] = a.special;
  }
  return Status::Ok();
}

Status LoadHuggingFace(std::string_view text, TokenizerImpl& t) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Error("tokenizer.json is not valid JSON");
  if (!j.contains("model")) return Status::Error("tokenizer.json has no \"model\"");
  if (j.contains("truncation") && !j["truncation"].is_null()) {
    return Status::Error("unsupported: truncation is set in tokenizer.json");
  }
  if (j.contains("padding") && !j["padding"].is_null()) {
    return Status::Error("unsupported: padding is set in tokenizer.json");
  }
  t.format_ = TokenizerFormat::kHuggingFaceJson;
  t.name_ = "huggingface-bpe";
  Status st = ParseNormalizer(j.value("normalizer", json()), t.normalizer_);
  if (!st.ok()) return st;
  json pre = j.value("pre_tokenizer", json());
  st = ExtractMetaspace(pre, t);
  if (!st.ok()) return st;
  st = ExtractByteLevelPrefixSpace(pre, t);
  if (!st.ok()) return st;
  std::string error;
  if (!ParsePreTokenizerSteps(pre, &t.steps_, &error)) {
    return Status::Error("unsupported pre-tokenizer: " + error);
  }
  // ByteLevel maps bytes to the printable alphabet the vocab is written in;
  // toktier keeps raw bytes and decodes the vocab instead.
  bool byte_level = std::any_of(t.steps_.begin(), t.steps_.end(),
                                [](const PreTokenizerStep& s) { return s.kind == PreTokenizerStep::Kind::kByteLevel; });
  std::vector<AddedToken> added, raw, norm;
  for (const json& a : j.value("added_tokens", json::array())) {
    AddedToken tok;
    tok.content = a.value("content", std::string());
    tok.id = a.value("id", 0u);
    tok.special = a.value("special", false);
    tok.single_word = a.value("single_word", false);
    tok.lstrip = a.value("lstrip", false);
    tok.rstrip = a.value("rstrip", false);
    tok.normalized = a.value("normalized", !tok.special);
    if (tok.content.empty()) continue;
    added.push_back(tok);
    (tok.normalized ? norm : raw).push_back(tok);
  }
  st = ParsePostProcessor(j.value("post_processor", json()), t.prefix_ids_, t.suffix_ids_);
  if (!st.ok()) return st;
  st = LoadModel(j["model"], byte_level, added, t);
  if (!st.ok()) return st;
  const json decoder = j.value("decoder", json());
  t.concat_decoder_ = byte_level && !t.metaspace_ && decoder.is_object() && decoder.value("type", "") == "ByteLevel";
  if (t.metaspace_ && !norm.empty()) {
    // Normalized added tokens are matched before pre-tokenization, where
    // Metaspace's replacement has not happened yet.
    return Status::Error("unsupported: Metaspace pre-tokenizer with normalized added tokens");
  }
  t.raw_added_.Build(std::move(raw));
  t.norm_added_.Build(std::move(norm));
  return Status::Ok();
}

}  // namespace

std::shared_ptr<const Tokenizer> Tokenizer::FromHuggingFaceJson(std::string_view json_text, Status* status) {
  auto impl = std::make_unique<TokenizerImpl>();
  Status st;
  try {
    st = LoadHuggingFace(json_text, *impl);
  } catch (const std::exception& e) {
    // nlohmann throws on type mismatches inside a well-formed document.
    st = Status::Error(std::string("malformed tokenizer.json: ") + e.what());
  }
  if (st.ok()) st = impl->Finish();
  if (!st.ok()) {
    if (status) *status = st;
    return nullptr;
  }
  impl->version_hash_ = VersionHash("hf", "", json_text);
  if (status) *status = Status::Ok();
  return TokenizerImpl::Wrap(std::move(impl));
}

std::shared_ptr<const Tokenizer> Tokenizer::FromBytes(std::string_view content, std::string_view encoding_name,
                                                      Status* status) {
  size_t i = 0;
  while (i < content.size() && (content[i] == ' ' || content[i] == '\n' || content[i] == '\r' || content[i] == '\t')) ++i;
  if (i < content.size() && content[i] == '{') {
    // Cheap sniffing: tiktoken JSON carries "bpe_ranks" and "pat_str".
    if (content.find("\"bpe_ranks\"") != std::string_view::npos &&
        content.find("\"model\"") == std::string_view::npos) {
      return FromTiktokenJson(content, status);
    }
    return FromHuggingFaceJson(content, status);
  }
  if (encoding_name.empty()) {
    if (status) *status = Status::Error("not a JSON tokenizer; a .tiktoken rank file needs --encoding NAME");
    return nullptr;
  }
  return FromTiktokenRanks(content, encoding_name, status);
}

}  // namespace toktier::core
