#include "config/config.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "config/config_options.h"

namespace toktier::config {
namespace {

using core::Status;
using nlohmann::json;

template <class Owner>
const OptionSpec<Owner>* FindOption(std::span<const OptionSpec<Owner>> options, std::string_view path) {
  for (const auto& o : options) {
    if (o.path == path) return &o;
  }
  return nullptr;
}

// True when some option lives under "group." (limits, store, ...).
bool IsGroup(std::string_view key) {
  for (const auto& o : ConfigOptions()) {
    if (o.path.size() > key.size() && o.path.substr(0, key.size()) == key && o.path[key.size()] == '.') return true;
  }
  return false;
}

Status ApplyField(std::string_view path, const json& value, Config* c) {
  const OptionSpec<Config>* o = FindOption(ConfigOptions(), path);
  if (!o) return Status::Error("config: unknown field '" + std::string(path) + "'");
  if (Status st = o->set_json(*o, value, c); !st.ok()) return Status::Error("config: " + st.message());
  return Status::Ok();
}

}  // namespace

Status ApplyConfigJson(const std::string& text, Config* c) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::Error("config: not a JSON object");
  // Decoded into a copy: a document with an error changes nothing.
  Config next = *c;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    if (key == "models") {
      if (!it->is_array()) return Status::Error("config: 'models' must be an array");
      next.models.clear();
      for (const auto& e : *it) {
        ModelConfig m;
        if (Status st = ParseModelJson(e, &m); !st.ok()) return Status::Error("config: " + st.message());
        next.models.push_back(std::move(m));
      }
    } else if (IsGroup(key)) {
      if (!it->is_object()) return Status::Error("config: '" + key + "' must be an object");
      for (auto sub = it->begin(); sub != it->end(); ++sub) {
        if (Status st = ApplyField(key + "." + sub.key(), sub.value(), &next); !st.ok()) return st;
      }
    } else if (Status st = ApplyField(key, it.value(), &next); !st.ok()) {
      return st;
    }
  }
  *c = std::move(next);
  return Status::Ok();
}

Status ApplyConfigEnv(Config* c) {
  for (const auto& o : ConfigOptions()) {
    if (o.env.empty()) continue;
    const char* v = std::getenv(std::string(o.env).c_str());
    if (!v) continue;
    if (Status st = o.set_text(o, v, c); !st.ok()) return Status::Error(std::string(o.env) + ": " + st.message());
  }
  return Status::Ok();
}

int LoadServeConfig(int argc, char** argv, Config* config) {
  CLI::App app{"toktier serve: tokenizing reverse proxy for OpenAI-compatible engines"};
  std::string config_path;
  std::vector<std::string> model_specs;
  bool check_only = false;
  app.add_option("--config", config_path, "JSON config file (see docs/proxy.md)");
  app.add_option("--model", model_specs, "NAME=TOKENIZER_PATH (repeatable; replaces the configured models)");
  app.add_flag("--check-config", check_only,
               "load and validate the configuration (tokenizer files included), print it, exit 0 (valid) or 2");
  // One flag per option of the table; its text is parsed as the environment
  // variable's would be.
  auto options = ConfigOptions();
  std::vector<std::string> flag_values(options.size());
  std::vector<CLI::Option*> flags(options.size(), nullptr);
  for (size_t i = 0; i < options.size(); ++i) {
    if (options[i].flag.empty()) continue;
    flags[i] = app.add_option(std::string(options[i].flag), flag_values[i],
                              "config field " + std::string(options[i].path) + " (docs/proxy.md)");
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? -1 : 2;
  }
  *config = Config{};
  config->check_only = check_only;
  if (!config_path.empty()) {
    std::ifstream in(config_path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "toktier serve: cannot read config %s\n", config_path.c_str());
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    if (Status st = ApplyConfigJson(ss.str(), config); !st.ok()) {
      std::fprintf(stderr, "toktier serve: %s: %s\n", config_path.c_str(), st.message().c_str());
      return 2;
    }
  }
  if (Status st = ApplyConfigEnv(config); !st.ok()) {
    std::fprintf(stderr, "toktier serve: %s\n", st.message().c_str());
    return 2;
  }
  for (size_t i = 0; i < options.size(); ++i) {
    if (!flags[i] || flags[i]->count() == 0) continue;
    if (Status st = options[i].set_text(options[i], flag_values[i], config); !st.ok()) {
      std::fprintf(stderr, "toktier serve: %s: %s\n", std::string(options[i].flag).c_str(), st.message().c_str());
      return 2;
    }
  }
  if (!model_specs.empty()) {
    config->models.clear();
    for (const auto& s : model_specs) {
      size_t eq = s.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) {
        std::fprintf(stderr, "toktier serve: --model expects NAME=TOKENIZER_PATH\n");
        return 2;
      }
      ModelConfig m;
      m.name = s.substr(0, eq);
      m.tokenizer = s.substr(eq + 1);
      config->models.push_back(std::move(m));
    }
  }
  return 0;
}

}  // namespace toktier::config
