// Reading tokenizer files from disk for the CLI and the proxy (core/ does no I/O).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/core.h"

namespace toktier::cli {

// Reads a whole file; nullopt (and *error) if it cannot be read.
std::optional<std::string> ReadWholeFile(const std::string& path, std::string* error);

// Loads a tokenizer file (HF tokenizer.json, tiktoken JSON, or a .tiktoken
// rank file with encoding_name). nullptr and *error on failure.
std::shared_ptr<const core::Tokenizer> LoadTokenizerFile(const std::string& path, const std::string& encoding_name,
                                                         std::string* error);

// The tokenizer options shared by the subcommands.
struct TokenizerArgs {
  std::string path;
  std::string encoding;
};

// Loads args.path for subcommand `command`; on failure prints
// "toktier COMMAND: reason" to stderr and returns nullptr.
std::shared_ptr<const core::Tokenizer> LoadTokenizerForCommand(const char* command, const TokenizerArgs& args);

}  // namespace toktier::cli
