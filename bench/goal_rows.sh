#!/usr/bin/env bash
# The single-GPU speed goals in one GPU call (issues' targets: Qwen3-0.6B and 8B batch 1, 8B batch 32,
# Qwen3-30B-A3B batch 1, 8B at 32k, TurboQuant against bf16 at 32k), with the device copy rate and HF
# transformers in the same run, and optionally a second binary paired against the first:
#   bench/goal_rows.sh TERN [VARIANT]
# Random-weight checkpoints (bench/qwen3_random.py, bench/zoo_baseline.py --spec-only) under /tmp.
# With VARIANT each tern row runs alternated as "main" (TERN) and "variant" (VARIANT), ROUNDS rounds
# (default 2; bench/paired_rows.sh). Env: OUT (default /tmp/tern-goals: kv.jsonl and goals.log),
# GOALS (default "0.6b 8b 8b-b32 moe kv hf"; the order they run in; also 32k and turbo32k: the 8B
# batch-1 step at 32k with bf16 or TurboQuant storage, paired like the others; and prefill32k: the 8B prefill
# of 32,768 tokens in chunks of 8,192 for each storage of PREFILL_KV, default "bf16 affine4 turbo", where the
# chunks after the first read a packed prefix; its rows' prefill figure is the one to read), TIME_LEFT (seconds: a row is
# skipped once less than its estimate is left, so a call with a time limit returns what it finished),
# SHORT (the short-context rows' bench flags), DEVICE=cpu (a dry run of the tern rows without a GPU).
set -uo pipefail
tern=$1 variant=${2:-}
here=$(dirname "$0")
out=${OUT:-/tmp/tern-goals}
mkdir -p "$out"
exec > >(tee -a "$out/goals.log") 2>&1
t0=$(date +%s)
left() { echo $((${TIME_LEFT:-100000} - ($(date +%s) - t0))); }
rows() {  # rows DIR BENCH_ARGS: main (and the variant, alternated), ROUNDS rounds
  local dir=$1
  shift
  local -a s=("main: $tern")
  [[ -n $variant ]] && s+=("variant: $variant")
  BENCH_ARGS="$*" "$here/paired_rows.sh" "$dir" "${ROUNDS:-2}" "${s[@]}"
}
ckpt() {  # ckpt NAME: the checkpoint directory, written once
  local d=/tmp/tern-goal-$1
  if [[ ! -f $d/config.json ]]; then
    case $1 in
      moe) python3 "$here/zoo_baseline.py" qwen3_moe_30b_a3b "$d" --spec-only >/dev/null ;;
      *) python3 "$here/qwen3_random.py" "$1" "$d" >/dev/null ;;
    esac
  fi
  echo "$d"
}
short=${SHORT:---prompt-tokens 128 --gen-tokens 128 --repeats 3}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
for goal in ${GOALS:-0.6b 8b 8b-b32 moe kv hf}; do
  need=$(case $goal in kv) echo 160 ;; moe) echo 90 ;; hf | prefill32k) echo 80 ;; 32k | turbo32k) echo 70 ;; *) echo 45 ;; esac)
  if (($(left) < need)); then
    echo "$goal: skipped ($(left) s left, about $need s needed)"
    continue
  fi
  echo "== $goal (+$(($(date +%s) - t0)) s)"
  case $goal in
    0.6b) rows "$(ckpt 0.6b)" "$short" ;;
    8b) rows "$(ckpt 8b)" "$short" ;;
    8b-b32) rows "$(ckpt 8b)" "$short --batch 32" ;;
    moe) rows "$(ckpt moe)" "$short" ;;
    32k) rows "$(ckpt 8b)" "--prompt-tokens 32768 --gen-tokens 64 --repeats 1" ;;
    turbo32k) rows "$(ckpt 8b)" "--prompt-tokens 32768 --gen-tokens 64 --repeats 1 --kv-cache turbo" ;;
    prefill32k)
      for kind in ${PREFILL_KV:-bf16 affine4 turbo}; do
        echo "-- --kv-cache $kind"
        rows "$(ckpt 8b)" "--prompt-tokens 32768 --gen-tokens 16 --repeats 2 --kv-cache $kind"
      done ;;
    kv)  # bf16 and TurboQuant at 32k, batch 1 and 8, with the step-time ratio (main's binary)
      KINDS="bf16 turbo" CONTEXTS=32768 BATCHES="1 8" REPEATS=1 WARMUP=1 GEN=64 \
        "$here/kv_table.sh" "$tern" "$(ckpt 8b)" "$out/kv.jsonl" 2>/dev/null | tail -6 ;;
    hf)  # the peer (HF transformers greedy, batch 1) and the device copy rate
      python3 "$here/hf_quick.py" "$(ckpt 0.6b)" "$(ckpt 8b)" 2>/dev/null | tail -1 ;;
    *) echo "unknown goal $goal (expected 0.6b, 8b, 8b-b32, moe, 32k, turbo32k, prefill32k, kv or hf)" ;;
  esac
done
echo "== done (+$(($(date +%s) - t0)) s)"
