#include "chat/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/error.h"
#include "chat/text_util.h"

namespace toktier::chat {

const char* ValueTypeName(ValueKind kind) {
  switch (kind) {
    case ValueKind::kUndefined: return "UndefinedValue";
    case ValueKind::kNull: return "NullValue";
    case ValueKind::kBool: return "BooleanValue";
    case ValueKind::kInteger: return "IntegerValue";
    case ValueKind::kFloat: return "FloatValue";
    case ValueKind::kString: return "StringValue";
    case ValueKind::kArray: return "ArrayValue";
    case ValueKind::kTuple: return "TupleValue";
    case ValueKind::kObject: return "ObjectValue";
    case ValueKind::kKeywordArguments: return "KeywordArgumentsValue";
    case ValueKind::kNamespace: return "NamespaceValue";
    case ValueKind::kFunction: return "FunctionValue";
  }
  return "?";
}

void FailValueTooDeep() {
  Fail(StatusCode::kLimitExceeded, "lists/dicts nested deeper than " + std::to_string(kMaxValueDepth));
}

Value Value::Array(ArrayData items, ValueKind kind) {
  Value v;
  v.kind = kind;
  for (const Value& x : items) {
    v.depth = std::max(v.depth, x.depth + 1);
    v.holds_namespace |= x.holds_namespace;
  }
  if (v.depth > kMaxValueDepth) FailValueTooDeep();
  v.array = std::make_shared<ArrayData>(std::move(items));
  return v;
}

Value Value::Object(std::shared_ptr<ObjectData> data, ValueKind kind) {
  Value v;
  v.kind = kind;
  v.holds_namespace = kind == ValueKind::kNamespace;
  for (const auto& [k, x] : data->entries()) {
    v.depth = std::max(v.depth, x.depth + 1);
    v.holds_namespace |= x.holds_namespace;
  }
  if (v.depth > kMaxValueDepth) FailValueTooDeep();
  v.object = std::move(data);
  return v;
}

size_t ObjectData::size() const { return entries_.size(); }

const Value* ObjectData::Find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &entries_[it->second].second;
  }
  for (const auto& [k, v] : entries_) {
    if (k == key) return &v;
  }
  return nullptr;
}

void ObjectData::Reserve(size_t n) { entries_.reserve(n); }

void ObjectData::Set(const std::string& key, Value value) {
  constexpr size_t kIndexFrom = 16;  // small maps: a linear scan is faster than hashing
  if (index_.empty()) {
    for (auto& [k, v] : entries_) {
      if (k == key) {
        v = std::move(value);
        return;
      }
    }
    entries_.emplace_back(key, std::move(value));
    if (entries_.size() >= kIndexFrom) {
      for (size_t i = 0; i < entries_.size(); ++i) index_.emplace(entries_[i].first, i);
    }
    return;
  }
  auto [it, inserted] = index_.emplace(key, entries_.size());
  if (!inserted) {
    entries_[it->second].second = std::move(value);
    return;
  }
  entries_.emplace_back(key, std::move(value));
}

std::string JsNumberToString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";  // also -0
  // Shortest round-trip digits, then ECMAScript's layout rules (Number::toString).
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(d), std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp10 = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  int k = static_cast<int>(digits.size());
  int n = exp10 + 1;
  std::string out = d < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits;
    out.append(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n));
    out += '.';
    out += digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-n), '0');
    out += digits;
  } else {
    out += digits[0];
    if (k > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += (n - 1 >= 0) ? '+' : '-';
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

namespace {

// FloatValue.toString: integral values keep ".0" (toFixed(1)), -0 is "-0.0".
std::string FloatToString(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::fmod(d, 1.0) == 0) {
    if (std::fabs(d) >= 1e21) return JsNumberToString(d);  // toFixed falls back to toString there
    char buf[400];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    return buf;
  }
  return JsNumberToString(d);
}

}  // namespace

std::string PrintString(const Value& v) {
  switch (v.kind) {
    case ValueKind::kUndefined:
    case ValueKind::kNull:
      return "undefined";  // the reference's NullValue carries JS undefined
    case ValueKind::kBool: return v.boolean ? "true" : "false";
    case ValueKind::kInteger: return JsNumberToString(v.number);
    case ValueKind::kFloat: return FloatToString(v.number);
    case ValueKind::kString: return v.s();
    case ValueKind::kArray:
    case ValueKind::kTuple:
    case ValueKind::kObject:
    case ValueKind::kKeywordArguments:
    case ValueKind::kNamespace: {
      if (v.kind == ValueKind::kKeywordArguments) FailRender("Cannot convert to JSON: KeywordArgumentsValue");
      std::string out;
      ToJson(v, JsonOptions{}, 0, false, &out);
      return out;
    }
    case ValueKind::kFunction:
      // The reference prints the JavaScript source of the function.
      FailUnsupported("printing a function or macro object");
  }
  return "";
}

std::string TakeRawString(Value&& v) {
  // use_count() is exact here: a render's values live on its own thread.
  if (v.kind == ValueKind::kString && v.str.use_count() == 1) {
    std::string taken = std::move(const_cast<std::string&>(*v.str));  // created non-const (Value::String)
    v.str.reset();
    v.kind = ValueKind::kUndefined;
    return taken;
  }
  return RawString(v);
}

void AppendRawString(const Value& v, std::string* out) {
  if (v.kind == ValueKind::kString) out->append(v.s());
  else out->append(RawString(v));
}

std::string RawString(const Value& v) {
  switch (v.kind) {
    case ValueKind::kUndefined:
    case ValueKind::kNull: return "undefined";
    case ValueKind::kBool: return v.boolean ? "true" : "false";
    case ValueKind::kInteger:
    case ValueKind::kFloat: return JsNumberToString(v.number);
    case ValueKind::kString: return v.s();
    case ValueKind::kArray:
    case ValueKind::kTuple: {
      // Array.prototype.toString: the elements' own toString, comma-joined.
      std::string out;
      for (size_t i = 0; i < v.array->size(); ++i) {
        if (i) out.push_back(',');
        out += PrintString((*v.array)[i]);
      }
      return out;
    }
    case ValueKind::kObject:
    case ValueKind::kKeywordArguments:
    case ValueKind::kNamespace: return "[object Map]";
    case ValueKind::kFunction: FailUnsupported("converting a function or macro object to a string");
  }
  return "";
}

bool Truthy(const Value& v) {
  switch (v.kind) {
    case ValueKind::kUndefined:
    case ValueKind::kNull: return false;
    case ValueKind::kBool: return v.boolean;
    case ValueKind::kInteger:
    case ValueKind::kFloat: return v.number != 0 && !std::isnan(v.number);
    case ValueKind::kString: return !v.s().empty();
    case ValueKind::kArray:
    case ValueKind::kTuple: return !v.array->empty();
    case ValueKind::kObject:
    case ValueKind::kKeywordArguments: return v.object->size() > 0;
    case ValueKind::kNamespace:  // a JS Map object: always truthy
    case ValueKind::kFunction: return true;
  }
  return false;
}

namespace {

bool IsPrimitive(const Value& v) {
  return v.kind == ValueKind::kUndefined || v.kind == ValueKind::kNull || v.kind == ValueKind::kBool ||
         v.IsNumber() || v.IsString();
}

// JS ToNumber of a string: trimmed, empty is 0, decimal/hex/Infinity forms.
double StringToNumber(std::string_view s) {
  std::string_view t = TrimJs(s);
  if (t.empty()) return 0;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X' || t[1] == 'o' || t[1] == 'O' || t[1] == 'b' || t[1] == 'B')) {
    int base = (t[1] == 'x' || t[1] == 'X') ? 16 : (t[1] == 'o' || t[1] == 'O') ? 8 : 2;
    double r = 0;
    for (char c : t.substr(2)) {
      int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : 99;
      if (d >= base) return NAN;
      r = r * base + d;
    }
    return r;
  }
  std::string_view body = t;
  bool neg = false;
  if (body[0] == '+' || body[0] == '-') {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "Infinity") return neg ? -INFINITY : INFINITY;
  // Only digits, one '.', and an exponent are valid; from_chars accepts a subset check.
  for (char c : body) {
    if (!(IsAsciiDigit(c) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) return NAN;
  }
  if (body.empty() || body[0] == 'e' || body[0] == 'E' || body == ".") return NAN;
  double r = 0;
  auto res = std::from_chars(body.data(), body.data() + body.size(), r);
  if (res.ec != std::errc() && res.ec != std::errc::result_out_of_range) return NAN;
  if (res.ptr != body.data() + body.size()) return NAN;
  return neg ? -r : r;
}

double PrimitiveToNumber(const Value& v) {
  switch (v.kind) {
    case ValueKind::kBool: return v.boolean ? 1 : 0;
    case ValueKind::kInteger:
    case ValueKind::kFloat: return v.number;
    case ValueKind::kString: return StringToNumber(v.s());
    default: return NAN;
  }
}

bool IsNullish(const Value& v) { return v.kind == ValueKind::kUndefined || v.kind == ValueKind::kNull; }

bool SameObject(const Value& a, const Value& b) {
  if (a.IsArray() && b.IsArray()) return a.array == b.array;
  if (a.object && b.object) return a.object == b.object;
  if (a.kind == ValueKind::kFunction && b.kind == ValueKind::kFunction) return a.function == b.function;
  return false;
}

}  // namespace

bool StrictEquals(const Value& a, const Value& b) {
  if (IsNullish(a) || IsNullish(b)) return IsNullish(a) && IsNullish(b);  // both carry JS undefined
  if (a.IsNumber() && b.IsNumber()) return a.number == b.number;
  if (a.kind == ValueKind::kBool && b.kind == ValueKind::kBool) return a.boolean == b.boolean;
  if (a.IsString() && b.IsString()) return a.s() == b.s();
  if (IsPrimitive(a) || IsPrimitive(b)) return false;
  return SameObject(a, b);
}

bool LooseEquals(const Value& a, const Value& b) {
  if (IsNullish(a) || IsNullish(b)) return IsNullish(a) && IsNullish(b);
  if (!IsPrimitive(a) && !IsPrimitive(b)) return SameObject(a, b);
  if (!IsPrimitive(a) || !IsPrimitive(b)) {
    // An object against a primitive: JS converts the object to its string.
    const Value& obj = IsPrimitive(a) ? b : a;
    const Value& prim = IsPrimitive(a) ? a : b;
    Value as_string = Value::String(RawString(obj));
    return LooseEquals(as_string, prim);
  }
  if (a.IsString() && b.IsString()) return a.s() == b.s();
  if (a.kind == ValueKind::kBool && b.kind == ValueKind::kBool) return a.boolean == b.boolean;
  return PrimitiveToNumber(a) == PrimitiveToNumber(b);
}

void JsonQuote(std::string_view s, bool ensure_ascii, std::string* out) {
  static const char* kHex = "0123456789abcdef";
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        default:
          if (c < 0x20 || (ensure_ascii && c == 0x7f)) {
            out->append("\\u00");
            out->push_back(kHex[c >> 4]);
            out->push_back(kHex[c & 15]);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp = DecodeUtf8(s, i, &len);
    if (ensure_ascii) {
      // \uXXXX per UTF-16 unit, as the reference escapes its JS string.
      auto emit = [&](uint32_t unit) {
        out->append("\\u");
        for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(unit >> shift) & 15]);
      };
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        emit(0xD800 + (v >> 10));
        emit(0xDC00 + (v & 0x3FF));
      } else {
        emit(cp);
      }
    } else {
      out->append(s.substr(i, len));
    }
    i += len;
  }
  out->push_back('"');
}

void ToJson(const Value& v, const JsonOptions& options, int depth, bool undefined_as_null, std::string* out) {
  if (depth > 512) Fail(StatusCode::kLimitExceeded, "tojson nesting deeper than 512");
  std::string item_sep = options.has_separators ? options.item_separator : (options.indent ? "," : ", ");
  std::string key_sep = options.has_separators ? options.key_separator : ": ";
  switch (v.kind) {
    case ValueKind::kNull: out->append("null"); return;
    case ValueKind::kUndefined: out->append(undefined_as_null ? "null" : "undefined"); return;
    case ValueKind::kInteger:
    case ValueKind::kFloat:
      out->append(std::isfinite(v.number) ? JsNumberToString(v.number) : "null");
      return;
    case ValueKind::kBool: out->append(v.boolean ? "true" : "false"); return;
    case ValueKind::kString: JsonQuote(v.s(), options.ensure_ascii, out); return;
    case ValueKind::kArray:
    case ValueKind::kTuple:
    case ValueKind::kObject:
    case ValueKind::kNamespace: {
      std::string indent_unit(static_cast<size_t>(options.indent), ' ');
      std::string base = "\n";
      for (int i = 0; i < depth; ++i) base += indent_unit;
      std::string child = base + indent_unit;
      if (v.IsArray()) {
        const auto& items = *v.array;
        out->push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out->append(item_sep);
          if (options.indent) out->append(child);
          ToJson(items[i], options, depth + 1, undefined_as_null, out);
        }
        if (options.indent && !items.empty()) out->append(base);
        out->push_back(']');
      } else {
        const auto& entries = v.object->entries();
        out->push_back('{');
        for (size_t i = 0; i < entries.size(); ++i) {
          if (i) out->append(item_sep);
          if (options.indent) out->append(child);
          JsonQuote(entries[i].first, options.ensure_ascii, out);
          out->append(key_sep);
          ToJson(entries[i].second, options, depth + 1, undefined_as_null, out);
        }
        if (options.indent && !entries.empty()) out->append(base);
        out->push_back('}');
      }
      return;
    }
    case ValueKind::kKeywordArguments:
    case ValueKind::kFunction:
      FailRender(std::string("Cannot convert to JSON: ") + ValueTypeName(v.kind));
  }
}

}  // namespace toktier::chat
