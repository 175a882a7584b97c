#!/usr/bin/env bash
# The GPU check-and-time run. Two steps:
#   scripts/gpu_check.sh pack [BUILD]   on the build machine (nvcc, no GPU needed): builds the CUDA tests,
#                                       the op benchmark and the CLI in BUILD (default build-cuda) and
#                                       gathers them with the shared libraries they need in BUILD/gpu-dist
#   scripts/gpu_check.sh unpack [BUILD] on the GPU machine: only unpacks what BUILD/gpu-dist holds (see unpack())
#   scripts/gpu_check.sh run [BUILD]    on the GPU machine: runs the cuda-labelled tests and the op
#                                       benchmark from BUILD/gpu-dist (building it first when missing and
#                                       the toolchain is there), logs to $TERN_GPU_LOGS (or /tmp/tern-gpu-out), prints a table
# With TERN_GPU_CLI=1 (both steps) the CLI travels too and `run` adds: the demo model's perplexity on
# cpu and cuda, and `tern bench` beside Hugging Face (bench/hf_baseline.py, HF_QUICK=1) on a random
# Qwen3 checkpoint of TERN_GPU_SIZE dimensions (default 0.6b) written in the same run.
# TERN_GPU_TABLE="0.6b 8b" (with the CLI) runs bench/decode_table.sh per size instead of the quick peer run.
# TERN_GPU_ZOO="gemma4_e4b qwen3_5_9b" (with the CLI) runs bench/zoo_table.sh for those architectures (HF_QUICK=1
# unless set), its files under /tmp/tern-zoo and its table in the logs.
# TERN_GPU_KV=1 (with the CLI) runs bench/kv_table.sh (KINDS, CONTEXTS, BATCHES, REPEATS, GEN) on a random
# Qwen3-8B checkpoint. TERN_GPU_TEST_FILTER narrows the CUDA tests (a gtest filter). TERN_GPU_SKIP_OPS=1 skips the op tests and benchmark; TERN_GPU_SKIP_PEER=1 the checkpoint and HF part. With TERN_GPU_TOKENIZER=1 (and the CLI) `run`
# also runs bench/tokenizer.sh beside HF tokenizers (carry bench/data and tests/data/tokenizers/npm).
# TERN_GPU_SAMPLED="0.6b 8b" (with the CLI): batch-1 decode of a random Qwen3 checkpoint of each size, greedy
# (the device argmax) beside host-sampled decode as generate runs it (see sampled_stage).
# TERN_GPU_NCU / TERN_GPU_SASS: a kernel's Nsight Compute profile / SASS (see profile_stage, sass_stage).
# TERN_GPU_GOALS=1 (with the CLI): the speed goals' rows beside HF and the copy rate, bench/goal_rows.sh, optionally
# paired against TERN_GPU_VARIANT (see goals_stage), after TERN_GPU_VARIANT_TESTS (the variant's
# tern_backend_tests or its .xz) has run TERN_GPU_TEST_FILTER.
# TERN_GPU_STEP="0.6b 8b qwen3_moe_30b_a3b" (with the CLI): one decode step's kernels and their GPU time, or
# with TERN_GPU_STEP_PREFILL=P one P-token prefill's (see step_stage).
# Any subset of the three binaries may travel: the stages whose binary is missing say so and are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
build=${2:-build-cuda}
dist=$build/gpu-dist
targets=(tern_backend_tests tern_cuda_bench)
[[ ${TERN_GPU_CLI:-0} == 1 ]] && targets+=(tern)

pack() {
  if [[ ! -f $build/build.ninja ]]; then
    cmake -S . -B "$build" -G Ninja -DTERN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
  fi
  [[ ${TERN_GPU_NO_BUILD:-0} == 1 ]] || ninja -C "$build" -j"${JOBS:-2}" "${targets[@]}"
  rm -rf "$dist" && mkdir -p "$dist/lib"
  # Binaries travel xz-compressed: the working tree and the carried build share a 64 MiB limit.
  # Stripped first: symbols are a fifth of the size.
  for t in "${targets[@]}"; do strip -o "$dist/$t" "$build/$t" && xz -T2 -9e "$dist/$t"; done
  # Host libraries the GPU machine's image may lack; the CUDA libraries come from its own toolkit.
  for t in "${targets[@]}"; do ldd "$build/$t"; done | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|ld-linux*|libstdc++*|libgcc_s*|libcublas*|libcuda*) ;;
      *)
        if [[ $(stat -Lc %s "$lib") -gt 1000000 ]]; then  # openblas, ICU, gfortran: compressed once, cached
          cache=$build/xz-cache/$(basename "$lib").xz
          if [[ ! -f $cache || $lib -nt $cache ]]; then
            mkdir -p "$build/xz-cache" && xz -T2 -9e -c "$lib" >"$cache.tmp" && mv "$cache.tmp" "$cache"
          fi
          cp "$cache" "$dist/lib/"
        else
          cp -L "$lib" "$dist/lib/"
        fi ;;
    esac
  done
  du -sh "$dist"
}

cli_stage() {
  local out=$1 rc=0
  for dev in cpu cuda; do
    echo "score demo model --device $dev"
    "$dist/tern" score models/brown-qwen3-14m --text-file models/brown-qwen3-14m/valid.txt --max-tokens 2048 \
      --device "$dev" || rc=1
  done
  if [[ -n ${TERN_GPU_KV:-} ]]; then  # KV storage kinds on a random Qwen3-8B checkpoint (bench/kv_table.sh)
    python3 bench/qwen3_random.py 8b /tmp/tern-q8-random || rc=1
    bench/kv_table.sh "$dist/tern" /tmp/tern-q8-random "$out/kv_table.jsonl" || rc=1
  fi
  if [[ -n ${TERN_GPU_ZOO:-} ]]; then  # model-zoo rows beside HF (bench/zoo_table.sh); its many files stay in /tmp
    HF_QUICK=${HF_QUICK:-1} bench/zoo_table.sh "$dist/tern" /tmp/tern-zoo $TERN_GPU_ZOO || rc=1
    cp /tmp/tern-zoo/zoo_table.md "$out/" 2>/dev/null || rc=1
  fi
  if [[ -n ${TERN_GPU_TABLE:-} ]]; then  # the full decode/prefill table per size, beside HF
    for size in $TERN_GPU_TABLE; do bench/decode_table.sh "$dist/tern" "$size" "$out" || rc=1; done
    return $rc
  fi
  [[ ${TERN_GPU_SKIP_PEER:-0} == 1 ]] && return $rc  # the demo perplexity only
  local size=${TERN_GPU_SIZE:-0.6b}
  local ckpt=/tmp/tern-ckpt-$size
  HF_QUICK=1 PYTHONUNBUFFERED=1 python3 bench/hf_baseline.py "$ckpt" "$out/hf_$size.json" "$size" || rc=1
  "$dist/tern" info "$ckpt" --device cuda || rc=1
  for p in 512 2048; do
    "$dist/tern" bench "$ckpt" --device cuda --prompt-tokens $p --gen-tokens 128 --repeats 3 || rc=1
  done
  return $rc
}

# Unpacks whatever BUILD/gpu-dist holds (binaries and/or libraries, xz-compressed where large) into
# /tmp/tern-gpu-dist, keeping what an earlier call left there: the tree and the carried build share a
# 64 MiB limit, so the libraries may travel in one call (`unpack`) and the binaries in the next.
# unxz_to FILE.xz OUT: decompressed with Python's lzma (the GPU machine's image may lack xz).
unxz_to() {
  python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$1" "$2"
}

unpack() {
  local libdir=/tmp/tern-gpu-dist/lib
  mkdir -p "$libdir"
  if [[ -d $dist/lib ]]; then cp "$dist"/lib/* "$libdir"/; fi
  cp "$dist"/*.xz /tmp/tern-gpu-dist/ 2>/dev/null || true
  for f in /tmp/tern-gpu-dist/*.xz "$libdir"/*.xz; do
    [[ -e $f ]] || continue
    unxz_to "$f" "${f%.xz}"
    rm -f "$f"
  done
}

# TERN_GPU_NCU=REGEX: Nsight Compute on the op benchmark (BENCH_ARGS) for the first kernel whose
# demangled name matches REGEX after TERN_GPU_NCU_SKIP (default 0) earlier matches: the launch, occupancy,
# throughput, warp-state, scheduler and source-counter sections in ncu.txt, the key lines printed.
# Template arguments print as "(int)3": match them with "." (e.g. 'TurboValueFrag<.int.3>').
profile_stage() {
  local out=$1 ncu
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  if [[ -z $ncu ]]; then echo "no ncu on this machine"; return 0; fi
  timeout 300 "$ncu" --clock-control none --kernel-name-base demangled -k "regex:$TERN_GPU_NCU" \
    --launch-skip "${TERN_GPU_NCU_SKIP:-0}" --launch-count 1 --section LaunchStats --section Occupancy \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section SourceCounters "$dist/tern_cuda_bench" ${BENCH_ARGS:-} >"$out/ncu.txt" 2>&1
  grep -E "No kernels were profiled|Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Issued Warp|No Eligible|Active Warps|Eligible Warps|Warp Cycles Per Issued|Issued Instructions  |Grid Size|excessive" "$out/ncu.txt" || true
}

# TERN_GPU_SASS="A B ...": the SASS of every kernel whose mangled name holds all the given pieces (e.g.
# "kv_decode_attention_mma TurboValueFragILi3 Li128E"), from the first binary that travelled, in
# sass.txt, with a count of instructions per opcode.
sass_stage() {
  local out=$1 bin
  for bin in "$dist"/tern_backend_tests "$dist"/tern_cuda_bench "$dist"/tern; do [[ -s $bin ]] && break; done
  if ! command -v cuobjdump >/dev/null; then echo "no cuobjdump on this machine"; return 0; fi
  cuobjdump -sass "$bin" | python3 -c '
import re, sys, collections
pieces, keep, on = sys.argv[2].split(), [], False
for line in sys.stdin:
    if "Function :" in line:
        on = all(p in line for p in pieces)
    if on:
        keep.append(line)
open(sys.argv[1], "w").writelines(keep)
ops = collections.Counter(m.group(1).split(".")[0] for l in keep
                          for m in [re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", l)] if m)
print(sum(1 for l in keep if "Function :" in l), "functions,", sum(ops.values()), "instructions")
print(" ".join(f"{k} {v}" for k, v in ops.most_common(25)))' "$out/sass.txt" "$TERN_GPU_SASS"
}

# TERN_GPU_STEP="0.6b 8b" (with the CLI): the kernels of one eager decode step of a random Qwen3
# checkpoint of each size and their GPU time (Nsight Compute per-kernel durations, bench/step_kernels.py).
# A zoo architecture (qwen3_moe_30b_a3b, qwen3_5_9b, gemma4_e4b) takes bench/zoo_baseline.py --spec-only
# weights instead. TERN_GPU_STEP_PREFILL=P profiles a P-token prefill instead of the decode step.
# Greedy decode against sampled decode, each sampled setting with the device sampler (as `tern
# generate` samples: top-K candidates copied for top-k, else the nucleus and the draw on the device)
# and the host sampler (every row copied over); same checkpoint and process order, tok/s; then HF
# transformers on the same config.json (bench/hf_sampled.py).
sampled_stage() {
  local size dir settings s kind
  settings=("" "--temperature 0.6 --top-k 20 --top-p 0.95" "--temperature 0.7 --top-p 0.9" "--temperature 1.0")
  echo "| checkpoint | decode | tok/s (median; min-max) | without the first step and graph captures (their ms) |"
  echo "|---|---|---|---|"
  for size in $TERN_GPU_SAMPLED; do
    dir=/tmp/tern-sampled-$size
    python3 bench/qwen3_random.py "$size" "$dir" >/dev/null
    for s in "${settings[@]}"; do
      for kind in device host; do
        [[ -z $s && $kind == host ]] && continue
        # shellcheck disable=SC2086
        "$dist/tern" bench "$dir" --device cuda --json --prompt-tokens 128 --gen-tokens 128 --repeats 3 $s \
          ${s:+--sampler $kind} 2>/dev/null |
          python3 -c 'import json, sys
d = json.load(sys.stdin); s = d["decode_sampling"]
how = s if isinstance(s, str) else ", ".join("%s %s" % kv for kv in s.items())
steady = d.get("decode_steady_tokens_per_second")
print("| %s | %s | %.1f (%.1f-%.1f) | %s |" % (sys.argv[1], how, d["decode_tokens_per_second"], d["decode_min"],
      d["decode_max"], "%.1f (%.1f ms)" % (steady, d["decode_setup_ms"]) if steady else "-"))' "$size"
      done
    done
    # The peer in the same run: HF transformers on the same config.json (bench/hf_sampled.py).
    python3 bench/hf_sampled.py "$dir" 2>/dev/null | python3 -c 'import json, sys
d = json.load(sys.stdin)
for k, v in d.items():
    if k != "model": print("| %s | HF transformers, %s | %.1f | |" % (sys.argv[1], k, v))' "$size" ||
      echo "| $size | HF transformers | not run (no torch / transformers here) | |"
  done
}

# TERN_GPU_GOALS=1 (with the CLI): bench/goal_rows.sh on the CLI (its GOALS, ROUNDS and TIME_LEFT), paired
# against TERN_GPU_VARIANT (a tern binary carried with the tree, or its .xz) when set; log in goals/.
# carried_bin PATH NAME: PATH, or for PATH.xz its copy decompressed to /tmp/tern-gpu-dist/NAME; made executable.
carried_bin() {
  local p=$1
  if [[ $p == *.xz ]]; then unxz_to "$p" "/tmp/tern-gpu-dist/$2" && p=/tmp/tern-gpu-dist/$2; fi
  chmod +x "$p" && echo "$p"
}

goals_stage() {
  local out=$1 variant=${TERN_GPU_VARIANT:-} vtests=${TERN_GPU_VARIANT_TESTS:-}
  [[ -n $variant ]] && variant=$(carried_bin "$variant" tern-variant)
  if [[ -n $vtests ]]; then  # the variant's own CUDA tests first: its rows count only if they pass
    vtests=$(carried_bin "$vtests" tern_backend_tests-variant)
    echo "== the variant's CUDA tests (${TERN_GPU_TEST_FILTER:-*})"
    timeout "${TERN_GPU_VARIANT_TESTS_S:-300}" "$vtests" --gtest_brief=1 \
      --gtest_filter="${TERN_GPU_TEST_FILTER:-*}" >"$out/variant_tests.log" 2>&1
    echo "variant tests: rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/variant_tests.log" | tr '\n' ' ')"
  fi
  OUT=$out/goals bench/goal_rows.sh "$dist/tern" $variant
}

step_stage() {
  local out=$1 ncu size layers dir prompt gen mode
  ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  if [[ -z $ncu ]]; then echo "no ncu on this machine"; return 0; fi
  prompt=${TERN_GPU_STEP_PREFILL:-16} gen=2 mode=""
  [[ -n ${TERN_GPU_STEP_PREFILL:-} ]] && gen=1 mode=--prefill
  for size in $TERN_GPU_STEP; do
    dir=/tmp/tern-step-$size
    case $size in
      *_*) python3 bench/zoo_baseline.py "$size" "$dir" --spec-only >/dev/null ;;
      *) python3 bench/qwen3_random.py "$size" "$dir" >/dev/null ;;
    esac
    layers=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c.get("text_config", c)["num_hidden_layers"])' "$dir/config.json")
    timeout 300 "$ncu" --csv --print-units base --clock-control none --metrics gpu__time_duration.sum \
      "$dist/tern" bench "$dir" --device cuda --cuda-graphs off --prompt-tokens "$prompt" --gen-tokens "$gen" \
      --repeats 1 --warmup 0 >"$out/step_$size.csv" 2>"$out/step_$size.err"
    echo "${mode:+prefill of $prompt tokens}${mode:-decode step}, $size dimensions:"
    python3 bench/step_kernels.py "$out/step_$size.csv" "$layers" $mode | tee "$out/step_$size.md"
  done
}

run() {
  local out=${TERN_GPU_LOGS:-/tmp/tern-gpu-out}
  mkdir -p "$out"
  # Any subset of the binaries may travel (the 64 MiB limit rarely takes all three); with none, build.
  if ! compgen -G "$dist/tern*.xz" >/dev/null && ! compgen -G "/tmp/tern-gpu-dist/tern*" >/dev/null; then
    echo "no binaries in $dist: building here"
    pack
  fi
  unpack
  local libdir=/tmp/tern-gpu-dist/lib
  chmod +x /tmp/tern-gpu-dist/tern* 2>/dev/null || true
  dist=/tmp/tern-gpu-dist
  local cublas
  cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1 || true)
  export LD_LIBRARY_PATH=$libdir${cublas:+:$(dirname "$cublas")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true
  echo "cublasLt: ${cublas:-not found}"
  local bin
  for bin in "$dist"/tern "$dist"/tern_backend_tests "$dist"/tern_cuda_bench; do
    [[ -s $bin ]] && { ldd "$bin" | grep -E "not found" || true; }
  done

  export TERN_TEST_DATA=$PWD/tests/data  # the model-parity tests read the fixtures from this tree
  set +e
  local test_rc=0 bench_rc=0
  if [[ ${TERN_GPU_SKIP_OPS:-0} != 1 ]]; then
    if [[ -s $dist/tern_backend_tests ]]; then
      "$dist/tern_backend_tests" --gtest_brief=1 --gtest_filter="${TERN_GPU_TEST_FILTER:-*}" 2>&1 | tee "$out/tests.log"
      test_rc=${PIPESTATUS[0]}
    else
      echo "tern_backend_tests did not travel: no CUDA tests in this run"
    fi
    if [[ -s $dist/tern_cuda_bench ]]; then
      "$dist/tern_cuda_bench" ${BENCH_ARGS:-} 2>&1 | tee "$out/bench.log"
      bench_rc=${PIPESTATUS[0]}
    else
      echo "tern_cuda_bench did not travel: no op benchmark in this run"
    fi
  fi
  if [[ -n ${TERN_GPU_NCU:-} && -s $dist/tern_cuda_bench ]]; then
    profile_stage "$out" 2>&1 | tee "$out/ncu_summary.log"
  fi
  if [[ -n ${TERN_GPU_STEP:-} && -x $dist/tern ]]; then
    step_stage "$out" 2>&1 | tee "$out/step_summary.log"
  fi
  if [[ -n ${TERN_GPU_SAMPLED:-} && -x $dist/tern ]]; then
    sampled_stage 2>&1 | tee "$out/sampled.log"
  fi
  if [[ -n ${TERN_GPU_SASS:-} ]]; then
    sass_stage "$out" 2>&1 | tee -a "$out/sass_summary.log"
  fi
  if [[ ${TERN_GPU_GOALS:-0} == 1 && -x $dist/tern ]]; then
    goals_stage "$out"
  fi
  local cli_rc=0
  if [[ ${TERN_GPU_CLI:-0} == 1 && -x $dist/tern ]]; then
    cli_stage "$out" 2>&1 | tee "$out/cli.log"
    cli_rc=${PIPESTATUS[0]}
  fi
  local tok_rc=0
  if [[ ${TERN_GPU_TOKENIZER:-0} == 1 && -x $dist/tern ]]; then
    bench/tokenizer.sh run "$dist/tern" "$out" 2>&1 | tee "$out/tokenizer.log"
    tok_rc=${PIPESTATUS[0]}
  fi
  set -e

  echo
  echo "== summary =="
  if [[ -f $out/tests.log ]]; then
    printf '%-28s %s\n' "cuda tests (rc $test_rc)" "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/tests.log" | tr '\n' ' ')"
  fi
  if [[ -f $out/bench.log ]]; then
    printf '%-28s %s\n' "op bench (rc $bench_rc)" "$(grep -c ' us' "$out/bench.log") rows, log in bench.log"
    grep -E "^ceilings|^device" "$out/bench.log" || true
  fi
  if [[ -f $out/cli.log ]]; then
    grep -E "perplexity|prefill|decode|copy_GBps|tok_s|^\|" "$out/cli.log" | head -60 || true
  fi
  return $((test_rc || bench_rc || cli_rc || tok_rc))
}

case $mode in
  pack) pack ;;
  unpack) unpack ;;
  run) run ;;
  *) echo "usage: $0 pack|unpack|run [BUILD]" >&2; exit 2 ;;
esac
