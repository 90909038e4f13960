// `toktier encode` and `toktier info`.
//
//   toktier encode --tokenizer PATH [--encoding NAME] [--add-special-tokens]
//                  [--threads N] [--parallel-min-bytes B] < text
//       prints the token IDs as one JSON array on one line. --threads N
//       (default 1): N > 1 encodes through a core::EncodePool(N) (the calling
//       thread and N - 1 workers) texts of at least --parallel-min-bytes
//       (default core's 64 KiB); the IDs are the same as with one thread.
//   toktier info --tokenizer PATH [--encoding NAME]
//       prints the version hash and which fast paths apply.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/cli.h"
#include "cli/cli_parse.h"
#include "proxy/server.h"

namespace toktier::cli {
namespace {

// Writes ids as one JSON array on one line (the proxy's own ID writer).
void WriteIdArray(const std::vector<uint32_t>& ids, std::FILE* out) {
  std::string buf = "[";
  api::AppendIdList(buf, ids.data(), ids.size());
  buf.append("]\n");
  std::fwrite(buf.data(), 1, buf.size(), out);
}

}  // namespace

int RunEncode(int argc, char** argv) {
  CLI::App app{"Tokenize UTF-8 text from stdin; print the token IDs as one JSON array"};
  std::string tokenizer_path, encoding;
  bool add_special = false;
  int threads = 1;
  size_t parallel_min_bytes = core::EncodeOptions{}.parallel_min_bytes;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json, tiktoken encoder JSON, or .tiktoken rank file")
      ->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file (e.g. cl100k_base)");
  app.add_flag("--add-special-tokens", add_special, "run the post-processor (BOS etc.) / allow special tokens");
  app.add_option("--threads", threads, "encode threads (the caller included; > 1: core::EncodePool)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--parallel-min-bytes", parallel_min_bytes,
                 "shortest text (bytes) encoded in parallel with --threads > 1 (default 65536)");
  TOKTIER_CLI_PARSE(app, argc, argv)
  auto tok = LoadTokenizerForCommand("encode", {tokenizer_path, encoding});
  if (!tok) return 2;
  std::string text((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  size_t bad = core::FindInvalidUtf8(text);
  if (bad != std::string::npos) {
    std::fprintf(stderr, "toktier encode: input is not valid UTF-8 (first invalid byte at offset %zu)\n", bad);
    return 3;
  }
  std::vector<uint32_t> ids;
  if (threads > 1) {
    core::EncodePool pool(threads);
    core::EncodeOptions options;
    options.pool = &pool;
    options.parallel_min_bytes = parallel_min_bytes;
    tok->Encode(text, add_special, ids, options);
  } else {
    tok->Encode(text, add_special, ids);
  }
  WriteIdArray(ids, stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

int RunInfo(int argc, char** argv) {
  CLI::App app{"Describe a tokenizer and print its version hash"};
  std::string tokenizer_path, encoding;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer file")->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file");
  TOKTIER_CLI_PARSE(app, argc, argv)
  auto tok = LoadTokenizerForCommand("info", {tokenizer_path, encoding});
  if (!tok) return 2;
  std::printf("version_hash: %s\n%s\n", tok->version_hash().c_str(), tok->Describe().c_str());
  return 0;
}

}  // namespace toktier::cli
