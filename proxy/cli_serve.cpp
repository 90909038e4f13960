// `toktier serve`: the proxy.
#include <csignal>
#include <cstdio>

#include "proxy/cli.h"
#include "proxy/config.h"
#include "proxy/config_check.h"
#include "proxy/server.h"

namespace toktier::cli {

int RunServe(int argc, char** argv) {
  proxy::Config config;
  int rc = proxy::LoadServeConfig(argc, argv, &config);
  if (rc == -1) return 0;  // --help
  if (rc != 0) return rc;
  if (config.check_only) {
    std::string summary, error;
    if (!proxy::CheckConfig(config, &summary, &error)) {
      std::fprintf(stderr, "toktier serve: invalid configuration: %s\n", error.c_str());
      return 2;
    }
    std::printf("%s\n", summary.c_str());
    return 0;
  }
  // Block the signals before any thread starts; RunUntilSignal waits for them.
  std::signal(SIGPIPE, SIG_IGN);
  if (config.models.empty()) {
    std::fprintf(stderr,
                 "toktier serve: no models configured (and no tools/node_modules tokenizers found): every request "
                 "is passed through unchanged\n");
  }
  proxy::Server server(config);
  std::string error;
  if (!server.Start(&error)) {
    std::fprintf(stderr, "toktier serve: %s\n", error.c_str());
    return 1;
  }
  std::fprintf(stderr, "toktier serve: listening on http://%s:%u (%zu models, %zu backends, state %s)\n",
               config.listen_address.c_str(), server.port(), config.models.size(), config.backends.size(),
               config.state_enabled ? "on" : "off");
  for (const auto& m : config.models) {
    std::fprintf(stderr, "  model %s -> %s (%s)\n", m.name.c_str(), m.tokenizer.c_str(),
                 m.forward_ids ? "ids" : "text");
  }
  server.RunUntilSignal();
  std::fprintf(stderr, "toktier serve: stopped\n");
  return 0;
}

}  // namespace toktier::cli
