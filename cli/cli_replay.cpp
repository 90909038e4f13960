// `toktier replay`: runs a recorded agent session through the incremental
// path and prints the IDs of every call.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/cli.h"
#include "cli/cli_parse.h"
#include "proxy/server.h"

namespace toktier::cli {
namespace {

void AppendIds(std::string& out, const std::vector<uint32_t>& ids) {
  out.push_back('[');
  api::AppendIdList(out, ids.data(), ids.size());
  out.push_back(']');
}

}  // namespace

int RunReplay(int argc, char** argv) {
  CLI::App app{"Replay a session file ({\"keep\",\"append\"} per line) through incremental repair"};
  std::string tokenizer_path, encoding, session_path;
  bool add_special = false, verify = false, quiet = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer file")->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file");
  app.add_flag("--add-special-tokens", add_special, "run the post-processor (BOS etc.)");
  app.add_flag("--verify", verify, "also tokenize every step in full; exit 1 on the first difference");
  app.add_flag("--summary-only", quiet, "print only the final summary line, not the IDs of each step");
  app.add_option("session", session_path, "session .jsonl file")->required();
  TOKTIER_CLI_PARSE(app, argc, argv)
  auto tok = LoadTokenizerForCommand("replay", {tokenizer_path, encoding});
  if (!tok) return 2;
  std::vector<std::string> prompts;
  if (core::Status st = ReadSessionPrompts(session_path, &prompts); !st.ok()) {
    std::fprintf(stderr, "toktier replay: %s\n", st.message().c_str());
    return 2;
  }
  core::TokenState state;
  std::vector<uint32_t> full;
  std::string line;
  size_t counts[4] = {};
  for (size_t step = 0; step < prompts.size(); ++step) {
    core::RepairOutcome o = core::Repairer::Update(*tok, state, prompts[step], add_special);
    ++counts[static_cast<int>(o.path)];
    if (verify) {
      tok->Encode(prompts[step], add_special, full);
      if (full != state.ids()) {
        size_t i = 0;
        while (i < full.size() && i < state.ids().size() && full[i] == state.ids()[i]) ++i;
        std::fprintf(stderr,
                     "toktier replay: step %zu: incremental IDs differ from a full tokenization at token %zu "
                     "(path %s, sync point %zu, common prefix %zu)\n",
                     step, i, std::string(core::RepairPathName(o.path)).c_str(), o.sync_point, o.common_prefix);
        return 1;
      }
    }
    if (quiet) continue;
    line.clear();
    line += "{\"step\":" + std::to_string(step) + ",\"ids\":";
    AppendIds(line, state.ids());
    line += ",\"path\":\"";
    line += core::RepairPathName(o.path);
    line += "\"";
    if (o.path == core::RepairPath::kFull) {
      line += ",\"reason\":\"";
      line += core::FullReasonName(o.full_reason);
      line += "\"";
    }
    if (o.path == core::RepairPath::kWidened) line += ",\"widenings\":" + std::to_string(o.widenings);
    line += "}\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  if (quiet || verify) {
    std::fprintf(quiet ? stdout : stderr,
                 "{\"steps\":%zu,\"unchanged\":%zu,\"first_try\":%zu,\"widened\":%zu,\"full\":%zu,\"verified\":%s}\n",
                 prompts.size(), counts[0], counts[1], counts[2], counts[3], verify ? "true" : "false");
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace toktier::cli
