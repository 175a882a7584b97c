#!/usr/bin/env python3
"""Summarise the kernels of compiled decode steps from an Nsight Systems GPU trace.

Usage:
  nsys profile -o run --trace=cuda --cuda-graph-trace=node tern bench DIR --device cuda ...
  nsys stats --report cuda_gpu_trace --format csv --output trace run.nsys-rep
  python3 bench/graph_profile.py trace_cuda_gpu_trace.csv [--gap-us 4]

Kernels are split into steps wherever the GPU sits idle for more than --gap-us; the segments of the kernel
count that holds the most kernels in all are taken as the decode steps (--kernels N names the count, for a
trace whose eager prefill makes many short segments; the counts found are printed). For each kernel name the table gives its launches a
step, its mean duration, and its mean "exposed" time: the time from the previous kernel's end (in end
order) to its own end, which is what the kernel adds to the step when kernels overlap under programmatic
dependent launch. The exposed times of a step add up to the step's span.
"""
import argparse
import collections
import csv
import sys


def load(path):
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            name = r.get("Name", "")
            if not r.get("GrdX"):  # memcpy and memset rows carry no grid
                continue
            start = int(r["Start (ns)"])
            rows.append((start, start + int(r["Duration (ns)"]), name))
    if not rows:
        sys.exit(f"{path}: no kernel rows (expected the cuda_gpu_trace report of nsys stats, CSV)")
    rows.sort()
    return rows


def short(name):
    """A kernel's name without namespaces and arguments: demangled names are cut, mangled ones
    (_ZN<len><id>...) give their last identifier and the first template arguments as written."""
    if name.startswith("_ZN"):
        i, ident = 3, ""
        while i < len(name) and name[i].isdigit():
            j = i
            while name[j].isdigit():
                j += 1
            n = int(name[i:j])
            ident, i = name[j:j + n], j + n
        rest = name[i + 1:i + 1 + 24] if i < len(name) and name[i] == "I" else ""
        return ident + (f"<{rest}...>" if rest else "")
    name = name.split("(")[0]
    for prefix in ("void ", "tern::cuda::kernels::"):
        name = name.replace(prefix, "")
    return name[:70]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--gap-us", type=float, default=4.0)
    ap.add_argument("--first", help="a step starts at each kernel whose name contains this (instead of idle gaps)")
    ap.add_argument("--period", type=int, help="also the mean of each position in a repeating run of this many "
                    "kernels (a layer), after --skip kernels at the start of each step")
    ap.add_argument("--skip", type=int, default=0)
    ap.add_argument("--kernels", type=int, help="the decode steps are the segments of this many kernels (default: "
                    "the segment length that holds the most kernels in all; a trace with a long eager prefill "
                    "may need it: the lengths found are printed)")
    a = ap.parse_args()
    rows = load(a.csv)
    steps, cur, last_end = [], [], 0
    for s, e, n in rows:
        starts = (a.first in n) if a.first else (s - last_end > a.gap_us * 1000)
        if cur and starts:
            steps.append(cur)
            cur = []
        last_end = max(last_end, e) if cur else e
        cur.append((s, e, n))
    steps.append(cur)
    # The decode steps: the segment length that holds the most kernels in all (load-time and other lone
    # kernels make many short segments).
    lengths = collections.Counter(len(s) for s in steps)
    common = a.kernels if a.kernels else max(lengths, key=lambda n: n * lengths[n])
    decode = [s for s in steps if len(s) == common]
    if not decode:
        sys.exit(f"{a.csv}: no segment of {common} kernels")
    if len(decode) > 2:
        decode = decode[1:-1]  # the first and last of a run may carry warm-up or teardown
    dur = collections.defaultdict(float)
    exposed = collections.defaultdict(float)
    count = collections.defaultdict(int)
    order = []
    span = 0.0
    for st in decode:
        span += max(e for _, e, _ in st) - st[0][0]
        prev_end = st[0][0]
        for s, e, n in sorted(st, key=lambda r: r[1]):
            k = short(n)
            if k not in count:
                order.append(k)
            count[k] += 1
            dur[k] += e - s
            exposed[k] += e - prev_end
            prev_end = e
    n = len(decode)
    if a.period:
        # only the runs that repeat the step's first run (the layers, not the head after them)
        pos = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
        names = {}
        for st in decode:
            prev_end = st[a.skip - 1][1] if a.skip else st[0][0]
            body = st[a.skip:]
            runs = 0  # whole runs that repeat the first (the layers; the head after them may start like one)
            while (runs + 1) * a.period <= len(body) and all(
                    body[runs * a.period + j][2] == body[j][2] for j in range(a.period)):
                runs += 1
            for i in range(runs * a.period):
                s0, e0, nm = body[i]
                q = pos[i % a.period]
                names[i % a.period] = short(nm)
                q[0] += 1
                q[1] += s0 - prev_end
                q[2] += e0 - s0
                q[3] += e0 - prev_end
                prev_end = e0
        print(f"| position in the run of {a.period} | kernel | start after the previous end, us | duration | "
              "end after the previous end |")
        print("|---|---|---|---|---|")
        for i in range(a.period):
            c, st_, du, ex = pos[i]
            print(f"| {i} | {names[i]} | {st_ / c / 1000:.2f} | {du / c / 1000:.2f} | {ex / c / 1000:.2f} |")
    print(f"{len(steps)} idle-separated segments; {n} decode steps of {common} kernels; "
          f"mean step span {span / n / 1000:.1f} us")
    top = sorted(lengths, key=lambda k: -k * lengths[k])[:6]
    print("segment lengths, kernels x segments: " + ", ".join(f"{k} x {lengths[k]}" for k in top))
    print("| kernel | a step | mean us | exposed us a step | share |")
    print("|---|---|---|---|---|")
    for k in sorted(order, key=lambda k: -exposed[k]):
        print(f"| {k} | {count[k] / n:g} | {dur[k] / count[k] / 1000:.2f} | {exposed[k] / n / 1000:.1f} | "
              f"{100 * exposed[k] / span:.0f} % |")


if __name__ == "__main__":
    main()
