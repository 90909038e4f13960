#include "chat/parser.h"

#include <charconv>
#include <cstdlib>
#include <set>
#include <string>

#include "chat/error.h"

namespace toktier::chat {
namespace {

NodePtr MakeNode(NodeKind kind) { return std::make_unique<Node>(kind); }

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_depth) : tokens_(tokens), max_depth_(max_depth) {}

  NodePtr Run() {
    auto program = MakeNode(NodeKind::kProgram);
    while (pos_ < tokens_.size()) program->body.push_back(ParseAny());
    return program;
  }

 private:
  // Bounds recursion on nested blocks and expressions.
  struct DepthGuard {
    explicit DepthGuard(Parser* p) : p(p) {
      if (++p->depth_ > p->max_depth_) Fail(StatusCode::kLimitExceeded, "template nesting deeper than " + std::to_string(p->max_depth_));
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  const Token& Peek(size_t ahead = 0) const {
    if (pos_ + ahead >= tokens_.size()) FailSyntax("Unexpected end of template");
    return tokens_[pos_ + ahead];
  }
  bool Is(TokenType type) const { return pos_ < tokens_.size() && tokens_[pos_].type == type; }
  bool IsIdentifier(std::string_view name, size_t ahead = 0) const {
    return pos_ + ahead < tokens_.size() && tokens_[pos_ + ahead].type == TokenType::kIdentifier &&
           tokens_[pos_ + ahead].value == name;
  }
  bool IsStatement(std::initializer_list<std::string_view> names) const {
    if (!(pos_ + 1 < tokens_.size() && tokens_[pos_].type == TokenType::kOpenStatement &&
          tokens_[pos_ + 1].type == TokenType::kIdentifier)) {
      return false;
    }
    for (auto n : names) {
      if (tokens_[pos_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& Expect(TokenType type, const char* what) {
    if (pos_ >= tokens_.size()) FailSyntax(std::string("Parser Error: ") + what + " at end of template");
    const Token& t = tokens_[pos_++];
    if (t.type != type) {
      FailSyntax(std::string("Parser Error: ") + what + ". " + TokenTypeName(t.type) + " !== " + TokenTypeName(type) + ".");
    }
    return t;
  }
  void ExpectIdentifier(std::string_view name) {
    if (!IsIdentifier(name)) FailSyntax("Expected " + std::string(name));
    ++pos_;
  }

  NodePtr ParseAny() {
    DepthGuard guard(this);
    const Token& t = Peek();
    switch (t.type) {
      case TokenType::kComment: {
        ++pos_;
        return MakeNode(NodeKind::kComment);
      }
      case TokenType::kText: {
        auto n = MakeNode(NodeKind::kText);
        n->str = tokens_[pos_++].value;
        return n;
      }
      case TokenType::kOpenStatement:
        return ParseStatement();
      case TokenType::kOpenExpression: {
        ++pos_;
        auto e = ParseExpression();
        Expect(TokenType::kCloseExpression, "Expected closing expression token");
        return e;
      }
      default:
        FailSyntax(std::string("Unexpected token type: ") + TokenTypeName(t.type));
    }
  }

  // Reads statements until one of `names` opens.
  void ParseBlockUntil(std::initializer_list<std::string_view> names, std::vector<NodePtr>* out) {
    while (!IsStatement(names)) {
      if (pos_ >= tokens_.size()) {
        FailSyntax("Unexpected end of template: missing {% " + std::string(*names.begin()) + " %}");
      }
      out->push_back(ParseAny());
    }
  }

  void ExpectEnd(std::string_view name) {
    Expect(TokenType::kOpenStatement, "Expected {% token");
    ExpectIdentifier(name);
    Expect(TokenType::kCloseStatement, "Expected %} token");
  }

  NodePtr ParseStatement() {
    Expect(TokenType::kOpenStatement, "Expected opening statement token");
    const Token& t = Peek();
    if (t.type != TokenType::kIdentifier) FailSyntax(std::string("Unknown statement, got ") + TokenTypeName(t.type));
    const std::string name = t.value;
    ++pos_;
    if (name == "set") return ParseSet();
    if (name == "if") {
      auto n = ParseIf();
      ExpectEnd("endif");
      return n;
    }
    if (name == "macro") {
      auto n = ParseMacro();
      ExpectEnd("endmacro");
      return n;
    }
    if (name == "for") {
      auto n = ParseFor();
      ExpectEnd("endfor");
      return n;
    }
    if (name == "call") {
      auto n = MakeNode(NodeKind::kCallStatement);
      bool has_caller_args = Is(TokenType::kOpenParen);
      if (has_caller_args) ParseArgs(/*parameters=*/true, &n->body);
      auto callee = ParsePrimary();
      if (callee->kind != NodeKind::kIdentifier) FailSyntax("Expected identifier following call statement");
      auto call = MakeNode(NodeKind::kCall);
      call->a = std::move(callee);
      ParseArgs(false, &call->body);
      Expect(TokenType::kCloseStatement, "Expected closing statement token");
      ParseBlockUntil({"endcall"}, &n->alt);
      ExpectEnd("endcall");
      n->a = std::move(call);
      MarkSpecialArguments(n.get(), n->body, n->alt);
      return n;
    }
    if (name == "break" || name == "continue") {
      Expect(TokenType::kCloseStatement, "Expected closing statement token");
      return MakeNode(name == "break" ? NodeKind::kBreak : NodeKind::kContinue);
    }
    if (name == "filter") {
      auto n = MakeNode(NodeKind::kFilterStatement);
      auto filter = ParsePrimary();
      if (filter->kind == NodeKind::kIdentifier && Is(TokenType::kOpenParen)) filter = ParseCallExpression(std::move(filter));
      n->a = std::move(filter);
      Expect(TokenType::kCloseStatement, "Expected closing statement token");
      ParseBlockUntil({"endfilter"}, &n->body);
      ExpectEnd("endfilter");
      return n;
    }
    // The reference knows no other statement (include, extends, raw, with,
    // block, import...): it fails to compile such a template, and so do we.
    FailUnsupported("statement '" + name + "'");
  }

  NodePtr ParseSet() {
    auto n = MakeNode(NodeKind::kSet);
    n->a = ParseExpressionSequence(false);
    if (Is(TokenType::kEquals)) {
      ++pos_;
      n->b = ParseExpressionSequence(false);
    } else {
      Expect(TokenType::kCloseStatement, "Expected %} token");
      ParseBlockUntil({"endset"}, &n->body);
      Expect(TokenType::kOpenStatement, "Expected {% token");
      ExpectIdentifier("endset");
    }
    Expect(TokenType::kCloseStatement, "Expected closing statement token");
    return n;
  }

  NodePtr ParseIf() {
    DepthGuard guard(this);
    auto n = MakeNode(NodeKind::kIf);
    n->a = ParseExpression();
    Expect(TokenType::kCloseStatement, "Expected closing statement token");
    ParseBlockUntil({"elif", "else", "endif"}, &n->body);
    if (IsStatement({"elif"})) {
      pos_ += 2;
      n->alt.push_back(ParseIf());
    } else if (IsStatement({"else"})) {
      pos_ += 2;
      Expect(TokenType::kCloseStatement, "Expected closing statement token");
      ParseBlockUntil({"endif"}, &n->alt);
    }
    return n;
  }

  NodePtr ParseMacro() {
    auto n = MakeNode(NodeKind::kMacro);
    auto name = ParsePrimary();
    if (name->kind != NodeKind::kIdentifier) FailSyntax("Expected identifier following macro statement");
    n->str = name->str;
    ParseArgs(true, &n->body);
    Expect(TokenType::kCloseStatement, "Expected closing statement token");
    ParseBlockUntil({"endmacro"}, &n->alt);
    MarkSpecialArguments(n.get(), n->body, n->alt);
    return n;
  }

  NodePtr ParseFor() {
    auto n = MakeNode(NodeKind::kFor);
    n->a = ParseExpressionSequence(true);
    if (n->a->kind != NodeKind::kIdentifier && n->a->kind != NodeKind::kTupleLiteral) {
      FailSyntax("Expected identifier/tuple for the loop variable");
    }
    if (!IsIdentifier("in")) FailSyntax("Expected `in` keyword following loop variable");
    ++pos_;
    n->b = ParseExpression();
    Expect(TokenType::kCloseStatement, "Expected closing statement token");
    ParseBlockUntil({"endfor", "else"}, &n->body);
    if (IsStatement({"else"})) {
      pos_ += 2;
      Expect(TokenType::kCloseStatement, "Expected closing statement token");
      ParseBlockUntil({"endfor"}, &n->alt);
    }
    return n;
  }

  NodePtr ParseExpressionSequence(bool primary) {
    auto first = primary ? ParsePrimary() : ParseExpression();
    if (!Is(TokenType::kComma)) return first;
    auto tuple = MakeNode(NodeKind::kTupleLiteral);
    tuple->body.push_back(std::move(first));
    while (true) {
      ++pos_;
      tuple->body.push_back(primary ? ParsePrimary() : ParseExpression());
      if (!Is(TokenType::kComma)) break;
    }
    return tuple;
  }

  NodePtr ParseExpression() {
    DepthGuard guard(this);
    return ParseIfExpression();
  }

  NodePtr ParseIfExpression() {
    auto a = ParseOr();
    if (!IsIdentifier("if")) return a;
    ++pos_;
    auto test = ParseOr();
    if (IsIdentifier("else")) {
      ++pos_;
      auto n = MakeNode(NodeKind::kTernary);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = ParseIfExpression();
      return n;
    }
    auto n = MakeNode(NodeKind::kSelect);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }

  NodePtr Binary(std::string op, NodePtr left, NodePtr right) {
    auto n = MakeNode(NodeKind::kBinary);
    n->str = std::move(op);
    n->a = std::move(left);
    n->b = std::move(right);
    return n;
  }

  NodePtr ParseOr() {
    auto left = ParseAnd();
    while (IsIdentifier("or")) {
      ++pos_;
      left = Binary("or", std::move(left), ParseAnd());
    }
    return left;
  }

  NodePtr ParseAnd() {
    auto left = ParseNot();
    while (IsIdentifier("and")) {
      ++pos_;
      left = Binary("and", std::move(left), ParseNot());
    }
    return left;
  }

  NodePtr ParseNot() {
    DepthGuard guard(this);
    NodePtr result;
    while (IsIdentifier("not")) {
      ++pos_;
      auto n = MakeNode(NodeKind::kUnary);
      n->str = "not";
      n->a = ParseNot();
      result = std::move(n);
    }
    return result ? std::move(result) : ParseComparison();
  }

  NodePtr ParseComparison() {
    auto left = ParseAdditive();
    while (true) {
      std::string op;
      if (IsIdentifier("not") && IsIdentifier("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else if (IsIdentifier("in")) {
        op = "in";
        ++pos_;
      } else if (Is(TokenType::kComparisonBinaryOperator)) {
        op = tokens_[pos_++].value;
      } else {
        break;
      }
      left = Binary(std::move(op), std::move(left), ParseAdditive());
    }
    return left;
  }

  NodePtr ParseAdditive() {
    auto left = ParseMultiplicative();
    while (Is(TokenType::kAdditiveBinaryOperator)) {
      std::string op = tokens_[pos_++].value;
      left = Binary(std::move(op), std::move(left), ParseMultiplicative());
    }
    return left;
  }

  NodePtr ParseMultiplicative() {
    auto left = ParsePower();
    while (Is(TokenType::kMultiplicativeBinaryOperator)) {
      std::string op = tokens_[pos_++].value;
      left = Binary(std::move(op), std::move(left), ParsePower());
    }
    return left;
  }

  NodePtr ParsePower() {
    auto left = ParseTest();
    while (Is(TokenType::kExponentiationBinaryOperator)) {
      ++pos_;
      left = Binary("**", std::move(left), ParseTest());
    }
    return left;
  }

  NodePtr ParseTest() {
    auto operand = ParseFilter();
    while (IsIdentifier("is")) {
      ++pos_;
      bool negate = IsIdentifier("not");
      if (negate) ++pos_;
      auto test = ParsePrimary();
      if (test->kind != NodeKind::kIdentifier) FailSyntax("Expected identifier for the test");
      auto n = MakeNode(NodeKind::kTest);
      n->a = std::move(operand);
      n->str = test->str;
      n->flag = negate;
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr ParseFilter() {
    auto operand = ParseUnarySign();
    while (Is(TokenType::kPipe)) {
      ++pos_;
      auto filter = ParsePrimary();
      if (filter->kind != NodeKind::kIdentifier) FailSyntax("Expected identifier for the filter");
      if (Is(TokenType::kOpenParen)) filter = ParseCallExpression(std::move(filter));
      auto n = MakeNode(NodeKind::kFilter);
      n->a = std::move(operand);
      n->b = std::move(filter);
      operand = std::move(n);
    }
    return operand;
  }

  NodePtr ParseUnarySign() {
    DepthGuard guard(this);
    if (pos_ < tokens_.size()) {
      const Token& t = tokens_[pos_];
      if ((t.type == TokenType::kUnaryOperator || t.type == TokenType::kAdditiveBinaryOperator) &&
          (t.value == "-" || t.value == "+")) {
        auto n = MakeNode(NodeKind::kUnary);
        n->str = t.value;
        ++pos_;
        n->a = ParseUnarySign();
        return n;
      }
    }
    auto member = ParseMember(ParsePrimary());
    if (Is(TokenType::kOpenParen)) return ParseCallExpression(std::move(member));
    return member;
  }

  NodePtr ParseCallExpression(NodePtr callee) {
    DepthGuard guard(this);
    auto n = MakeNode(NodeKind::kCall);
    n->a = std::move(callee);
    ParseArgs(false, &n->body);
    auto expr = ParseMember(std::move(n));
    if (Is(TokenType::kOpenParen)) expr = ParseCallExpression(std::move(expr));
    return expr;
  }

  void ParseArgs(bool parameters, std::vector<NodePtr>* out) {
    Expect(TokenType::kOpenParen, "Expected opening parenthesis for arguments list");
    std::set<std::string> names;
    bool saw_keyword = false, saw_spread = false;
    while (!Is(TokenType::kCloseParen)) {
      if (pos_ >= tokens_.size()) FailSyntax("Unexpected end of template in an argument list");
      bool keyword_spread = Is(TokenType::kExponentiationBinaryOperator);
      bool positional_spread = Is(TokenType::kMultiplicativeBinaryOperator) && tokens_[pos_].value == "*";
      if (parameters && (keyword_spread || positional_spread)) {
        FailSyntax("Argument unpacking is not allowed in parameter declarations");
      }
      if (keyword_spread) {
        ++pos_;
        auto n = MakeNode(NodeKind::kKeywordSpread);
        n->a = ParseExpression();
        out->push_back(std::move(n));
        if (Is(TokenType::kComma)) ++pos_;
        if (!Is(TokenType::kCloseParen)) FailSyntax("Expected closing parenthesis: `**` must be applied to the final argument");
        break;
      }
      NodePtr arg;
      if (positional_spread) {
        if (saw_spread) FailSyntax("Only one `*` argument unpacking is allowed");
        saw_spread = true;
        ++pos_;
        arg = MakeNode(NodeKind::kSpread);
        arg->a = ParseExpression();
      } else {
        arg = ParseExpression();
        if (Is(TokenType::kEquals)) {
          ++pos_;
          if (arg->kind != NodeKind::kIdentifier) {
            FailSyntax(parameters ? "Expected identifier for parameter declaration" : "Expected identifier for keyword argument");
          }
          auto kw = MakeNode(NodeKind::kKeywordArgument);
          kw->str = arg->str;
          kw->a = ParseExpression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::kIdentifier && arg->kind != NodeKind::kKeywordArgument) {
            FailSyntax("Expected identifier for parameter declaration");
          }
          if (!names.insert(arg->str).second) FailSyntax("Duplicate parameter name: " + arg->str);
        }
        if (arg->kind == NodeKind::kKeywordArgument) {
          saw_keyword = true;
        } else if (saw_keyword) {
          FailSyntax(parameters ? "Non-default argument follows default argument" : "Positional arguments must come before keyword arguments");
        } else if (saw_spread) {
          FailSyntax("Positional arguments must not follow `*` argument unpacking");
        }
      }
      out->push_back(std::move(arg));
      if (Is(TokenType::kComma)) ++pos_;
    }
    Expect(TokenType::kCloseParen, "Expected closing parenthesis for arguments list");
  }

  NodePtr ParseSubscript() {
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!Is(TokenType::kCloseSquareBracket)) {
      if (pos_ >= tokens_.size()) FailSyntax("Unexpected end of template in a subscript");
      if (Is(TokenType::kColon)) {
        parts.push_back(nullptr);
        ++pos_;
        is_slice = true;
      } else {
        parts.push_back(ParseExpression());
        if (Is(TokenType::kColon)) {
          ++pos_;
          is_slice = true;
        }
      }
    }
    if (parts.empty()) FailSyntax("Expected at least one argument for member/slice expression");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) FailSyntax("Expected 0-3 arguments for slice expression");
    auto n = MakeNode(NodeKind::kSlice);
    n->a = std::move(parts[0]);
    if (parts.size() > 1) n->b = std::move(parts[1]);
    if (parts.size() > 2) n->c = std::move(parts[2]);
    return n;
  }

  NodePtr ParseMember(NodePtr object) {
    while (Is(TokenType::kDot) || Is(TokenType::kOpenSquareBracket)) {
      bool computed = Is(TokenType::kOpenSquareBracket);
      ++pos_;
      NodePtr property;
      if (computed) {
        property = ParseSubscript();
        Expect(TokenType::kCloseSquareBracket, "Expected closing square bracket");
      } else {
        property = ParsePrimary();
        if (property->kind != NodeKind::kIdentifier && property->kind != NodeKind::kIntegerLiteral) {
          FailSyntax("Expected identifier or integer following dot operator");
        }
      }
      auto n = MakeNode(NodeKind::kMember);
      n->a = std::move(object);
      n->b = std::move(property);
      n->flag = computed;
      object = std::move(n);
    }
    return object;
  }

  NodePtr ParsePrimary() {
    DepthGuard guard(this);
    const Token& t = Peek();
    ++pos_;
    switch (t.type) {
      case TokenType::kNumericLiteral: {
        bool is_float = t.value.find('.') != std::string::npos;
        auto n = MakeNode(is_float ? NodeKind::kFloatLiteral : NodeKind::kIntegerLiteral);
        n->number = std::strtod(t.value.c_str(), nullptr);
        return n;
      }
      case TokenType::kStringLiteral: {
        auto n = MakeNode(NodeKind::kStringLiteral);
        n->str = t.value;
        while (Is(TokenType::kStringLiteral)) n->str += tokens_[pos_++].value;  // adjacent literals concatenate
        return n;
      }
      case TokenType::kIdentifier: {
        auto n = MakeNode(NodeKind::kIdentifier);
        n->str = t.value;
        return n;
      }
      case TokenType::kOpenParen: {
        auto e = ParseExpressionSequence(false);
        Expect(TokenType::kCloseParen, "Expected closing parenthesis");
        return e;
      }
      case TokenType::kOpenSquareBracket: {
        auto n = MakeNode(NodeKind::kArrayLiteral);
        while (!Is(TokenType::kCloseSquareBracket)) {
          if (pos_ >= tokens_.size()) FailSyntax("Unexpected end of template in a list literal");
          n->body.push_back(ParseExpression());
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      case TokenType::kOpenCurlyBracket: {
        auto n = MakeNode(NodeKind::kObjectLiteral);
        while (!Is(TokenType::kCloseCurlyBracket)) {
          if (pos_ >= tokens_.size()) FailSyntax("Unexpected end of template in a dict literal");
          n->body.push_back(ParseExpression());
          Expect(TokenType::kColon, "Expected colon between key and value in object literal");
          n->alt.push_back(ParseExpression());
          if (Is(TokenType::kComma)) ++pos_;
        }
        ++pos_;
        return n;
      }
      default:
        FailSyntax(std::string("Unexpected token: ") + TokenTypeName(t.type));
    }
  }

  // Whether a macro (or call block) body reads `kwargs` / `varargs` that are
  // not its own parameters: only then does it accept extra arguments.
  static void FindSpecialReads(const Node* n, bool* kwargs, bool* varargs) {
    if (!n) return;
    if (n->kind == NodeKind::kIdentifier) {
      if (n->str == "kwargs") *kwargs = true;
      if (n->str == "varargs") *varargs = true;
      return;
    }
    if (n->kind == NodeKind::kMember && !n->flag) {  // a.kwargs is an attribute, not the variable
      FindSpecialReads(n->a.get(), kwargs, varargs);
      return;
    }
    if (n->kind == NodeKind::kFilter) {  // a filter's name is not a read
      FindSpecialReads(n->a.get(), kwargs, varargs);
      if (n->b && n->b->kind == NodeKind::kCall) {
        for (const auto& x : n->b->body) FindSpecialReads(x.get(), kwargs, varargs);
      }
      return;
    }
    if (n->kind == NodeKind::kFilterStatement) {
      for (const auto& x : n->body) FindSpecialReads(x.get(), kwargs, varargs);
      if (n->a && n->a->kind == NodeKind::kCall) {
        for (const auto& x : n->a->body) FindSpecialReads(x.get(), kwargs, varargs);
      }
      return;
    }
    FindSpecialReads(n->a.get(), kwargs, varargs);
    FindSpecialReads(n->b.get(), kwargs, varargs);
    FindSpecialReads(n->c.get(), kwargs, varargs);
    for (const auto& x : n->body) FindSpecialReads(x.get(), kwargs, varargs);
    for (const auto& x : n->alt) FindSpecialReads(x.get(), kwargs, varargs);
  }

  static void MarkSpecialArguments(Node* n, const std::vector<NodePtr>& params, const std::vector<NodePtr>& body) {
    bool kwargs = false, varargs = false;
    for (const auto& p : params) {
      if (p->kind == NodeKind::kKeywordArgument) FindSpecialReads(p->a.get(), &kwargs, &varargs);
    }
    for (const auto& x : body) FindSpecialReads(x.get(), &kwargs, &varargs);
    for (const auto& p : params) {
      if (p->str == "kwargs") kwargs = false;
      if (p->str == "varargs") varargs = false;
    }
    n->uses_kwargs = kwargs;
    n->uses_varargs = varargs;
  }

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int max_depth_;
};

}  // namespace

NodePtr Parse(const std::vector<Token>& tokens, int max_depth) { return Parser(tokens, max_depth).Run(); }

}  // namespace toktier::chat
