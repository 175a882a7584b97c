# Prints the decode/prefill table of bench/decode_table.sh: tern bench results (JSON lines) beside the
# Hugging Face run on the same checkpoint (hf_baseline.py JSON), each as a percentage of the ceiling
# from the bytes the step must move over the copy bandwidth measured in the same run.
# usage: python3 decode_table.py CKPT_DIR TERN_JSONL HF_JSON
import json, sys

ckpt, tern_path, hf_path = sys.argv[1:4]
cfg = json.load(open(f"{ckpt}/config.json"))
hf = json.load(open(hf_path))
rows = [json.loads(l) for l in open(tern_path) if l.strip().startswith("{")]

h, inter, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
nh, nkv, hd, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim", h // cfg["num_attention_heads"]), cfg["vocab_size"]
layer = h * (nh * hd) * 2 + h * (nkv * hd) * 2 + 3 * h * inter + 2 * h + 2 * hd
weights = 2 * (L * layer + h + V * h)            # bf16 bytes a decode step reads (the lm_head, not the embedding)
kv_token = 2 * 2 * L * nkv * hd                  # bf16 K and V of one position, all layers
bw = hf["copy_GBps"] * 1e9

def ceiling(batch, ctx):
    return batch / ((weights + batch * ctx * kv_token) / bw)

print(f"checkpoint {ckpt}: {weights / 1e9:.2f} GB of weights read per decode step, "
      f"{kv_token / 1024:.0f} KiB of KV per position; copy bandwidth {hf['copy_GBps']:.0f} GB/s (same run)")
print(f"| measurement | HF transformers | tern | tern % of ceiling | ceiling |")
print(f"|---|---|---|---|---|")
for r in rows:
    P, B, G = r["prompt_tokens"], r["batch"], r["gen_tokens"]
    kind = r.get("kind", "decode")
    if kind == "prefill":
        peer = hf.get(f"prefill_{P}_tok_s")
        print(f"| prefill {P} tokens, tok/s | {peer and round(peer):,} | {r['prefill_tokens_per_second']:,.0f} | | |")
        continue
    ctx = P + G // 2
    c = ceiling(B, ctx)
    peer = hf.get(f"decode_dynamic_bs{B}_tok_s") if P <= 512 else None
    stat = hf.get("decode_static_compiled_bs1_tok_s") if (B == 1 and P <= 512) else None
    peer_s = "—" if peer is None else f"{peer:,.1f}" + (f" ({stat:,.1f} compiled)" if stat else "")
    t = r["decode_tokens_per_second"]
    print(f"| batch-{B} decode at {P} context{', ' + r['kv_cache'] if r['kv_cache'] != 'bf16' else ''}, tok/s | {peer_s} | "
          f"{t:,.1f} | {100 * t / c:.0f}% | {c:,.0f} |")
