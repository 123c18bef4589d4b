#!/usr/bin/env bash
# tokenizer.sh — the tokenizer's speed beside its yardsticks, on one core (docs/tokenizer.md quotes it).
#   bench/tokenizer.sh [BUILD=build]
# Text: the first 1 MB of Debian's licence texts and package copyright files. The Python minbpe (no
# deduplication, a full recount per merge) would take far too long there, so it trains 512 tokens on the
# first 100 kB, beside bench_tokenizer on the same, and checks that both make the same merges. The npm
# encoder encodes the same 100 kB.
set -euo pipefail
build="${1:-build}"
work="$(mktemp -d)"
{ cat /usr/share/common-licenses/* /usr/share/doc/*/copyright 2>/dev/null || true; } | head -c 1000000 | iconv -f utf-8 -t utf-8 -c > "$work/1mb.txt"
head -c 100000 "$work/1mb.txt" | iconv -f utf-8 -t utf-8 -c > "$work/100kb.txt"
echo "cpu: $("$(dirname "${BASH_SOURCE[0]}")/cpu_name.sh")"
taskset -c 0 "$build/bin/bench_tokenizer" "$work/1mb.txt" 4096
echo "--- 512 tokens on 100 kB: scratchgrad, then Python minbpe"
taskset -c 0 "$build/bin/scratchgrad" bpe --text "$work/100kb.txt" --vocab-size 512 --save "$work/100kb.bpe" | grep learned
taskset -c 0 python3 bench/minbpe_train.py "$work/100kb.txt" 512 --compare "$work/100kb.bpe"
echo "--- GPT-2 encoding of the 100 kB: scratchgrad, then the npm encoder (its output array grows by"
echo "    concatenation, which is quadratic: a whole megabyte takes it minutes)"
taskset -c 0 "$build/bin/bench_tokenizer" "$work/100kb.txt" 512 | grep "gpt2 encode"
if [ -d tests/tokenizer/node_modules/gpt-3-encoder ]; then
  taskset -c 0 node bench/npm_encode.mjs "$work/100kb.txt"
else
  echo "(npm encoder not installed: cd tests/tokenizer && npm ci)"
fi
rm -rf "$work"
