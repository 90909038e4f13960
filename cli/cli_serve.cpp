// `toktier serve`: the proxy.
#include <csignal>
#include <cstdio>

#include "cli/cli.h"
#include "proxy/server.h"

namespace toktier::cli {

int RunServe(int argc, char** argv) {
  proxy::Config config;
  int rc = config::LoadServeConfig(argc, argv, &config);
  if (rc == -1) return 0;  // --help
  if (rc != 0) return rc;
  if (config.check_only) {
    std::string summary;
    if (core::Status st = proxy::CheckConfig(config, &summary); !st.ok()) {
      std::fprintf(stderr, "toktier serve: invalid configuration: %s\n", st.message().c_str());
      return 2;
    }
    std::printf("%s\n", summary.c_str());
    return 0;
  }
  // Block the signals before any thread starts; RunUntilSignal waits for them.
  std::signal(SIGPIPE, SIG_IGN);
  if (config.models.empty()) {
    std::fprintf(stderr,
                 "toktier serve: no models configured (--config, --model): every request is passed through "
                 "unchanged\n");
  }
  proxy::Server server(config);
  if (core::Status st = server.Start(); !st.ok()) {
    std::fprintf(stderr, "toktier serve: %s\n", st.message().c_str());
    return 1;
  }
  std::fprintf(stderr, "toktier serve: listening on http://%s:%u (%zu models, %zu backends, state %s)\n",
               config.listen_address.c_str(), server.port(), config.models.size(), config.backends.size(),
               config.state_enabled ? "on" : "off");
  for (const auto& m : config.models) {
    std::fprintf(stderr, "  model %s -> %s (%s)\n", m.name.c_str(), m.tokenizer.c_str(),
                 std::string(config::kForwardModeNames[static_cast<size_t>(m.forward_mode)]).c_str());
  }
  server.RunUntilSignal();
  std::fprintf(stderr, "toktier serve: stopped\n");
  return 0;
}

int RunConfigReference(int argc, char** argv) {
  std::string_view arg = argc > 1 ? argv[1] : "";
  if (arg == "--paths") {
    for (const auto& p : config::ConfigOptionPaths()) std::printf("%s\n", p.c_str());
    return 0;
  }
  if (!arg.empty()) {
    std::fprintf(stderr, "usage: toktier config-reference [--paths]\n");
    return 2;
  }
  std::fputs(config::ConfigReferenceMarkdown().c_str(), stdout);
  return 0;
}

}  // namespace toktier::cli
