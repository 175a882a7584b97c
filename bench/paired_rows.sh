#!/usr/bin/env bash
# Paired decode rows on the GPU machine: `tern bench` on one checkpoint under several settings,
# alternated over ROUNDS rounds, so that a change is measured against its control in the same call.
#   bench/paired_rows.sh MODEL_DIR ROUNDS SETTING...
# SETTING: "LABEL: [NAME=VALUE ...] BINARY", e.g. "staged: /tmp/tern-gpu-dist/tern" and
# "unstaged: TERN_CUDA_DECODE_PREWAIT=0 /tmp/tern-gpu-dist/tern". Bench flags: BENCH_ARGS (default
# "--prompt-tokens 128 --gen-tokens 128 --repeats 3"); DEVICE=cpu for a dry run without a GPU. One
# line a row: label, round, decode tok/s median (min-max), the steady rate, the one-time steps' ms and
# the prefill tok/s median (min-max).
set -uo pipefail
model=$1 rounds=$2
shift 2
for ((r = 1; r <= rounds; r++)); do
  for setting in "$@"; do
    label=${setting%%:*}
    read -r -a cmd <<<"${setting#*:}"
    # shellcheck disable=SC2086
    line=$(env "${cmd[@]}" bench "$model" --device "${DEVICE:-cuda}" --json ${BENCH_ARGS:---prompt-tokens 128 --gen-tokens 128 --repeats 3} \
      2>/dev/null | tail -1)
    ROW=$line python3 -c '
import json, os, sys
try:
    r = json.loads(os.environ["ROW"])
    print("%.1f (%.1f-%.1f) steady %.1f setup %.1f ms, prefill %.1f (%.1f-%.1f)" % (r["decode_tokens_per_second"],
          r["decode_min"], r["decode_max"], r["decode_steady_tokens_per_second"] or 0, r["decode_setup_ms"],
          r["prefill_tokens_per_second"], r["prefill_min"], r["prefill_max"]))
except Exception:
    print("failed")' | sed "s|^|$label, round $r: |"
  done
done
