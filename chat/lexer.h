// Private: template source -> tokens, with the reference's preprocessing
// (trailing newline, lstrip_blocks, trim_blocks, {% generation %} removal)
// and whitespace control ({%- -%} {{- -}} {#- -#}).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"

namespace toktier::chat {

enum class TokenType {
  kText, kNumericLiteral, kStringLiteral, kIdentifier, kEquals, kOpenParen, kCloseParen,
  kOpenStatement, kCloseStatement, kOpenExpression, kCloseExpression, kOpenSquareBracket,
  kCloseSquareBracket, kOpenCurlyBracket, kCloseCurlyBracket, kComma, kDot, kColon, kPipe,
  kAdditiveBinaryOperator, kMultiplicativeBinaryOperator, kExponentiationBinaryOperator,
  kComparisonBinaryOperator, kUnaryOperator, kComment
};

const char* TokenTypeName(TokenType type);

struct Token {
  std::string value;
  TokenType type;
};

// The source after the reference's preprocessing step.
std::string Preprocess(std::string_view source, const TemplateOptions& options);
// Throws RenderFailure (kSyntaxError) on malformed input.
std::vector<Token> Tokenize(std::string_view source, const TemplateOptions& options);

}  // namespace toktier::chat
