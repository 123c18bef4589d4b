#!/usr/bin/env bash
# run-browser-test.sh — the lab's browser test (tests/lab/browser.test.mjs): builds what is missing (the
# native programs it compares with, the WebAssembly page), installs playwright-core from the committed
# lock file, and drives the page in headless Chromium (/usr/bin/chromium; Debian: apt-get install chromium).
#   NATIVE_BUILD=build (default)  WASM_BUILD=build-wasm (default)  screenshots: build-wasm/lab-screenshots/
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
native_build="${NATIVE_BUILD:-$source_dir/build}"
wasm_build="${WASM_BUILD:-$source_dir/build-wasm}"
cd "$source_dir"

if [ ! -x "$native_build/bin/lab_json" ] || [ ! -x "$native_build/bin/attention_from_scratch" ] || [ ! -x "$native_build/bin/scratchgrad" ]; then
  [ -f "$native_build/CMakeCache.txt" ] || cmake -S . -B "$native_build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$native_build" --target lab_json attention_from_scratch scratchgrad -j "$(nproc)"
fi
examples/lab/build.sh "$wasm_build"

if [ ! -d tests/lab/node_modules/playwright-core ]; then
  (cd tests/lab && npm ci --no-audit --no-fund)
fi
LAB_DIR="$wasm_build/lab" NATIVE_BIN="$native_build/bin" SCREENSHOTS="$wasm_build/lab-screenshots" \
  node tests/lab/browser.test.mjs
