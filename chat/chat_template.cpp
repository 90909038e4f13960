#include "chat/chat_template.h"

#include <new>
#include <type_traits>

#include "chat/error.h"
#include "chat/interpreter.h"
#include "chat/lexer.h"
#include "chat/parser.h"

namespace toktier::chat {

struct ChatTemplate::Impl {
  NodePtr program;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;
const Node* ChatTemplate::impl_program() const { return impl_->program.get(); }

namespace {

// Runs `body`, turning every internal failure into a Status.
template <typename F>
Status Guarded(F&& body) {
  try {
    body();
    return Status::Ok();
  } catch (const RenderFailure& f) {
    return Status::Error(f.code, f.message);
  } catch (const std::bad_alloc&) {
    return Status::Error(StatusCode::kLimitExceeded, "out of memory");
  } catch (const std::exception& e) {
    return Status::Error(StatusCode::kRenderError, e.what());
  } catch (...) {
    // break/continue outside a loop: the reference fails the same way.
    return Status::Error(StatusCode::kRenderError, "break or continue outside a loop");
  }
}

}  // namespace

Status ChatTemplate::Compile(std::string_view source, const TemplateOptions& options, std::unique_ptr<ChatTemplate>* out) {
  out->reset();
  if (source.size() > options.max_source_bytes) {
    return Status::Error(StatusCode::kLimitExceeded, "template over " + std::to_string(options.max_source_bytes) + " bytes");
  }
  auto impl = std::make_unique<Impl>();
  Status s = Guarded([&] { impl->program = Parse(Tokenize(source, options), options.max_parse_depth); });
  if (s.ok()) out->reset(new ChatTemplate(std::move(impl)));
  return s;
}

Status ChatTemplate::Render(const nlohmann::ordered_json& inputs, const RenderOptions& options, std::string* out) const {
  if (!inputs.is_object()) return Status::Error(StatusCode::kInvalidArgument, "inputs must be a JSON object");
  return Guarded([&] {
    Interpreter interpreter(options);
    *out = interpreter.Run(*impl_->program, inputs);
  });
}

Status ChatTemplate::Render(nlohmann::ordered_json&& inputs, const RenderOptions& options, std::string* out) const {
  if (!inputs.is_object()) return Status::Error(StatusCode::kInvalidArgument, "inputs must be a JSON object");
  return Guarded([&] {
    Interpreter interpreter(options);
    *out = interpreter.Run(*impl_->program, std::move(inputs));
  });
}

namespace {

// tokenizer_config.json writes a special token as a string or as an
// AddedToken object with "content".
const nlohmann::ordered_json* TokenString(const nlohmann::ordered_json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return nullptr;
  if (it->is_string()) return &*it;
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return &*c;
  }
  return nullptr;
}

}  // namespace

namespace {

// `Json` is `const ordered_json` (the request's values are copied) or
// `ordered_json` (moved: the caller gave the request away).
template <typename Json>
Status BuildInputs(Json& request, const nlohmann::ordered_json& tokenizer_config, nlohmann::ordered_json* inputs) {
  auto take = [](auto& v) -> nlohmann::ordered_json {
    if constexpr (std::is_const_v<Json>) return v;
    else return std::move(v);
  };
  if (!request.is_object()) return Status::Error(StatusCode::kInvalidArgument, "the request must be a JSON object");
  auto messages = request.find("messages");
  if (messages == request.end() || !messages->is_array()) {
    return Status::Error(StatusCode::kInvalidArgument, "the request has no \"messages\" array");
  }
  // Room for every key first: growing an ordered_json object copies its
  // values (the pair's const key makes its move a throwing one), and
  // messages go in first.
  nlohmann::ordered_json in = nlohmann::ordered_json::object();
  auto kwargs = request.find("chat_template_kwargs");
  in.get_ref<nlohmann::ordered_json::object_t&>().reserve(
      8 + (kwargs != request.end() && kwargs->is_object() ? kwargs->size() : 0));
  in["messages"] = take(*messages);
  // transformers passes tools and documents as None when absent.
  auto tools = request.find("tools");
  in["add_generation_prompt"] = true;
  in["tools"] = tools != request.end() ? take(*tools) : nlohmann::ordered_json(nullptr);
  in["documents"] = nullptr;
  auto agp = request.find("add_generation_prompt");
  if (agp != request.end()) {
    if (!agp->is_boolean()) return Status::Error(StatusCode::kInvalidArgument, "add_generation_prompt must be a boolean");
    in["add_generation_prompt"] = *agp;
  }
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (const auto* v = TokenString(tokenizer_config, key)) in[key] = *v;
  }
  if (kwargs != request.end() && !kwargs->is_null()) {
    if (!kwargs->is_object()) return Status::Error(StatusCode::kInvalidArgument, "chat_template_kwargs must be an object");
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it) in[it.key()] = take(it.value());
  }
  *inputs = std::move(in);
  return Status::Ok();
}

}  // namespace

Status BuildChatInputs(const nlohmann::ordered_json& request, const nlohmann::ordered_json& tokenizer_config,
                       nlohmann::ordered_json* inputs) {
  return BuildInputs(request, tokenizer_config, inputs);
}

Status BuildChatInputs(nlohmann::ordered_json&& request, const nlohmann::ordered_json& tokenizer_config,
                       nlohmann::ordered_json* inputs) {
  return BuildInputs(request, tokenizer_config, inputs);
}

}  // namespace toktier::chat
