// Whether a template iterates over a message's content parts (vLLM's
// content-format detection, docs/chat.md): engines render a message whose
// content is a list of parts either as that list ("openai": the template
// loops over message['content']) or as the parts' texts joined by "\n"
// ("string": every other template). The test is the one vLLM runs on the
// template's syntax tree: the variables bound to `messages` (directly or by
// `set`), the loop variables over them, then a loop over such a variable's
// `content` (through filters, tests and slices).
#include <set>
#include <string>
#include <vector>

#include "chat/ast.h"
#include "chat/chat_template.h"

namespace toktier::chat {
namespace {

void CollectNodes(const Node* n, NodeKind kind, std::vector<const Node*>* out) {
  if (!n) return;
  if (n->kind == kind) out->push_back(n);
  CollectNodes(n->a.get(), kind, out);
  CollectNodes(n->b.get(), kind, out);
  CollectNodes(n->c.get(), kind, out);
  for (const auto& c : n->body) CollectNodes(c.get(), kind, out);
  for (const auto& c : n->alt) CollectNodes(c.get(), kind, out);
}

bool IsVar(const Node* n, const std::string& var) { return n && n->kind == NodeKind::kIdentifier && n->str == var; }

// var['key'] or var.key
bool IsAttr(const Node* n, const std::string& var, const std::string& key) {
  if (!n || n->kind != NodeKind::kMember || !IsVar(n->a.get(), var) || !n->b) return false;
  if (n->flag) return n->b->kind == NodeKind::kStringLiteral && n->b->str == key;
  return n->b->kind == NodeKind::kIdentifier && n->b->str == key;
}

// `var` (or var[key] when key is given), seen through filters, tests and slices.
bool IsVarOrElems(const Node* n, const std::string& var, const std::string& key) {
  if (!n) return false;
  if (n->kind == NodeKind::kFilter || n->kind == NodeKind::kTest) return IsVarOrElems(n->a.get(), var, key);
  if (n->kind == NodeKind::kMember && n->flag && n->b && n->b->kind == NodeKind::kSlice) {
    return IsVarOrElems(n->a.get(), var, key);
  }
  return key.empty() ? IsVar(n, var) : IsAttr(n, var, key);
}

}  // namespace

ContentFormat ChatTemplate::content_format() const {
  const Node* root = impl_program();
  std::vector<const Node*> sets, loops;
  CollectNodes(root, NodeKind::kSet, &sets);
  CollectNodes(root, NodeKind::kFor, &loops);
  // Names that hold `messages` or its elements: the global and what `set`
  // binds to them, transitively.
  std::vector<std::string> list_vars = {"messages"};
  std::set<std::string> seen = {"messages"};
  for (size_t i = 0; i < list_vars.size(); ++i) {
    for (const Node* s : sets) {
      if (!s->a || s->a->kind != NodeKind::kIdentifier || !s->b) continue;
      if (IsVarOrElems(s->b.get(), list_vars[i], "") && seen.insert(s->a->str).second) list_vars.push_back(s->a->str);
    }
  }
  std::vector<std::string> message_vars;
  for (const Node* l : loops) {
    for (const auto& v : list_vars) {
      if (IsVarOrElems(l->b.get(), v, "")) {
        if (l->a && l->a->kind == NodeKind::kIdentifier) message_vars.push_back(l->a->str);
        break;
      }
    }
  }
  for (const Node* l : loops) {
    for (const auto& v : message_vars) {
      if (IsVarOrElems(l->b.get(), v, "content")) return ContentFormat::kOpenAI;
    }
  }
  return ContentFormat::kString;
}

}  // namespace toktier::chat
