// Private: runtime values with the reference's types (IntegerValue,
// FloatValue, StringValue, ...). Numbers are doubles as in JS; `kind`
// remembers integer vs float, which printing and arithmetic distinguish.
// Lists, dicts and namespaces are shared (reference semantics, as in JS).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace toktier::chat {

// Lists and dicts nest at most this deep: deeper values would recurse
// without bound when printed or freed (a template can build them in a loop).
constexpr int kMaxValueDepth = 512;
[[noreturn]] void FailValueTooDeep();

enum class ValueKind { kUndefined, kNull, kBool, kInteger, kFloat, kString, kArray, kTuple, kObject, kKeywordArguments, kNamespace, kFunction };

const char* ValueTypeName(ValueKind kind);  // the reference's type names, for error messages

struct Value;
struct Env;
using EnvPtr = std::shared_ptr<Env>;

// Insertion-ordered map (JS Map), with an index for large ones.
class ObjectData {
 public:
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value value);
  void Reserve(size_t n);  // out of line: Value is incomplete here (clang rejects the inline reserve)
  const std::vector<std::pair<std::string, Value>>& entries() const { return entries_; }
  size_t size() const;

 private:
  std::vector<std::pair<std::string, Value>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

using ArrayData = std::vector<Value>;
using Function = std::function<Value(std::vector<Value>& args, const EnvPtr& caller_scope)>;

struct Value {
  ValueKind kind = ValueKind::kUndefined;
  bool boolean = false;
  double number = 0;
  std::shared_ptr<const std::string> str;
  std::shared_ptr<ArrayData> array;     // kArray, kTuple
  std::shared_ptr<ObjectData> object;   // kObject, kKeywordArguments, kNamespace
  std::shared_ptr<const Function> function;
  int depth = 0;  // nesting of lists/dicts inside this value
  // A namespace, or a list/dict holding one. Namespaces are the only mutable
  // values; keeping them out of namespace attributes rules out cycles and
  // keeps `depth` exact for everything a namespace can later receive.
  bool holds_namespace = false;

  static Value Undefined() { return {}; }
  static Value Null() { Value v; v.kind = ValueKind::kNull; return v; }
  static Value Bool(bool b) { Value v; v.kind = ValueKind::kBool; v.boolean = b; return v; }
  static Value Integer(double n) { Value v; v.kind = ValueKind::kInteger; v.number = n; return v; }
  static Value Float(double n) { Value v; v.kind = ValueKind::kFloat; v.number = n; return v; }
  // The string object itself is not const (only the handle is), so a
  // string held by one Value alone can be taken over (TakeString).
  static Value String(std::string s) { Value v; v.kind = ValueKind::kString; v.str = std::make_shared<std::string>(std::move(s)); return v; }
  static Value Array(ArrayData items, ValueKind kind = ValueKind::kArray);
  static Value Object(std::shared_ptr<ObjectData> data, ValueKind kind = ValueKind::kObject);
  static Value Func(Function f) { Value v; v.kind = ValueKind::kFunction; v.function = std::make_shared<const Function>(std::move(f)); return v; }

  bool IsUndefined() const { return kind == ValueKind::kUndefined; }
  bool IsNull() const { return kind == ValueKind::kNull; }
  bool IsString() const { return kind == ValueKind::kString; }
  bool IsNumber() const { return kind == ValueKind::kInteger || kind == ValueKind::kFloat; }
  bool IsArray() const { return kind == ValueKind::kArray || kind == ValueKind::kTuple; }  // ArrayValue and its subclass
  bool IsObject() const { return kind == ValueKind::kObject || kind == ValueKind::kKeywordArguments; }  // ObjectValue and its subclass
  bool IsAttributeContainer() const { return IsObject() || kind == ValueKind::kNamespace; }
  const std::string& s() const { return *str; }
};

// JS Number.prototype.toString.
std::string JsNumberToString(double d);
// The reference's RuntimeValue.toString(): what {{ value }} prints.
std::string PrintString(const Value& v);
// JS String(value.value): what `~`, `+` and join use.
std::string RawString(const Value& v);
// RawString of a value about to be dropped: a string no other Value shares
// (the result of the previous `+` in `a + b + c`, a block's output) is moved
// out instead of copied, so building a message's line copies its content once.
std::string TakeRawString(Value&& v);
// out += RawString(v), without the intermediate copy for a string.
void AppendRawString(const Value& v, std::string* out);
// __bool__.
bool Truthy(const Value& v);
// JS `left.value == right.value` (loose) and `===` (strict).
bool LooseEquals(const Value& a, const Value& b);
bool StrictEquals(const Value& a, const Value& b);

struct JsonOptions {
  int indent = 0;  // 0: none (the reference treats indent 0 as none)
  bool ensure_ascii = false;
  bool has_separators = false;
  std::string item_separator, key_separator;
};
// The reference's toJSON (the tojson filter and the printing of lists/dicts).
void ToJson(const Value& v, const JsonOptions& options, int depth, bool undefined_as_null, std::string* out);
// JSON.stringify of a string.
void JsonQuote(std::string_view s, bool ensure_ascii, std::string* out);

}  // namespace toktier::chat
