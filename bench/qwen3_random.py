# A Qwen3 model directory of real dimensions with random weights and no checkpoint: config.json (as
# transformers 5.17 writes it for Qwen3ForCausalLM) and random_weights.json (every tensor's name, shape
# and dtype; tern generates the values, see tern/io/random_weights.h). Needs no torch.
# usage: python3 qwen3_random.py 8b|0.6b OUT_DIR   (the dimensions of bench/hf_baseline.py)
import json, os, sys

size, out = sys.argv[1], sys.argv[2]
dims = {
    "8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8),
    "0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8),
}[size]
h, inter, n, nh, nkv, hd, V = (dims["hidden_size"], dims["intermediate_size"], dims["num_hidden_layers"],
                               dims["num_attention_heads"], dims["num_key_value_heads"], 128, 151936)
tied = size != "8b"
cfg = dict(architectures=["Qwen3ForCausalLM"], model_type="qwen3", attention_bias=False, dtype="bfloat16", head_dim=hd,
           hidden_act="silu", rms_norm_eps=1e-6, max_position_embeddings=40960, tie_word_embeddings=tied, vocab_size=V,
           rope_parameters={"rope_theta": 1e6, "rope_type": "default"}, layer_types=["full_attention"] * n,
           bos_token_id=151643, eos_token_id=151645, **dims)
t = [("model.embed_tokens.weight", [V, h]), ("model.norm.weight", [h])]
if not tied:
    t.append(("lm_head.weight", [V, h]))
for i in range(n):
    p = f"model.layers.{i}."
    t += [(p + "input_layernorm.weight", [h]), (p + "post_attention_layernorm.weight", [h]),
          (p + "self_attn.q_proj.weight", [nh * hd, h]), (p + "self_attn.k_proj.weight", [nkv * hd, h]),
          (p + "self_attn.v_proj.weight", [nkv * hd, h]), (p + "self_attn.o_proj.weight", [h, nh * hd]),
          (p + "self_attn.q_norm.weight", [hd]), (p + "self_attn.k_norm.weight", [hd]),
          (p + "mlp.gate_proj.weight", [inter, h]), (p + "mlp.up_proj.weight", [inter, h]),
          (p + "mlp.down_proj.weight", [h, inter])]
os.makedirs(out, exist_ok=True)
json.dump(cfg, open(f"{out}/config.json", "w"), indent=1)
json.dump([{"name": k, "shape": s, "dtype": "BF16"} for k, s in t], open(f"{out}/random_weights.json", "w"))
print(f"wrote {out}/config.json and random_weights.json ({len(t)} tensors)")
