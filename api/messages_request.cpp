// Anthropic Messages -> chat completions (api/messages_request.h).
#include "api/messages_request.h"
#include "api/chat_conversation.h"
#include "api/json_tree.h"

#include <cstdio>

namespace toktier::api {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kBillingHeader = "x-anthropic-billing-header";

bool Fail(RequestError* error, std::string message, std::string param = "") {
  error->status = 400;
  error->message = std::move(message);
  error->param = std::move(param);
  return false;
}

bool IsBilling(const std::string& text, const MessagesOptions& o) {
  return o.drop_billing_header && text.compare(0, kBillingHeader.size(), kBillingHeader) == 0;
}

// Text of system blocks (a string, or text blocks), appended to *parts.
bool SystemTexts(const ordered_json& system, const MessagesOptions& o, std::vector<std::string>* parts,
                 RequestError* error, const char* param) {
  if (system.is_null()) return true;
  if (system.is_string()) {
    // A plain string is taken whole, even empty: vLLM writes a system
    // message for an inline `role: "system"` message whose text is "" (the
    // top-level system is skipped when empty; its caller checks).
    parts->push_back(system.get<std::string>());
    return true;
  }
  if (!system.is_array()) return Fail(error, std::string("'") + param + "' must be a string or a list of text blocks.", param);
  for (const auto& block : system) {
    if (!block.is_object() || block.value("type", "") != "text") {
      return Fail(error, std::string("'") + param + "' blocks must be text blocks.", param);
    }
    auto text = block.find("text");
    if (text == block.end() || !text->is_string()) return Fail(error, "a text block needs a string 'text'.", param);
    const std::string& t = text->get_ref<const std::string&>();
    if (!t.empty() && !IsBilling(t, o)) parts->push_back(t);
  }
  return true;
}

// A tool_result block of a user message -> a tool message.
// The request's strings are moved, not copied: the caller's tree is its own
// and is not read again.
bool ToolResultMessage(ordered_json& block, ordered_json* out, RequestError* error) {
  std::string text;
  auto content = block.find("content");
  if (content != block.end() && content->is_string()) {
    text = std::move(content->get_ref<std::string&>());
  } else if (content != block.end() && content->is_array()) {
    bool first = true;
    for (const auto& item : *content) {
      if (!item.is_object()) continue;  // vLLM skips what is not a block
      const std::string type = item.value("type", "");
      if (type == "text") {
        if (!first) text += '\n';
        first = false;
        auto t = item.find("text");
        if (t != item.end() && t->is_string()) text += t->get<std::string>();
      } else {
        return Fail(error, "tool_result content of type '" + type + "' is not supported on the token path (text only).",
                    "messages");
      }
    }
  } else if (content != block.end() && !content->is_null()) {
    return Fail(error, "a tool_result's 'content' must be a string or a list of blocks.", "messages");
  }
  auto id = block.find("tool_use_id");
  *out = ordered_json{{"role", "tool"},
                      {"tool_call_id", id != block.end() && id->is_string() ? id->get<std::string>() : std::string()},
                      {"content", std::move(text)}};
  return true;
}

// One Anthropic message -> chat messages appended to *out (tool results
// first, as separate tool messages, then the message itself).
bool ConvertMessage(ordered_json& msg, ordered_json* out, RequestError* error) {
  const std::string role = msg.value("role", "");
  ordered_json chat = ordered_json::object();
  chat["role"] = role;
  auto content = msg.find("content");
  if (content == msg.end()) return Fail(error, "every message needs 'content'.", "messages");
  if (content->is_string()) {
    chat["content"] = std::move(*content);
    out->push_back(std::move(chat));
    return true;
  }
  if (!content->is_array()) return Fail(error, "a message's 'content' must be a string or a list of blocks.", "messages");
  ordered_json parts = ordered_json::array();
  ordered_json tool_calls = ordered_json::array();
  std::string reasoning;
  bool has_reasoning = false;
  for (auto& block : *content) {
    if (!block.is_object()) return Fail(error, "content blocks must be objects.", "messages");
    auto type_it = block.find("type");
    if (type_it == block.end() || !type_it->is_string()) return Fail(error, "content blocks need a string 'type'.", "messages");
    const std::string& type = type_it->get_ref<const std::string&>();
    if (type == "text") {
      auto t = block.find("text");
      if (t == block.end() || !t->is_string()) return Fail(error, "a text block needs a string 'text'.", "messages");
      if (!t->get_ref<const std::string&>().empty()) {
        parts.push_back(ordered_json{{"type", "text"}, {"text", std::move(*t)}});
      }
    } else if (type == "thinking") {
      auto t = block.find("thinking");
      if (t != block.end() && t->is_string()) {
        reasoning += t->get<std::string>();
        has_reasoning = true;
      }
    } else if (type == "redacted_thinking" || type == "tool_reference") {
      // Opaque (encrypted) thinking, and references that tool results
      // expand: nothing to render, as in vLLM.
    } else if (type == "tool_use") {
      auto id = block.find("id");
      auto name = block.find("name");
      auto input = block.find("input");
      ordered_json args = input != block.end() && !input->is_null() ? *input : ordered_json::object();
      tool_calls.push_back(ordered_json{
          {"id", id != block.end() && id->is_string() ? id->get<std::string>() : std::string("call_0")},
          {"type", "function"},
          {"function",
           {{"name", name != block.end() && name->is_string() ? name->get<std::string>() : std::string()},
            {"arguments", PythonJsonDumps(args)}}}});
    } else if (type == "tool_result") {
      if (role == "user") {
        ordered_json tool;
        if (!ToolResultMessage(block, &tool, error)) return false;
        out->push_back(std::move(tool));
      } else {
        auto c = block.find("content");
        if (c != block.end() && !c->is_null() && !c->is_string()) {
          return Fail(error, "an assistant's tool_result must have string content.", "messages");
        }
        std::string text = c != block.end() && c->is_string() ? c->get<std::string>() : "";
        parts.push_back(ordered_json{{"type", "text"}, {"text", "Tool result: " + text}});
      }
    } else if (type == "image" || type == "document" || type == "search_result" || type == "container_upload") {
      return Fail(error, "content blocks of type '" + type + "' are not supported on the token path (text only).",
                  "messages");
    } else {
      return Fail(error, "unknown content block type '" + type + "'.", "messages");
    }
  }
  if (has_reasoning) chat["reasoning"] = std::move(reasoning);
  if (!tool_calls.empty()) chat["tool_calls"] = std::move(tool_calls);
  if (parts.size() == 1) {
    chat["content"] = std::move(parts[0]["text"]);
  } else if (!parts.empty()) {
    chat["content"] = std::move(parts);
  }
  // A user message that held only tool results has become those tool messages.
  if (!(role == "user" && !chat.contains("content"))) out->push_back(std::move(chat));
  return true;
}

void AppendUtf16Escape(std::string& out, unsigned u) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", u & 0xFFFFu);
  out += buf;
}

void DumpString(const std::string& s, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20 || c == 0x7f) AppendUtf16Escape(out, c); else out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // Valid UTF-8 (the body was checked): decode one code point.
    unsigned cp = 0;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0F : 0x1F);
    for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      AppendUtf16Escape(out, 0xD800 + (cp >> 10));
      AppendUtf16Escape(out, 0xDC00 + (cp & 0x3FF));
    } else {
      AppendUtf16Escape(out, cp);
    }
  }
  out += '"';
}

void Dump(const ordered_json& v, std::string& out) {
  switch (v.type()) {
    case ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (const auto& [k, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        DumpString(k, out);
        out += ": ";
        Dump(item, out);
      }
      out += '}';
      return;
    }
    case ordered_json::value_t::array: {
      out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += ", ";
        Dump(v[i], out);
      }
      out += ']';
      return;
    }
    case ordered_json::value_t::string: DumpString(v.get_ref<const std::string&>(), out); return;
    case ordered_json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case ordered_json::value_t::null: out += "null"; return;
    default: out += v.dump(); return;  // numbers: shortest round-trip form, as Python's repr
  }
}

// metadata.user_id: Claude Code writes a JSON object text with session_id.
std::string SessionOfMetadata(const ordered_json& body) {
  auto md = body.find("metadata");
  if (md == body.end() || !md->is_object()) return "";
  auto uid = md->find("user_id");
  if (uid == md->end() || !uid->is_string()) return "";
  const std::string& s = uid->get_ref<const std::string&>();
  if (s.empty() || s.front() != '{' || s.size() > 4096) return "";
  ordered_json parsed = ordered_json::parse(s, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return "";
  auto sid = parsed.find("session_id");
  return sid != parsed.end() && sid->is_string() ? sid->get<std::string>() : "";
}

}  // namespace

std::string PythonJsonDumps(const ordered_json& value) {
  std::string out;
  Dump(value, out);
  return out;
}

std::string CountTokensJson(size_t input_tokens) {
  return "{\"input_tokens\":" + std::to_string(input_tokens) + "}";
}

bool ParseMessagesRequest(std::string_view body, const MessagesOptions& options, bool count_tokens,
                          MessagesRequest* out, RequestError* error, size_t max_depth,
                          std::shared_ptr<void>* leftovers) {
  ordered_json b;
  const JsonParseOutcome parsed = ParseBoundedJson(body, max_depth, &b);
  if (parsed == JsonParseOutcome::kTooDeep) return Fail(error, TooDeepMessage(max_depth));
  if (parsed != JsonParseOutcome::kOk || !b.is_object()) return Fail(error, "The request body must be one JSON object.");
  auto model = b.find("model");
  if (model == b.end() || !model->is_string()) return Fail(error, "model: Field required (a string).", "model");
  out->model = model->get<std::string>();
  auto messages = b.find("messages");
  if (messages == b.end() || !messages->is_array() || messages->empty()) {
    return Fail(error, "messages: a non-empty list is required.", "messages");
  }
  if (!count_tokens) {
    auto mt = b.find("max_tokens");
    if (mt == b.end() || !mt->is_number_integer() || mt->get<int64_t>() < 1) {
      return Fail(error, "max_tokens: Field required (a positive integer).", "max_tokens");
    }
  }
  if (auto s = b.find("stream"); s != b.end() && !s->is_null()) {
    if (!s->is_boolean()) return Fail(error, "stream: must be a boolean.", "stream");
    out->stream = !count_tokens && s->get<bool>();
  }

  // The system prompt: the top-level system and every system message of
  // the conversation, joined (vLLM moves mid-conversation system text up).
  std::vector<std::string> system;
  if (auto s = b.find("system"); s != b.end() && !(s->is_string() && s->get_ref<const std::string&>().empty()) &&
                                  !SystemTexts(*s, options, &system, error, "system")) {
    return false;
  }
  for (const auto& m : *messages) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return Fail(error, "every message must be an object with a string 'role'.", "messages");
    }
    const std::string& role = m["role"].get_ref<const std::string&>();
    if (role == "system") {
      if (!SystemTexts(m.value("content", ordered_json()), options, &system, error, "messages")) return false;
    } else if (role != "user" && role != "assistant") {
      return Fail(error, "messages: role must be 'user' or 'assistant' (got '" + role + "').", "messages");
    }
  }
  ordered_json chat_messages = ordered_json::array();
  if (!system.empty()) {
    std::string joined;
    for (const auto& s : system) joined += s;
    chat_messages.push_back(ordered_json{{"role", "system"}, {"content", std::move(joined)}});
  }
  for (auto& m : *messages) {
    if (m["role"] == "system") continue;
    if (!ConvertMessage(m, &chat_messages, error)) return false;
  }

  ordered_json c = ObjectWithRoom(16);
  c["model"] = out->model;
  c["messages"] = std::move(chat_messages);
  if (!count_tokens) {
    c["max_tokens"] = b["max_tokens"];
    if (auto st = b.find("stop_sequences"); st != b.end() && !st->is_null()) {
      if (!st->is_array()) return Fail(error, "stop_sequences: must be a list of strings.", "stop_sequences");
      for (const auto& s : *st) {
        if (!s.is_string()) return Fail(error, "stop_sequences: must be a list of strings.", "stop_sequences");
        out->stop_sequences.push_back(s.get<std::string>());
      }
      c["stop"] = *st;
    }
    for (const char* k : {"temperature", "top_p", "top_k"}) {
      if (auto it = b.find(k); it != b.end() && !it->is_null()) {
        if (!it->is_number()) return Fail(error, std::string(k) + ": must be a number.", k);
        c[k] = *it;
      }
    }
    if (out->stream) {
      c["stream"] = true;
      c["stream_options"] = ordered_json{{"include_usage", true}};
    }
  }
  if (auto tc = b.find("tool_choice"); tc != b.end() && !tc->is_null()) {
    const std::string type = tc->is_object() ? tc->value("type", "") : "";
    if (type == "auto") {
      c["tool_choice"] = "auto";
    } else if (type == "none") {
      c["tool_choice"] = "none";
    } else if (type == "any" || type == "tool") {
      return Fail(error, "tool_choice '" + type + "' (a forced tool call) is not supported on the token path.",
                  "tool_choice");
    } else {
      return Fail(error, "tool_choice: type must be auto, any, tool or none.", "tool_choice");
    }
  }
  if (auto tools = b.find("tools"); tools != b.end() && !tools->is_null()) {
    if (!tools->is_array()) return Fail(error, "tools: must be a list.", "tools");
    ordered_json list = ordered_json::array();
    for (const auto& t : *tools) {
      if (!t.is_object()) return Fail(error, "tools: every tool must be an object.", "tools");
      auto name = t.find("name");
      if (name == t.end() || !name->is_string()) return Fail(error, "tools: every tool needs a string 'name'.", "tools");
      // Anthropic's server tools (web_search_20250305, bash_..., with a
      // "type" other than "custom") are nothing a local model can call.
      if (auto type = t.find("type"); type != t.end() && type->is_string() && *type != "custom") {
        return Fail(error, "tools: server tool '" + type->get<std::string>() + "' is not available on this endpoint.",
                    "tools");
      }
      ordered_json fn = ordered_json::object();
      fn["name"] = *name;
      if (auto d = t.find("description"); d != t.end()) fn["description"] = *d;
      auto schema = t.find("input_schema");
      if (schema == t.end() || !schema->is_object()) return Fail(error, "tools: every tool needs an 'input_schema' object.", "tools");
      fn["parameters"] = *schema;
      // Tool search (Claude Code's deferred MCP tools): vLLM hands the flag
      // to the template with the tool, for templates that keep such tools
      // out of the prompt; the others write it out with the tool.
      if (auto defer = t.find("defer_loading"); defer != t.end() && !defer->is_null()) {
        if (!defer->is_boolean()) return Fail(error, "tools: defer_loading must be a boolean.", "tools");
        fn["defer_loading"] = *defer;
      }
      list.push_back(ordered_json{{"type", "function"}, {"function", std::move(fn)}});
    }
    if (!list.empty()) {
      c["tools"] = std::move(list);
      if (!c.contains("tool_choice")) c["tool_choice"] = "auto";
    }
  }
  ordered_json kwargs = ordered_json::object();
  if (auto kw = b.find("chat_template_kwargs"); kw != b.end() && kw->is_object()) kwargs = *kw;
  // output_config.effort is the chat request's reasoning_effort (Claude
  // Code sends it on every turn): the template sees it, and enable_thinking
  // follows it unless the request's own kwargs set that.
  if (auto oc = b.find("output_config"); oc != b.end() && oc->is_object()) {
    if (auto effort = oc->find("effort"); effort != oc->end() && !effort->is_null()) {
      if (!effort->is_string()) return Fail(error, "output_config.effort: must be a string.", "output_config");
      ApplyReasoningEffort(effort->get<std::string>(), &kwargs);
    }
  }
  if (!kwargs.empty()) c["chat_template_kwargs"] = std::move(kwargs);
  out->session_id = SessionOfMetadata(b);
  out->chat = std::move(c);
  if (leftovers) *leftovers = std::make_shared<ordered_json>(std::move(b));
  return true;
}

}  // namespace toktier::api
