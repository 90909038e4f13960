// simdjson on-demand -> nlohmann::ordered_json (api/json_tree.h). Built
// with the same kernel flags as completions.cpp (api/CMakeLists.txt), and
// walks with the same per-thread parser.
#include "api/json_tree.h"

#include "api/json_string.h"
#include "api/simdjson_parser.h"

#include <cstring>
#include <string>
#include <utility>

namespace toktier::api {
namespace {

namespace od = simdjson::ondemand;
using nlohmann::ordered_json;

bool Build(od::value v, ordered_json* out) {
  od::json_type type;
  if (v.type().get(type)) return false;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (v.get_object().get(object)) return false;
      *out = ordered_json::object();
      for (auto field_result : object) {
        od::field field;
        if (std::move(field_result).get(field)) return false;
        std::string_view key;
        if (field.unescaped_key().get(key)) return false;
        ordered_json child;
        if (!Build(field.value(), &child)) return false;
        // nlohmann's parser: operator[] keeps a repeated key's first
        // position and takes its last value.
        (*out)[std::string(key)] = std::move(child);
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (v.get_array().get(array)) return false;
      *out = ordered_json::array();
      for (auto element_result : array) {
        od::value element;
        if (std::move(element_result).get(element)) return false;
        ordered_json child;
        if (!Build(element, &child)) return false;
        out->push_back(std::move(child));
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view s;
      if (v.get_string().get(s)) return false;
      *out = std::string(s);
      return true;
    }
    case od::json_type::number: {
      // nlohmann's own reading of the token (integer, unsigned or float,
      // -0, overflow): numbers are few in a chat body.
      const std::string_view token = v.raw_json_token();
      *out = ordered_json::parse(token.begin(), token.end(), nullptr, /*allow_exceptions=*/false);
      return !out->is_discarded() && out->is_number();
    }
    case od::json_type::boolean: {
      bool b = false;
      if (v.get_bool().get(b)) return false;
      *out = b;
      return true;
    }
    case od::json_type::null: {
      bool is_null = false;
      if (v.is_null().get(is_null) || !is_null) return false;
      *out = nullptr;
      return true;
    }
  }
  return false;
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

bool ParseJsonTreeFast(std::string_view text, ordered_json* out) {
  // nlohmann skips a UTF-8 byte-order mark; leave that to it.
  if (text.size() >= 3 && std::memcmp(text.data(), "\xEF\xBB\xBF", 3) == 0) return false;
  simdjson::padded_string padded(text);
  od::document doc;
  if (ThreadJsonParser().iterate(padded).get(doc)) return false;
  od::json_type type;
  if (doc.type().get(type) || (type != od::json_type::object && type != od::json_type::array)) return false;
  od::value root;
  if (doc.get_value().get(root)) return false;
  if (!Build(root, out)) return false;
  // Anything after the value but whitespace: nlohmann refuses the body.
  const char* rest = nullptr;
  return doc.current_location().get(rest) != simdjson::SUCCESS;
}

}  // namespace toktier::api
