// Completions -> chat completions translation (see chat_response.h). One
// incremental splitter turns a choice's text into reasoning, content and
// tool-call pieces; the non-streaming path feeds it the whole text at once,
// so a stream's deltas always add up to the non-streaming message.
#include "api/chat_response.h"

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "api/json_limits.h"

namespace toktier::api {
namespace {

using Json = nlohmann::ordered_json;  // ordered: output keys keep the order they are written in

constexpr std::string_view kSpaces = " \t\r\n";
constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";
constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
// A longer line without '\n' is not an engine's SSE: refuse it rather than grow.
constexpr size_t kMaxLineBytes = size_t{16} << 20;

// What a choice's text splits into, in order.
struct Piece {
  enum class Kind { kContent, kReasoning, kToolCall };
  Kind kind = Kind::kContent;
  std::string text;       // kContent, kReasoning
  std::string name;       // kToolCall
  std::string arguments;  // kToolCall: JSON text
};
using Pieces = std::vector<Piece>;

void AppendText(Pieces* pieces, Piece::Kind kind, std::string_view text) {
  if (text.empty()) return;
  if (!pieces->empty() && pieces->back().kind == kind) {
    pieces->back().text += text;
  } else {
    pieces->push_back(Piece{kind, std::string(text), {}, {}});
  }
}

std::string_view Trim(std::string_view s) {
  size_t first = s.find_first_not_of(kSpaces);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(kSpaces) + 1 - first);
}

// Where the suffix of `text` starts that is a proper prefix of `marker`
// (text.size() when none): those bytes wait until later text decides. Every
// marker starts with ASCII '<', so the cut is always at a character boundary.
size_t HeldSuffixStart(std::string_view text, std::string_view marker) {
  size_t from = text.size() >= marker.size() ? text.size() - marker.size() + 1 : 0;
  for (size_t i = from; i < text.size(); ++i) {
    if (text[i] == marker[0] && marker.starts_with(text.substr(i))) return i;
  }
  return text.size();
}

// Where to resume searching `buffer` for `marker` once it was not found in it.
size_t ResumeSearchAt(const std::string& buffer, std::string_view marker) {
  return buffer.size() >= marker.size() ? buffer.size() - marker.size() + 1 : 0;
}

std::string Dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// Engine answers and the model's tool-call text are untrusted JSON: the
// same nesting bound as client bodies (a too-deep one is discarded, i.e.
// malformed), since the translation copies and dumps what it parses.
Json ParseJson(std::string_view text) {
  Json j;
  (void)ParseBoundedJson(text, kDefaultJsonMaxDepth, &j);
  return j;
}

// Tool arguments as the chat API carries them: JSON text inside a string. An
// argument string from the model is taken as already being that text.
bool ArgumentsText(const Json& arguments, std::string* out) {
  if (arguments.is_string()) {
    *out = arguments.get<std::string>();
  } else if (arguments.is_object()) {
    *out = Dump(arguments);
  } else {
    return false;
  }
  return true;
}

// {"name": str, <one of argument_keys>: object-or-string}; a missing
// arguments key is "{}" only when allowed (inside explicit call tags).
bool ParseJsonCall(const Json& call, bool arguments_required, Piece* out) {
  if (!call.is_object()) return false;
  auto name = call.find("name");
  if (name == call.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) return false;
  auto arguments = call.find("arguments");
  if (arguments == call.end()) arguments = call.find("parameters");
  out->kind = Piece::Kind::kToolCall;
  out->name = name->get<std::string>();
  out->arguments = "{}";
  if (arguments == call.end()) return !arguments_required;
  return ArgumentsText(*arguments, &out->arguments);
}

bool ParseHermesCall(std::string_view body, Pieces* calls) {
  Piece call;
  if (!ParseJsonCall(ParseJson(Trim(body)), /*arguments_required=*/false, &call)) return false;
  calls->push_back(std::move(call));
  return true;
}

// Llama 3 JSON calls: one object, or several joined by ';' (split outside
// JSON strings). Arguments are required so that a plain JSON answer with a
// "name" field is not taken for a call.
bool ParseLlama3Calls(std::string_view content, Pieces* calls) {
  content = Trim(content);
  if (!content.starts_with('{')) return false;
  bool in_string = false;
  bool escaped = false;
  size_t start = 0;
  for (size_t i = 0; i <= content.size(); ++i) {
    if (i < content.size()) {
      char c = content[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
        continue;
      }
      if (c == '"') in_string = true;
      if (c != ';') continue;
    }
    std::string_view part = Trim(content.substr(start, i - start));
    start = i + 1;
    if (part.empty()) continue;  // a trailing ';'
    Piece call;
    if (!ParseJsonCall(ParseJson(part), /*arguments_required=*/true, &call)) return false;
    calls->push_back(std::move(call));
  }
  return !calls->empty();
}

// One DeepSeek call block (between call begin and end): V3's
// "function<sep>NAME\n```json\nARGS\n```", or V3.1's "NAME<sep>ARGS".
bool ParseDeepSeekCall(std::string_view block, Piece* out) {
  size_t sep = block.find(kDeepSeekSep);
  if (sep == std::string_view::npos) return false;
  std::string_view head = Trim(block.substr(0, sep));
  std::string_view tail = block.substr(sep + kDeepSeekSep.size());
  std::string_view name = head;
  std::string_view arguments = tail;
  size_t fence = tail.find("\n```");
  if (head == "function" && fence != std::string_view::npos) {
    name = Trim(tail.substr(0, fence));
    std::string_view fenced = tail.substr(fence + 4);
    size_t info_end = fenced.find('\n');  // past the fence's info string ("json")
    if (info_end == std::string_view::npos) return false;
    fenced.remove_prefix(info_end + 1);
    size_t close = fenced.rfind("```");
    if (close == std::string_view::npos || !Trim(fenced.substr(close + 3)).empty()) return false;
    arguments = fenced.substr(0, close);
  }
  Json parsed = ParseJson(Trim(arguments));
  if (name.empty() || !parsed.is_object()) return false;
  out->kind = Piece::Kind::kToolCall;
  out->name = std::string(name);
  out->arguments = Dump(parsed);
  return true;
}

// The DeepSeek section between calls begin and calls end: call blocks, with
// whitespace between them allowed.
bool ParseDeepSeekCalls(std::string_view section, Pieces* calls) {
  while (true) {
    section = section.substr(std::min(section.size(), section.find_first_not_of(kSpaces)));
    if (section.empty()) return !calls->empty();
    if (!section.starts_with(kDeepSeekCallBegin)) return false;
    section.remove_prefix(kDeepSeekCallBegin.size());
    size_t end = section.find(kDeepSeekCallEnd);
    Piece call;
    if (end == std::string_view::npos || !ParseDeepSeekCall(section.substr(0, end), &call)) return false;
    calls->push_back(std::move(call));
    section.remove_prefix(end + kDeepSeekCallEnd.size());
  }
}

// Splits one choice's text, fed in pieces, into reasoning, content and tool
// calls. Text that could still turn out to be (part of) a marker or a call is
// held back until later text or Finish decides.
class ChoiceTextSplitter {
 public:
  explicit ChoiceTextSplitter(const ChatTranslateOptions& options)
      : think_open_in_prompt_(options.think_open_in_prompt),
        tools_(options.tools),
        think_state_(options.reasoning ? ThinkState::kStart : ThinkState::kContent),
        content_state_(options.tools == ToolCallFormat::kLlama3Json ? ContentState::kDeciding
                                                                    : ContentState::kText) {}

  void Feed(std::string_view text, Pieces* out) {
    if (think_state_ == ThinkState::kContent) {
      FeedContent(text, out);
      return;
    }
    think_buffer_ += text;
    ProcessThink(/*at_end=*/false, out);
  }

  void Finish(Pieces* out) {
    if (think_state_ != ThinkState::kContent) ProcessThink(/*at_end=*/true, out);
    ProcessContent(/*at_end=*/true, out);
    held_spaces_.clear();  // the content's trailing whitespace (Hermes trims it)
  }

 private:
  enum class ThinkState {
    kStart,           // deciding whether the text opens with "<think>"
    kMaybeReasoning,  // it did not: reasoning only if a "</think>" comes, so all is held
    kReasoning,       // inside <think>
    kContent,         // past reasoning (or reasoning off)
  };
  enum class ContentState {
    kDeciding,  // kLlama3Json: waiting for the first non-space character
    kText,      // plain content, scanning for a call block's opening marker
    kBlock,     // inside a call block (Hermes) or section (DeepSeek): held
    kHoldAll,   // kLlama3Json content that starts with '{': decided at the end
  };

  void ProcessThink(bool at_end, Pieces* out) {
    std::string& buffer = think_buffer_;
    if (think_state_ == ThinkState::kStart) {
      size_t first = buffer.find_first_not_of(kSpaces);
      std::string_view rest = first == std::string::npos ? "" : std::string_view(buffer).substr(first);
      if (rest.starts_with(kThinkOpen)) {
        buffer.erase(0, first + kThinkOpen.size());  // the whitespace before <think> belongs to neither
        think_state_ = ThinkState::kReasoning;
      } else if (!at_end && kThinkOpen.starts_with(rest)) {
        return;
      } else {
        think_state_ = think_open_in_prompt_ ? ThinkState::kReasoning : ThinkState::kMaybeReasoning;
      }
    }
    size_t close = buffer.find(kThinkClose, think_scanned_);
    if (close != std::string::npos) {
      AppendText(out, Piece::Kind::kReasoning, std::string_view(buffer).substr(0, close));
      std::string after = buffer.substr(close + kThinkClose.size());
      buffer.clear();
      think_state_ = ThinkState::kContent;
      strip_newlines_ = true;  // "</think>\n\n" separates the answer from the reasoning
      FeedContent(after, out);
      return;
    }
    if (think_state_ == ThinkState::kMaybeReasoning) {
      if (at_end) {  // no </think> after all: the whole text is content
        think_state_ = ThinkState::kContent;
        FeedContent(buffer, out);
        buffer.clear();
      } else {
        think_scanned_ = ResumeSearchAt(buffer, kThinkClose);
      }
      return;
    }
    size_t held = at_end ? buffer.size() : HeldSuffixStart(buffer, kThinkClose);
    AppendText(out, Piece::Kind::kReasoning, std::string_view(buffer).substr(0, held));
    buffer.erase(0, held);
    think_scanned_ = 0;
  }

  void FeedContent(std::string_view text, Pieces* out) {
    if (strip_newlines_) {
      size_t first = text.find_first_not_of('\n');
      if (first == std::string_view::npos) return;
      text.remove_prefix(first);
      strip_newlines_ = false;
    }
    content_buffer_ += text;
    ProcessContent(/*at_end=*/false, out);
  }

  std::string_view BlockOpen() const {
    if (tools_ == ToolCallFormat::kHermes) return kHermesOpen;
    if (tools_ == ToolCallFormat::kDeepSeekV3) return kDeepSeekCallsBegin;
    return {};
  }
  std::string_view BlockClose() const {
    return tools_ == ToolCallFormat::kHermes ? kHermesClose : kDeepSeekCallsEnd;
  }

  void ProcessContent(bool at_end, Pieces* out) {
    std::string& buffer = content_buffer_;
    while (true) {
      switch (content_state_) {
        case ContentState::kDeciding: {
          size_t first = buffer.find_first_not_of(kSpaces);
          if (first == std::string::npos && !at_end) return;
          content_state_ = first != std::string::npos && buffer[first] == '{' ? ContentState::kHoldAll
                                                                               : ContentState::kText;
          break;
        }
        case ContentState::kHoldAll: {
          if (!at_end) return;
          Pieces calls;
          if (ParseLlama3Calls(buffer, &calls)) {
            out->insert(out->end(), calls.begin(), calls.end());
          } else {
            EmitContent(buffer, out);
          }
          buffer.clear();
          return;
        }
        case ContentState::kText: {
          std::string_view open = BlockOpen();
          size_t start = open.empty() ? std::string::npos : buffer.find(open);
          if (start != std::string::npos) {
            EmitContent(std::string_view(buffer).substr(0, start), out);
            buffer.erase(0, start + open.size());
            content_state_ = ContentState::kBlock;
            block_scanned_ = 0;
            break;
          }
          size_t held = at_end || open.empty() ? buffer.size() : HeldSuffixStart(buffer, open);
          EmitContent(std::string_view(buffer).substr(0, held), out);
          buffer.erase(0, held);
          return;
        }
        case ContentState::kBlock: {
          std::string_view close = BlockClose();
          size_t end = buffer.find(close, block_scanned_);
          if (end == std::string::npos && !at_end) {
            block_scanned_ = ResumeSearchAt(buffer, close);
            return;
          }
          bool closed = end != std::string::npos;
          std::string_view body = std::string_view(buffer).substr(0, closed ? end : buffer.size());
          Pieces calls;
          // An unclosed Hermes block is text; a DeepSeek section cut short
          // after complete calls (no calls-end marker) still is calls.
          bool parsed = tools_ == ToolCallFormat::kHermes ? closed && ParseHermesCall(body, &calls)
                                                          : ParseDeepSeekCalls(body, &calls);
          if (parsed) {
            out->insert(out->end(), calls.begin(), calls.end());
          } else {  // not a call after all: its text, markers included, is content
            std::string text(BlockOpen());
            text += body;
            if (closed) text += close;
            EmitContent(text, out);
          }
          buffer.erase(0, closed ? end + close.size() : buffer.size());
          content_state_ = ContentState::kText;
          break;
        }
      }
    }
  }

  // Hermes content is the text outside the call blocks, trimmed: leading
  // whitespace is dropped, and whitespace is held until non-space text
  // follows it (dropped at the end).
  void EmitContent(std::string_view text, Pieces* out) {
    if (tools_ != ToolCallFormat::kHermes) {
      AppendText(out, Piece::Kind::kContent, text);
      return;
    }
    size_t last = text.find_last_not_of(kSpaces);
    if (last == std::string_view::npos) {
      if (content_started_) held_spaces_ += text;
      return;
    }
    size_t first = content_started_ ? 0 : text.find_first_not_of(kSpaces);
    AppendText(out, Piece::Kind::kContent, held_spaces_);
    AppendText(out, Piece::Kind::kContent, text.substr(first, last + 1 - first));
    held_spaces_ = std::string(text.substr(last + 1));
    content_started_ = true;
  }

  const bool think_open_in_prompt_;
  const ToolCallFormat tools_;
  ThinkState think_state_;
  ContentState content_state_;
  std::string think_buffer_;
  size_t think_scanned_ = 0;  // think_buffer_ before this holds no "</think>"
  bool strip_newlines_ = false;
  std::string content_buffer_;
  size_t block_scanned_ = 0;  // content_buffer_ before this holds no block close
  bool content_started_ = false;
  std::string held_spaces_;
};

bool SetError(std::string* error, std::string message) {
  *error = std::move(message);
  return false;
}

// One engine choice, validated.
struct EngineChoice {
  int64_t index = 0;
  std::string text;
  std::vector<uint32_t> token_ids;  // for an engine that answers in IDs
  std::optional<std::string> finish_reason;
  // vLLM names the stop string that ended the choice here; passed on (as
  // vLLM's chat answers do) so /v1/messages can say which stop sequence.
  std::optional<std::string> stop_reason;
};

bool ReadTokenIds(const Json& choice, std::vector<uint32_t>* ids, std::string* error) {
  ids->clear();
  auto it = choice.find("token_ids");
  if (it == choice.end() || it->is_null()) return true;
  if (!it->is_array()) return SetError(error, "a choice's token_ids is not an array");
  ids->reserve(it->size());
  for (const Json& id : *it) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > UINT32_MAX) {
      return SetError(error, "a choice's token_ids holds something other than a token ID");
    }
    ids->push_back(static_cast<uint32_t>(id.get<uint64_t>()));
  }
  return true;
}

bool ReadEngineChoice(const Json& choice, int64_t default_index, bool ids, EngineChoice* out, std::string* error) {
  if (!choice.is_object()) return SetError(error, "a choice is not an object");
  out->index = default_index;
  if (auto index = choice.find("index"); index != choice.end()) {
    if (!index->is_number_integer() || index->get<int64_t>() < 0) return SetError(error, "bad choice index");
    out->index = index->get<int64_t>();
  }
  out->text.clear();
  if (ids && !ReadTokenIds(choice, &out->token_ids, error)) return false;
  if (auto text = choice.find("text"); !ids && text != choice.end() && !text->is_null()) {
    if (!text->is_string()) return SetError(error, "a choice's text is not a string");
    out->text = text->get<std::string>();
  }
  out->finish_reason.reset();
  if (auto finish = choice.find("finish_reason"); finish != choice.end() && !finish->is_null()) {
    if (!finish->is_string()) return SetError(error, "a choice's finish_reason is not a string");
    out->finish_reason = finish->get<std::string>();
  }
  out->stop_reason.reset();
  if (auto stop = choice.find("stop_reason"); stop != choice.end() && stop->is_string()) {
    out->stop_reason = stop->get<std::string>();
  }
  return true;
}

// A choice the proxy decoded ended at a stop string the proxy found: the
// choice stopped there whatever the engine did after it, and it names the
// string, as vLLM's text endpoints do (finish_reason "stop", stop_reason the
// string; /v1/messages turns that into stop_sequence).
void NameMatchedStop(const TokenTextStream& decoder, EngineChoice* choice) {
  if (!decoder.stopped()) return;
  choice->finish_reason = "stop";
  if (!choice->stop_reason) choice->stop_reason = decoder.matched_stop();
}

Json ChatFinishReason(const std::optional<std::string>& engine_reason, bool had_tool_calls) {
  if (!engine_reason) return nullptr;
  if (*engine_reason == "stop" && had_tool_calls) return "tool_calls";
  return *engine_reason;
}

// Unique per response: derived from the response id, choice index and the
// call's position in the choice (so a stream and a body agree on it).
std::string ToolCallId(const std::string& response_id, int64_t choice_index, size_t call_index) {
  std::string_view base = response_id;
  if (base.starts_with("chatcmpl-")) base.remove_prefix(9);
  std::string id = "call_";
  if (!base.empty()) (id += base) += '_';
  if (choice_index > 0) (id += std::to_string(choice_index)) += '_';
  return id += std::to_string(call_index);
}

Json ToolCallJson(const Piece& call, std::string id) {
  Json json = Json::object();
  json["id"] = std::move(id);
  json["type"] = "function";
  json["function"] = {{"name", call.name}, {"arguments", call.arguments}};
  return json;
}

Json Envelope(const ChatTranslateOptions& options, const char* object) {
  Json json = Json::object();
  json["id"] = options.id;
  json["object"] = object;
  json["created"] = options.created;
  json["model"] = options.model;
  return json;
}

bool TranslateWhole(std::string_view completion_json, const ChatTranslateOptions& options, std::string* chat_json,
                    std::string* error) {
  try {
    Json completion = ParseJson(completion_json);
    if (!completion.is_object()) return SetError(error, "the engine's response is not a JSON object");
    auto choices = completion.find("choices");
    if (choices == completion.end() || !choices->is_array()) {
      return SetError(error, "the engine's response has no choices array");
    }
    Json chat = Envelope(options, "chat.completion");
    Json& chat_choices = chat["choices"] = Json::array();
    for (size_t position = 0; position < choices->size(); ++position) {
      EngineChoice choice;
      if (!ReadEngineChoice((*choices)[position], static_cast<int64_t>(position), options.decode_with != nullptr,
                            &choice, error))
        return false;
      if (options.decode_with) {
        TokenTextStream decoder(options.decode_with, options.decode);
        if (!decoder.Feed(choice.token_ids, &choice.text)) return SetError(error, "a token ID outside the vocabulary");
        decoder.Finish(&choice.text);
        NameMatchedStop(decoder, &choice);
      }
      ChoiceTextSplitter splitter(options);
      Pieces pieces;
      splitter.Feed(choice.text, &pieces);
      splitter.Finish(&pieces);
      std::string content, reasoning;
      Json tool_calls = Json::array();
      for (const Piece& piece : pieces) {
        if (piece.kind == Piece::Kind::kContent) content += piece.text;
        if (piece.kind == Piece::Kind::kReasoning) reasoning += piece.text;
        if (piece.kind == Piece::Kind::kToolCall) {
          tool_calls.push_back(ToolCallJson(piece, ToolCallId(options.id, choice.index, tool_calls.size())));
        }
      }
      bool has_reasoning = options.reasoning && !reasoning.empty();
      Json message = Json::object();
      message["role"] = "assistant";
      // null content: the message is all calls or all reasoning
      message["content"] = content.empty() && (has_reasoning || !tool_calls.empty()) ? Json(nullptr) : Json(content);
      if (has_reasoning) message["reasoning_content"] = reasoning;
      if (!tool_calls.empty()) message["tool_calls"] = tool_calls;
      Json chat_choice = Json::object();
      chat_choice["index"] = choice.index;
      chat_choice["message"] = std::move(message);
      chat_choice["logprobs"] = nullptr;
      chat_choice["finish_reason"] = ChatFinishReason(choice.finish_reason, !tool_calls.empty());
      if (choice.stop_reason) chat_choice["stop_reason"] = *choice.stop_reason;
      chat_choices.push_back(std::move(chat_choice));
    }
    if (auto usage = completion.find("usage"); usage != completion.end()) chat["usage"] = *usage;
    *chat_json = Dump(chat);
    return true;
  } catch (const std::exception& e) {
    return SetError(error, std::string("translating the engine's response: ") + e.what());
  }
}

}  // namespace

core::Status TranslateCompletion(std::string_view completion_json, const ChatTranslateOptions& options,
                                 std::string* chat_json) {
  std::string error;
  if (!TranslateWhole(completion_json, options, chat_json, &error)) return core::Status::Error(std::move(error));
  return core::Status::Ok();
}

struct ChatStreamTranslator::ChoiceStream {
  explicit ChoiceStream(const ChatTranslateOptions& options) : splitter(options) {
    if (options.decode_with) decoder.emplace(options.decode_with, options.decode);
  }
  ChoiceTextSplitter splitter;
  std::optional<TokenTextStream> decoder;  // an engine that answers in IDs
  bool finished = false;  // its finish event went out (or it was flushed at the end)
  size_t tool_calls = 0;  // calls sent so far
};

namespace {

void AppendEvent(const Json& event, std::string* out) {
  *out += "data: ";
  *out += Dump(event);
  *out += "\n\n";
}

void AppendChunk(const ChatTranslateOptions& options, int64_t index, Json delta, Json finish_reason,
                 std::string* out, const std::optional<std::string>& stop_reason = std::nullopt) {
  Json choice = Json::object();
  choice["index"] = index;
  choice["delta"] = std::move(delta);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = std::move(finish_reason);
  if (stop_reason) choice["stop_reason"] = *stop_reason;
  Json chunk = Envelope(options, "chat.completion.chunk");
  chunk["choices"] = Json::array({std::move(choice)});
  AppendEvent(chunk, out);
}

}  // namespace

ChatStreamTranslator::ChatStreamTranslator(ChatTranslateOptions options) : options_(std::move(options)) {}
ChatStreamTranslator::~ChatStreamTranslator() = default;
ChatStreamTranslator::ChatStreamTranslator(ChatStreamTranslator&&) noexcept = default;
ChatStreamTranslator& ChatStreamTranslator::operator=(ChatStreamTranslator&&) noexcept = default;

bool ChatStreamTranslator::Fail(std::string message) {
  failed_ = true;
  error_ = std::move(message);
  return false;
}

bool ChatStreamTranslator::Feed(std::string_view bytes, std::string* out) {
  if (failed_) return false;
  try {
    line_buffer_ += bytes;
    size_t line_start = 0;
    for (size_t newline; (newline = line_buffer_.find('\n', line_scanned_)) != std::string::npos;) {
      std::string_view line(line_buffer_.data() + line_start, newline - line_start);
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!HandleLine(line, out)) return false;
      line_start = line_scanned_ = newline + 1;
    }
    line_buffer_.erase(0, line_start);
    line_scanned_ = line_buffer_.size();
    if (line_buffer_.size() > kMaxLineBytes) return Fail("an engine SSE line is over 16 MiB");
    return true;
  } catch (const std::exception& e) {
    return Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

bool ChatStreamTranslator::Finish(std::string* out) {
  if (failed_) return false;
  try {
    // An unterminated last line or an event without its blank line still
    // counts: the engine's stream ended there.
    if (!line_buffer_.empty()) {
      std::string_view line = line_buffer_;
      if (line.ends_with('\r')) line.remove_suffix(1);
      if (!HandleLine(line, out)) return false;
      line_buffer_.clear();
    }
    if (!DispatchEvent(out)) return false;
    FlushUnfinished(out);
    return true;
  } catch (const std::exception& e) {
    return Fail(std::string("translating the engine's stream: ") + e.what());
  }
}

bool ChatStreamTranslator::HandleLine(std::string_view line, std::string* out) {
  if (line.empty()) return DispatchEvent(out);
  if (line.front() == ':') return true;  // an SSE comment (keep-alive)
  size_t colon = line.find(':');
  if (line.substr(0, colon) != "data") return true;  // event:, id:, retry: mean nothing here
  std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
  if (value.starts_with(' ')) value.remove_prefix(1);
  if (has_event_data_) event_data_ += '\n';
  event_data_ += value;
  has_event_data_ = true;
  if (event_data_.size() > kMaxLineBytes) return Fail("an engine SSE event is over 16 MiB");
  return true;
}

bool ChatStreamTranslator::DispatchEvent(std::string* out) {
  if (!has_event_data_) return true;
  std::string data = std::move(event_data_);
  event_data_.clear();
  has_event_data_ = false;
  return HandleEngineEvent(data, out);
}

ChatStreamTranslator::ChoiceStream& ChatStreamTranslator::StreamFor(int64_t index, std::string* out) {
  auto [it, inserted] = choices_.try_emplace(index);
  if (inserted) {
    it->second = std::make_unique<ChoiceStream>(options_);
    AppendChunk(options_, index, Json{{"role", "assistant"}, {"content", ""}}, nullptr, out);
  }
  return *it->second;
}

namespace {

// One event per piece: content, reasoning_content, or one tool call.
void AppendPieces(const ChatTranslateOptions& options, int64_t index, const Pieces& pieces, size_t* tool_calls,
                  std::string* out) {
  for (const Piece& piece : pieces) {
    Json delta = Json::object();
    if (piece.kind == Piece::Kind::kContent) delta["content"] = piece.text;
    if (piece.kind == Piece::Kind::kReasoning) delta["reasoning_content"] = piece.text;
    if (piece.kind == Piece::Kind::kToolCall) {
      Json call = Json::object();
      call["index"] = *tool_calls;
      call.update(ToolCallJson(piece, ToolCallId(options.id, index, *tool_calls)));
      delta["tool_calls"] = Json::array({std::move(call)});
      ++*tool_calls;
    }
    AppendChunk(options, index, std::move(delta), nullptr, out);
  }
}

}  // namespace

bool ChatStreamTranslator::HandleEngineEvent(const std::string& data, std::string* out) {
  if (saw_done_) return true;  // nothing follows [DONE] for the client
  if (data == "[DONE]") {
    // Held text goes out first: clients stop reading at [DONE].
    FlushUnfinished(out);
    *out += "data: [DONE]\n\n";
    saw_done_ = true;
    return true;
  }
  Json chunk = ParseJson(data);
  if (!chunk.is_object()) return Fail("malformed JSON in the engine's stream");
  auto choices = chunk.find("choices");
  if (choices == chunk.end() && chunk.contains("error")) {  // the engine's own error event: pass it on
    AppendEvent(chunk, out);
    return true;
  }
  if (choices != chunk.end() && !choices->is_array()) return Fail("the engine's chunk has no choices array");
  if (choices != chunk.end()) {
    for (const Json& engine_choice : *choices) {
      EngineChoice choice;
      std::string error;
      if (!ReadEngineChoice(engine_choice, 0, options_.decode_with != nullptr, &choice, &error)) return Fail(error);
      ChoiceStream& stream = StreamFor(choice.index, out);
      if (stream.finished) continue;  // text after the choice's finish_reason is not the client's
      if (stream.decoder) {
        if (!stream.decoder->Feed(choice.token_ids, &choice.text)) return Fail("a token ID outside the vocabulary");
        if (choice.finish_reason) {
          stream.decoder->Finish(&choice.text);
          NameMatchedStop(*stream.decoder, &choice);
        }
      }
      Pieces pieces;
      stream.splitter.Feed(choice.text, &pieces);
      if (choice.finish_reason) stream.splitter.Finish(&pieces);
      AppendPieces(options_, choice.index, pieces, &stream.tool_calls, out);
      if (choice.finish_reason) {
        AppendChunk(options_, choice.index, Json::object(), ChatFinishReason(choice.finish_reason, stream.tool_calls > 0),
                    out, choice.stop_reason);
        stream.finished = true;
      }
    }
  }
  // The usage chunk (choices []), or usage riding on a chunk with choices
  // (llama.cpp's last chunk): the client gets it the OpenAI way, on its own.
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    Json usage_chunk = Envelope(options_, "chat.completion.chunk");
    usage_chunk["choices"] = Json::array();
    usage_chunk["usage"] = *usage;
    AppendEvent(usage_chunk, out);
  }
  return true;
}

void ChatStreamTranslator::FlushUnfinished(std::string* out) {
  for (auto& [index, stream] : choices_) {
    if (stream->finished) continue;
    Pieces pieces;
    if (stream->decoder) {
      std::string rest;
      stream->decoder->Finish(&rest);
      stream->splitter.Feed(rest, &pieces);
    }
    stream->splitter.Finish(&pieces);
    AppendPieces(options_, index, pieces, &stream->tool_calls, out);
    stream->finished = true;
  }
}

}  // namespace toktier::api
