// Differential driver: encodes every text of a corpus (JSONL of {"text": ...})
// with toktier's core and compares with the reference IDs (JSONL, one JSON
// array per line, from tools/ref_encode.js).
//
//   diff_encode --tokenizer PATH [--encoding NAME] [--add-special-tokens]
//               --corpus FILE --ref FILE [--label NAME] [--max-report N]
//
// Also checks that EncodeWithEnds gives the same IDs as Encode and that the
// token ends are non-decreasing and inside the text, and (issue 13) that the
// parallel path (a 2-thread pool, texts cut into regions of 64 bytes, so
// nearly every text is cut) gives the same IDs and ends.
// On a divergence prints the text index, its kind, the first differing token
// position, a snippet of the text around it and both ID sequences there.
// Always ends with one line: TOTALS {"label",..,"texts","ids","divergences",..}.
// Exit 0: no divergence; 1: divergences; 2: usage / input errors.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/core.h"

using toktier::core::Tokenizer;

namespace {

std::string ReadFile(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    *ok = false;
    return {};
  }
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  *ok = true;
  return s;
}

// Escapes a text snippet for display (control / non-ASCII-space characters as \u{..}).
std::string Show(std::string_view s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if (i + len > s.size()) len = s.size() - i;
    uint32_t cp = c;
    if (len == 2) cp = ((c & 0x1F) << 6) | (s[i + 1] & 0x3F);
    if (len == 3) cp = ((c & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    if (len == 4) cp = ((c & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
    bool plain = (cp >= 0x21 && cp < 0x7F && cp != '\\') || cp == ' ' ||
                 (cp >= 0xA1 && !(cp >= 0x2000 && cp <= 0x206F) && cp != 0x3000 && cp != 0xFEFF && cp != 0x1680 &&
                  !(cp >= 0x300 && cp <= 0x36F) && !(cp >= 0xFE00 && cp <= 0xFE0F));
    if (plain) {
      out.append(s.substr(i, len));
    } else {
      char buf[16];
      std::snprintf(buf, sizeof buf, "\\u{%X}", cp);
      out += buf;
    }
    i += len;
  }
  return out;
}

std::string TokenShow(const Tokenizer& tok, uint32_t id) {
  return std::to_string(id) + "'" + Show(tok.TokenBytes(id)) + "'";
}

size_t SnapBack(std::string_view s, size_t p) {
  while (p > 0 && p < s.size() && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tok_path, encoding, corpus_path, ref_path, label;
  bool add_special = false;
  long max_report = 5;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "diff_encode: missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer") tok_path = next();
    else if (a == "--encoding") encoding = next();
    else if (a == "--corpus") corpus_path = next();
    else if (a == "--ref") ref_path = next();
    else if (a == "--label") label = next();
    else if (a == "--max-report") max_report = std::stol(next());
    else if (a == "--add-special-tokens") add_special = true;
    else {
      std::fprintf(stderr, "diff_encode: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (tok_path.empty() || corpus_path.empty() || ref_path.empty()) {
    std::fprintf(stderr,
                 "usage: diff_encode --tokenizer PATH [--encoding NAME] [--add-special-tokens] --corpus FILE "
                 "--ref FILE [--label NAME] [--max-report N]\n");
    return 2;
  }
  if (label.empty()) label = tok_path;

  bool ok = false;
  std::string tok_bytes = ReadFile(tok_path, &ok);
  if (!ok) {
    std::fprintf(stderr, "diff_encode: cannot read %s\n", tok_path.c_str());
    return 2;
  }
  toktier::core::Status st;
  auto tok = Tokenizer::FromBytes(tok_bytes, encoding, &st);
  if (!tok || !st.ok()) {
    std::fprintf(stderr, "diff_encode: cannot load %s: %s\n", tok_path.c_str(), st.message().c_str());
    return 2;
  }
  std::ifstream corpus(corpus_path, std::ios::binary), ref(ref_path, std::ios::binary);
  if (!corpus || !ref) {
    std::fprintf(stderr, "diff_encode: cannot open %s or %s\n", corpus_path.c_str(), ref_path.c_str());
    return 2;
  }

  size_t texts = 0, ids_compared = 0, divergences = 0, ends_errors = 0, parallel_errors = 0, parallel_cut = 0,
         bytes = 0;
  toktier::core::EncodePool pool(2);
  toktier::core::EncodeOptions parallel;
  parallel.pool = &pool;
  parallel.parallel_min_bytes = 0;
  parallel.chunk_bytes = 64;
  std::vector<uint32_t> pids, pends;
  double encode_ms = 0;
  std::string cline, rline;
  std::vector<uint32_t> ids, ids2, ends, want;
  while (std::getline(corpus, cline)) {
    if (cline.empty()) continue;
    if (!std::getline(ref, rline)) {
      std::fprintf(stderr, "diff_encode: reference has fewer lines than the corpus (text %zu)\n", texts);
      return 2;
    }
    auto cj = nlohmann::json::parse(cline, nullptr, false);
    auto rj = nlohmann::json::parse(rline, nullptr, false);
    if (!cj.is_object() || !cj.contains("text") || !rj.is_array()) {
      std::fprintf(stderr, "diff_encode: malformed line %zu\n", texts);
      return 2;
    }
    const std::string text = cj["text"].get<std::string>();
    const std::string kind = cj.value("kind", "");
    want.clear();
    for (const auto& v : rj) want.push_back(v.get<uint32_t>());

    ids.clear();
    auto t0 = std::chrono::steady_clock::now();
    tok->Encode(text, add_special, ids);
    encode_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ids2.clear();
    ends.clear();
    tok->EncodeWithEnds(text, add_special, ids2, ends);

    const size_t index = texts++;
    bytes += text.size();
    ids_compared += want.size();
    if (ids != want) {
      ++divergences;
      if (static_cast<long>(divergences) <= max_report) {
        size_t p = 0;
        while (p < ids.size() && p < want.size() && ids[p] == want[p]) ++p;
        // Locate the divergence in the text: toktier's end of the last common
        // token (the IDs agree up to p), else the summed reference token bytes.
        size_t off = 0;
        if (ids2 == ids && ends.size() == ids.size()) {
          off = p > 0 ? ends[p - 1] : 0;
        } else {
          for (size_t k = 0; k < p; ++k) off += tok->TokenBytes(want[k]).size();
        }
        off = std::min(off, text.size());
        size_t a = SnapBack(text, off > 60 ? off - 60 : 0), b = SnapBack(text, std::min(text.size(), off + 60));
        if (b < text.size() && b <= off) b = text.size();
        std::fprintf(stderr,
                     "DIVERGENCE [%s] text #%zu (kind %s, %zu bytes): first difference at token %zu "
                     "(toktier %zu tokens, reference %zu), near byte %zu\n",
                     label.c_str(), index, kind.c_str(), text.size(), p, ids.size(), want.size(), off);
        std::fprintf(stderr, "  text[%zu..%zu]: \"%s\" | \"%s\"\n", a, b, Show(std::string_view(text).substr(a, off - a)).c_str(),
                     Show(std::string_view(text).substr(off, b - off)).c_str());
        size_t from = p > 3 ? p - 3 : 0;
        std::fprintf(stderr, "  toktier:   ");
        for (size_t k = from; k < std::min(ids.size(), p + 8); ++k)
          std::fprintf(stderr, "%s%s ", k == p ? ">" : "", TokenShow(*tok, ids[k]).c_str());
        std::fprintf(stderr, "\n  reference: ");
        for (size_t k = from; k < std::min(want.size(), p + 8); ++k)
          std::fprintf(stderr, "%s%s ", k == p ? ">" : "", TokenShow(*tok, want[k]).c_str());
        std::fprintf(stderr, "\n");
        if (text.size() <= 400) std::fprintf(stderr, "  whole text (JSON): %s\n", nlohmann::json(text).dump().c_str());
      }
    }
    toktier::core::EncodeOutcome oc;
    pids.clear();
    pends.clear();
    tok->EncodeWithEnds(text, add_special, pids, pends, parallel, &oc);
    parallel_cut += oc.chunks > 1;
    if (pids != ids2 || pends != ends) {
      ++parallel_errors;
      if (static_cast<long>(parallel_errors) <= max_report) {
        std::fprintf(stderr, "PARALLEL ERROR [%s] text #%zu (kind %s, %zu bytes, %zu chunks): %s differ%s\n",
                     label.c_str(), index, kind.c_str(), text.size(), oc.chunks, pids != ids2 ? "ids" : "ends",
                     text.size() <= 400 ? (" " + nlohmann::json(text).dump()).c_str() : "");
      }
    }
    bool ends_ok = ids2 == ids && ends.size() == ids2.size();
    for (size_t k = 0; ends_ok && k < ends.size(); ++k) {
      if (ends[k] > text.size() || (k > 0 && ends[k] < ends[k - 1])) ends_ok = false;
    }
    if (!ends_ok) {
      ++ends_errors;
      if (static_cast<long>(ends_errors) <= max_report) {
        std::fprintf(stderr,
                     "ENDS ERROR [%s] text #%zu (kind %s): EncodeWithEnds gave %zu ids / %zu ends, Encode %zu ids%s\n",
                     label.c_str(), index, kind.c_str(), ids2.size(), ends.size(), ids.size(),
                     ids2 == ids ? " (same IDs; ends not monotonic or out of range)" : " (different IDs)");
      }
    }
  }
  if (std::getline(ref, rline) && !rline.empty()) {
    std::fprintf(stderr, "diff_encode: reference has more lines than the corpus\n");
    return 2;
  }
  std::printf(
      "TOTALS {\"label\":%s,\"add_special_tokens\":%s,\"texts\":%zu,\"bytes\":%zu,\"ids\":%zu,\"divergences\":%zu,"
      "\"ends_errors\":%zu,\"parallel_errors\":%zu,\"parallel_cut_texts\":%zu,\"encode_ms\":%.1f}\n",
      nlohmann::json(label).dump().c_str(), add_special ? "true" : "false", texts, bytes, ids_compared, divergences,
      ends_errors, parallel_errors, parallel_cut, encode_ms);
  return divergences == 0 && ends_errors == 0 && parallel_errors == 0 ? 0 : 1;
}
