#!/usr/bin/env bash
# Quick start, part 1: set up and build (scripts/setup.sh), then stream a continuation from the
# embedded demo model. Extra arguments go to `tern generate` (e.g. --temperature 0.8 --max-tokens 200).
# usage: scripts/demo.sh ["prompt"] [generate options]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
prompt="The jury said"
if (($#)) && [[ "$1" != --* ]]; then
  prompt="$1"
  shift
fi
exec "${TERN_BUILD_DIR:-$root/build}/tern" generate "$root/models/brown-qwen3-14m" "$prompt" --max-tokens 64 "$@"
