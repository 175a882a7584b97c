#!/usr/bin/env bash
# KV storage kinds on the GPU: bytes per token, the context that fits, and decode tok/s per kind.
#   bench/kv_table.sh TERN MODEL_DIR OUT_JSONL
# Env: KINDS (default "bf16 affine8 affine4 turbo:k8v4 turbo"), CONTEXTS (default "4096 32768"),
# BATCHES (default "1 8"), REPEATS (default 3), GEN (decode steps, default 64), MEMORY (default 141GB).
# Each row: `tern info --kv-cache KIND --memory MEMORY --json` and `tern bench --kv-cache KIND --json`.
set -uo pipefail
tern=$1 model=$2 out=$3
: >"$out"
for kind in ${KINDS:-bf16 affine8 affine4 turbo:k8v4 turbo}; do
  info=$("$tern" info "$model" --device cuda --kv-cache "$kind" --memory "${MEMORY:-141GB}" --json 2>/dev/null | tail -1)
  for ctx in ${CONTEXTS:-4096 32768}; do
    for bs in ${BATCHES:-1 8}; do
      row=$("$tern" bench "$model" --device cuda --json --kv-cache "$kind" --prompt-tokens "$ctx" --batch "$bs" \
        --gen-tokens "${GEN:-64}" --repeats "${REPEATS:-3}" --warmup "${WARMUP:-1}" 2>>"$out.log" | tail -1)
      INFO=$info ROW=$row KIND=$kind python3 -c '
import json, os
try: r = json.loads(os.environ["ROW"])
except Exception: r = {"error": "tern bench failed", "kv_cache": os.environ["KIND"]}
try: r["info"] = json.loads(os.environ["INFO"])
except Exception: pass
print(json.dumps(r))' | tee -a "$out"
    done
  done
done
# The table: one line per (kind, context, batch), with the step time relative to bf16's.
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
base = {(r.get("prompt_tokens"), r.get("batch")): r.get("decode_tokens_per_second") for r in rows if r.get("kv_cache") == "bf16"}
print("| --kv-cache | context | batch | KV bytes/token | decode tok/s | compiled | step time vs bf16 |")
print("|---|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| {r.get('kv_cache')} | | | | failed | | |"); continue
    b = base.get((r["prompt_tokens"], r["batch"]))
    ratio = f"{b / r['decode_tokens_per_second']:.2f}x" if b else ""
    info = r.get("info", {})
    bpt = next((v for k, v in info.items() if "bytes_per_token" in k), "") if isinstance(info, dict) else ""
    print(f"| {r['kv_cache']} | {r['prompt_tokens']} | {r['batch']} | {bpt} | {r['decode_tokens_per_second']:.1f} | "
          f"{r['compiled_decode']} | {ratio} |")
PY
