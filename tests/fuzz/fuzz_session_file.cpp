// Session file parser: any bytes parse or fail with a message, never crash.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>
#include <vector>

#include "cli/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path =
      (std::filesystem::temp_directory_path() / ("toktier_fuzz_session_" + std::to_string(getpid()) + ".jsonl")).string();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::vector<std::string> prompts;
  (void)toktier::cli::ReadSessionPrompts(path, &prompts);
  return 0;
}
