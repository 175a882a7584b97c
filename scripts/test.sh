#!/usr/bin/env bash
# Quick start, part 2: set up and build (scripts/setup.sh), fetch the pinned tokenizer files the text
# tests compare against, run the whole CTest suite, then short libFuzzer runs of every fuzz target.
# usage: scripts/test.sh [ctest args]   (env: TERN_FUZZ_SECONDS, default 15; 0 skips the fuzz runs)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${TERN_BUILD_DIR:-$root/build}"
"$root/scripts/setup.sh"
"$root/scripts/fetch_tokenizers.sh"
# ctest runs tests side by side: OpenMP threads that spin while waiting would starve each other.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
ctest --test-dir "$build" --output-on-failure -j "${TERN_JOBS:-$(nproc)}" "$@"

seconds="${TERN_FUZZ_SECONDS:-15}"
if ((seconds > 0)); then
  for src in "$root"/tests/fuzz/*_fuzz.cpp; do
    [[ -e "$src" ]] || continue
    "$root/scripts/fuzz.sh" "$(basename "$src" .cpp)" "$seconds"
  done
fi
echo "tern: all tests passed"
