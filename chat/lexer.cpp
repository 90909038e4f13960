#include "chat/lexer.h"

#include <array>
#include <utility>

#include "chat/error.h"
#include "chat/text_util.h"

namespace toktier::chat {

const char* TokenTypeName(TokenType type) {
  static constexpr std::array<const char*, 25> kNames = {
      "Text", "NumericLiteral", "StringLiteral", "Identifier", "Equals", "OpenParen", "CloseParen",
      "OpenStatement", "CloseStatement", "OpenExpression", "CloseExpression", "OpenSquareBracket",
      "CloseSquareBracket", "OpenCurlyBracket", "CloseCurlyBracket", "Comma", "Dot", "Colon", "Pipe",
      "AdditiveBinaryOperator", "MultiplicativeBinaryOperator", "ExponentiationBinaryOperator",
      "ComparisonBinaryOperator", "UnaryOperator", "Comment"};
  return kNames[static_cast<size_t>(type)];
}

namespace {

// Line starts as the reference's /^/m sees them: after \n, \r, U+2028, U+2029.
bool IsLineTerminatorBefore(std::string_view s, size_t i) {
  if (i == 0) return true;
  char c = s[i - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 / U+2029 are E2 80 A8 / E2 80 A9.
  return i >= 3 && s[i - 3] == '\xE2' && s[i - 2] == '\x80' && (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// lstrip_blocks: spaces and tabs between a line start and "{#", "{%" or "{-" go.
std::string LstripBlocks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (IsLineTerminatorBefore(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        i = j;  // drop the run; "{" is copied below
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

// trim_blocks: the newline right after "#}", "%}" or "-}" goes.
std::string TrimBlocks(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    out.push_back(s[i]);
    if (s[i] == '}' && i > 0 && (s[i - 1] == '#' || s[i - 1] == '%' || s[i - 1] == '-') && i + 1 < s.size() &&
        s[i + 1] == '\n') {
      ++i;
    }
  }
  return out;
}

// {% generation %} / {% endgeneration %} (transformers' assistant-mask
// markers) are removed, with the whitespace around them unless a '-' asks
// to drop it.
std::string RemoveGenerationTags(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t copied = 0;  // s[0, copied) is in out (or consumed by a previous match)
  size_t search = 0;
  while (true) {
    size_t open = s.find("{%", search);
    if (open == std::string_view::npos) break;
    size_t p = open + 2;
    bool strip_before = p < s.size() && s[p] == '-';
    if (strip_before) ++p;
    p += WhitespaceRunFrom(s, p);
    if (s.substr(p, 3) == "end") p += 3;
    if (s.substr(p, 10) != "generation") {
      search = open + 2;
      continue;
    }
    p += 10;
    p += WhitespaceRunFrom(s, p);
    bool strip_after = p < s.size() && s[p] == '-';
    if (strip_after) ++p;
    if (s.substr(p, 2) != "%}") {
      search = open + 2;
      continue;
    }
    p += 2;
    size_t before = WhitespaceRunBefore(s.substr(0, open), open);
    if (open - before < copied) before = open - copied;
    size_t after = WhitespaceRunFrom(s, p);
    out.append(s.substr(copied, open - before - copied));
    if (!strip_before) out.append(s.substr(open - before, before));
    if (!strip_after) out.append(s.substr(p, after));
    copied = p + after;
    search = copied;
  }
  out.append(s.substr(copied));
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view src) : src_(src) {}

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      TokenType last = tokens_.empty() ? TokenType::kText : tokens_.back().type;
      bool at_text = tokens_.empty() || last == TokenType::kCloseStatement ||
                     last == TokenType::kCloseExpression || last == TokenType::kComment;
      if (at_text) {
        size_t start = pos_;
        while (pos_ < src_.size() &&
               !(src_[pos_] == '{' && pos_ + 1 < src_.size() &&
                 (src_[pos_ + 1] == '%' || src_[pos_ + 1] == '{' || src_[pos_ + 1] == '#'))) {
          ++pos_;
        }
        if (pos_ > start) {
          Push(std::string(src_.substr(start, pos_ - start)), TokenType::kText);
          continue;
        }
      }
      if (StartsWith("{#")) {
        LexComment();
        continue;
      }
      if (StartsWith("{%-")) {
        StripTrailingWhitespace();
        Push("{%", TokenType::kOpenStatement);
        pos_ += 3;
        continue;
      }
      if (StartsWith("{{-")) {
        StripTrailingWhitespace();
        Push("{{", TokenType::kOpenExpression);
        curly_depth_ = 0;
        pos_ += 3;
        continue;
      }
      SkipWhitespaceInTag();
      if (StartsWith("-%}")) {
        Push("%}", TokenType::kCloseStatement);
        pos_ += 3;
        pos_ += WhitespaceRunFrom(src_, pos_);
        continue;
      }
      if (StartsWith("-}}")) {
        Push("}}", TokenType::kCloseExpression);
        pos_ += 3;
        pos_ += WhitespaceRunFrom(src_, pos_);
        continue;
      }
      if (pos_ >= src_.size()) break;
      char c = src_[pos_];
      if (c == '-' || c == '+') {
        if (tokens_.empty() || tokens_.back().type == TokenType::kText) {
          FailSyntax(std::string("Unexpected character: ") + c);
        }
        switch (tokens_.back().type) {
          case TokenType::kIdentifier:
          case TokenType::kNumericLiteral:
          case TokenType::kStringLiteral:
          case TokenType::kCloseParen:
          case TokenType::kCloseSquareBracket:
            break;  // a binary operator: the mapping table below
          default: {
            ++pos_;
            std::string num = ConsumeDigits();
            if (!num.empty() && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsAsciiDigit(src_[pos_ + 1])) {
              ++pos_;
              num += "." + ConsumeDigits();
            }
            Push(std::string(1, c) + num, num.empty() ? TokenType::kUnaryOperator : TokenType::kNumericLiteral);
            continue;
          }
        }
      }
      if (LexOperator()) continue;
      if (c == '\'' || c == '"') {
        ++pos_;
        Push(ConsumeString(c), TokenType::kStringLiteral);
        ++pos_;
        continue;
      }
      if (IsAsciiDigit(c)) {
        std::string num = ConsumeDigits();
        bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::kDot;
        if (!after_dot && pos_ + 1 < src_.size() && src_[pos_] == '.' && IsAsciiDigit(src_[pos_ + 1])) {
          ++pos_;
          num += "." + ConsumeDigits();
        }
        Push(std::move(num), TokenType::kNumericLiteral);
        continue;
      }
      if (IsAsciiWord(c)) {
        size_t start = pos_;
        while (pos_ < src_.size() && IsAsciiWord(src_[pos_])) ++pos_;
        CheckNotAtEnd();
        Push(std::string(src_.substr(start, pos_ - start)), TokenType::kIdentifier);
        continue;
      }
      size_t len;
      uint32_t cp = DecodeUtf8(src_, pos_, &len);
      std::string shown;
      AppendUtf8(cp, &shown);
      FailSyntax("Unexpected character: " + shown);
    }
    return std::move(tokens_);
  }

 private:
  bool StartsWith(std::string_view s) const { return src_.substr(pos_, s.size()) == s; }
  void Push(std::string value, TokenType type) { tokens_.push_back(Token{std::move(value), type}); }

  // The reference's consumeWhile fails when a consumed character ends the
  // input (an unterminated tag, number, word or string).
  void CheckNotAtEnd() const {
    if (pos_ >= src_.size()) FailSyntax("Unexpected end of input");
  }

  void SkipWhitespaceInTag() {
    size_t n = WhitespaceRunFrom(src_, pos_);
    pos_ += n;
    if (n > 0) CheckNotAtEnd();
  }

  std::string ConsumeDigits() {
    size_t start = pos_;
    while (pos_ < src_.size() && IsAsciiDigit(src_[pos_])) ++pos_;
    if (pos_ > start) CheckNotAtEnd();
    return std::string(src_.substr(start, pos_ - start));
  }

  std::string ConsumeString(char quote) {
    std::string out;
    while (pos_ < src_.size() && src_[pos_] != quote) {
      if (src_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= src_.size()) FailSyntax("Unexpected end of input");
        char e = src_[pos_++];
        if (e == 'x' || e == 'u') {
          size_t n = e == 'x' ? 2 : 4;
          std::string_view hex = src_.substr(pos_, n);
          uint32_t cp = 0;
          bool ok = hex.size() == n;
          for (char h : hex) {
            int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) ok = false;
            cp = cp * 16 + static_cast<uint32_t>(d < 0 ? 0 : d);
          }
          if (!ok) FailSyntax("Invalid hexadecimal escape sequence: \\" + std::string(1, e) + std::string(hex));
          // A lone surrogate cannot be written as UTF-8: the reference would
          // carry it in a JS string; refuse rather than differ.
          if (cp >= 0xD800 && cp <= 0xDFFF) FailUnsupported("surrogate escape \\u" + std::string(hex) + " in a string literal");
          AppendUtf8(cp, &out);
          pos_ += n;
          continue;
        }
        switch (e) {
          case 'n': out.push_back('\n'); break;
          case 't': out.push_back('\t'); break;
          case 'r': out.push_back('\r'); break;
          case 'b': out.push_back('\b'); break;
          case 'f': out.push_back('\f'); break;
          case 'v': out.push_back('\v'); break;
          case '\'': out.push_back('\''); break;
          case '"': out.push_back('"'); break;
          case '\\': out.push_back('\\'); break;
          default: FailSyntax(std::string("Unexpected escaped character: ") + e);
        }
        continue;
      }
      out.push_back(src_[pos_++]);
      CheckNotAtEnd();
    }
    if (pos_ >= src_.size()) FailSyntax("Unexpected end of input");
    return out;
  }

  void StripTrailingWhitespace() {
    if (!tokens_.empty() && tokens_.back().type == TokenType::kText) {
      std::string& v = tokens_.back().value;
      v.resize(v.size() - WhitespaceRunBefore(v, v.size()));
      if (v.empty()) tokens_.pop_back();
    }
  }

  void LexComment() {
    pos_ += 2;
    bool strip_before = pos_ < src_.size() && src_[pos_] == '-';
    if (strip_before) ++pos_;
    size_t start = pos_;
    while (!(pos_ + 1 < src_.size() && src_[pos_] == '#' && src_[pos_ + 1] == '}')) {
      if (pos_ + 2 >= src_.size()) FailSyntax("Missing end of comment tag");
      ++pos_;
    }
    std::string comment(src_.substr(start, pos_ - start));
    bool strip_after = !comment.empty() && comment.back() == '-';
    if (strip_after) comment.pop_back();
    if (strip_before) StripTrailingWhitespace();
    Push(std::move(comment), TokenType::kComment);
    pos_ += 2;
    if (strip_after) pos_ += WhitespaceRunFrom(src_, pos_);
  }

  // The reference's ordered mapping table: longer operators before their
  // prefixes where it matters ("**" before "*", "//" before "/").
  bool LexOperator() {
    static const std::pair<std::string_view, TokenType> kTable[] = {
        {"{%", TokenType::kOpenStatement}, {"%}", TokenType::kCloseStatement},
        {"{{", TokenType::kOpenExpression}, {"}}", TokenType::kCloseExpression},
        {"(", TokenType::kOpenParen}, {")", TokenType::kCloseParen},
        {"{", TokenType::kOpenCurlyBracket}, {"}", TokenType::kCloseCurlyBracket},
        {"[", TokenType::kOpenSquareBracket}, {"]", TokenType::kCloseSquareBracket},
        {",", TokenType::kComma}, {".", TokenType::kDot}, {":", TokenType::kColon}, {"|", TokenType::kPipe},
        {"<=", TokenType::kComparisonBinaryOperator}, {">=", TokenType::kComparisonBinaryOperator},
        {"==", TokenType::kComparisonBinaryOperator}, {"!=", TokenType::kComparisonBinaryOperator},
        {"<", TokenType::kComparisonBinaryOperator}, {">", TokenType::kComparisonBinaryOperator},
        {"+", TokenType::kAdditiveBinaryOperator}, {"-", TokenType::kAdditiveBinaryOperator},
        {"~", TokenType::kAdditiveBinaryOperator}, {"**", TokenType::kExponentiationBinaryOperator},
        {"*", TokenType::kMultiplicativeBinaryOperator}, {"//", TokenType::kMultiplicativeBinaryOperator},
        {"/", TokenType::kMultiplicativeBinaryOperator}, {"%", TokenType::kMultiplicativeBinaryOperator},
        {"=", TokenType::kEquals}};
    for (const auto& [seq, type] : kTable) {
      if (seq == "}}" && curly_depth_ > 0) continue;
      if (!StartsWith(seq)) continue;
      Push(std::string(seq), type);
      if (type == TokenType::kOpenExpression) curly_depth_ = 0;
      else if (type == TokenType::kOpenCurlyBracket) ++curly_depth_;
      else if (type == TokenType::kCloseCurlyBracket) --curly_depth_;
      pos_ += seq.size();
      return true;
    }
    return false;
  }

  std::string_view src_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::string Preprocess(std::string_view source, const TemplateOptions& options) {
  std::string s(source);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (options.lstrip_blocks) s = LstripBlocks(s);
  if (options.trim_blocks) s = TrimBlocks(s);
  return RemoveGenerationTags(s);
}

std::vector<Token> Tokenize(std::string_view source, const TemplateOptions& options) {
  std::string src = Preprocess(source, options);
  return Lexer(src).Run();
}

}  // namespace toktier::chat
