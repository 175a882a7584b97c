"""Times Hugging Face `tokenizers` the way `tern tokenize --bench` times tern: one load, then the whole
file encoded as one text (best of N), one thread. Prints the same JSON fields, including an FNV-1a hash
of the ids (4 little-endian bytes per id) so bench/tokenizer.sh can check both tokenizers agree.
usage: python3 bench/tokenizer_hf.py TOKENIZER_DIR FILE [REPEATS]"""
import json, sys, time

t0 = time.perf_counter()
from tokenizers import Tokenizer  # noqa: E402  (import time is not load time)
t1 = time.perf_counter()
tok = Tokenizer.from_file(f"{sys.argv[1]}/tokenizer.json")
load_ms = (time.perf_counter() - t1) * 1e3
text = open(sys.argv[2], encoding="utf-8").read()
repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
best = float("inf")
for _ in range(repeats):
    t = time.perf_counter()
    ids = tok.encode(text, add_special_tokens=False).ids
    best = min(best, time.perf_counter() - t)
h = 1469598103934665603
for i in ids:
    for b in range(4):
        h = ((h ^ ((i >> (8 * b)) & 0xFF)) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
n = len(text.encode("utf-8"))
print(json.dumps({"load_ms": load_ms, "bytes": n, "tokens": len(ids), "encode_s": best, "mb_per_s": n / best / 1e6,
                  "ids_fnv1a": f"{h:016x}"}))
