#include "proxy/tokenizer_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace toktier::cli {

std::optional<std::string> ReadWholeFile(const std::string& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = "cannot open '" + path + "': " + std::strerror(errno);
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    if (error) *error = "cannot read '" + path + "'";
    return std::nullopt;
  }
  return ss.str();
}

std::shared_ptr<const core::Tokenizer> LoadTokenizerFile(const std::string& path, const std::string& encoding_name,
                                                         std::string* error) {
  auto bytes = ReadWholeFile(path, error);
  if (!bytes) return nullptr;
  core::Status st;
  auto tok = core::Tokenizer::FromBytes(*bytes, encoding_name, &st);
  if (!tok && error) *error = "cannot load tokenizer '" + path + "': " + st.message();
  return tok;
}

std::shared_ptr<const core::Tokenizer> LoadTokenizerForCommand(const char* command, const TokenizerArgs& args) {
  std::string error;
  auto tok = LoadTokenizerFile(args.path, args.encoding, &error);
  if (!tok) std::fprintf(stderr, "toktier %s: %s\n", command, error.c_str());
  return tok;
}

}  // namespace toktier::cli
