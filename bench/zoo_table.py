# Prints the model-zoo table of bench/zoo_table.sh: per architecture, tern bench (tern.jsonl) beside
# Hugging Face transformers (hf.json from zoo_baseline.py) on the same dimensions with random weights;
# the batch-1 decode ceiling from the bytes of the active weights over the copy bandwidth; and the
# KV accounting at 32k context (tern info beside the bytes in transformers' own cache).
# usage: python3 zoo_table.py OUT_ROOT [ARCH...]   (default: every ARCH with a directory under OUT_ROOT)
import json, os, sys

root = sys.argv[1]
archs = sys.argv[2:] or [a for a in ("qwen3_moe_30b_a3b", "qwen3_5_9b", "gemma4_e4b") if os.path.isdir(f"{root}/{a}")]


def load(path, default):
    try:
        return json.load(open(path))
    except Exception:
        return default


def num(v, digits=0):
    if v is None:
        return "—"
    return f"{v:,.{digits}f}"


def gb(v):
    return "—" if v is None else f"{v / 1e9:.2f} GB"


for arch in archs:
    d = f"{root}/{arch}"
    hf = load(f"{d}/hf.json", {})
    rows = {}
    if os.path.exists(f"{d}/tern.jsonl"):
        for line in open(f"{d}/tern.jsonl"):
            if line.strip().startswith("{"):
                r = json.loads(line)
                rows[r["kind"]] = r
    info = load(f"{d}/tern_info.json", {})
    print(f"\n### {arch}\n")
    bw = hf.get("copy_GBps")
    print(f"transformers {hf.get('transformers', '?')}, torch {hf.get('torch', '?')}, attention "
          f"{hf.get('attn_implementation')}, experts {hf.get('experts_implementation')}; "
          f"{hf.get('params', 0) / 1e9:.2f} B parameters; copy bandwidth {num(bw)} GB/s (same machine)\n")
    print("| measurement | HF transformers | tern | tern / HF |")
    print("|---|---|---|---|")

    def row(label, hf_key, kind, field, digits=0):
        peer = hf.get(hf_key)
        r = rows.get(kind, {})
        ours = r.get(field)
        err = r.get("error") or (hf.get(kind + "_error") if peer is None else None)
        ratio = f"{ours / peer:.2f}x" if ours and peer else ("error (below)" if err else "—")
        extra = " (compiled)" if r.get("compiled_decode") else ""
        print(f"| {label} | {num(peer, digits)} | {num(ours, digits)}{extra} | {ratio} |")

    for p in (2048, 8192):
        if f"prefill_{p}" in rows or f"prefill_{p}_tok_s" in hf:
            row(f"prefill {p:,} tokens, tok/s", f"prefill_{p}_tok_s", f"prefill_{p}", "prefill_tokens_per_second")
    row("batch-1 decode after 128 tokens, tok/s", "decode_bs1_tok_s", "decode_bs1", "decode_tokens_per_second", 1)
    if "decode_bs32" in rows or "decode_bs32_tok_s" in hf:
        row("batch-32 decode after 128 tokens (all rows), tok/s", "decode_bs32_tok_s", "decode_bs32",
            "decode_tokens_per_second", 1)
    if "decode_ctx32k" in rows or "decode_ctx32k_bs1_tok_s" in hf:
        row("batch-1 decode at 32k context, tok/s", "decode_ctx32k_bs1_tok_s", "decode_ctx32k",
            "decode_tokens_per_second", 1)
    active = hf.get("decode_active_bytes")
    if active and bw:
        ceiling = bw * 1e9 / active
        t = rows.get("decode_bs1", {}).get("decode_tokens_per_second")
        pct = f"tern {100 * t / ceiling:.0f}% of it" if t else ""
        print(f"| batch-1 decode ceiling: {gb(active)} of active weights / {num(bw)} GB/s, tok/s | | "
              f"{num(ceiling)} | {pct} |")
    if info:
        kinds = ", ".join(f"{n} {k}" for k, n in sorted(info.get("cache_layers", {}).items()))
        by = info.get("kv_bytes_at_context_by_kind", {})
        print(f"| KV bytes at {info.get('context', 0):,} tokens ({kinds}) | "
              f"{gb(hf.get('cache_bytes_ctx32k'))} | {gb(info.get('kv_bytes_at_context'))} "
              f"(full {gb(by.get('full'))}, sliding {gb(by.get('sliding'))}, recurrent {gb(by.get('recurrent'))}) | |")
        print(f"| KV bytes per token on full layers | | {num(info.get('kv_bytes_per_token'))} | |")
    errors = {k: v for k, v in hf.items() if k.endswith("_error")}
    errors.update({f"tern {k}": r["error"] + " " + r.get("flags", "") for k, r in rows.items() if "error" in r})
    if "decode_ctx32k" not in rows and "decode_ctx32k_bs1_tok_s" not in hf and arch != "qwen3_moe_30b_a3b":
        errors["decode_ctx32k"] = "not run"
    for k, v in errors.items():
        print(f"\n- {k}: {v}")
