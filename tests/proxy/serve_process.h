// `toktier serve` as a child process, for tests that kill it (SIGKILL) or
// give it its own limits. The binary is the toktier target of the same build
// (TOKTIER_BINARY); stderr goes to a log file, where the test also reads the
// port from "listening on http://127.0.0.1:PORT".
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "mock_engine.h"
#include "test_support.h"

namespace toktier::test {

// Writes DIR/config.json for a child `toktier serve` in front of `engine`
// (llama3, RocksDB in DIR/db, no guard or shadow sampling) and returns its path.
inline std::string WriteServeConfig(const MockEngine& engine, const std::filesystem::path& dir) {
  nlohmann::json cfg = {{"listen", "127.0.0.1"},
                        {"port", 0},
                        {"workers", 2},
                        {"backends", {engine.url()}},
                        {"models", {{{"name", "llama3"}, {"tokenizer", TokenizerPath("llama3")}}}},
                        {"guard", {{"enabled", false}}},
                        {"health", {{"interval_ms", 100}}},
                        {"shadow_sample_rate", 0},
                        {"store", {{"data_dir", (dir / "db").string()}}}};
  std::ofstream(dir / "config.json") << cfg.dump();
  return (dir / "config.json").string();
}

struct ServeProcess {
  pid_t pid = -1;
  uint16_t port = 0;
  std::string log;

  ServeProcess(const std::string& config_path, const std::string& log_path) : log(log_path) {
    std::filesystem::path bin = TOKTIER_BINARY;
    REQUIRE_MESSAGE(std::filesystem::exists(bin), "build the toktier target: " << bin);
    std::string b = bin.string();
    const char* argv[] = {b.c_str(), "serve", "--config", config_path.c_str(), nullptr};
    // fork + exec rather than posix_spawn: the child asks to be killed when
    // the test process dies (an aborted test must not leave a server that
    // holds ctest's output pipe open). Only async-signal-safe calls after fork.
    const pid_t parent = getpid();
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) dup2(fd, 2);
      execv(argv[0], const_cast<char**>(argv));
      _exit(127);
    }
    for (int i = 0; i < 600 && port == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::ifstream f(log_path);
      std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      size_t at = all.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) port = static_cast<uint16_t>(std::stoi(all.substr(at + 30)));
    }
    REQUIRE_MESSAGE(port != 0, "toktier serve did not start; see " << log_path);
  }
  void Kill9() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      pid = -1;
    }
  }
  ~ServeProcess() { Kill9(); }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
};

}  // namespace toktier::test
