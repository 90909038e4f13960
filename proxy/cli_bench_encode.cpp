// `toktier bench encode`: full-tokenization throughput of one text file,
// after checking the IDs once against the reference encoder
// (node tools/ref_encode.js: HF tokenizers / tiktoken).
//
//   toktier bench encode --tokenizer PATH [--encoding NAME] --text FILE
//                        [--runs N] [--add-special-tokens] [--no-check]
//                        [--ref-script PATH] [--node PATH]
//
// Prints one JSON line:
//   {"chars":..,"bytes":..,"tokens":..,"ms_median":..,"ms_p90":..,"mb_per_s":..,
//    "runs":..,"check":"ok"|"skipped", ["warning":"..."]}
// chars counts code points; mb_per_s is UTF-8 bytes / 1e6 per second at the
// median. Exit codes: 2 usage/load errors, 4 reference failed, 5 IDs differ.
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "proxy/cli.h"
#include "proxy/tokenizer_files.h"

#ifndef TOKTIER_SOURCE_DIR
#define TOKTIER_SOURCE_DIR "."
#endif

namespace toktier::cli {
namespace {

size_t CountCodePoints(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Finds an executable on PATH ("" if none).
std::string FindOnPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::string p = path;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find(':', start);
    if (end == std::string::npos) end = p.size();
    std::string dir = p.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string cand = dir + "/" + name;
    if (access(cand.c_str(), X_OK) == 0) return cand;
    start = end + 1;
  }
  return "";
}

// Runs argv with stdin from in_path and stdout to out_path; returns the exit status.
int RunProcess(const std::vector<std::string>& argv, const std::string& in_path, const std::string& out_path) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!std::freopen(in_path.c_str(), "rb", stdin)) _exit(126);
    if (!std::freopen(out_path.c_str(), "wb", stdout)) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string Fmt3(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", x);
  return buf;
}

}  // namespace

int RunBenchEncode(int argc, char** argv) {
  CLI::App app{"Time full tokenization of a text file (IDs checked once against the reference)"};
  std::string tokenizer_path, encoding, text_path;
  std::string ref_script = std::string(TOKTIER_SOURCE_DIR) + "/tools/ref_encode.js";
  std::string node = "node";
  int runs = 10;
  bool add_special = false, no_check = false;
  app.add_option("--tokenizer", tokenizer_path, "tokenizer.json, tiktoken encoder JSON, or .tiktoken rank file")
      ->required();
  app.add_option("--encoding", encoding, "encoding name for a raw .tiktoken rank file");
  app.add_option("--text", text_path, "UTF-8 text file to encode")->required();
  app.add_option("--runs", runs, "timed runs (after one untimed run)")->check(CLI::Range(1, 100000));
  app.add_flag("--add-special-tokens", add_special, "encode with add_special_tokens");
  app.add_flag("--no-check", no_check, "skip the reference check (reported in the output)");
  app.add_option("--ref-script", ref_script, "reference encoder script");
  app.add_option("--node", node, "node executable");
  CLI11_PARSE(app, argc, argv);
  std::string error;
  auto tok = LoadTokenizerForCommand("bench encode", {tokenizer_path, encoding});
  if (!tok) return 2;
  auto text_opt = ReadWholeFile(text_path, &error);
  if (!text_opt) {
    std::fprintf(stderr, "toktier bench encode: %s\n", error.c_str());
    return 2;
  }
  const std::string& text = *text_opt;
  size_t bad = core::FindInvalidUtf8(text);
  if (bad != std::string::npos) {
    std::fprintf(stderr, "toktier bench encode: %s is not valid UTF-8 (first invalid byte at offset %zu)\n",
                 text_path.c_str(), bad);
    return 2;
  }

  std::vector<uint32_t> ids;
  tok->Encode(text, add_special, ids);  // untimed first run; its IDs are checked
  const std::vector<uint32_t> first = ids;

  // Reference check, once.
  std::string check = "ok", warning;
  std::string node_path = FindOnPath(node);
  if (no_check) {
    check = "skipped";
    warning = "reference check disabled (--no-check)";
  } else if (node_path.empty()) {
    check = "skipped";
    warning = "reference check skipped: node not found";
  } else if (!std::filesystem::exists(ref_script)) {
    check = "skipped";
    warning = "reference check skipped: " + ref_script + " not found";
  } else {
    std::string tmpl = (std::filesystem::temp_directory_path() / "toktier-bench-XXXXXX").string();
    std::vector<char> dir(tmpl.begin(), tmpl.end());
    dir.push_back('\0');
    if (!mkdtemp(dir.data())) {
      std::fprintf(stderr, "toktier bench encode: cannot create a temporary directory\n");
      return 4;
    }
    std::string d = dir.data();
    std::string in = d + "/in.jsonl", out = d + "/out.jsonl";
    {
      std::ofstream f(in, std::ios::binary);
      f << nlohmann::json({{"text", text}, {"add_special_tokens", add_special}}).dump() << "\n";
    }
    std::vector<std::string> args = {node_path, ref_script, "--tokenizer", tokenizer_path};
    if (!encoding.empty()) {
      args.push_back("--encoding");
      args.push_back(encoding);
    }
    int rc = RunProcess(args, in, out);
    std::vector<uint32_t> ref;
    bool parsed = false;
    if (rc == 0) {
      std::ifstream f(out, std::ios::binary);
      std::string line;
      if (std::getline(f, line)) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_array()) {
          ref.reserve(j.size());
          for (const auto& v : j) ref.push_back(v.get<uint32_t>());
          parsed = true;
        }
      }
    }
    std::filesystem::remove_all(d);
    if (rc != 0 || !parsed) {
      std::fprintf(stderr, "toktier bench encode: reference encoder failed (exit %d): %s %s\n", rc,
                   node_path.c_str(), ref_script.c_str());
      return 4;
    }
    if (ref != first) {
      size_t i = 0;
      while (i < ref.size() && i < first.size() && ref[i] == first[i]) ++i;
      std::fprintf(stderr,
                   "toktier bench encode: IDs differ from the reference at position %zu "
                   "(toktier %zu tokens, reference %zu tokens)\n  toktier:  ",
                   i, first.size(), ref.size());
      for (size_t k = i; k < std::min(first.size(), i + 12); ++k) std::fprintf(stderr, "%u ", first[k]);
      std::fprintf(stderr, "\n  reference: ");
      for (size_t k = i; k < std::min(ref.size(), i + 12); ++k) std::fprintf(stderr, "%u ", ref[k]);
      std::fprintf(stderr, "\n");
      return 5;
    }
  }

  std::vector<double> ms;
  ms.reserve(runs);
  for (int r = 0; r < runs; ++r) {
    ids.clear();
    auto t0 = std::chrono::steady_clock::now();
    tok->Encode(text, add_special, ids);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (ids.size() != first.size()) {
      std::fprintf(stderr, "toktier bench encode: run %d gave %zu tokens, first run %zu\n", r, ids.size(),
                   first.size());
      return 5;
    }
  }
  std::sort(ms.begin(), ms.end());
  size_t n = ms.size();
  double median = n % 2 ? ms[n / 2] : (ms[n / 2 - 1] + ms[n / 2]) / 2;
  size_t p90i = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n))) - 1;
  double p90 = ms[std::min(p90i, n - 1)];
  double mbps = median > 0 ? static_cast<double>(text.size()) / 1e6 / (median / 1e3) : 0;

  std::string outj = "{\"chars\":" + std::to_string(CountCodePoints(text)) +
                     ",\"bytes\":" + std::to_string(text.size()) + ",\"tokens\":" + std::to_string(first.size()) +
                     ",\"ms_median\":" + Fmt3(median) + ",\"ms_p90\":" + Fmt3(p90) + ",\"mb_per_s\":" + Fmt3(mbps) +
                     ",\"runs\":" + std::to_string(runs) + ",\"check\":\"" + check + "\"";
  if (!warning.empty()) outj += ",\"warning\":" + nlohmann::json(warning).dump();
  outj += "}\n";
  std::fputs(outj.c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace toktier::cli
