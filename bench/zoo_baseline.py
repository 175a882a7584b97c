# Model-zoo peer baseline on the GPU: Hugging Face transformers running a model of real dimensions
# with random bf16 weights initialised on the GPU (no checkpoint is read or written). Also writes,
# for tern, OUT_DIR/config.json and OUT_DIR/random_weights.json (every tensor's checkpoint name,
# shape and dtype), which tern loads as deterministic random weights. Timings go to OUT_DIR/hf.json.
# usage: python3 zoo_baseline.py ARCH OUT_DIR [--spec-only]
#   ARCH: qwen3_moe_30b_a3b | qwen3_5_9b | gemma4_e4b
# Every timing is guarded: a failure (out of memory, a missing feature) is recorded in hf.json as
# "<key>_error" and the script carries on. HF_QUICK=1 runs one timed repeat per measurement.
import json, os, re, sys, time, traceback

ARCHS = {
    # Qwen3-30B-A3B: 48 layers, 128 experts, top-8.
    "qwen3_moe_30b_a3b": ("qwen3_moe", dict(
        vocab_size=151936, hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_experts=128,
        num_experts_per_tok=8, norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], num_hidden_layers=48,
        num_attention_heads=32, num_key_value_heads=4, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6,
        tie_word_embeddings=False, max_position_embeddings=40960, bos_token_id=151643, eos_token_id=151645)),
    # Qwen3.5-9B text model: 8 x (3 Gated DeltaNet + 1 gated full attention), 32 V / 16 QK linear heads.
    "qwen3_5_9b": ("qwen3_5_text", dict(
        vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32, num_attention_heads=16,
        num_key_value_heads=4, head_dim=256, layer_types=(["linear_attention"] * 3 + ["full_attention"]) * 8,
        linear_conv_kernel_dim=4, linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
        linear_num_value_heads=32, rms_norm_eps=1e-6, tie_word_embeddings=False, max_position_embeddings=262144,
        rope_parameters={"rope_theta": 1e7, "partial_rotary_factor": 0.25, "rope_type": "default"},
        eos_token_id=248044)),
    # Gemma 4 E4B text model: 42 layers, 5 sliding (window 512) : 1 full, head_dim 256 / 512 on full
    # layers, per-layer inputs of 256, the last 18 layers reading K/V of earlier ones.
    "gemma4_e4b": ("gemma4_text", dict(
        vocab_size=262144, hidden_size=2560, intermediate_size=10240, num_hidden_layers=42, num_attention_heads=8,
        num_key_value_heads=2, head_dim=256, global_head_dim=512, sliding_window=512,
        layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 7, hidden_size_per_layer_input=256,
        vocab_size_per_layer_input=262144, num_kv_shared_layers=18, final_logit_softcapping=30.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, max_position_embeddings=131072, use_double_wide_mlp=False, enable_moe_block=False,
        attention_k_eq_v=False, pad_token_id=0, bos_token_id=2, eos_token_id=1)),
}
# What each architecture is timed at (tern's zoo_table.sh runs the same).
PREFILL = {"qwen3_moe_30b_a3b": [2048], "qwen3_5_9b": [2048, 8192], "gemma4_e4b": [2048]}
DECODE_BATCHES = {"qwen3_moe_30b_a3b": [1, 32], "qwen3_5_9b": [1], "gemma4_e4b": [1]}
LONG_CONTEXT = {"qwen3_5_9b": 32768, "gemma4_e4b": 32768}
PROMPT, GEN, LONG_GEN = 128, 128, 32

ST_DTYPE = {"torch.bfloat16": "BF16", "torch.float16": "F16", "torch.float32": "F32"}
ST_SIZE = {"BF16": 2, "F16": 2, "F32": 4}


def nbytes(shape, dtype):
    n = ST_SIZE[dtype]
    for d in shape:
        n *= d
    return n


def checkpoint_tensors(model, cfg):
    """[(name, shape, dtype)] as a checkpoint holds them: tied parameters once (the first name), and
    fused MoE experts (transformers 5 keeps mlp.experts.gate_up_proj [E, 2I, H] and down_proj [E, H, I]
    in memory) split into the per-expert names the published checkpoints use."""
    out, seen = [], set()
    for name, t in model.state_dict(keep_vars=True).items():
        if id(t) in seen:
            continue
        seen.add(id(t))
        dtype = ST_DTYPE.get(str(t.dtype), "BF16")
        m = re.match(r"^(.*\.mlp\.experts)\.(gate_up_proj|down_proj)$", name)
        if m and t.dim() == 3:
            E, H, I = t.shape[0], cfg.hidden_size, cfg.moe_intermediate_size
            want = [E, 2 * I, H] if m.group(2) == "gate_up_proj" else [E, H, I]
            # either orientation: the per-expert checkpoint shapes come from the config
            assert sorted(t.shape) == sorted(want), f"{name}: expected fused experts {want}, got {list(t.shape)}"
            for e in range(E):
                p = f"{m.group(1)}.{e}."
                if m.group(2) == "gate_up_proj":
                    out += [(p + "gate_proj.weight", [I, H], dtype), (p + "up_proj.weight", [I, H], dtype)]
                else:
                    out.append((p + "down_proj.weight", [H, I], dtype))
            continue
        out.append((name, list(t.shape), dtype))
    return out


def active_decode_bytes(tensors, cfg, tied):
    """Bytes one batch-1 decode step must read: every weight except the embedding tables (one row is
    read), the embedding again when tied (it is the lm_head), and top_k of n_expert experts per layer."""
    n_exp = getattr(cfg, "num_experts", None) or 0
    top_k = getattr(cfg, "num_experts_per_tok", None) or 0
    total = 0.0
    for name, shape, dtype in tensors:
        b = nbytes(shape, dtype)
        if "embed_tokens" in name:
            if tied and name.endswith("embed_tokens.weight"):
                total += b
            continue
        if n_exp and ".mlp.experts." in name:
            b = b * top_k / n_exp
        total += b
    return int(total)


def main():
    arch, out_dir = sys.argv[1], sys.argv[2]
    spec_only = "--spec-only" in sys.argv[3:]
    if arch not in ARCHS:
        sys.exit(f"unknown ARCH '{arch}' (one of {', '.join(ARCHS)})")
    import torch
    from transformers import AutoModelForCausalLM, CONFIG_MAPPING, GenerationConfig

    os.makedirs(out_dir, exist_ok=True)
    mtype, kw = ARCHS[arch]
    cfg = CONFIG_MAPPING[mtype](**kw)
    cfg.save_pretrained(out_dir)  # tern reads transformers' own config.json
    saved = json.load(open(f"{out_dir}/config.json"))
    assert saved.get("model_type") == mtype, f"config.json model_type {saved.get('model_type')}, expected {mtype}"
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    tensors = checkpoint_tensors(meta, cfg)
    del meta
    json.dump([{"name": n, "shape": s, "dtype": d} for n, s, d in tensors], open(f"{out_dir}/random_weights.json", "w"))
    tied = bool(saved.get("tie_word_embeddings", False))
    res = {"arch": arch, "model_type": mtype, "model": f"{arch} dims, random bf16 weights on the GPU",
           "transformers": __import__("transformers").__version__, "torch": torch.__version__,
           "checkpoint_tensors": len(tensors),
           "checkpoint_bytes": sum(nbytes(s, d) for _, s, d in tensors),
           "decode_active_bytes": active_decode_bytes(tensors, cfg, tied)}
    out_json = f"{out_dir}/hf.json"

    def save():
        json.dump(res, open(out_json, "w"), indent=1)

    save()
    print(f"wrote {out_dir}/config.json and random_weights.json ({len(tensors)} tensors)", flush=True)
    if spec_only:
        return

    quick = os.environ.get("HF_QUICK") == "1"

    def guarded(key, fn):
        try:
            fn()
        except Exception as e:  # out of memory, unsupported cache, ...: record and carry on
            res[f"{key}_error"] = repr(e)[:400]
            traceback.print_exc()
            torch.cuda.empty_cache()
        save()
        print(key, {k: v for k, v in res.items() if k.startswith(key)}, flush=True)

    def cuda_time(fn, reps=3, warm=1):
        if quick:
            reps = 1
        for _ in range(warm):
            fn()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1000)
        ts.sort()
        return ts[len(ts) // 2]

    def copy_bw():
        a = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
        t = cuda_time(lambda: b.copy_(a), reps=5, warm=2)
        res["copy_GBps"] = 2 * a.numel() / t / 1e9
        del a, b
        torch.cuda.empty_cache()
    guarded("copy", copy_bw)
    if "copy_GBps" in res:
        res["decode_ceiling_bs1_tok_s"] = res["copy_GBps"] * 1e9 / res["decode_active_bytes"]

    torch.manual_seed(0)
    t0 = time.time()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.02)
    model.eval()
    torch.cuda.synchronize()
    res["init_s"] = time.time() - t0
    res["params"] = sum(p.numel() for p in model.parameters())
    res["weight_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
    res["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
    res["experts_implementation"] = getattr(model.config, "_experts_implementation", None)
    res["gpu_mem_after_load_GB"] = torch.cuda.memory_allocated() / 1e9
    save()

    g = torch.Generator(device="cuda").manual_seed(1)
    vocab = cfg.vocab_size
    rand_ids = lambda bs, n: torch.randint(3, min(vocab, 150000), (bs, n), device="cuda", generator=g)

    def generate(ids, new):
        gc = GenerationConfig(do_sample=False, max_new_tokens=new, min_new_tokens=new, eos_token_id=None,
                              pad_token_id=0)
        return lambda: model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)

    with torch.no_grad():
        for L in PREFILL[arch]:
            def prefill(L=L):
                ids = rand_ids(1, L)
                t = cuda_time(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1))
                res[f"prefill_{L}_tok_s"] = L / t
            guarded(f"prefill_{L}", prefill)

        # Decode after a PROMPT-token prompt (dynamic cache): generate GEN tokens and 1 token; the
        # difference is GEN - 1 decode steps without the prefill. The raw generate rate is kept too.
        for bs in DECODE_BATCHES[arch]:
            def decode(bs=bs):
                ids = rand_ids(bs, PROMPT)
                t_full = cuda_time(generate(ids, GEN))
                t_one = cuda_time(generate(ids, 1))
                res[f"decode_bs{bs}_tok_s"] = bs * (GEN - 1) / max(t_full - t_one, 1e-9)
                res[f"generate_bs{bs}_tok_s"] = bs * GEN / t_full
            guarded(f"decode_bs{bs}", decode)

        if arch in LONG_CONTEXT:
            ctx = LONG_CONTEXT[arch]
            key = f"decode_ctx{ctx // 1024}k"

            def long_decode():
                torch.cuda.reset_peak_memory_stats()
                ids = rand_ids(1, ctx)
                # one run each: a 32k prompt is seconds per run, and the model is warm by now
                t_full = cuda_time(generate(ids, LONG_GEN), reps=1, warm=0)
                t_one = cuda_time(generate(ids, 1), reps=1, warm=0)
                res[f"{key}_bs1_tok_s"] = (LONG_GEN - 1) / max(t_full - t_one, 1e-9)
                res[f"prefill_{ctx}_via_generate_tok_s"] = ctx / t_one
                res[f"{key}_peak_mem_GB"] = torch.cuda.max_memory_allocated() / 1e9
            guarded(key, long_decode)

            def cache_bytes():  # what transformers' own cache holds after the prompt
                ids = rand_ids(1, ctx)
                out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
                cache, n = out.past_key_values, 0
                for layer in getattr(cache, "layers", []):
                    for attr in ("keys", "values", "conv_states", "recurrent_states"):
                        v = getattr(layer, attr, None)
                        if torch.is_tensor(v):
                            n += v.numel() * v.element_size()
                res[f"cache_bytes_ctx{ctx // 1024}k"] = n
                del out, cache
                torch.cuda.empty_cache()
            guarded(f"cache_bytes_ctx{ctx // 1024}k", cache_bytes)
    res["total_s"] = time.time() - t0
    save()
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
