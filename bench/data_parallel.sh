#!/usr/bin/env bash
# bench/data_parallel.sh — data parallelism on this machine: 1 rank × 2 threads against 2 ranks × 1 thread
# (the same two cores), at the GPT `small` preset (3 blocks, D 96, H 4, T 64, B 16) and at gpt6 (6 blocks,
# D 256, H 4, T 128, B 32). For each size it prints the time per step (the first step not timed), the
# scaling efficiency t(1 × 2) / t(2 × 1) (and t(1 × 1) / (2 · t(2 × 1)), one thread's step as the unit), the time each step waits for gradients after backward with and
# without overlap, the share of the allreduce time that backward hid (1 − waited / waited without overlap),
# and what --deterministic-reduce costs.
#
#   bench/data_parallel.sh            STEPS_SMALL=30 STEPS_GPT6=6 by default: a few minutes in all
#
# Needs build/bin/scratchgrad built with MPI (BUILD=... for another build folder) and mpirun.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bin/scratchgrad
[[ -x $bin ]] || { echo "data_parallel.sh: $bin not found" >&2; exit 1; }
mpirun=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe --bind-to none}
text=$(mktemp)
trap 'rm -f "$text"' EXIT
cat "$root"/docs/*.md "$root"/README.md >"$text"  # some 100 kB of text to learn

# "data parallel: ... : 12.34 ms per step, 1.23 ms of it waiting ..." → "12.34 1.23"
timing() { sed -n 's/^data parallel: .*: \([0-9.]*\) ms per step, \([0-9.]*\) ms of it waiting.*/\1 \2/p' <<<"$1"; }

run() {  # ranks threads steps size-flags extra-flags...
  local ranks=$1 threads=$2 steps=$3; shift 3
  local out
  out=$($mpirun -np "$ranks" "$bin" train --model gpt --text "$text" --threads "$threads" --steps "$steps" \
        --warmup 1 --eval-every 1000000 --sample 0 --check-every 1000000 "$@" 2>&1) || { echo "$out" >&2; exit 1; }
  timing "$out"
}

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $("$root/bench/cpu_name.sh"), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for size in small gpt6; do
  if [[ $size = small ]]; then flags=(--preset small); steps=${STEPS_SMALL:-30}
  else flags=(--preset small --layers 6 --dim 256 --heads 4 --context 128 --batch 32); steps=${STEPS_GPT6:-6}; fi
  read -r single _ < <(run 1 1 "$steps" "${flags[@]}")
  read -r one _ < <(run 1 2 "$steps" "${flags[@]}")
  read -r two wait_overlap < <(run 2 1 "$steps" "${flags[@]}")
  read -r two_serial wait_serial < <(run 2 1 "$steps" "${flags[@]}" --no-overlap)
  read -r det_one _ < <(run 1 2 "$steps" "${flags[@]}" --deterministic-reduce)
  read -r det_two _ < <(run 2 1 "$steps" "${flags[@]}" --deterministic-reduce)
  awk -v s="$size" -v n="$steps" -v one_thread="$single" -v a="$one" -v b="$two" -v wo="$wait_overlap" -v c="$two_serial" -v ws="$wait_serial" \
      -v d1="$det_one" -v d2="$det_two" 'BEGIN {
    printf "%s (%d steps): 1 rank x 1 thread %.1f ms/step; 1 rank x 2 threads %.1f ms/step; 2 ranks x 1 thread %.1f ms/step (efficiency against 1 x 2: %.2f, against 1 x 1: %.2f)\n", s, n, one_thread, a, b, a / b, one_thread / (2 * b)
    printf "  waiting for gradients after backward: %.2f ms/step overlapped, %.2f ms/step not (%.1f ms/step in all): %.0f%% hidden\n", wo, ws, c, (ws > 0 ? 100 * (1 - wo / ws) : 0)
    printf "  --deterministic-reduce (one micro-shard per window): %.1f ms/step on 1 rank x 2 threads, %.1f ms/step on 2 ranks x 1 thread\n", d1, d2
  }'
done
