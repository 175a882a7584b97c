#!/usr/bin/env bash
# One GPU call for the MoE bench's experts line (`tern bench`'s moe_decode_step) at Qwen3-30B-A3B
# dimensions: the compiled-decode and MoE tests (among them the ordinary forward after a compiled
# decoder, which the recorded expert step relies on), then `tern bench` at batch 1 and 32 on the
# random-weight checkpoint of bench/zoo_baseline.py. Needs build-cuda/gpu-dist packed from this tree
# (scripts/gpu_check.sh pack build-cuda); carry it. About 3 minutes.
set -uo pipefail
t0=$(date +%s)
scripts/gpu_check.sh unpack build-cuda >/dev/null
d=/tmp/tern-gpu-dist
chmod +x $d/tern*
cublas=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$d/lib:$(dirname "$cublas")
export TERN_TEST_DATA=$PWD/tests/data TERN_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
el() { echo "+$(($(date +%s) - t0)) s"; }
$d/tern_backend_tests --gtest_brief=1 --gtest_filter='CompiledDecode.*:CudaMoe.*' 2>&1 | tail -3
echo "tests $(el)"
ck=/tmp/tern-goal-moe
[[ -f $ck/config.json ]] || python3 bench/zoo_baseline.py qwen3_moe_30b_a3b $ck --spec-only >/dev/null
for b in ${BATCHES:-1 32}; do
  $d/tern bench $ck --device cuda --prompt-tokens 128 --gen-tokens 32 --repeats 1 --batch $b 2>&1 | tail -3
  echo "batch $b $(el)"
done
