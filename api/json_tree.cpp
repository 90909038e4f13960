// simdjson on-demand -> nlohmann::ordered_json (api/json_tree.h). Built
// with the same kernel flags as completions.cpp (api/CMakeLists.txt), and
// walks with the same per-thread parser.
#include "api/json_tree.h"

#include "api/json_string.h"
#include "api/simdjson_parser.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace toktier::api {
namespace {

namespace od = simdjson::ondemand;
using nlohmann::ordered_json;

// `depth`: the nesting of `v` (the document's value is 1).
FastTree Build(od::value v, size_t depth, size_t max_depth, ordered_json* out) {
  constexpr FastTree kNo = FastTree::kNotVouched;
  od::json_type type;
  if (v.type().get(type)) return kNo;
  switch (type) {
    case od::json_type::object: {
      // The walk recurses once per level: the bound is checked before.
      if (depth > max_depth) return FastTree::kTooDeep;
      od::object object;
      if (v.get_object().get(object)) return kNo;
      // The fields are gathered first and the object sized once (ObjectWithRoom).
      std::vector<std::pair<std::string, ordered_json>> fields;
      for (auto field_result : object) {
        od::field field;
        if (std::move(field_result).get(field)) return kNo;
        std::string_view key;
        if (field.unescaped_key().get(key)) return kNo;
        ordered_json child;
        if (FastTree r = Build(field.value(), depth + 1, max_depth, &child); r != FastTree::kBuilt) return r;
        fields.emplace_back(std::string(key), std::move(child));
      }
      *out = ObjectWithRoom(fields.size());
      // nlohmann's parser: operator[] keeps a repeated key's first
      // position and takes its last value.
      for (auto& [key, child] : fields) (*out)[std::move(key)] = std::move(child);
      return FastTree::kBuilt;
    }
    case od::json_type::array: {
      if (depth > max_depth) return FastTree::kTooDeep;
      od::array array;
      if (v.get_array().get(array)) return kNo;
      *out = ordered_json::array();
      for (auto element_result : array) {
        od::value element;
        if (std::move(element_result).get(element)) return kNo;
        ordered_json child;
        if (FastTree r = Build(element, depth + 1, max_depth, &child); r != FastTree::kBuilt) return r;
        out->push_back(std::move(child));
      }
      return FastTree::kBuilt;
    }
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return kNo;
      *out = std::string(s);
      return FastTree::kBuilt;
    }
    case od::json_type::number: {
      // nlohmann's own reading of the token (integer, unsigned or float,
      // -0, overflow): numbers are few in a chat body.
      std::string_view token = v.raw_json_token();
      while (!token.empty() && (token.back() == ' ' || token.back() == '\t' || token.back() == '\n' ||
                                token.back() == '\r')) {
        token.remove_suffix(1);
      }
      // simdjson's token runs to the next structural character, so bytes no
      // number holds can trail it; nlohmann would read a NUL there as the end
      // of its input and vouch for "0<NUL><junk>", which its parse of the
      // whole body refuses (found by fuzz_chat_request).
      if (token.empty() || token.find_first_not_of("0123456789+-.eE") != std::string_view::npos) return kNo;
      *out = ordered_json::parse(token.begin(), token.end(), nullptr, /*allow_exceptions=*/false);
      return !out->is_discarded() && out->is_number() ? FastTree::kBuilt : kNo;
    }
    case od::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b)) return kNo;
      *out = b;
      return FastTree::kBuilt;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) || !is_null) return kNo;
      *out = nullptr;
      return FastTree::kBuilt;
    }
  }
  return kNo;
}

// `skip`: a key left out of this object (not of nested ones); "" = none.
void Dump(const ordered_json& j, std::string* out, std::string_view skip = {}) {
  switch (j.type()) {
    case nlohmann::detail::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!skip.empty() && k == skip) continue;
        if (!first) out->push_back(',');
        first = false;
        out->push_back('"');
        AppendEscapedJsonString(k, out);
        out->append("\":");
        Dump(v, out);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::detail::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& v : j) {
        if (!first) out->push_back(',');
        first = false;
        Dump(v, out);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::detail::value_t::string:
      out->push_back('"');
      AppendEscapedJsonString(j.get_ref<const std::string&>(), out);
      out->push_back('"');
      return;
    default:  // numbers, booleans, null: nlohmann's own forms
      out->append(j.dump());
  }
}

}  // namespace

std::string DumpJsonTree(const ordered_json& tree, std::string_view skip) {
  std::string out;
  Dump(tree, &out, skip);
  return out;
}

FastTree ParseJsonTreeFast(std::string_view text, size_t max_depth, ordered_json* out) {
  constexpr FastTree kNo = FastTree::kNotVouched;
  // nlohmann skips a UTF-8 byte-order mark; leave that to it.
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) return kNo;
  simdjson::padded_string padded(text);
  od::document doc;
  if (ThreadJsonParser().iterate(padded).get(doc)) return kNo;
  od::json_type type;
  if (doc.type().get(type) || (type != od::json_type::object && type != od::json_type::array)) return kNo;
  od::value root;
  if (doc.get_value().get(root)) return kNo;
  if (FastTree r = Build(root, 1, max_depth, out); r != FastTree::kBuilt) return r;
  // Anything after the value but whitespace: nlohmann refuses the body.
  const char* rest = nullptr;
  return doc.current_location().get(rest) != simdjson::SUCCESS ? FastTree::kBuilt : kNo;
}

}  // namespace toktier::api
