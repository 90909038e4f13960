// Command-line parsing shared by the subcommands: CLI11 prints the message
// (or the help), and the exit code is 0 for --help and 2 for every usage
// error (CLI11's own codes, e.g. 105 for a value out of range, are not
// passed on: the usage comments and scripts expect 2).
#pragma once

#include <CLI/CLI.hpp>

#define TOKTIER_CLI_PARSE(app, argc, argv)                 \
  try {                                                    \
    (app).parse((argc), (argv));                           \
  } catch (const CLI::ParseError& parse_error) {           \
    return (app).exit(parse_error) == 0 ? 0 : 2;           \
  }
