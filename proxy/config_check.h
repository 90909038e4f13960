// `toktier serve --check-config`: validates a loaded configuration the way
// the server would use it (tokenizer files loaded, URLs and addresses parsed,
// ranges checked) without listening, opening the store or contacting engines.
// Deployment tooling runs it on rendered configs (deploy/helm, tests/deploy).
#pragma once

#include <string>

#include "proxy/config.h"

namespace toktier::proxy {

// The effective configuration in the JSON file's schema (docs/proxy.md),
// every field present: what `--check-config` prints.
std::string ConfigToJson(const Config& config);

// True when `config` is usable by `toktier serve`: every model's tokenizer
// loads, names are unique, URLs and the listen address parse, numbers are in
// range. *summary (on success) is a JSON object: "config" (ConfigToJson) and
// "tokenizers" (name, version hash, vocabulary size per model). *error names
// the first problem.
bool CheckConfig(const Config& config, std::string* summary, std::string* error);

}  // namespace toktier::proxy
