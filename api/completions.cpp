#include "api/completions.h"

#include "api/simdjson_parser.h"

#include <cassert>
#include <charconv>

namespace toktier::api {
namespace {

namespace od = simdjson::ondemand;

bool Fail(RequestError* e, std::string msg, std::string param = "") {
  e->status = 400;
  e->message = std::move(msg);
  e->param = std::move(param);
  return false;
}

void AppendJsonString(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

// Position of the end of the value just consumed: the next structural char
// with trailing whitespace trimmed.
size_t ValueEnd(const char* base, const char* loc) {
  size_t end = static_cast<size_t>(loc - base);
  while (end > 0 && (base[end - 1] == ' ' || base[end - 1] == '\n' || base[end - 1] == '\r' || base[end - 1] == '\t'))
    --end;
  return end;
}

// The byte range of a string value's contents (between its quotes), without
// unescaping it. raw_json_token() does not consume the value; the iteration
// skips it afterwards.
bool RawStringRange(od::value& v, const char* base, CompletionRequest::RawRange* r) {
  std::string_view tok = v.raw_json_token();
  while (!tok.empty() && (tok.back() == ' ' || tok.back() == '\n' || tok.back() == '\r' || tok.back() == '\t'))
    tok.remove_suffix(1);
  if (tok.size() < 2 || tok.front() != '"' || tok.back() != '"') return false;
  r->begin = static_cast<size_t>(tok.data() - base) + 1;
  r->end = r->begin + tok.size() - 2;
  return true;
}

// `body` itself when its capacity holds simdjson's padding (callers reserve
// it), else a padded copy in *scratch: the slow fallback.
const std::string& Padded(const std::string& body, std::string* scratch) {
  if (body.capacity() >= body.size() + simdjson::SIMDJSON_PADDING) return body;
  scratch->reserve(body.size() + simdjson::SIMDJSON_PADDING);
  scratch->assign(body);
  return *scratch;
}

}  // namespace

size_t JsonPadding() { return simdjson::SIMDJSON_PADDING; }

bool ParseCompletionRequest(const std::string& unpadded, CompletionRequest* out, RequestError* error,
                            size_t max_depth) {
  // Offsets are the same in a padded copy, so the ranges hold for `unpadded`.
  std::string scratch;
  const std::string& body = Padded(unpadded, &scratch);
  const char* base = body.data();
  od::document doc;
  if (ThreadJsonParser().iterate(base, body.size(), body.capacity()).get(doc)) {
    return Fail(error, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using "
                       "your HTTP library correctly. The OpenAI API expects a JSON payload.)");
  }
  od::object obj;
  if (doc.get_object().get(obj)) return Fail(error, "The request body must be a JSON object.");
  bool have_model = false, have_prompt = false;
  for (auto field_res : obj) {
    od::field field;
    if (std::move(field_res).get(field)) return Fail(error, "We could not parse the JSON body of your request.");
    std::string_view key;
    if (field.unescaped_key().get(key)) return Fail(error, "We could not parse the JSON body of your request.");
    od::value v = field.value();
    if (key == "model") {
      std::string_view s;
      if (v.get_string().get(s)) return Fail(error, "'model' must be a string.", "model");
      out->model.assign(s);
      have_model = true;
    } else if (key == "stream") {
      od::json_type t;
      if (v.type().get(t)) return Fail(error, "We could not parse the JSON body of your request.");
      if (t == od::json_type::null) continue;
      if (v.get_bool().get(out->stream)) return Fail(error, "'stream' must be a boolean.", "stream");
    } else if (key == "add_special_tokens") {
      if (v.get_bool().get(out->add_special_tokens))
        return Fail(error, "'add_special_tokens' must be a boolean.", "add_special_tokens");
      out->has_add_special_tokens = true;
    } else if (key == "prompt") {
      if (have_prompt) return Fail(error, "duplicate 'prompt' field.", "prompt");
      have_prompt = true;
      out->prompts.clear();
      od::json_type t;
      if (v.type().get(t)) return Fail(error, "We could not parse the JSON body of your request.");
      const char* start = v.raw_json_token().data();
      out->prompt_begin = static_cast<size_t>(start - base);
      if (t == od::json_type::string) {
        CompletionRequest::RawRange r;
        if (!RawStringRange(v, base, &r)) return Fail(error, "'prompt' is not a valid string.", "prompt");
        if (r.begin == r.end) return Fail(error, "'prompt' must not be empty.", "prompt");
        out->kind = PromptKind::kString;
        out->prompts.push_back(r);
        out->prompt_end = r.end + 1;  // the closing quote
        continue;
      } else if (t == od::json_type::array) {
        od::array arr;
        if (v.get_array().get(arr)) return Fail(error, "'prompt' is not a valid array.", "prompt");
        size_t n = 0, strings = 0, numbers = 0, lists = 0;
        for (auto el_res : arr) {
          od::value el;
          if (std::move(el_res).get(el)) return Fail(error, "We could not parse the JSON body of your request.");
          od::json_type et;
          if (el.type().get(et)) return Fail(error, "We could not parse the JSON body of your request.");
          ++n;
          if (et == od::json_type::string) {
            CompletionRequest::RawRange r;
            if (!RawStringRange(el, base, &r)) return Fail(error, "'prompt' is not a valid array.", "prompt");
            if (r.begin == r.end) return Fail(error, "'prompt' must not contain empty strings.", "prompt");
            out->prompts.push_back(r);
            ++strings;
          } else if (et == od::json_type::number) {
            int64_t x;
            if (el.get_int64().get(x) || x < 0 || x > 0xffffffffLL)
              return Fail(error, "'prompt' token IDs must be non-negative integers.", "prompt");
            ++numbers;
          } else if (et == od::json_type::array) {
            od::array inner;
            if (el.get_array().get(inner)) return Fail(error, "'prompt' is not a valid array.", "prompt");
            size_t m = 0;
            for (auto x_res : inner) {
              int64_t x;
              if (std::move(x_res).get_int64().get(x) || x < 0 || x > 0xffffffffLL)
                return Fail(error, "'prompt' token IDs must be non-negative integers.", "prompt");
              ++m;
            }
            if (m == 0) return Fail(error, "'prompt' must not contain empty token lists.", "prompt");
            ++lists;
          } else {
            return Fail(error, "'prompt' must be a string, an array of strings, or an array of token IDs.", "prompt");
          }
        }
        if (n == 0) return Fail(error, "'prompt' must not be empty.", "prompt");
        if (strings != n && numbers != n && lists != n)
          return Fail(error, "'prompt' must not mix strings and token IDs.", "prompt");
        out->kind = strings == n ? PromptKind::kStringList : PromptKind::kTokens;
      } else {
        return Fail(error, "'prompt' must be a string, an array of strings, or an array of token IDs.", "prompt");
      }
      const char* loc = nullptr;
      if (doc.current_location().get(loc)) return Fail(error, "We could not parse the JSON body of your request.");
      out->prompt_end = ValueEnd(base, loc);
      assert(out->prompt_end > out->prompt_begin && out->prompt_end <= body.size());
    }
    // Other fields are skipped (the engine validates them).
  }
  // Exactly one JSON value: anything after it but whitespace (a second
  // object, say) would reach the engine unseen by this parser.
  const char* rest = nullptr;
  if (doc.current_location().get(rest) == simdjson::SUCCESS) {
    return Fail(error, "We could not parse the JSON body of your request: unexpected data after the JSON value.");
  }
  if (!have_model) return Fail(error, "you must provide a model parameter", "model");
  if (!have_prompt) return Fail(error, "'prompt' is a required property", "prompt");
  // Nesting, the same bound as every API (the engine and any later reader
  // of this body may recurse). The prompt, most of the bytes, is at most
  // three levels deep (an array of ID lists inside the object): only the
  // bytes around it are scanned, those after it one level down (inside the
  // top-level object).
  if (max_depth < 3 || JsonNestingExceeds({base, out->prompt_begin}, max_depth) ||
      JsonNestingExceeds({base + out->prompt_end, unpadded.size() - out->prompt_end}, max_depth - 1)) {
    return Fail(error, TooDeepMessage(max_depth));
  }
  return true;
}

std::string ModelOfJsonBody(const std::string& unpadded) {
  if (unpadded.empty()) return "";
  std::string scratch;
  const std::string& body = Padded(unpadded, &scratch);
  od::document doc;
  od::object obj;
  std::string_view model;
  if (ThreadJsonParser().iterate(body.data(), body.size(), body.capacity()).get(doc) || doc.get_object().get(obj) ||
      obj.find_field_unordered("model").get_string().get(model)) {
    return "";
  }
  return std::string(model);
}

std::string_view ErrorTypeName(ErrorType type) {
  switch (type) {
    case ErrorType::kInvalidRequest: return "invalid_request_error";
    case ErrorType::kServer: return "server_error";
    case ErrorType::kTimeout: return "timeout";
  }
  return "server_error";
}

std::string ErrorJson(const RequestError& e) {
  std::string out = "{\"error\":{\"message\":";
  AppendJsonString(out, e.message);
  out += ",\"type\":";
  AppendJsonString(out, ErrorTypeName(e.type));
  out += ",\"param\":";
  if (e.param.empty()) out += "null"; else AppendJsonString(out, e.param);
  out += ",\"code\":";
  if (e.code.empty()) out += "null"; else AppendJsonString(out, e.code);
  out += "}}";
  return out;
}

void AppendIdList(std::string& out, const uint32_t* ids, size_t n) {
  size_t old = out.size();
  out.resize(old + n * 11);
  char* p = out.data() + old;
  char* end = out.data() + out.size();
  for (size_t i = 0; i < n; ++i) {
    if (i) *p++ = ',';
    p = std::to_chars(p, end, ids[i]).ptr;
  }
  out.resize(static_cast<size_t>(p - out.data()));
}

od::parser& ThreadJsonParser() {
  thread_local od::parser parser;
  return parser;
}

}  // namespace toktier::api
