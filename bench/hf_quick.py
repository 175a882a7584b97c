# usage: python3 bench/hf_quick.py MODEL_DIR...   (prints one JSON object)
# The peer and the ceiling of a call: HF transformers greedy decode (batch 1, 128-token prompt, 128 new
# tokens, random bf16 weights, dynamic cache; two timed runs after a warm-up) on a model directory's
# config, and the device copy rate (a 2 GiB torch copy, read + write, best and median of 10).
import json, sys, time
import os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
from transformers import AutoConfig, GenerationConfig
from hf_random import random_qwen3
a = torch.empty(1 << 30, dtype=torch.bfloat16, device="cuda"); b = torch.empty_like(a)
ts = []
for _ in range(10):
    torch.cuda.synchronize(); t0 = time.perf_counter(); b.copy_(a); torch.cuda.synchronize(); ts.append(time.perf_counter() - t0)
ts.sort(); del a, b
res = {"copy_GBps_best": round(2 * 2**31 / ts[0] / 1e9), "copy_GBps_median": round(2 * 2**31 / ts[5] / 1e9)}
for d in sys.argv[1:]:
    model = random_qwen3(AutoConfig.from_pretrained(d))
    ids = torch.randint(0, 150000, (1, 128), device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
    gc = GenerationConfig(max_new_tokens=128, min_new_tokens=128, eos_token_id=None, pad_token_id=0, do_sample=False)
    run = lambda: model.generate(ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    with torch.no_grad():
        run(); r = []
        for _ in range(2):
            torch.cuda.synchronize(); t0 = time.perf_counter(); run(); torch.cuda.synchronize(); r.append(round(128 / (time.perf_counter() - t0), 1))
    res[d] = r
    del model; torch.cuda.empty_cache()
print(json.dumps(res))
