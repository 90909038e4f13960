// Private: evaluates a parsed template with the reference's semantics.
#pragma once

#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "chat/ast.h"
#include "chat/chat_template.h"
#include "chat/value.h"

namespace toktier::chat {

// A variable scope; lookups walk to the parent (the reference's Environment).
struct Env {
  explicit Env(EnvPtr parent_env = nullptr) : parent(std::move(parent_env)) {}
  EnvPtr parent;
  std::unordered_map<std::string, Value> vars;
  Value Lookup(const std::string& name) const;
};

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options) : options_(options) {}
  // Throws RenderFailure.
  std::string Run(const Node& program, const nlohmann::ordered_json& inputs);
  std::string Run(const Node& program, nlohmann::ordered_json&& inputs);  // takes the inputs' strings

  // Used by builtins.
  Value Evaluate(const Node* node, const EnvPtr& env);
  void CountIterations(uint64_t n);
  void CheckSize(size_t bytes) const;
  const RenderOptions& options() const { return options_; }
  void EvaluateArgumentsForFilter(const std::vector<NodePtr>& args, const EnvPtr& env, std::vector<Value>* positional,
                                  std::shared_ptr<ObjectData>* keywords) {
    EvaluateArguments(args, env, positional, keywords);
  }

 private:
  template <typename Json>
  std::string RunWith(const Node& program, Json& inputs);
  friend class Builtins;
  std::string EvaluateBlock(const std::vector<NodePtr>& statements, const EnvPtr& env);
  Value EvaluateBinary(const Node& node, const EnvPtr& env);
  Value EvaluateMember(const Node& node, const EnvPtr& env);
  Value EvaluateCall(const Node& node, const EnvPtr& env);
  Value EvaluateSet(const Node& node, const EnvPtr& env);
  Value EvaluateFor(const Node& node, const EnvPtr& env);
  Value EvaluateCallStatement(const Node& node, const EnvPtr& env);
  void EvaluateArguments(const std::vector<NodePtr>& args, const EnvPtr& env, std::vector<Value>* positional,
                         std::shared_ptr<ObjectData>* keywords);
  void BindMacroArguments(const std::string& display_name, const Node& owner, const std::vector<NodePtr>& params,
                          std::vector<Value>& args, const EnvPtr& scope);
  Value MakeMacro(const Node& node);
  void SetupGlobals(Env* env);

  const RenderOptions& options_;
  uint64_t iterations_ = 0;
  int depth_ = 0;
};

// Filters, tests and the methods of strings and dicts (builtins.cpp).
Value ApplyFilter(Interpreter& in, const Value& operand, const Node& filter, const EnvPtr& env);
bool ApplyTest(const std::string& name, const Value& operand, const Value* argument);
bool HasTest(const std::string& name);
Value GetMember(Interpreter& in, const Value& object, const Value& property);
// Python-style strftime with the reference's subset (%Y %m %d %b %B %H %M %%).
std::string Strftime(int64_t unix_seconds, std::string_view format);

}  // namespace toktier::chat
