// Private: the syntax tree. One node struct for every kind (the evaluator
// switches on `kind`); which fields a kind uses is listed next to it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace toktier::chat {

enum class NodeKind {
  kProgram,          // body
  kText,             // str (template text outside tags)
  kStringLiteral,    // str
  kIntegerLiteral,   // number
  kFloatLiteral,     // number
  kIdentifier,       // str
  kArrayLiteral,     // body = elements
  kTupleLiteral,     // body = elements
  kObjectLiteral,    // body = keys, alt = values
  kIf,               // a = test, body, alt
  kFor,              // a = loop variable (Identifier/Tuple), b = iterable, body, alt = else block
  kBreak,
  kContinue,
  kSet,              // a = target, b = value (null for a block set), body = block set body
  kMacro,            // str = name, body = parameters, alt = macro body
  kCallStatement,    // a = Call node, body = caller parameters, alt = body
  kFilterStatement,  // a = filter (Identifier or Call), body
  kComment,
  kMember,           // a = object, b = property, flag = computed ([...])
  kCall,             // a = callee, body = arguments
  kBinary,           // str = operator, a, b
  kUnary,            // str = operator, a
  kFilter,           // a = operand, b = filter (Identifier or Call)
  kTest,             // a = operand, str = test name, flag = negated
  kSelect,           // a = value, b = condition (`x if c` without else)
  kTernary,          // a = condition, b = if true, c = if false
  kSlice,            // a = start, b = stop, c = step (each may be null)
  kKeywordArgument,  // str = name, a = value
  kSpread,           // a (*args)
  kKeywordSpread,    // a (**kwargs)
};

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  explicit Node(NodeKind k) : kind(k) {}
  NodeKind kind;
  std::string str;
  double number = 0;
  bool flag = false;
  NodePtr a, b, c;
  std::vector<NodePtr> body, alt;
  // kMacro / kCallStatement: whether the body reads `kwargs` / `varargs`.
  bool uses_kwargs = false, uses_varargs = false;
};

}  // namespace toktier::chat
