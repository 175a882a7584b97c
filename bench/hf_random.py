# A Qwen3ForCausalLM of a given config with random bf16 weights on the GPU, initialised as the peer
# baseline does (seed 0, every matrix N(0, 0.02)); shared by hf_baseline.py and hf_sampled.py.
import torch
from transformers import Qwen3ForCausalLM


def random_qwen3(cfg):
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0, 0.02)
    return model.eval()
