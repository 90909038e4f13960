// Private: tokens -> syntax tree, with the reference's grammar and operator
// precedence (which differs from Python Jinja in places, e.g. `is` binds
// tighter than `*`; the reference is what must be matched).
#pragma once

#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace toktier::chat {

// Throws RenderFailure (kSyntaxError, kUnsupported for statements the
// reference does not know either, kLimitExceeded past max_depth).
NodePtr Parse(const std::vector<Token>& tokens, int max_depth);

}  // namespace toktier::chat
