#include "chat/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "chat/error.h"
#include "chat/text_util.h"

namespace toktier::chat {
namespace {

// {% break %} / {% continue %} unwind to the innermost loop.
struct BreakSignal {};
struct ContinueSignal {};

// A JS canonical array index ("0", "17"; not "017"): such keys come first
// in a JS object's property order, ascending.
bool IsArrayIndexKey(const std::string& k, uint64_t* index) {
  if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
  uint64_t v = 0;
  for (char c : k) {
    if (!IsAsciiDigit(c)) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v >= 4294967295ull) return false;
  *index = v;
  return true;
}

}  // namespace

Value Env::Lookup(const std::string& name) const {
  for (const Env* e = this; e; e = e->parent.get()) {
    auto it = e->vars.find(name);
    if (it != e->vars.end()) return it->second;
  }
  return Value::Undefined();
}

namespace {

// Converts request JSON as the reference converts JS values: integral
// numbers are IntegerValue, objects keep their key order except that
// integer-like keys come first (JS property order). `Json` is `const
// ordered_json` (the strings are copied) or `ordered_json` (the caller gave
// the inputs away: the strings are moved, so a megabyte conversation is not
// copied once more on its way into the renderer).
template <typename Json>
Value ConvertJson(Json& j, int depth) {
  if (depth > 256) Fail(StatusCode::kLimitExceeded, "input JSON nested deeper than 256");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::Null();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.template get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Integer(static_cast<double>(j.template get<int64_t>()));
    case nlohmann::ordered_json::value_t::number_unsigned: return Value::Integer(static_cast<double>(j.template get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      double d = j.template get<double>();
      return std::isfinite(d) && std::trunc(d) == d ? Value::Integer(d) : Value::Float(d);
    }
    case nlohmann::ordered_json::value_t::string:
      if constexpr (std::is_const_v<Json>) {
        return Value::String(j.template get_ref<const std::string&>());
      } else {
        return Value::String(std::move(j.template get_ref<std::string&>()));
      }
    case nlohmann::ordered_json::value_t::array: {
      ArrayData items;
      items.reserve(j.size());
      for (auto& x : j) items.push_back(ConvertJson<Json>(x, depth + 1));
      return Value::Array(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto data = std::make_shared<ObjectData>();
      std::vector<std::pair<uint64_t, const std::string*>> index_keys;
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx;
        if (IsArrayIndexKey(it.key(), &idx)) index_keys.emplace_back(idx, &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [idx, k] : index_keys) data->Set(*k, ConvertJson<Json>(j.at(*k), depth + 1));
      for (auto it = j.begin(); it != j.end(); ++it) {
        uint64_t idx;
        if (!IsArrayIndexKey(it.key(), &idx)) data->Set(it.key(), ConvertJson<Json>(it.value(), depth + 1));
      }
      return Value::Object(std::move(data));
    }
    default:
      FailUnsupported("binary JSON values in inputs");
  }
}

}  // namespace

void Interpreter::CountIterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.max_loop_iterations) {
    Fail(StatusCode::kLimitExceeded, "more than " + std::to_string(options_.max_loop_iterations) + " loop iterations");
  }
}

void Interpreter::CheckSize(size_t bytes) const {
  if (bytes > options_.max_output_bytes) {
    Fail(StatusCode::kLimitExceeded, "a string or output over " + std::to_string(options_.max_output_bytes) + " bytes");
  }
}

void Interpreter::SetupGlobals(Env* env) {
  env->vars["namespace"] = Value::Func([](std::vector<Value>& args, const EnvPtr&) {
    std::vector<Value> positional = args;
    Value kwargs;
    if (!positional.empty() && positional.back().kind == ValueKind::kKeywordArguments) {
      kwargs = positional.back();
      positional.pop_back();
    }
    if (positional.size() > 1) FailRender("namespace expected at most 1 argument, got " + std::to_string(positional.size()));
    auto entries = std::make_shared<ObjectData>();
    if (positional.size() == 1) {
      const Value& source = positional[0];
      if (source.IsObject()) {
        for (const auto& [k, v] : source.object->entries()) entries->Set(k, v);
      } else if (source.IsArray()) {
        for (const Value& pair : *source.array) {
          if (!pair.IsArray() || pair.array->size() != 2) {
            FailRender("namespace expected an object or an iterable of [key, value] pairs");
          }
          if (!(*pair.array)[0].IsString()) FailRender("namespace keys must be strings");
          entries->Set((*pair.array)[0].s(), (*pair.array)[1]);
        }
      } else {
        FailRender(std::string("'") + ValueTypeName(source.kind) + "' object is not iterable");
      }
    }
    if (kwargs.object) {
      for (const auto& [k, v] : kwargs.object->entries()) entries->Set(k, v);
    }
    return Value::Object(std::move(entries), ValueKind::kNamespace);
  });
  env->vars["false"] = Value::Bool(false);
  env->vars["true"] = Value::Bool(true);
  env->vars["none"] = Value::Null();
  env->vars["raise_exception"] = Value::Func([](std::vector<Value>& args, const EnvPtr&) -> Value {
    // The reference throws new Error(first argument): JS String() of it.
    std::string message = args.empty() ? "" : RawString(args[0]);
    Fail(StatusCode::kRaised, message);
  });
  env->vars["range"] = Value::Func([this](std::vector<Value>& args, const EnvPtr&) {
    // The reference passes the plain JS numbers through; keyword arguments
    // arrive as an object, which JS arithmetic turns into NaN: refuse those.
    for (const Value& a : args) {
      if (!a.IsNumber()) FailUnsupported(std::string("range() with a ") + ValueTypeName(a.kind) + " argument");
    }
    if (args.empty()) FailUnsupported("range() without arguments");
    double start = 0, stop, step = 1;
    if (args.size() == 1) {
      stop = args[0].number;
    } else {
      start = args[0].number;
      stop = args[1].number;
      if (args.size() > 2) step = args[2].number;
    }
    if (step == 0) FailRender("range() step must not be zero");
    ArrayData out;
    for (double i = start; step > 0 ? i < stop : i > stop; i += step) {
      CountIterations(1);
      out.push_back(Value::Integer(i));
    }
    return Value::Array(std::move(out));
  });
  env->vars["strftime_now"] = Value::Func([this](std::vector<Value>& args, const EnvPtr&) {
    if (!options_.now_unix_seconds) FailUnsupported("strftime_now() without RenderOptions::now_unix_seconds");
    if (args.empty() || !args[0].IsString()) FailUnsupported("strftime_now() without a format string");
    return Value::String(Strftime(*options_.now_unix_seconds, args[0].s()));
  });
  env->vars["True"] = Value::Bool(true);
  env->vars["False"] = Value::Bool(false);
  env->vars["None"] = Value::Null();
}

template <typename Json>
std::string Interpreter::RunWith(const Node& program, Json& inputs) {
  auto global = std::make_shared<Env>();
  SetupGlobals(global.get());
  for (auto it = inputs.begin(); it != inputs.end(); ++it) {
    if (global->vars.count(it.key())) FailRender("Variable already declared: " + it.key());
    global->vars[it.key()] = ConvertJson<Json>(it.value(), 0);
  }
  std::string out = EvaluateBlock(program.body, global);
  if (options_.keep_values) *options_.keep_values = std::move(global);
  return out;
}

std::string Interpreter::Run(const Node& program, const nlohmann::ordered_json& inputs) { return RunWith(program, inputs); }

std::string Interpreter::Run(const Node& program, nlohmann::ordered_json&& inputs) { return RunWith(program, inputs); }

std::string Interpreter::EvaluateBlock(const std::vector<NodePtr>& statements, const EnvPtr& env) {
  std::string result;
  for (const auto& s : statements) {
    if (s->kind == NodeKind::kText) {
      result += s->str;
    } else {
      Value v = Evaluate(s.get(), env);
      if (v.kind == ValueKind::kNull || v.kind == ValueKind::kUndefined) continue;
      if (v.IsString() && result.empty()) result = TakeRawString(std::move(v));
      else if (v.IsString()) result += v.s();
      else result += PrintString(v);
    }
    CheckSize(result.size());
  }
  return result;
}

void Interpreter::EvaluateArguments(const std::vector<NodePtr>& args, const EnvPtr& env, std::vector<Value>* positional,
                                    std::shared_ptr<ObjectData>* keywords) {
  for (const auto& arg : args) {
    if (arg->kind == NodeKind::kSpread) {
      Value v = Evaluate(arg->a.get(), env);
      if (!v.IsArray()) FailRender(std::string("Cannot unpack non-iterable type: ") + ValueTypeName(v.kind));
      for (const Value& x : *v.array) positional->push_back(x);
    } else if (arg->kind != NodeKind::kKeywordArgument && arg->kind != NodeKind::kKeywordSpread) {
      positional->push_back(Evaluate(arg.get(), env));
    }
  }
  auto add = [&](const std::string& key, Value v) {
    if ((*keywords)->Find(key)) FailRender("Got multiple values for keyword argument '" + key + "'");
    (*keywords)->Set(key, std::move(v));
  };
  for (const auto& arg : args) {
    if (arg->kind == NodeKind::kKeywordArgument) {
      add(arg->str, Evaluate(arg->a.get(), env));
    } else if (arg->kind == NodeKind::kKeywordSpread) {
      Value v = Evaluate(arg->a.get(), env);
      if (!v.IsObject()) FailRender(std::string("Argument after ** must be a mapping, not ") + ValueTypeName(v.kind));
      for (const auto& [k, x] : v.object->entries()) add(k, x);
    }
  }
}

Value Interpreter::Evaluate(const Node* node, const EnvPtr& env) {
  if (!node) return Value::Undefined();
  switch (node->kind) {
    case NodeKind::kProgram: return Value::String(EvaluateBlock(node->body, env));
    case NodeKind::kText:
    case NodeKind::kStringLiteral: return Value::String(node->str);
    case NodeKind::kIntegerLiteral: return Value::Integer(node->number);
    case NodeKind::kFloatLiteral: return Value::Float(node->number);
    case NodeKind::kIdentifier: return env->Lookup(node->str);
    case NodeKind::kComment: return Value::Null();
    case NodeKind::kBreak: throw BreakSignal{};
    case NodeKind::kContinue: throw ContinueSignal{};
    case NodeKind::kArrayLiteral:
    case NodeKind::kTupleLiteral: {
      ArrayData items;
      for (const auto& x : node->body) items.push_back(Evaluate(x.get(), env));
      return Value::Array(std::move(items), node->kind == NodeKind::kTupleLiteral ? ValueKind::kTuple : ValueKind::kArray);
    }
    case NodeKind::kObjectLiteral: {
      auto data = std::make_shared<ObjectData>();
      for (size_t i = 0; i < node->body.size(); ++i) {
        Value key = Evaluate(node->body[i].get(), env);
        if (!key.IsString()) FailRender(std::string("Object keys must be strings: got ") + ValueTypeName(key.kind));
        data->Set(key.s(), Evaluate(node->alt[i].get(), env));
      }
      return Value::Object(std::move(data));
    }
    case NodeKind::kIf: {
      Value test = Evaluate(node->a.get(), env);
      return Value::String(EvaluateBlock(Truthy(test) ? node->body : node->alt, env));
    }
    case NodeKind::kFor: return EvaluateFor(*node, env);
    case NodeKind::kSet: return EvaluateSet(*node, env);
    case NodeKind::kMacro:
      env->vars[node->str] = MakeMacro(*node);
      return Value::Null();
    case NodeKind::kCallStatement: return EvaluateCallStatement(*node, env);
    case NodeKind::kFilterStatement: {
      Value rendered = Value::String(EvaluateBlock(node->body, env));
      return ApplyFilter(*this, rendered, *node->a, env);
    }
    case NodeKind::kMember: return EvaluateMember(*node, env);
    case NodeKind::kCall: return EvaluateCall(*node, env);
    case NodeKind::kBinary: return EvaluateBinary(*node, env);
    case NodeKind::kUnary: {
      Value arg = Evaluate(node->a.get(), env);
      if (node->str == "not") return Value::Bool(!Truthy(arg));
      double sign = node->str == "-" ? -1 : 1;
      if (arg.IsNumber() || arg.kind == ValueKind::kBool) {
        double v = arg.kind == ValueKind::kBool ? (arg.boolean ? 1 : 0) : arg.number;
        return arg.kind == ValueKind::kFloat ? Value::Float(sign * v) : Value::Integer(sign * v);
      }
      FailRender("Unknown operator \"" + node->str + "\" for " + ValueTypeName(arg.kind));
    }
    case NodeKind::kFilter: {
      Value operand = Evaluate(node->a.get(), env);
      return ApplyFilter(*this, operand, *node->b, env);
    }
    case NodeKind::kTest: {
      Value operand = Evaluate(node->a.get(), env);
      if (!HasTest(node->str)) FailRender("Unknown test: " + node->str);
      bool r = ApplyTest(node->str, operand, nullptr);
      return Value::Bool(node->flag ? !r : r);
    }
    case NodeKind::kSelect: {
      Value test = Evaluate(node->b.get(), env);
      if (!Truthy(test)) return Value::Undefined();
      return Evaluate(node->a.get(), env);
    }
    case NodeKind::kTernary: {
      Value cond = Evaluate(node->a.get(), env);
      return Evaluate(Truthy(cond) ? node->b.get() : node->c.get(), env);
    }
    default:
      FailRender("Unknown node type");
  }
}

Value Interpreter::EvaluateBinary(const Node& node, const EnvPtr& env) {
  const std::string& op = node.str;
  Value left = Evaluate(node.a.get(), env);
  if (op == "and") return Truthy(left) ? Evaluate(node.b.get(), env) : left;
  if (op == "or") return Truthy(left) ? left : Evaluate(node.b.get(), env);
  Value right = Evaluate(node.b.get(), env);
  if (op == "==") return Value::Bool(LooseEquals(left, right));
  if (op == "!=") return Value::Bool(!LooseEquals(left, right));
  auto numeric_like = [](const Value& v) { return v.IsNumber() || v.kind == ValueKind::kBool; };
  auto numeric_value = [](const Value& v) { return v.kind == ValueKind::kBool ? (v.boolean ? 1.0 : 0.0) : v.number; };
  if (left.IsUndefined() || right.IsUndefined()) {
    if (right.IsUndefined() && (op == "in" || op == "not in")) return Value::Bool(op == "not in");
    FailRender("Cannot perform operation " + op + " on undefined values");
  } else if (left.IsNull() || right.IsNull()) {
    FailRender("Cannot perform operation on null values");
  } else if (op == "~") {
    std::string s = TakeRawString(std::move(left));
    AppendRawString(right, &s);
    CheckSize(s.size());
    return Value::String(std::move(s));
  } else if (op == "**" && numeric_like(left) && numeric_like(right)) {
    double a = numeric_value(left), b = numeric_value(right);
    if (a == 0 && b < 0) FailRender("0.0 cannot be raised to a negative power");
    double r = std::pow(a, b);
    if (!std::isfinite(r)) FailRender("Exponentiation result is not a finite real number");
    bool is_float = left.kind == ValueKind::kFloat || right.kind == ValueKind::kFloat || b < 0;
    return is_float ? Value::Float(r) : Value::Integer(r);
  } else if (left.IsNumber() && right.IsNumber()) {
    double a = left.number, b = right.number;
    bool is_float = left.kind == ValueKind::kFloat || right.kind == ValueKind::kFloat;
    auto num = [&](double r) { return is_float ? Value::Float(r) : Value::Integer(r); };
    if (op == "+") return num(a + b);
    if (op == "-") return num(a - b);
    if (op == "*") return num(a * b);
    if (op == "/") return Value::Float(a / b);
    if (op == "//") return num(std::floor(a / b));
    if (op == "%") return num(std::fmod(a, b));
    if (op == "<") return Value::Bool(a < b);
    if (op == ">") return Value::Bool(a > b);
    if (op == ">=") return Value::Bool(a >= b);
    if (op == "<=") return Value::Bool(a <= b);
  } else if (left.IsArray() && right.IsArray()) {
    if (op == "+") {
      ArrayData items = *left.array;
      items.insert(items.end(), right.array->begin(), right.array->end());
      CountIterations(items.size());
      return Value::Array(std::move(items));
    }
  } else if (right.IsArray()) {
    if (op == "in" || op == "not in") {
      bool member = std::any_of(right.array->begin(), right.array->end(), [&](const Value& x) { return StrictEquals(x, left); });
      return Value::Bool(op == "in" ? member : !member);
    }
  }
  if ((left.IsString() || right.IsString()) && op == "+") {
    std::string s = TakeRawString(std::move(left));
    AppendRawString(right, &s);
    CheckSize(s.size());
    return Value::String(std::move(s));
  }
  if (left.IsString() && right.IsString()) {
    if (op == "in") return Value::Bool(right.s().find(left.s()) != std::string::npos);
    if (op == "not in") return Value::Bool(right.s().find(left.s()) == std::string::npos);
  }
  if (left.IsString() && right.IsObject()) {
    if (op == "in") return Value::Bool(right.object->Find(left.s()) != nullptr);
    if (op == "not in") return Value::Bool(right.object->Find(left.s()) == nullptr);
  }
  FailRender("Unknown operator \"" + op + "\" between " + ValueTypeName(left.kind) + " and " + ValueTypeName(right.kind));
}

namespace {

// The reference's slice(): Python-like bounds, any step sign.
template <typename T>
std::vector<T> SliceItems(const std::vector<T>& items, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const double n = static_cast<double>(items.size());
  double step = step_v.IsUndefined() ? 1 : step_v.number;
  double direction = step > 0 ? 1 : (step < 0 ? -1 : 0);
  double start, stop;
  if (direction >= 0) {
    start = start_v.IsUndefined() ? 0 : start_v.number;
    start = start < 0 ? std::max(n + start, 0.0) : std::min(start, n);
    stop = stop_v.IsUndefined() ? n : stop_v.number;
    stop = stop < 0 ? std::max(n + stop, 0.0) : std::min(stop, n);
  } else {
    start = start_v.IsUndefined() ? n - 1 : start_v.number;
    start = start < 0 ? std::max(n + start, -1.0) : std::min(start, n - 1);
    stop = stop_v.IsUndefined() ? -1 : stop_v.number;
    stop = stop < -1 ? std::max(n + stop, -1.0) : std::min(stop, n - 1);
  }
  std::vector<T> out;
  if (direction == 0) return out;
  for (double i = start; direction * i < direction * stop; i += step) {
    if (i >= 0 && i < n) out.push_back(items[static_cast<size_t>(i)]);
  }
  return out;
}

}  // namespace

Value Interpreter::EvaluateMember(const Node& node, const EnvPtr& env) {
  Value object = Evaluate(node.a.get(), env);
  Value property;
  if (node.flag) {
    if (node.b->kind == NodeKind::kSlice) {
      if (!object.IsArray() && !object.IsString()) FailRender("Slice object must be an array or string");
      Value start = Evaluate(node.b->a.get(), env);
      Value stop = Evaluate(node.b->b.get(), env);
      Value step = Evaluate(node.b->c.get(), env);
      for (const Value* v : {&start, &stop, &step}) {
        if (!(v->kind == ValueKind::kInteger || v->IsUndefined())) FailRender("Slice start must be numeric or undefined");
      }
      if (object.IsArray()) {
        ArrayData items = SliceItems(*object.array, start, stop, step);
        CountIterations(items.size());
        return Value::Array(std::move(items));
      }
      std::vector<std::string_view> chars;  // Array.from(string): code points
      const std::string& s = object.s();
      for (size_t i = 0; i < s.size();) {
        size_t len;
        DecodeUtf8(s, i, &len);
        chars.emplace_back(s.data() + i, len);
        i += len;
      }
      std::string out;
      for (auto c : SliceItems(chars, start, stop, step)) out.append(c);
      return Value::String(std::move(out));
    }
    property = Evaluate(node.b.get(), env);
  } else if (node.b->kind == NodeKind::kIntegerLiteral) {
    property = Value::Integer(node.b->number);
  } else {
    property = Value::String(node.b->str);
  }
  return GetMember(*this, object, property);
}

Value Interpreter::EvaluateCall(const Node& node, const EnvPtr& env) {
  std::vector<Value> args;
  auto kwargs = std::make_shared<ObjectData>();
  EvaluateArguments(node.body, env, &args, &kwargs);
  if (kwargs->size() > 0) args.push_back(Value::Object(kwargs, ValueKind::kKeywordArguments));
  Value fn = Evaluate(node.a.get(), env);
  if (fn.kind != ValueKind::kFunction) FailRender(std::string("Cannot call something that is not a function: got ") + ValueTypeName(fn.kind));
  if (++depth_ > options_.max_call_depth) {
    Fail(StatusCode::kLimitExceeded, "calls nested deeper than " + std::to_string(options_.max_call_depth));
  }
  Value r = (*fn.function)(args, env);
  --depth_;
  return r;
}

Value Interpreter::EvaluateSet(const Node& node, const EnvPtr& env) {
  Value rhs = node.b ? Evaluate(node.b.get(), env) : Value::String(EvaluateBlock(node.body, env));
  const Node& target = *node.a;
  if (target.kind == NodeKind::kIdentifier) {
    env->vars[target.str] = std::move(rhs);
  } else if (target.kind == NodeKind::kTupleLiteral) {
    if (!rhs.IsArray()) FailRender(std::string("Cannot unpack non-iterable type in set: ") + ValueTypeName(rhs.kind));
    if (rhs.array->size() != target.body.size()) FailRender("Wrong number of items to unpack in set");
    for (size_t i = 0; i < target.body.size(); ++i) {
      if (target.body[i]->kind != NodeKind::kIdentifier) FailRender("Cannot unpack to non-identifier in set");
      env->vars[target.body[i]->str] = (*rhs.array)[i];
    }
  } else if (target.kind == NodeKind::kMember) {
    Value object = Evaluate(target.a.get(), env);
    if (object.kind != ValueKind::kNamespace) FailRender("cannot assign attribute on non-namespace object");
    if (target.b->kind != NodeKind::kIdentifier) FailRender("Cannot assign to member with non-identifier property");
    if (rhs.holds_namespace) FailUnsupported("assigning a namespace (or a list/dict holding one) to a namespace attribute");
    if (rhs.depth + 1 > kMaxValueDepth) FailValueTooDeep();
    object.object->Set(target.b->str, std::move(rhs));
  } else {
    FailRender("Invalid LHS inside assignment expression");
  }
  return Value::Null();
}

Value Interpreter::EvaluateFor(const Node& node, const EnvPtr& env) {
  auto scope = std::make_shared<Env>(env);
  const Node* test = nullptr;
  Value iterable;
  if (node.b->kind == NodeKind::kSelect) {
    iterable = Evaluate(node.b->a.get(), scope);
    test = node.b->b.get();
  } else {
    iterable = Evaluate(node.b.get(), scope);
  }
  if (!iterable.IsArray() && !iterable.IsObject()) {
    FailRender(std::string("Expected iterable or object type in for loop: got ") + ValueTypeName(iterable.kind));
  }
  ArrayData all;
  if (iterable.IsObject()) {
    for (const auto& [k, v] : iterable.object->entries()) all.push_back(Value::String(k));
  } else {
    all = *iterable.array;
  }
  const Node& loopvar = *node.a;
  auto bind = [&](const EnvPtr& target, const Value& current) {
    if (loopvar.kind == NodeKind::kIdentifier) {
      target->vars[loopvar.str] = current;
      return;
    }
    if (current.kind != ValueKind::kArray) FailRender(std::string("Cannot unpack non-iterable type: ") + ValueTypeName(current.kind));
    if (loopvar.body.size() != current.array->size()) FailRender("Wrong number of items to unpack");
    for (size_t j = 0; j < loopvar.body.size(); ++j) {
      if (loopvar.body[j]->kind != NodeKind::kIdentifier) FailRender("Cannot unpack non-identifier type");
      target->vars[loopvar.body[j]->str] = (*current.array)[j];
    }
  };
  ArrayData items;
  for (const Value& current : all) {
    CountIterations(1);
    if (test) {
      auto loop_scope = std::make_shared<Env>(scope);
      bind(loop_scope, current);
      if (!Truthy(Evaluate(test, loop_scope))) continue;
    } else if (loopvar.kind == NodeKind::kTupleLiteral) {
      // Unpacking errors surface before the body runs, as in the reference.
      auto probe = std::make_shared<Env>(scope);
      bind(probe, current);
    }
    items.push_back(current);
  }
  std::string result;
  bool no_iteration = true;
  const double n = static_cast<double>(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    CountIterations(1);
    auto loop = std::make_shared<ObjectData>();
    loop->Reserve(9);  // one allocation per iteration, not five
    double di = static_cast<double>(i);
    loop->Set("index", Value::Integer(di + 1));
    loop->Set("index0", Value::Integer(di));
    loop->Set("revindex", Value::Integer(n - di));
    loop->Set("revindex0", Value::Integer(n - di - 1));
    loop->Set("first", Value::Bool(i == 0));
    loop->Set("last", Value::Bool(i + 1 == items.size()));
    loop->Set("length", Value::Integer(n));
    loop->Set("previtem", i > 0 ? items[i - 1] : Value::Undefined());
    loop->Set("nextitem", i + 1 < items.size() ? items[i + 1] : Value::Undefined());
    scope->vars["loop"] = Value::Object(std::move(loop));
    bind(scope, items[i]);
    try {
      if (result.empty()) result = EvaluateBlock(node.body, scope);
      else result += EvaluateBlock(node.body, scope);
      CheckSize(result.size());
    } catch (const ContinueSignal&) {
      continue;  // the reference leaves no_iteration as it was here
    } catch (const BreakSignal&) {
      break;
    }
    no_iteration = false;
  }
  if (no_iteration) result += EvaluateBlock(node.alt, scope);
  return Value::String(std::move(result));
}

void Interpreter::BindMacroArguments(const std::string& display_name, const Node& owner, const std::vector<NodePtr>& params,
                                     std::vector<Value>& args, const EnvPtr& scope) {
  std::vector<Value> positional = args;
  std::vector<std::pair<std::string, Value>> keywords;
  if (!positional.empty() && positional.back().kind == ValueKind::kKeywordArguments) {
    keywords = positional.back().object->entries();
    positional.pop_back();
  }
  std::vector<std::pair<std::string, const Node*>> pending_defaults;
  for (size_t i = 0; i < params.size(); ++i) {
    const Node& p = *params[i];
    const std::string& name = p.str;
    bool have = i < positional.size();
    Value value = have ? positional[i] : Value::Undefined();
    if (!have) {
      auto it = std::find_if(keywords.begin(), keywords.end(), [&](const auto& kv) { return kv.first == name; });
      if (it != keywords.end()) {
        value = it->second;
        keywords.erase(it);
        have = true;
      }
    }
    if (!have && p.kind == NodeKind::kKeywordArgument) pending_defaults.emplace_back(name, p.a.get());
    scope->vars[name] = value;
  }
  if (owner.uses_kwargs) {
    auto data = std::make_shared<ObjectData>();
    for (auto& [k, v] : keywords) data->Set(k, v);
    scope->vars["kwargs"] = Value::Object(std::move(data));
  } else if (!keywords.empty()) {
    FailRender("macro " + display_name + " takes no keyword argument '" + keywords.front().first + "'");
  }
  if (owner.uses_varargs) {
    ArrayData rest;
    for (size_t i = params.size(); i < positional.size(); ++i) rest.push_back(positional[i]);
    scope->vars["varargs"] = Value::Array(std::move(rest));
  } else if (positional.size() > params.size()) {
    FailRender("macro " + display_name + " takes not more than " + std::to_string(params.size()) + " argument(s)");
  }
  for (const auto& [name, def] : pending_defaults) scope->vars[name] = Evaluate(def, scope);
}

Value Interpreter::MakeMacro(const Node& node) {
  const Node* n = &node;
  return Value::Func([this, n](std::vector<Value>& args, const EnvPtr& caller_scope) {
    auto scope = std::make_shared<Env>(caller_scope);
    BindMacroArguments("'" + n->str + "'", *n, n->body, args, scope);
    return Value::String(EvaluateBlock(n->alt, scope));
  });
}

Value Interpreter::EvaluateCallStatement(const Node& node, const EnvPtr& env) {
  const Node* n = &node;
  EnvPtr defining_env = env;
  Value caller = Value::Func([this, n, defining_env](std::vector<Value>& args, const EnvPtr&) {
    auto scope = std::make_shared<Env>(defining_env);
    BindMacroArguments("None", *n, n->body, args, scope);
    return Value::String(EvaluateBlock(n->alt, scope));
  });
  std::vector<Value> args;
  auto kwargs = std::make_shared<ObjectData>();
  EvaluateArguments(node.a->body, env, &args, &kwargs);
  args.push_back(Value::Object(kwargs, ValueKind::kKeywordArguments));
  Value fn = Evaluate(node.a->a.get(), env);
  if (fn.kind != ValueKind::kFunction) FailRender(std::string("Cannot call something that is not a function: got ") + ValueTypeName(fn.kind));
  auto call_env = std::make_shared<Env>(env);
  call_env->vars["caller"] = caller;
  if (++depth_ > options_.max_call_depth) {
    Fail(StatusCode::kLimitExceeded, "calls nested deeper than " + std::to_string(options_.max_call_depth));
  }
  Value r = (*fn.function)(args, call_env);
  --depth_;
  return r;
}

}  // namespace toktier::chat
