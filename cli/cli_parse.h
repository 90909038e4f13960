// What the subcommands share (internal to cli/): command-line parsing and
// loading the tokenizer they are given.
//
// Command-line parsing: CLI11 prints the message
// (or the help), and the exit code is 0 for --help and 2 for every usage
// error (CLI11's own codes, e.g. 105 for a value out of range, are not
// passed on: the usage comments and scripts expect 2).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "proxy/server.h"

#define TOKTIER_CLI_PARSE(app, argc, argv)                 \
  try {                                                    \
    (app).parse((argc), (argv));                           \
  } catch (const CLI::ParseError& parse_error) {           \
    return (app).exit(parse_error) == 0 ? 0 : 2;           \
  }

namespace toktier::cli {

// The tokenizer options shared by the subcommands.
struct TokenizerArgs {
  std::string path;
  std::string encoding;
};

// Loads args.path for subcommand `command`; on failure prints
// "toktier COMMAND: reason" to stderr and returns nullptr.
inline std::shared_ptr<const core::Tokenizer> LoadTokenizerForCommand(const char* command, const TokenizerArgs& args) {
  std::shared_ptr<const core::Tokenizer> tok;
  if (core::Status st = proxy::LoadTokenizerFile(args.path, args.encoding, &tok); !st.ok()) {
    std::fprintf(stderr, "toktier %s: %s\n", command, st.message().c_str());
  }
  return tok;
}

}  // namespace toktier::cli
