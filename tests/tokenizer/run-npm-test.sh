#!/usr/bin/env bash
# run-npm-test.sh — compares scratchgrad's GPT-2 tokenizer with the npm package gpt-3-encoder (compare.mjs),
# installed with `npm ci` from the committed lock into the build folder. Needs node, npm and the network:
# without them it prints why and exits 77, which ctest reports as skipped.
#   run-npm-test.sh <scratchgrad binary> <work folder>
set -uo pipefail
scratchgrad="$1"
work="$2"
here="$(cd "$(dirname "$0")" && pwd)"
source_dir="$(cd "$here/../.." && pwd)"

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (Debian: apt-get install nodejs npm)"; exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$work/"
if [ ! -f "$work/node_modules/gpt-3-encoder/encoder.json" ]; then
  if ! (cd "$work" && timeout 300 npm ci --no-audit --no-fund >npm-ci.log 2>&1); then
    echo "SKIP: npm ci failed (no network?):"; tail -3 "$work/npm-ci.log"; exit 77
  fi
fi
cp "$here/compare.mjs" "$work/"
cd "$work" && node compare.mjs "$scratchgrad" "$work/node_modules/gpt-3-encoder" "$source_dir" "$work"
