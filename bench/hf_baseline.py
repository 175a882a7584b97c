# Peer baseline on the GPU: Hugging Face transformers running a Qwen3 model of
# real dimensions with random bf16 weights. Writes the checkpoint (for other
# engines to load) and a JSON of timings.
# usage: python3 hf_baseline.py CKPT_DIR OUT_JSON [size]
# (Copied into tern's bench/ so it travels to the GPU machine. HF_QUICK=1 skips batch 8/32 and the
# compiled static-cache decode, which take minutes. The model comes from hf_random.py.)
import json, os, sys, time
import torch
from transformers import Qwen3Config, GenerationConfig
from hf_random import random_qwen3

ckpt, out = sys.argv[1], sys.argv[2]
size = sys.argv[3] if len(sys.argv) > 3 else "8b"
dims = {
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8),
}[size]
cfg = Qwen3Config(vocab_size=151936, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=40960,
                  tie_word_embeddings=(size != "8b"), bos_token_id=151643, eos_token_id=151645, **dims)
model = random_qwen3(cfg)
res = {"model": f"qwen3-{size} dims, random bf16 weights", "params": sum(p.numel() for p in model.parameters())}
res["weight_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())
if not os.path.exists(f"{ckpt}/config.json"):
    t = time.time(); model.save_pretrained(ckpt, safe_serialization=True); res["save_s"] = time.time() - t

def cuda_time(fn, reps=5, warm=2):
    for _ in range(warm): fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1000)
    ts.sort(); return ts[len(ts) // 2]

# copy bandwidth ceiling
a = torch.empty(2 * 1024**3, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
t = cuda_time(lambda: b.copy_(a)); res["copy_GBps"] = 2 * a.numel() / t / 1e9
del a, b
g = torch.Generator(device="cuda").manual_seed(1)
with torch.no_grad():
    for L in [512, 2048, 8192]:
        ids = torch.randint(0, 150000, (1, L), device="cuda", generator=g)
        t = cuda_time(lambda: model(input_ids=ids, use_cache=False, logits_to_keep=1))
        res[f"prefill_{L}_tok_s"] = L / t
    def gen(bs, new, impl=None, prompt=128):
        ids = torch.randint(0, 150000, (bs, prompt), device="cuda", generator=g)
        gc = GenerationConfig(do_sample=False, max_new_tokens=new, min_new_tokens=new, eos_token_id=None, pad_token_id=0, cache_implementation=impl)
        return lambda: model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    quick = os.environ.get("HF_QUICK") == "1"
    for bs in ([1] if quick else [1, 8, 32]):
        t = cuda_time(gen(bs, 128), reps=3, warm=1)
        res[f"decode_dynamic_bs{bs}_tok_s"] = bs * 128 / t
    try:  # static cache: generate compiles the forward itself (torch.compile + CUDA graphs)
        if quick: raise RuntimeError("skipped (HF_QUICK=1)")
        t0 = time.time()
        t = cuda_time(gen(1, 256, "static"), reps=3, warm=2)
        res["decode_static_compiled_bs1_tok_s"] = 256 / t
        res["compile_warmup_s"] = time.time() - t0
    except Exception as e:
        res["compiled_error"] = repr(e)[:400]
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res, indent=1))
