# The peer for sampled generation: Hugging Face transformers generating with do_sample on a Qwen3 model
# of real dimensions with random bf16 weights (the dimensions of bench/qwen3_random.py), batch 1, a
# 128-token prompt and 128 new tokens, for greedy and the sampling settings `tern bench` is run with.
# usage: python3 hf_sampled.py 0.6b|8b   (prints one JSON object: decode tok/s per setting, median of 3)
import json, sys, time
import torch
from transformers import Qwen3Config, Qwen3ForCausalLM, GenerationConfig

size = sys.argv[1]
dims = {
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8),
}[size]
cfg = Qwen3Config(vocab_size=151936, head_dim=128, rope_theta=1e6, rms_norm_eps=1e-6, max_position_embeddings=40960,
                  tie_word_embeddings=(size != "8b"), bos_token_id=151643, eos_token_id=151645, **dims)
torch.manual_seed(0)
with torch.device("cuda"):
    model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
with torch.no_grad():
    for p in model.parameters():
        if p.dim() >= 2:
            p.normal_(0, 0.02)
model.eval()
settings = {
    "greedy": dict(do_sample=False),
    "t0.6 k20 p0.95": dict(do_sample=True, temperature=0.6, top_k=20, top_p=0.95),
    "t0.7 p0.9": dict(do_sample=True, temperature=0.7, top_k=0, top_p=0.9),
    "t1.0": dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0),
}
ids = torch.randint(0, 150000, (1, 128), device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
res = {"model": f"qwen3-{size} dims, random bf16 weights, HF transformers dynamic cache"}
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
