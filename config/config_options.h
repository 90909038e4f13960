// Every option of `toktier serve`, described once. Each entry names its JSON
// path, environment variable, flag, range and doc line next to the Config
// member it sets; JSON loading, the environment, the flags, the ranges that
// --check-config enforces, its printed configuration and the option table of
// docs/proxy.md (`toktier config-reference`) all come from these tables.
// Adding an option is one entry in config_options.cpp.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/core.h"
#include "config/config.h"

namespace toktier::config {

template <class Owner>
struct OptionSpec {
  std::string_view path;  // JSON: "limits.body_bytes"; a model's: "tool_parser"
  std::string_view env;   // "" = none
  std::string_view flag;  // "" = none
  // Numbers: the inclusive range (kNoMax: unbounded above). Ignored otherwise.
  double min = 0, max = 0;
  std::string_view doc;  // Markdown, one line
  // Filled by the table's maker from the member's type.
  std::string_view type;                     // "integer", "number", "bool", "string", "list", "enum"
  std::span<const std::string_view> choices = {};  // an enum's names
  core::Status (*set_json)(const OptionSpec&, const nlohmann::json&, Owner*) = nullptr;
  core::Status (*set_text)(const OptionSpec&, std::string_view, Owner*) = nullptr;
  nlohmann::ordered_json (*get)(const Owner&) = nullptr;
  core::Status (*check)(const OptionSpec&, const Owner&) = nullptr;
};

inline constexpr double kNoMax = 1e300;

std::span<const OptionSpec<Config>> ConfigOptions();
std::span<const OptionSpec<ModelConfig>> ModelOptions();

// Loads one `models` entry (an object of ModelOptions fields).
[[nodiscard]] core::Status ParseModelJson(const nlohmann::json& entry, ModelConfig* model);

}  // namespace toktier::config
