# The kernels of one decode step and their GPU time, from Nsight Compute's per-kernel durations:
#   ncu --csv --print-units base --metrics gpu__time_duration.sum TERN bench MODEL --cuda-graphs off \
#       --prompt-tokens 16 --gen-tokens 2 --repeats 1 --warmup 0 > ncu.csv
#   python3 bench/step_kernels.py ncu.csv N_LAYERS [--prefill]
# The step is everything from the last launch of the embedding kernel on (eager decode, one step per
# token). With --prefill: the forward before it instead, from the embedding launch before that one (run
# `tern bench --prompt-tokens P --gen-tokens 1`: the prompt's forward, then one decode step). ncu
# serialises the kernels and runs each alone, so the sum is kernel time without the gaps between launches.
import collections, csv, re, sys

path, n_layers = sys.argv[1], int(sys.argv[2])
prefill = "--prefill" in sys.argv[3:]
rows = list(csv.reader(open(path)))
head = next(i for i, r in enumerate(rows) if r and r[0] == "ID")
cols = rows[head]
name_at, value_at = cols.index("Kernel Name"), cols.index("Metric Value")
launches = [(r[name_at], float(r[value_at].replace(",", "")) / 1e3) for r in rows[head + 1:] if len(r) > value_at]
short = [re.sub(r"^(\w+::)+", "", n.split("(")[0].replace("void ", "")) for n, _ in launches]

# One decode step: the last launch of the embedding kernel to the end (eager decode, one step per token).
starts = [i for i, n in enumerate(short) if n.startswith("embedding_kernel")]
if not starts:
    sys.exit("no embedding_kernel launch found: is this a `tern bench` run with --cuda-graphs off?")
if prefill and len(starts) < 2:
    sys.exit("--prefill needs two embedding_kernel launches (the prompt's forward, then a decode step)")
span = slice(starts[-2], starts[-1]) if prefill else slice(starts[-1], None)
step = list(zip(short, (t for _, t in launches)))[span]
total = sum(t for _, t in step)
print(f"{len(step)} kernels in the {'prefill' if prefill else 'last decode step'}, {total:.1f} us of kernel time "
      f"({len(step) / n_layers:.1f} kernels and {total / n_layers:.1f} us per layer)")
count, time = collections.Counter(), collections.Counter()
for n, t in step:
    count[n] += 1
    time[n] += t
print("| kernel | launches | us | us per launch | share |")
print("|---|---|---|---|---|")
for n in sorted(time, key=lambda k: -time[k]):
    print(f"| {n[:70]} | {count[n]} | {time[n]:.1f} | {time[n] / count[n]:.2f} | {100 * time[n] / total:.0f}% |")
