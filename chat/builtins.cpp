// Filters, tests, and the methods of strings and dicts, as the reference
// defines them (which differs from Python Jinja: e.g. `|default` needs
// parentheses, `join` without them concatenates).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include "chat/error.h"
#include "chat/interpreter.h"
#include "chat/text_util.h"

namespace toktier::chat {
namespace {

Value Arg(const std::vector<Value>& args, size_t i) { return i < args.size() ? args[i] : Value::Undefined(); }
bool HasArg(const std::vector<Value>& args, size_t i) { return i < args.size(); }

// `positional[i] ?? kwargs[name] ?? fallback`, the reference's argument lookup.
Value ArgOr(const std::vector<Value>& positional, size_t i, const ObjectData& kwargs, const char* name, Value fallback) {
  if (HasArg(positional, i)) return positional[i];
  if (const Value* v = kwargs.Find(name)) return *v;
  return fallback;
}

// Case-insensitive compare lowers both sides (JS toLowerCase), then
// compares UTF-16 code units.
int CompareStrings(const std::string& a, const std::string& b, bool case_sensitive) {
  std::string x = case_sensitive ? a : ToLowerJs(a);
  std::string y = case_sensitive ? b : ToLowerJs(b);
  // UTF-8 byte order equals code point order; UTF-16 order differs only
  // between U+E000..U+FFFF and supplementary characters.
  auto key = [](const std::string& s) {
    std::u16string u;
    for (size_t i = 0; i < s.size();) {
      size_t len;
      uint32_t cp = DecodeUtf8(s, i, &len);
      if (cp >= 0x10000) {
        cp -= 0x10000;
        u.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
        u.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
      } else {
        u.push_back(static_cast<char16_t>(cp));
      }
      i += len;
    }
    return u;
  };
  auto ux = key(x), uy = key(y);
  return ux < uy ? -1 : (uy < ux ? 1 : 0);
}

int CompareValues(const Value& a, const Value& b, bool case_sensitive) {
  if (a.IsNull() && b.IsNull()) return 0;
  if (a.IsNull() || b.IsNull()) FailRender(std::string("Cannot compare ") + ValueTypeName(a.kind) + " with " + ValueTypeName(b.kind));
  if (a.IsUndefined() && b.IsUndefined()) return 0;
  if (a.IsUndefined() || b.IsUndefined()) FailRender(std::string("Cannot compare ") + ValueTypeName(a.kind) + " with " + ValueTypeName(b.kind));
  auto numeric_like = [](const Value& v) { return v.IsNumber() || v.kind == ValueKind::kBool; };
  if (numeric_like(a) && numeric_like(b)) {
    double x = a.kind == ValueKind::kBool ? a.boolean : a.number;
    double y = b.kind == ValueKind::kBool ? b.boolean : b.number;
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.kind != b.kind) FailRender(std::string("Cannot compare different types: ") + ValueTypeName(a.kind) + " and " + ValueTypeName(b.kind));
  if (a.IsString()) return CompareStrings(a.s(), b.s(), case_sensitive);
  FailRender(std::string("Cannot compare type: ") + ValueTypeName(a.kind));
}

Value GetAttributePath(const Value& item, const std::string& path) {
  Value value = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (value.IsAttributeContainer()) {
      const Value* v = value.object->Find(part);
      value = v ? *v : Value::Undefined();
    } else if (value.IsArray()) {
      // parseInt(part, 10): leading digits.
      char* end = nullptr;
      long idx = std::strtol(part.c_str(), &end, 10);
      if (end == part.c_str() || idx < 0 || static_cast<size_t>(idx) >= value.array->size()) return Value::Undefined();
      value = (*value.array)[static_cast<size_t>(idx)];
    } else {
      return Value::Undefined();
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return value;
}

// JS parseInt(s, 10) / parseFloat(s): leading whitespace, a sign, the
// longest numeric prefix; NaN when there is none.
double ParseIntJs(std::string_view s) {
  s = TrimStartJs(s);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  size_t start = i;
  double v = 0;
  while (i < s.size() && IsAsciiDigit(s[i])) v = v * 10 + (s[i++] - '0');
  if (i == start) return NAN;
  return neg ? -v : v;
}

double ParseFloatJs(std::string_view s) {
  s = TrimStartJs(s);
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (s.substr(i, 8) == "Infinity") return s[0] == '-' ? -INFINITY : INFINITY;
  size_t digits = 0;
  while (i < s.size() && IsAsciiDigit(s[i])) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && IsAsciiDigit(s[i])) ++i, ++digits;
  }
  if (digits == 0) return NAN;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t k = j;
    while (k < s.size() && IsAsciiDigit(s[k])) ++k;
    if (k > j) i = k;
  }
  return std::strtod(std::string(s.substr(0, i)).c_str(), nullptr);
}

std::vector<std::string> SplitOn(const std::string& s, const std::string& sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::string JoinStrings(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

// JS Array.prototype.join of the raw values (null/undefined become "").
std::string JoinRaw(Interpreter& in, const ArrayData& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out.append(sep);
    if (!items[i].IsNull() && !items[i].IsUndefined()) out += RawString(items[i]);
    in.CheckSize(out.size());
  }
  return out;
}

std::string ReplaceJs(Interpreter& in, const std::string& s, const std::string& old_value, const std::string& new_value, double count) {
  double remaining = std::isnan(count) || count < 0 ? INFINITY : count;
  if (count == 0) return s;
  std::string out;
  if (old_value.empty()) {
    // (?=) with the u flag: an empty match before every code point and at the end.
    for (size_t i = 0; i <= s.size();) {
      if (remaining > 0) {
        out += new_value;
        --remaining;
      }
      if (i == s.size()) break;
      size_t len;
      DecodeUtf8(s, i, &len);
      out.append(s, i, len);
      i += len;
      in.CheckSize(out.size());
    }
    return out;
  }
  size_t start = 0;
  while (remaining > 0) {
    size_t p = s.find(old_value, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += new_value;
    start = p + old_value.size();
    --remaining;
    in.CheckSize(out.size());
  }
  out.append(s, start, std::string::npos);
  in.CheckSize(out.size());
  return out;
}

std::string TitleCase(const std::string& s) {
  // /\b\w/g with ASCII \w: a word character after a non-word one.
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<unsigned char>(out[i]);
    bool starts_word = IsAsciiWord(c) && (i == 0 || !IsAsciiWord(static_cast<unsigned char>(out[i - 1])));
    if (starts_word && c >= 'a' && c <= 'z') out[i] = static_cast<char>(c - 32);
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  if (s.empty()) return s;
  size_t len;
  DecodeUtf8(s, 0, &len);
  return ToUpperJs(s.substr(0, len)) + s.substr(len);
}

std::string Indent(const std::string& s, int width, bool first, bool blank) {
  std::vector<std::string> lines = SplitOn(s, "\n");
  std::string pad(static_cast<size_t>(width), ' ');
  for (size_t i = 0; i < lines.size(); ++i) {
    if ((!first && i == 0) || (!blank && lines[i].empty())) continue;
    lines[i] = pad + lines[i];
  }
  return JoinStrings(lines, "\n");
}

bool StartsOrEndsWith(const std::string& s, const std::vector<Value>& args, bool starts, const char* name) {
  if (args.empty()) FailRender(std::string(name) + "() requires at least one argument");
  auto check = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return starts ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  const Value& pattern = args[0];
  if (pattern.IsString()) return check(pattern.s());
  if (pattern.IsArray()) {
    for (const Value& item : *pattern.array) {
      if (!item.IsString()) FailRender(std::string(name) + "() tuple elements must be strings");
      if (check(item.s())) return true;
    }
    return false;
  }
  FailRender(std::string(name) + "() argument must be a string or tuple of strings");
}

// A method of a string bound to its receiver (the reference's builtins map).
Value StringMethod(Interpreter& in, const std::string& name, std::shared_ptr<const std::string> receiver) {
  const std::string& s = *receiver;
  if (name == "length") return Value::Integer(static_cast<double>(Utf16Length(s)));
  static const char* kMethods[] = {"upper", "lower", "strip", "title", "capitalize", "rstrip", "lstrip",
                                   "startswith", "endswith", "split", "replace"};
  if (std::find_if(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return name == m; }) == std::end(kMethods)) {
    return Value::Undefined();
  }
  Interpreter* ip = &in;
  return Value::Func([ip, name, receiver](std::vector<Value>& args, const EnvPtr&) -> Value {
    const std::string& s = *receiver;
    if (name == "upper") return Value::String(ToUpperJs(s));
    if (name == "lower") return Value::String(ToLowerJs(s));
    // The reference ignores arguments of strip/lstrip/rstrip: it always trims whitespace.
    if (name == "strip") return Value::String(std::string(TrimJs(s)));
    if (name == "rstrip") return Value::String(std::string(TrimEndJs(s)));
    if (name == "lstrip") return Value::String(std::string(TrimStartJs(s)));
    if (name == "title") return Value::String(TitleCase(s));
    if (name == "capitalize") return Value::String(Capitalize(s));
    if (name == "startswith") return Value::Bool(StartsOrEndsWith(s, args, true, "startswith"));
    if (name == "endswith") return Value::Bool(StartsOrEndsWith(s, args, false, "endswith"));
    if (name == "split") {
      Value sep = HasArg(args, 0) ? args[0] : Value::Null();
      if (!sep.IsString() && !sep.IsNull()) FailRender("sep argument must be a string or null");
      Value maxsplit = HasArg(args, 1) ? args[1] : Value::Integer(-1);
      if (maxsplit.kind != ValueKind::kInteger) FailRender("maxsplit argument must be a number");
      std::vector<std::string> parts;
      if (sep.IsNull()) {
        std::string_view text = TrimStartJs(s);
        size_t i = 0;
        while (i < text.size()) {
          i += WhitespaceRunFrom(text, i);
          if (i >= text.size()) break;
          size_t start = i;
          while (i < text.size()) {
            size_t len;
            if (IsJsWhitespace(DecodeUtf8(text, i, &len))) break;
            i += len;
          }
          if (maxsplit.number != -1 && static_cast<double>(parts.size()) >= maxsplit.number) {
            parts.emplace_back(text.substr(start));
            break;
          }
          parts.emplace_back(text.substr(start, i - start));
        }
      } else {
        if (sep.s().empty()) FailRender("empty separator");
        parts = SplitOn(s, sep.s());
        if (maxsplit.number != -1 && static_cast<double>(parts.size()) > maxsplit.number) {
          size_t keep = maxsplit.number < 0 ? 0 : static_cast<size_t>(maxsplit.number);
          std::vector<std::string> rest(parts.begin() + static_cast<long>(keep), parts.end());
          parts.resize(keep);
          parts.push_back(JoinStrings(rest, sep.s()));
        }
      }
      ip->CountIterations(parts.size());
      ArrayData out;
      for (auto& p : parts) out.push_back(Value::String(std::move(p)));
      return Value::Array(std::move(out));
    }
    // replace
    if (args.size() < 2) FailRender("replace() requires at least two arguments");
    if (!args[0].IsString() || !args[1].IsString()) FailRender("replace() arguments must be strings");
    Value count = Value::Null();
    if (args.size() > 2) {
      if (args[2].kind == ValueKind::kKeywordArguments) {
        const Value* c = args[2].object->Find("count");
        count = c ? *c : Value::Null();
      } else {
        count = args[2];
      }
    }
    if (count.kind != ValueKind::kInteger && !count.IsNull()) FailRender("replace() count argument must be a number or null");
    return Value::String(ReplaceJs(*ip, s, args[0].s(), args[1].s(), count.IsNull() ? NAN : count.number));
  });
}

Value DictItems(const ObjectData& o) {
  ArrayData out;
  for (const auto& [k, v] : o.entries()) out.push_back(Value::Array({Value::String(k), v}));
  return Value::Array(std::move(out));
}

Value DictMethod(const std::string& name, const Value& receiver) {
  auto obj = receiver.object;
  if (name == "get") {
    return Value::Func([obj](std::vector<Value>& args, const EnvPtr&) {
      Value key = Arg(args, 0);
      if (!key.IsString()) FailRender(std::string("Object key must be a string: got ") + ValueTypeName(key.kind));
      if (const Value* v = obj->Find(key.s())) return *v;
      return HasArg(args, 1) ? args[1] : Value::Null();
    });
  }
  if (name == "items") return Value::Func([obj](std::vector<Value>&, const EnvPtr&) { return DictItems(*obj); });
  if (name == "keys") {
    return Value::Func([obj](std::vector<Value>&, const EnvPtr&) {
      ArrayData out;
      for (const auto& [k, v] : obj->entries()) out.push_back(Value::String(k));
      return Value::Array(std::move(out));
    });
  }
  if (name == "values") {
    return Value::Func([obj](std::vector<Value>&, const EnvPtr&) {
      ArrayData out;
      for (const auto& [k, v] : obj->entries()) out.push_back(v);
      return Value::Array(std::move(out));
    });
  }
  if (name == "dictsort") {
    return Value::Func([obj](std::vector<Value>& args, const EnvPtr&) {
      ObjectData none;
      const ObjectData* kwargs = &none;
      std::vector<Value> positional;
      for (const Value& a : args) {
        if (a.kind == ValueKind::kKeywordArguments) kwargs = a.object.get();
        else positional.push_back(a);
      }
      Value case_sensitive = ArgOr(positional, 0, *kwargs, "case_sensitive", Value::Bool(false));
      if (case_sensitive.kind != ValueKind::kBool) FailRender("case_sensitive must be a boolean");
      Value by = ArgOr(positional, 1, *kwargs, "by", Value::String("key"));
      if (!by.IsString()) FailRender("by must be a string");
      if (by.s() != "key" && by.s() != "value") FailRender("by must be either 'key' or 'value'");
      Value reverse = ArgOr(positional, 2, *kwargs, "reverse", Value::Bool(false));
      if (reverse.kind != ValueKind::kBool) FailRender("reverse must be a boolean");
      ArrayData items = *DictItems(*obj).array;
      size_t index = by.s() == "key" ? 0 : 1;
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        int r = CompareValues((*a.array)[index], (*b.array)[index], case_sensitive.boolean);
        return (reverse.boolean ? -r : r) < 0;
      });
      return Value::Array(std::move(items));
    });
  }
  return Value::Undefined();
}

}  // namespace

Value GetMember(Interpreter& in, const Value& object, const Value& property) {
  if (object.IsAttributeContainer()) {
    if (!property.IsString()) FailRender(std::string("Cannot access property with non-string: got ") + ValueTypeName(property.kind));
    if (const Value* v = object.object->Find(property.s())) return *v;
    if (object.IsObject()) return DictMethod(property.s(), object);
    return Value::Undefined();
  }
  if (object.IsArray() || object.IsString()) {
    if (property.kind == ValueKind::kInteger) {
      // Array.prototype.at / String.prototype.at: negative counts from the end.
      double i = property.number;
      if (object.IsArray()) {
        double n = static_cast<double>(object.array->size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::Undefined();
        return (*object.array)[static_cast<size_t>(i)];
      }
      const std::string& s = object.s();
      double n = static_cast<double>(Utf16Length(s));
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined();
      // Walk to the UTF-16 index; a supplementary character's half would be
      // a lone surrogate in the reference.
      size_t unit = 0;
      for (size_t b = 0; b < s.size();) {
        size_t len;
        uint32_t cp = DecodeUtf8(s, b, &len);
        size_t units = cp >= 0x10000 ? 2 : 1;
        if (static_cast<double>(unit) == i && units == 1) return Value::String(s.substr(b, len));
        if (static_cast<double>(unit + units) > i) FailUnsupported("indexing half of a supplementary character");
        unit += units;
        b += len;
      }
      return Value::Undefined();
    }
    if (property.IsString()) {
      if (object.IsArray()) {
        if (property.s() == "length") return Value::Integer(static_cast<double>(object.array->size()));
        return Value::Undefined();
      }
      return StringMethod(in, property.s(), object.str);
    }
    FailRender(std::string("Cannot access property with non-string/non-number: got ") + ValueTypeName(property.kind));
  }
  if (!property.IsString()) FailRender(std::string("Cannot access property with non-string: got ") + ValueTypeName(property.kind));
  return Value::Undefined();  // numbers, booleans, none, undefined, functions have no attributes
}

bool HasTest(const std::string& name) {
  static const char* kTests[] = {"boolean", "callable", "odd", "even", "false", "true", "none", "string", "number",
                                 "integer", "iterable", "mapping", "sequence", "lower", "upper", "defined",
                                 "undefined", "equalto", "eq"};
  return std::find_if(std::begin(kTests), std::end(kTests), [&](const char* t) { return name == t; }) != std::end(kTests);
}

bool ApplyTest(const std::string& name, const Value& v, const Value* argument) {
  if (name == "boolean") return v.kind == ValueKind::kBool;
  if (name == "callable") return v.kind == ValueKind::kFunction;
  if (name == "odd" || name == "even") {
    if (v.kind != ValueKind::kInteger) FailRender("cannot " + name + " on " + ValueTypeName(v.kind));
    bool odd = std::fmod(v.number, 2) != 0;
    return name == "odd" ? odd : !odd;
  }
  if (name == "false") return v.kind == ValueKind::kBool && !v.boolean;
  if (name == "true") return v.kind == ValueKind::kBool && v.boolean;
  if (name == "none") return v.IsNull();
  if (name == "string") return v.IsString();
  if (name == "number") return v.IsNumber();
  if (name == "integer") return v.kind == ValueKind::kInteger;
  if (name == "iterable") return v.kind == ValueKind::kArray || v.IsString();
  if (name == "mapping") return v.IsObject();
  if (name == "sequence") return v.IsArray() || v.IsObject() || v.IsString();
  if (name == "lower") return v.IsString() && v.s() == ToLowerJs(v.s());
  if (name == "upper") return v.IsString() && v.s() == ToUpperJs(v.s());
  if (name == "defined") return !v.IsUndefined();
  if (name == "undefined") return v.IsUndefined();
  if (name == "equalto" || name == "eq") {
    if (!argument) FailRender("Cannot read properties of undefined (reading 'value')");
    return StrictEquals(v, *argument);
  }
  FailRender("Unknown test: " + name);
}

std::string Strftime(int64_t unix_seconds, std::string_view format) {
  static const char* kMonths[] = {"January", "February", "March", "April", "May", "June", "July",
                                  "August", "September", "October", "November", "December"};
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  auto pad2 = [](int n) { return n < 10 ? "0" + std::to_string(n) : std::to_string(n); };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    char c = format[i + 1];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += std::string(kMonths[tm.tm_mon]).substr(0, 3); break;
      case 'B': out += kMonths[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default:  // the reference leaves other directives as they are
        out.push_back('%');
        out.push_back(c);
    }
    ++i;
  }
  return out;
}

namespace {

Value ApplyNamedFilter(Interpreter& in, const Value& operand, const std::string& name, const EnvPtr& env) {
  auto unknown = [&](const char* type) -> Value { FailRender(std::string("Unknown ") + type + " filter: " + name); };
  if (name == "safe") return operand;
  if (name == "tojson") {
    std::string out;
    ToJson(operand, JsonOptions{}, 0, true, &out);
    in.CheckSize(out.size());
    return Value::String(std::move(out));
  }
  if (operand.IsArray()) {
    const ArrayData& items = *operand.array;
    if (name == "list") return operand;
    if (name == "first") return items.empty() ? Value::Undefined() : items.front();
    if (name == "last") return items.empty() ? Value::Undefined() : items.back();
    if (name == "length") return Value::Integer(static_cast<double>(items.size()));
    if (name == "reverse") return Value::Array(ArrayData(items.rbegin(), items.rend()));
    if (name == "sort") {
      ArrayData sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), [](const Value& a, const Value& b) { return CompareValues(a, b, false) < 0; });
      return Value::Array(std::move(sorted));
    }
    if (name == "join") return Value::String(JoinRaw(in, items, ""));
    if (name == "string") {
      std::string out;
      ToJson(operand, JsonOptions{}, 0, false, &out);
      return Value::String(std::move(out));
    }
    if (name == "unique") {
      ArrayData out;
      for (const Value& x : items) {
        bool seen = std::any_of(out.begin(), out.end(), [&](const Value& y) {
          // JS Set membership of the raw values (SameValueZero).
          if (std::isnan(x.number) && std::isnan(y.number) && x.IsNumber() && y.IsNumber()) return true;
          return StrictEquals(x, y);
        });
        if (!seen) out.push_back(x);
      }
      return Value::Array(std::move(out));
    }
    return unknown("ArrayValue");
  }
  if (operand.IsString()) {
    const std::string& s = operand.s();
    if (name == "length" || name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      Value m = StringMethod(in, name, operand.str);
      if (m.kind != ValueKind::kFunction) return m;
      std::vector<Value> none;
      return (*m.function)(none, env);
    }
    if (name == "trim") return Value::String(std::string(TrimJs(s)));
    if (name == "indent") return Value::String(Indent(s, 4, false, false));
    if (name == "join" || name == "string") return operand;
    if (name == "int") {
      double v = ParseIntJs(s);
      return Value::Integer(std::isnan(v) ? 0 : v);
    }
    if (name == "float") {
      double v = ParseFloatJs(s);
      return Value::Float(std::isnan(v) ? 0 : v);
    }
    return unknown("StringValue");
  }
  if (operand.IsNumber()) {
    if (name == "abs") return operand.kind == ValueKind::kInteger ? Value::Integer(std::fabs(operand.number)) : Value::Float(std::fabs(operand.number));
    if (name == "int") return Value::Integer(std::floor(operand.number));
    if (name == "float") return Value::Float(operand.number);
    if (name == "string") return Value::String(PrintString(operand));
    return unknown("NumericValue");
  }
  if (operand.IsObject()) {
    if (name == "items") return DictItems(*operand.object);
    if (name == "length") return Value::Integer(static_cast<double>(operand.object->size()));
    Value m = DictMethod(name, operand);
    if (m.kind == ValueKind::kFunction) {
      std::vector<Value> none;
      return (*m.function)(none, env);
    }
    return unknown("ObjectValue");
  }
  if (operand.kind == ValueKind::kBool) {
    if (name == "bool") return operand;
    if (name == "int") return Value::Integer(operand.boolean ? 1 : 0);
    if (name == "float") return Value::Float(operand.boolean ? 1 : 0);
    if (name == "string") return Value::String(operand.boolean ? "true" : "false");
    return unknown("BooleanValue");
  }
  FailRender("Cannot apply filter \"" + name + "\" to type: " + ValueTypeName(operand.kind));
}

}  // namespace

Value ApplyFilter(Interpreter& in, const Value& operand, const Node& filter, const EnvPtr& env) {
  if (filter.kind == NodeKind::kIdentifier) return ApplyNamedFilter(in, operand, filter.str, env);
  if (filter.kind != NodeKind::kCall || filter.a->kind != NodeKind::kIdentifier) FailRender("Unknown filter");
  const std::string& name = filter.a->str;
  auto evaluate_args = [&](std::vector<Value>* args, std::shared_ptr<ObjectData>* kwargs) {
    *kwargs = std::make_shared<ObjectData>();
    in.EvaluateArgumentsForFilter(filter.body, env, args, kwargs);
  };
  std::vector<Value> args;
  std::shared_ptr<ObjectData> kwargs;
  if (name == "tojson") {
    evaluate_args(&args, &kwargs);
    const Value* indent = kwargs->Find("indent");
    if (indent && !(indent->kind == ValueKind::kInteger || indent->IsNull())) FailRender("If set, indent must be a number");
    const Value* ensure_ascii = kwargs->Find("ensure_ascii");
    if (ensure_ascii && ensure_ascii->kind != ValueKind::kBool) FailRender("If set, ensure_ascii must be a boolean");
    const Value* sort_keys = kwargs->Find("sort_keys");
    if (sort_keys && sort_keys->kind != ValueKind::kBool) FailRender("If set, sort_keys must be a boolean");
    // The reference sorts keys with localeCompare (ICU collation), which a
    // byte order does not reproduce.
    if (sort_keys && sort_keys->boolean) FailUnsupported("tojson(sort_keys=true)");
    JsonOptions options;
    if (indent && indent->kind == ValueKind::kInteger) {
      if (indent->number < 0) FailRender("Invalid count value: " + JsNumberToString(indent->number));
      if (indent->number > 1024) FailUnsupported("tojson indent over 1024");
      options.indent = static_cast<int>(indent->number);
    }
    options.ensure_ascii = ensure_ascii && ensure_ascii->boolean;
    if (const Value* sep = kwargs->Find("separators"); sep && !sep->IsNull()) {
      if (!sep->IsArray()) FailRender("If set, separators must be a tuple of two strings");
      if (sep->array->size() != 2 || !(*sep->array)[0].IsString() || !(*sep->array)[1].IsString()) {
        FailRender("separators must be a tuple of two strings");
      }
      options.has_separators = true;
      options.item_separator = (*sep->array)[0].s();
      options.key_separator = (*sep->array)[1].s();
    }
    std::string out;
    ToJson(operand, options, 0, true, &out);
    in.CheckSize(out.size());
    return Value::String(std::move(out));
  }
  if (name == "join") {
    if (!operand.IsString() && !operand.IsArray()) {
      FailRender("Cannot apply filter \"join\" to type: " + std::string(ValueTypeName(operand.kind)));
    }
    evaluate_args(&args, &kwargs);
    Value sep = ArgOr(args, 0, *kwargs, "separator", Value::String(""));
    if (!sep.IsString()) FailRender("separator must be a string");
    if (operand.IsArray()) return Value::String(JoinRaw(in, *operand.array, sep.s()));
    std::string out;
    const std::string& s = operand.s();
    for (size_t i = 0; i < s.size();) {
      size_t len;
      DecodeUtf8(s, i, &len);
      if (i) out += sep.s();
      out.append(s, i, len);
      i += len;
      in.CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "int" || name == "float") {
    evaluate_args(&args, &kwargs);
    bool is_int = name == "int";
    Value def = ArgOr(args, 0, *kwargs, "default", is_int ? Value::Integer(0) : Value::Float(0));
    if (operand.IsString()) {
      double v = is_int ? ParseIntJs(operand.s()) : ParseFloatJs(operand.s());
      if (std::isnan(v)) return def;
      return is_int ? Value::Integer(v) : Value::Float(v);
    }
    if (operand.IsNumber()) return operand;
    if (operand.kind == ValueKind::kBool) return is_int ? Value::Integer(operand.boolean) : Value::Float(operand.boolean);
    FailRender("Cannot apply filter \"" + name + "\" to type: " + ValueTypeName(operand.kind));
  }
  if (name == "default") {
    evaluate_args(&args, &kwargs);
    Value def = HasArg(args, 0) ? args[0] : Value::String("");
    Value boolean = HasArg(args, 1) ? args[1] : (kwargs->Find("boolean") ? *kwargs->Find("boolean") : Value::Bool(false));
    if (boolean.kind != ValueKind::kBool) FailRender("`default` filter flag must be a boolean");
    if (operand.IsUndefined() || (boolean.boolean && !Truthy(operand))) return def;
    return operand;
  }
  if (operand.IsArray()) {
    const ArrayData& items = *operand.array;
    if (name == "sort") {
      evaluate_args(&args, &kwargs);
      Value reverse = ArgOr(args, 0, *kwargs, "reverse", Value::Bool(false));
      if (reverse.kind != ValueKind::kBool) FailRender("reverse must be a boolean");
      Value case_sensitive = ArgOr(args, 1, *kwargs, "case_sensitive", Value::Bool(false));
      if (case_sensitive.kind != ValueKind::kBool) FailRender("case_sensitive must be a boolean");
      Value attribute = ArgOr(args, 2, *kwargs, "attribute", Value::Null());
      if (!(attribute.IsString() || attribute.kind == ValueKind::kInteger || attribute.IsNull())) {
        FailRender("attribute must be a string, integer, or null");
      }
      auto key = [&](const Value& item) {
        if (attribute.IsNull()) return item;
        return GetAttributePath(item, attribute.IsString() ? attribute.s() : JsNumberToString(attribute.number));
      };
      ArrayData sorted = items;
      std::stable_sort(sorted.begin(), sorted.end(), [&](const Value& a, const Value& b) {
        int r = CompareValues(key(a), key(b), case_sensitive.boolean);
        return (reverse.boolean ? -r : r) < 0;
      });
      return Value::Array(std::move(sorted));
    }
    if (name == "selectattr" || name == "rejectattr") {
      bool select = name == "selectattr";
      for (const Value& item : items) {
        if (!item.IsAttributeContainer()) FailRender("`" + name + "` can only be applied to array of objects");
      }
      for (const auto& a : filter.body) {
        if (a->kind != NodeKind::kStringLiteral) FailRender("arguments of `" + name + "` must be strings");
      }
      std::vector<Value> lits;
      for (const auto& a : filter.body) lits.push_back(in.Evaluate(a.get(), env));
      if (lits.empty()) FailRender("Cannot read properties of undefined (reading 'value')");
      const std::string attr = lits[0].s();
      std::string test_name = lits.size() > 1 ? lits[1].s() : "";
      if (lits.size() > 1 && !HasTest(test_name)) FailRender("Unknown test: " + test_name);
      Value test_arg = lits.size() > 2 ? lits[2] : Value::Undefined();
      ArrayData out;
      for (const Value& item : items) {
        const Value* a = item.object->Find(attr);
        bool r = false;
        if (a) r = lits.size() > 1 ? ApplyTest(test_name, *a, &test_arg) : Truthy(*a);
        if (select ? r : !r) out.push_back(item);
      }
      return Value::Array(std::move(out));
    }
    if (name == "map") {
      evaluate_args(&args, &kwargs);
      const Value* attr = kwargs->Find("attribute");
      if (!attr) FailUnsupported("`map` expressions without `attribute` set");
      if (!attr->IsString()) FailRender("attribute must be a string");
      const Value* def = kwargs->Find("default");
      ArrayData out;
      for (const Value& item : items) {
        if (!item.IsAttributeContainer()) FailRender("items in map must be an object");
        Value v = GetAttributePath(item, attr->s());
        out.push_back(v.IsUndefined() && def ? *def : v);
      }
      return Value::Array(std::move(out));
    }
    FailRender("Unknown ArrayValue filter: " + name);
  }
  if (operand.IsString()) {
    if (name == "indent") {
      evaluate_args(&args, &kwargs);
      Value width = ArgOr(args, 0, *kwargs, "width", Value::Integer(4));
      if (width.kind != ValueKind::kInteger) FailRender("width must be a number");
      if (width.number < 0) FailRender("Invalid count value: " + JsNumberToString(width.number));
      if (width.number > 4096) FailUnsupported("indent width over 4096");
      bool first = Truthy(ArgOr(args, 1, *kwargs, "first", Value::Bool(false)));
      bool blank = Truthy(ArgOr(args, 2, *kwargs, "blank", Value::Bool(false)));
      std::string out = Indent(operand.s(), static_cast<int>(width.number), first, blank);
      in.CheckSize(out.size());
      return Value::String(std::move(out));
    }
    if (name == "replace") {
      evaluate_args(&args, &kwargs);
      args.push_back(Value::Object(kwargs, ValueKind::kKeywordArguments));
      Value m = StringMethod(in, "replace", operand.str);
      return (*m.function)(args, env);
    }
    FailRender("Unknown StringValue filter: " + name);
  }
  if (operand.IsObject()) {
    Value m = DictMethod(name, operand);
    if (m.kind == ValueKind::kFunction) {
      evaluate_args(&args, &kwargs);
      if (kwargs->size() > 0) args.push_back(Value::Object(kwargs, ValueKind::kKeywordArguments));
      return (*m.function)(args, env);
    }
    FailRender("Unknown ObjectValue filter: " + name);
  }
  FailRender("Cannot apply filter \"" + name + "\" to type: " + ValueTypeName(operand.kind));
}

}  // namespace toktier::chat
