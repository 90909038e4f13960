// toktier: one binary, subcommands encode, info, replay, bench, render, serve,
// config-reference.
#include <cstdio>
#include <cstring>
#include <exception>
#include <string_view>

#include "cli/cli.h"

namespace {

void Usage() {
  std::fprintf(stderr,
               "usage: toktier <command> [options]\n"
               "  encode  --tokenizer PATH [--encoding NAME] [--add-special-tokens]   text on stdin -> IDs\n"
               "  info    --tokenizer PATH [--encoding NAME]                          version hash, components\n"
               "  replay  --tokenizer PATH [--add-special-tokens] [--verify] SESSION.jsonl   IDs per call\n"
               "  bench   encode --tokenizer PATH --text FILE [--runs N]              throughput vs reference\n"
               "  bench   repair --tokenizer PATH --sessions DIR                      repair latency by context size\n"
               "  render  --tokenizer-config FILE [--now ISO8601]                     chat request on stdin -> prompt\n"
               "  serve   [--config FILE] [--port N] [--backends URLS] [--model NAME=TOKENIZER] ...  the proxy\n"
               "  config-reference [--paths]                                         every serve option (Markdown)\n"
               "Run 'toktier <command> --help' for a command's options.\n");
}

int Dispatch(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  // The generic regex path throws when PCRE2 gives up on a pathological
  // pattern and input (match or depth limit); the proxy forwards such a
  // prompt as text, the CLI commands report it (exit 4) instead of aborting.
  try {
    return Dispatch(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "toktier %s: %s\n", argc > 1 ? argv[1] : "", e.what());
    return 4;
  }
}

namespace {

int Dispatch(int argc, char** argv) {
  if (argc < 2) {
    Usage();
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "encode") return toktier::cli::RunEncode(argc - 1, argv + 1);
  if (cmd == "info") return toktier::cli::RunInfo(argc - 1, argv + 1);
  if (cmd == "serve") return toktier::cli::RunServe(argc - 1, argv + 1);
  if (cmd == "replay") return toktier::cli::RunReplay(argc - 1, argv + 1);
  if (cmd == "config-reference") return toktier::cli::RunConfigReference(argc - 1, argv + 1);
  if (cmd == "render") return toktier::cli::RunRender(argc - 1, argv + 1);
  if (cmd == "bench" && argc >= 3 && std::strcmp(argv[2], "encode") == 0) {
    return toktier::cli::RunBenchEncode(argc - 2, argv + 2);
  }
  if (cmd == "bench" && argc >= 3 && std::strcmp(argv[2], "repair") == 0) {
    return toktier::cli::RunBenchRepair(argc - 2, argv + 2);
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    Usage();
    return 0;
  }
  std::fprintf(stderr, "toktier: unknown command '%s'\n", argv[1]);
  Usage();
  return 2;
}

}  // namespace
