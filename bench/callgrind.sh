#!/usr/bin/env bash
# bench/callgrind.sh — instructions per training step at the seed's size, counted by valgrind's callgrind:
# a figure that does not move with the machine's load, so a change's cost shows even on a busy VM.
#
#   bench/callgrind.sh [extra bench_char_model flags, e.g. --dim 64 --context 16]
#
# Runs bench_char_model under callgrind twice, for SHORT (20) and LONG (120) steps with no warm-up, and
# divides the difference by LONG - SHORT: start-up, model construction and the first step's one-off
# allocations cancel out. Single-threaded (BLIS and the kernels on one thread). Needs valgrind and
# build/bin/bench_char_model (bench/compare.sh builds it). Knobs: BUILD, SHORT, LONG, KEEP=1 keeps the
# callgrind.out files in the build directory for callgrind_annotate.
# The last line is: instructions_per_step=<n>
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bin/bench_char_model
short=${SHORT:-20} long=${LONG:-120}
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (Debian: apt-get install valgrind)" >&2; exit 1; }
[[ -x $bin ]] || { echo "callgrind.sh: $bin not found (run bench/compare.sh or build the bench_char_model target)" >&2; exit 1; }

count() {  # count STEPS: instructions of a whole run
  local out=$build/callgrind.out.$1
  SCRATCHGRAD_THREADS=1 valgrind --tool=callgrind --callgrind-out-file="$out" "$bin" --threads 1 --steps "$1" --warmup 0 "${@:2}" \
    2>&1 | sed -n 's/.*Collected : *//p'
  [[ ${KEEP:-0} = 1 ]] || rm -f "$out"
}
a=$(count "$short" "$@")
b=$(count "$long" "$@")
echo "callgrind: $short steps $a instructions, $long steps $b instructions ($*)"
echo "instructions_per_step=$(((b - a) / (long - short)))"
