// `toktier render`: an OpenAI chat request on stdin -> the prompt its
// model's chat template renders (what the engine would tokenize).
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/cli.h"
#include "cli/cli_parse.h"

namespace toktier::cli {
namespace {

// "2026-12-01T09:30:00Z" (or without Z, or a date only) as UTC seconds.
bool ParseIso8601(const std::string& s, int64_t* out) {
  std::tm tm{};
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  int n = std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d", &y, &mo, &d, &h, &mi, &sec);
  if (n != 3 && n != 6) return false;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  *out = static_cast<int64_t>(timegm(&tm));
  return true;
}

}  // namespace

int RunRender(int argc, char** argv) {
  CLI::App app{"Render an OpenAI chat request (stdin) with a tokenizer_config.json chat template; print the prompt"};
  std::string config_path, now_text, template_name;
  app.add_option("--tokenizer-config", config_path, "tokenizer_config.json with chat_template, bos_token, eos_token")->required();
  app.add_option("--now", now_text, "the instant strftime_now() formats (ISO 8601, UTC; default: the current time)");
  app.add_option("--template-name", template_name, "which named template when chat_template is a list (default: 'default')");
  TOKTIER_CLI_PARSE(app, argc, argv)

  std::ifstream config_file(config_path, std::ios::binary);
  if (!config_file) {
    std::fprintf(stderr, "toktier render: cannot read %s\n", config_path.c_str());
    return 2;
  }
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(config_file, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    std::fprintf(stderr, "toktier render: %s is not a JSON object\n", config_path.c_str());
    return 2;
  }
  std::string source;
  auto tmpl = config.find("chat_template");
  if (tmpl != config.end() && tmpl->is_string()) {
    source = tmpl->get<std::string>();
  } else if (tmpl != config.end() && tmpl->is_array()) {
    std::string want = template_name.empty() ? "default" : template_name;
    for (const auto& t : *tmpl) {
      if (t.is_object() && t.value("name", "") == want && t.contains("template") && t["template"].is_string()) {
        source = t["template"].get<std::string>();
      }
    }
  }
  if (source.empty()) {
    std::fprintf(stderr, "toktier render: %s has no chat_template%s\n", config_path.c_str(),
                 template_name.empty() ? "" : (" named " + template_name).c_str());
    return 2;
  }
  std::string body((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(body, nullptr, false);
  if (request.is_discarded()) {
    std::fprintf(stderr, "toktier render: stdin is not valid JSON\n");
    return 3;
  }
  chat::RenderOptions options;
  if (!now_text.empty()) {
    int64_t now = 0;
    if (!ParseIso8601(now_text, &now)) {
      std::fprintf(stderr, "toktier render: --now '%s' is not ISO 8601\n", now_text.c_str());
      return 2;
    }
    options.now_unix_seconds = now;
  } else {
    options.now_unix_seconds = static_cast<int64_t>(std::time(nullptr));
  }
  nlohmann::ordered_json inputs;
  chat::Status s = chat::BuildChatInputs(request, config, &inputs);
  std::unique_ptr<chat::ChatTemplate> compiled;
  if (s.ok()) s = chat::ChatTemplate::Compile(source, chat::TemplateOptions{}, &compiled);
  std::string prompt;
  if (s.ok()) s = compiled->Render(inputs, options, &prompt);
  if (!s.ok()) {
    std::fprintf(stderr, "toktier render: %s\n", s.ToString().c_str());
    return 3;
  }
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace toktier::cli
