// toktier_mock_engine: the test mock as a standalone server (load generator).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "mock_engine.h"

int main(int argc, char** argv) {
  uint16_t port = argc > 1 ? static_cast<uint16_t>(std::atoi(argv[1])) : 8001;
  std::signal(SIGPIPE, SIG_IGN);
  toktier::test::MockEngine engine(port, /*record=*/false);
  std::fprintf(stderr, "toktier_mock_engine: listening on %s\n", engine.url().c_str());
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}
