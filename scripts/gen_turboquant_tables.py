#!/usr/bin/env python3
# Generates the constant tables of tern/ops/turboquant.cpp: the Lloyd-Max codebooks of N(0,1)
# (the Lloyd-Max conditions solved by Newton's method, with exact interval integrals of the
# density) and the fixed +-1 sign vectors
# of the value rotation (splitmix64 from seed 42, bit i of the stream = sign of element i, 1 = -1).
# usage: python3 scripts/gen_turboquant_tables.py > /tmp/tables.txt   (standard library only)
import math

def pdf(x): return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) if math.isfinite(x) else 0.0
def cdf(x): return 0.5 * (1 + math.erf(x / math.sqrt(2))) if math.isfinite(x) else (1.0 if x > 0 else 0.0)

def moments(a, b):  # integrals over [a, b] of phi, x phi, x^2 phi
    m0 = cdf(b) - cdf(a)
    m1 = pdf(a) - pdf(b)
    ta = a * pdf(a) if math.isfinite(a) else 0.0
    tb = b * pdf(b) if math.isfinite(b) else 0.0
    return m0, m1, m0 - (tb - ta)

def lloyd_max(bits, tol=1e-10, max_iter=100):
    # The Lloyd-Max conditions (each point the mean of its cell, cells cut at midpoints) as a fixed
    # point c = T(c), solved by Newton's method: T_i depends on c_{i-1}, c_i, c_{i+1}, so the
    # Jacobian is tridiagonal. Start: quantiles of N(0, 3), the asymptotically optimal density.
    n = 1 << bits
    def icdf(p):
        lo, hi = -12.0, 12.0
        for _ in range(100):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
        return (lo + hi) / 2
    c = [math.sqrt(3) * icdf((i + 0.5) / n) for i in range(n)]
    for it in range(max_iter):
        b = [-math.inf] + [(c[i] + c[i + 1]) / 2 for i in range(n - 1)] + [math.inf]
        F, lo_d, di, up = [], [], [], []
        for i in range(n):
            m0, m1, _ = moments(b[i], b[i + 1])
            t = m1 / m0
            da = pdf(b[i]) * (t - b[i]) / m0 if i > 0 else 0.0          # dT/d(left cut)
            db = pdf(b[i + 1]) * (b[i + 1] - t) / m0 if i < n - 1 else 0.0  # dT/d(right cut)
            F.append(t - c[i])
            lo_d.append(0.5 * da)
            di.append(0.5 * da + 0.5 * db - 1.0)
            up.append(0.5 * db)
        if max(abs(f) for f in F) < tol: break
        # Thomas algorithm for J d = -F
        cp, dp = [0.0] * n, [0.0] * n
        for i in range(n):
            m = di[i] - (lo_d[i] * cp[i - 1] if i else 0.0)
            cp[i] = up[i] / m
            dp[i] = (-F[i] - (lo_d[i] * dp[i - 1] if i else 0.0)) / m
        d = [0.0] * n
        for i in reversed(range(n)):
            d[i] = dp[i] - (cp[i] * d[i + 1] if i < n - 1 else 0.0)
        c = [x + y for x, y in zip(c, d)]
    b = [-math.inf] + [(c[i] + c[i + 1]) / 2 for i in range(n - 1)] + [math.inf]
    dist = 0.0
    for i in range(n):
        m0, m1, m2 = moments(b[i], b[i + 1])
        dist += m2 - 2 * c[i] * m1 + c[i] * c[i] * m0
    return c, dist, it

def splitmix64(state):
    while True:
        state = (state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        yield z ^ (z >> 31)

import sys
for bits in [int(b) for b in sys.argv[1:]] or (1, 2, 3, 4, 8):
    c, d, it = lloyd_max(bits)
    half = c[len(c) // 2:]
    print(f"// {bits}-bit: distortion {d:.6g} after {it} iterations")
    print(f"constexpr float kLloydMax{bits}[] = {{" + ", ".join(f"{x:.9g}f" for x in half) + "};")

for dim in (32, 64, 128, 256, 512):
    g = splitmix64(42 + dim)
    words = [next(g) for _ in range((dim + 63) // 64)]
    if dim < 64: words[0] &= (1 << dim) - 1
    print(f"constexpr uint64_t kSigns{dim}[] = {{" + ", ".join(f"0x{w:016x}ull" for w in words) + "};")
