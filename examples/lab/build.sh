#!/usr/bin/env bash
# build.sh — builds the lab page with Emscripten into build-wasm/lab/ (or $1/lab/): index.html, lab.css,
# app.js and lab.js (the engine compiled to WebAssembly, inlined). Incremental: a second run rebuilds only
# what changed. Needs em++ (Debian: apt-get install emscripten; `make lab` installs it).
set -euo pipefail
source_dir="$(cd "$(dirname "$0")/../.." && pwd)"
build_dir="${1:-$source_dir/build-wasm}"
# Debian's emscripten runs its JavaScript tools with node and finds their modules (acorn) here.
export NODE_PATH="${NODE_PATH:-/usr/share/nodejs}"
command -v em++ >/dev/null || { echo "build.sh: em++ not found (apt-get install emscripten)" >&2; exit 2; }
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # ccache (when installed) keeps the compiled objects, as for the native builds: em++ takes seconds to start.
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  emcmake cmake -S "$source_dir/examples/lab" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
fi
cmake --build "$build_dir" -j "$(nproc 2>/dev/null || echo 2)"
echo "built $build_dir/lab/index.html"
