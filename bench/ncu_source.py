# One kernel's instruction mix and stall samples, from Nsight Compute's source page:
#   ncu --kernel-name regex:NAME --launch-skip 5 --launch-count 1 --section SourceCounters \
#       --section WarpStateStats --import-source no -o rep BINARY ARGS...
#   ncu -i rep.ncu-rep --page source --csv --print-source sass > src.csv
#   python3 bench/ncu_source.py src.csv [UNITS] [--top N]
# Reads the report's first kernel. Prints the executed warp instructions and the share of stall samples
# per opcode (per unit of work when UNITS is given, e.g. the warp tiles the kernel walked), then the N
# instructions with the most stall samples (address, samples, executions per unit, source) to find the
# hot part of a loop.
import argparse, collections, csv, re, sys

ap = argparse.ArgumentParser(description="instruction mix and stall samples of one kernel")
ap.add_argument("csv")
ap.add_argument("units", nargs="?", type=float, default=1.0, help="units of work to divide the counts by")
ap.add_argument("--top", type=int, default=25, help="instructions with the most stall samples to list")
opt = ap.parse_args()
path, units, top = opt.csv, opt.units, opt.top
rows = list(csv.reader(open(path)))
head = next((i for i, r in enumerate(rows) if "Source" in r and "Instructions Executed" in r), None)
if head is None:
    sys.exit(f"{path}: no 'Source' / 'Instructions Executed' columns: is this `--page source --csv` output?")
cols = rows[head]
i_src, i_n = cols.index("Source"), cols.index("Instructions Executed")
i_stall = cols.index("Warp Stall Sampling (All Samples)")
lines = []
for r in rows[head + 1:]:
    if len(r) <= max(i_src, i_n, i_stall) or not r[i_src].strip():
        continue
    if r[i_n] == "Instructions Executed":  # the next kernel's header (a report of several launches)
        break
    text = r[i_src].strip()
    op = re.sub(r"^@!?U?P\w+\s+", "", text).split()[0]
    lines.append((r[0], op, text, int(r[i_n] or 0), int(r[i_stall] or 0)))
total = sum(n for *_, n, _ in lines) or 1
samples = sum(s for *_, s in lines) or 1
by_op, stall_op = collections.Counter(), collections.Counter()
for _, op, _, n, s in lines:
    by_op[op] += n
    stall_op[op] += s
print(f"{total:,} warp instructions ({total / units:,.1f} per unit), {samples:,} stall samples")
print(f"{'opcode':28s} {'per unit':>10s} {'share':>6s} {'stalls':>6s}")
for op, n in by_op.most_common(30):
    print(f"{op:28s} {n / units:10.1f} {100 * n / total:5.1f}% {100 * stall_op[op] / samples:5.1f}%")
print(f"\nthe {top} instructions with the most stall samples:")
base = int(lines[0][0], 16) if lines else 0
for addr, _, text, n, s in sorted(lines, key=lambda x: -x[4])[:top]:
    print(f"{int(addr, 16) - base:8x} {s:6d} {n / units:8.2f}  {text}")
