#!/usr/bin/env python3
"""Per-kernel totals of a whole kernel trace (a prefill, or any run that is not a train of decode steps).

Usage:
  CUDA_INJECTION64_PATH=$PWD/kernel_trace.so TERN_KERNEL_TRACE=trace.csv tern bench DIR --device cuda ...
  python3 bench/trace_totals.py trace.csv [--top 20]

The trace is bench/cuda/kernel_trace.cpp's CSV (or Nsight Systems' cuda_gpu_trace report). For each kernel
name: launches, total duration, and its busy share: how much it lengthens the union of the GPU's busy time
(kernels overlapped under programmatic dependent launch count once), so the shares add up to the busy
time. The idle time between kernels (host work, copies, synchronisation) is printed apart.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_profile import load, short  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=20, help="kernels listed, by busy share (default 20)")
    a = ap.parse_args()
    rows = load(a.csv)
    count = collections.defaultdict(int)
    dur = collections.defaultdict(float)
    busy = collections.defaultdict(float)
    idle, busy_end = 0.0, rows[0][0]
    for s, e, n in sorted(rows, key=lambda r: r[1]):
        k = short(n)
        count[k] += 1
        dur[k] += e - s
        if s > busy_end:
            idle += s - busy_end
        busy[k] += e - max(s, busy_end)
        busy_end = e
    total_busy = sum(busy.values())
    span = busy_end - rows[0][0]
    print(f"{len(rows)} kernels over {span / 1e6:.2f} ms: busy {total_busy / 1e6:.2f} ms, idle {idle / 1e6:.2f} ms")
    print("| kernel | launches | total ms | busy ms | busy share |")
    print("|---|---|---|---|---|")
    for k in sorted(busy, key=lambda k: -busy[k])[: a.top]:
        print(f"| {k} | {count[k]} | {dur[k] / 1e6:.2f} | {busy[k] / 1e6:.2f} | {100 * busy[k] / total_busy:.1f} % |")


if __name__ == "__main__":
    main()
