"""How far Hugging Face transformers' own bf16 execution is from its float32 one on a fixture model:
NMSE of the logits per prompt of reference.json, and argmax flips where the f32 top-2 margin exceeds
0.05. The CUDA Tier 2 test bounds tern's bf16 error by these numbers (tests/data/models/*/hf_bf16_noise.json).
usage (GPU machine): python3 bench/hf_bf16_noise.py tests/data/models/qwen3"""
import json, sys, torch
from transformers import AutoModelForCausalLM
d = sys.argv[1]
meta = json.load(open(f"{d}/reference.json"))
m32 = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32).cuda().eval()
m16 = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.bfloat16).cuda().eval()
for p, ids in enumerate(meta["prompts"]):
    x = torch.tensor([ids]).cuda()
    with torch.no_grad():
        a = m32(x).logits.float(); b = m16(x).logits.float()
    nmse = ((a - b) ** 2).sum() / (a ** 2).sum()
    top2 = a.topk(2, dim=-1).values; margin = top2[..., 0] - top2[..., 1]
    flips = ((a.argmax(-1) != b.argmax(-1)) & (margin > 0.05)).sum().item()
    print(f"{d.split('/')[-1]} prompt {p} ({len(ids)} tokens): HF bf16 vs f32 NMSE {nmse.item():.3e}, argmax flips at margin>0.05: {flips}")
