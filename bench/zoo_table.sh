#!/usr/bin/env bash
# The model-zoo benchmark on the GPU: tern beside Hugging Face transformers at real model dimensions with
# random weights (no checkpoint on disk; tern generates them from random_weights.json):
#   bench/zoo_table.sh TERN OUT_ROOT [ARCH...]   (ARCH: qwen3_moe_30b_a3b qwen3_5_9b gemma4_e4b; default all)
# Per ARCH, bench/zoo_baseline.py writes OUT_ROOT/ARCH/{config.json,random_weights.json,hf.json} (skipped
# when hf.json exists, unless HF_RERUN=1); then `tern bench` runs prefill 2,048 (and 8,192 for qwen3_5),
# batch-1 decode after 128 tokens, batch 32 for the MoE, and decode at 32k context for qwen3_5 and gemma4;
# `tern info` gives the KV accounting at 32k. Prints a markdown table (bench/zoo_table.py). A failing
# run is recorded as an error line and the others go on. Where one command's time is limited, run one
# ARCH per call (the table covers every ARCH under OUT_ROOT) and set HF_QUICK=1 (one timed repeat in HF).
set -uo pipefail
tern=$1 root=$2
shift 2
archs=${*:-qwen3_moe_30b_a3b qwen3_5_9b gemma4_e4b}
here=$(dirname "$0")

# bench_row ARCH_DIR KIND FLAGS...: one `tern bench` JSON line tagged with KIND, or an error line.
bench_row() {
  local d=$1 kind=$2
  shift 2
  local out
  out=$("$tern" bench "$d" --device cuda --json "$@" 2>>"$d/tern.log" | tail -1)
  KIND=$kind FLAGS="$*" OUT=$out python3 -c '
import json, os
try:
    r = json.loads(os.environ["OUT"])
except Exception:
    r = {"error": "tern bench failed (see tern.log)", "flags": os.environ["FLAGS"]}
r["kind"] = os.environ["KIND"]
print(json.dumps(r))' >>"$d/tern.jsonl"
}

for arch in $archs; do
  d=$root/$arch
  mkdir -p "$d"
  if [[ ! -f $d/hf.json || ${HF_RERUN:-0} == 1 ]]; then
    echo "[zoo] $arch: transformers baseline" >&2
    PYTHONUNBUFFERED=1 python3 "$here/zoo_baseline.py" "$arch" "$d" >"$d/hf.log" 2>&1 ||
      echo "[zoo] $arch: zoo_baseline.py failed (see $d/hf.log)" >&2
  fi
  if [[ ! -f $d/random_weights.json ]]; then
    echo "[zoo] $arch: no random_weights.json; skipping tern" >&2
    continue
  fi
  echo "[zoo] $arch: tern" >&2
  : >"$d/tern.jsonl"
  : >"$d/tern.log"
  prefills="2048"
  [[ $arch == qwen3_5_9b ]] && prefills="2048 8192"
  for p in $prefills; do
    bench_row "$d" "prefill_$p" --prompt-tokens "$p" --gen-tokens 1 --repeats 3
  done
  bench_row "$d" decode_bs1 --prompt-tokens 128 --gen-tokens 128 --repeats 3
  if [[ $arch == qwen3_moe_30b_a3b ]]; then
    bench_row "$d" decode_bs32 --prompt-tokens 128 --gen-tokens 128 --repeats 3 --batch 32
  else
    bench_row "$d" decode_ctx32k --prompt-tokens 32768 --gen-tokens 32 --repeats 2 --warmup 1
    "$tern" info "$d" --device cuda --context 32768 --json 2>>"$d/tern.log" | tail -1 >"$d/tern_info.json" ||
      echo "[zoo] $arch: tern info failed (see $d/tern.log)" >&2
  fi
done
python3 "$here/zoo_table.py" "$root" | tee "$root/zoo_table.md"  # every ARCH run so far under OUT_ROOT
