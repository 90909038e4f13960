// Reading tokenizer files for the server and the CLI (core/ does no I/O).
#include "proxy/server.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace toktier::proxy {

core::Status ReadWholeFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::Status::Error(core::StatusCode::kIoError, "cannot open '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return core::Status::Error(core::StatusCode::kIoError, "cannot read '" + path + "'");
  *out = std::move(ss).str();
  return core::Status::Ok();
}

core::Status LoadTokenizerFile(const std::string& path, const std::string& encoding_name,
                               std::shared_ptr<const core::Tokenizer>* out) {
  std::string bytes;
  if (core::Status st = ReadWholeFile(path, &bytes); !st.ok()) return st;
  core::Status st;
  auto tok = core::Tokenizer::FromBytes(bytes, encoding_name, &st);
  if (!tok) return core::Status::Error(st.code(), "cannot load tokenizer '" + path + "': " + st.message());
  *out = std::move(tok);
  return core::Status::Ok();
}

}  // namespace toktier::proxy
