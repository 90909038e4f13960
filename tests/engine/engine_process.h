// The llama.cpp engine (tools/engine/llama_engine.mjs on node-llama-cpp) as a
// child process for the engine tests, on an ephemeral 127.0.0.1 port read
// from its "listening on http://127.0.0.1:PORT" line. Its models are the tiny
// GGUFs the build writes into BUILD/models (tools/engine/CMakeLists.txt).
#pragma once

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

namespace toktier::test {

inline std::string EngineModelPath(const std::string& name) {
  return std::string(TOKTIER_ENGINE_MODELS) + "/" + name + ".gguf";
}

// Fails the calling case unless node, the engine script and the models
// exist: tools/dev.sh installs the engine and the build makes the models
// (unit_engine depends on engine_models), so none of them is optional.
inline void RequireEngine(const std::vector<std::string>& models) {
  std::error_code ec;
  REQUIRE_MESSAGE((std::filesystem::exists(TOKTIER_NODE, ec) && std::filesystem::exists(TOKTIER_ENGINE_SCRIPT, ec)),
                  "node or the llama.cpp engine script missing: run tools/dev.sh setup");
  for (const auto& m : models) {
    REQUIRE_MESSAGE(std::filesystem::exists(EngineModelPath(m), ec), "engine model " << m << " missing (BUILD/models)");
  }
}

struct EngineProcess {
  pid_t pid = -1;
  uint16_t port = 0;
  std::string log;

  // models: names served (NAME=BUILD/models/NAME.gguf); ctx in tokens.
  EngineProcess(const std::vector<std::string>& models, int ctx, const std::string& log_path) : log(log_path) {
    std::vector<std::string> args = {TOKTIER_NODE, TOKTIER_ENGINE_SCRIPT, "--port", "0", "--ctx",
                                     std::to_string(ctx), "--threads", "2"};
    for (const auto& m : models) {
      args.push_back("--model");
      args.push_back(m + "=" + EngineModelPath(m));
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = getpid();
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test (ctest's pipe)
      if (getppid() != parent) _exit(127);
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      execv(argv[0], argv.data());
      _exit(127);
    }
    const std::string marker = "listening on http://127.0.0.1:";
    for (int i = 0; i < 1200 && port == 0; ++i) {  // up to 60 s (models load in ~2-3 s each)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      std::ifstream f(log_path);
      std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      size_t at = all.find(marker);
      if (at != std::string::npos) port = static_cast<uint16_t>(std::stoi(all.substr(at + marker.size())));
      if (waitpid(pid, nullptr, WNOHANG) == pid) {
        pid = -1;
        break;
      }
    }
    REQUIRE_MESSAGE(port != 0, "the llama.cpp engine did not start; see " << log_path);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
  ~EngineProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  EngineProcess(const EngineProcess&) = delete;
  EngineProcess& operator=(const EngineProcess&) = delete;
};

}  // namespace toktier::test
