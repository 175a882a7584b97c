# The peer for sampled generation: Hugging Face transformers generating with do_sample on the Qwen3
# model directory `tern bench` runs (bench/qwen3_random.py: its config.json, so the same dimensions),
# with random bf16 weights of its own, batch 1, a 128-token prompt and 128 new tokens, for greedy and
# the sampling settings tern is run with.
# usage: python3 hf_sampled.py MODEL_DIR   (prints one JSON object: decode tok/s per setting, median of 3)
import json, sys, time
import torch
from transformers import AutoConfig, GenerationConfig
from hf_random import random_qwen3

cfg = AutoConfig.from_pretrained(sys.argv[1])
model = random_qwen3(cfg)
settings = {
    "greedy": dict(do_sample=False),
    "t0.6 k20 p0.95": dict(do_sample=True, temperature=0.6, top_k=20, top_p=0.95),
    "t0.7 p0.9": dict(do_sample=True, temperature=0.7, top_k=0, top_p=0.9),
    "t1.0": dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0),
}
ids = torch.randint(0, 150000, (1, 128), device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
res = {"model": f"{sys.argv[1]}: config.json with random bf16 weights, HF transformers dynamic cache"}
with torch.no_grad():
    for name, kw in settings.items():
        gc = GenerationConfig(max_new_tokens=128, min_new_tokens=128, eos_token_id=None, pad_token_id=0, **kw)
        run = lambda: model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
        run()
        ts = []
        for _ in range(3):
            torch.cuda.synchronize(); t0 = time.time(); run(); torch.cuda.synchronize(); ts.append(time.time() - t0)
        ts.sort()
        res[name] = round(128 / ts[1], 1)
print(json.dumps(res))
