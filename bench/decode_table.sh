#!/usr/bin/env bash
# The decode/prefill benchmark of one checkpoint on the GPU, beside Hugging Face transformers:
#   bench/decode_table.sh TERN SIZE OUT_DIR      (SIZE: 8b or 0.6b, as bench/hf_baseline.py takes)
# Writes the random-weight checkpoint and times HF on it (bench/hf_baseline.py; HF_QUICK=1 skips HF's
# batch 8/32 and compiled runs), then runs `tern bench` on the same checkpoint: prefill 512 / 2,048 /
# 8,192; batch-1 decode at 128 / 4,096 / 32,768 tokens of context; batch 8 / 32 / 64 decode; each
# row also with the --kv-cache kinds in KV_KINDS (default none). Prints a table (bench/decode_table.py).
set -euo pipefail
tern=$1 size=$2 out=$3
mkdir -p "$out"
ckpt=/tmp/tern-ckpt-$size
here=$(dirname "$0")
if [[ ! -f $out/hf_$size.json ]]; then
  PYTHONUNBUFFERED=1 python3 "$here/hf_baseline.py" "$ckpt" "$out/hf_$size.json" "$size" >"$out/hf_$size.log" 2>&1
fi
jsonl=$out/tern_$size.jsonl
: >"$jsonl"
b() { "$tern" bench "$ckpt" --device cuda --json "$@" | tail -1; }
for p in ${PREFILL:-512 2048 8192}; do
  b --prompt-tokens "$p" --gen-tokens 1 --repeats 3 | python3 -c 'import json,sys; r=json.load(sys.stdin); r["kind"]="prefill"; print(json.dumps(r))' >>"$jsonl"
done
for kv in bf16 ${KV_KINDS:-}; do
  for ctx in ${CONTEXTS:-128 4096 32768}; do
    g=128; [[ $ctx -ge 32768 ]] && g=64
    b --prompt-tokens "$ctx" --gen-tokens $g --repeats 3 --kv-cache "$kv" >>"$jsonl"
  done
  for bs in ${BATCHES:-8 32 64}; do
    b --prompt-tokens 128 --gen-tokens 128 --repeats 3 --batch "$bs" --kv-cache "$kv" >>"$jsonl"
  done
done
python3 "$here/decode_table.py" "$ckpt" "$jsonl" "$out/hf_$size.json" | tee "$out/table_$size.md"
