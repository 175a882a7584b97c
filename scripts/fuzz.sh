#!/usr/bin/env bash
# Builds one libFuzzer target in build-fuzz (clang, ASan + UBSan) and runs it for SECONDS over its seed
# corpus tests/fuzz/corpus/<target without _fuzz>/ (and <target without _fuzz>.dict when present).
# Exits non-zero when the fuzzer finds a crash.
# Usage: scripts/fuzz.sh TARGET SECONDS      e.g. scripts/fuzz.sh io_safetensors_fuzz 20
set -euo pipefail

usage="usage: scripts/fuzz.sh TARGET SECONDS (e.g. io_safetensors_fuzz 20)"
target=${1:?$usage}
seconds=${2:?$usage}
[[ $seconds =~ ^[0-9]+$ ]] || { echo "fuzz.sh: expected SECONDS to be a whole number, got '$seconds'" >&2; exit 2; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${TERN_FUZZ_BUILD_DIR:-$root/build-fuzz}
jobs=${TERN_JOBS:-2}

for tool in clang clang++ cmake; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: expected $tool on PATH (apt-get install clang libclang-rt-dev cmake)" >&2; exit 2; }
done
src="$root/tests/fuzz/$target.cpp"
[[ -f $src ]] || { echo "fuzz.sh: expected a fuzz target tests/fuzz/$target.cpp, got none" >&2; exit 2; }

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DTERN_FUZZ=ON -DTERN_TESTS=OFF -DTERN_CUDA=OFF >/dev/null
fi
cmake --build "$build" --target "$target" -j "$jobs"

seeds="$root/tests/fuzz/corpus/${target%_fuzz}"
work="$build/fuzz-corpus/$target"        # grows across runs; the committed seeds stay untouched
artifacts="$build/fuzz-artifacts/$target"
mkdir -p "$work" "$artifacts"
corpora=("$work")
[[ -d $seeds ]] && corpora+=("$seeds")
log="$build/fuzz-$target.log"
dict="$root/tests/fuzz/${target%_fuzz}.dict"
extra=()
[[ -f $dict ]] && extra+=(-dict="$dict")

echo "fuzz.sh: running $target for ${seconds}s (corpus ${corpora[*]})"
set +e
"$build/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${extra[@]}" "${corpora[@]}" >"$log" 2>&1
rc=$?
set -e

execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
if [[ $rc -ne 0 ]]; then
  tail -n 60 "$log" >&2
  echo "fuzz.sh: $target FAILED (exit $rc) after ${execs:-?} runs; reproducer(s) in $artifacts, log in $log" >&2
  exit 1
fi
echo "fuzz.sh: $target OK: ${execs:-?} runs in ${seconds}s, ${rate:-?} exec/s, corpus $(ls "$work" | wc -l) files"
