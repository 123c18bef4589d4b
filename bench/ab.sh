#!/usr/bin/env bash
# bench/ab.sh — two builds of bench_gpt against each other, interleaved, on a noisy machine: each round
# runs A and B on 1 and 2 threads one after the other, and each keeps its fastest step over the rounds
# (the step least disturbed by other work). For a change's before/after; compare.sh is for PyTorch.
#
#   bench/ab.sh ROUNDS BIN_A BIN_B ["ENV=VALUE ..." for B only]
#   e.g.  bench/ab.sh 3 /tmp/base/build/bin/bench_gpt build/bin/bench_gpt
#
# Model: gpt6 (6 blocks, D 256, 4 heads, T 128, B 32) in fast numerics; FLAGS overrides the bench_gpt flags.
set -euo pipefail
rounds=$1 bin_a=$2 bin_b=$3 env_b=${4:-}
flags=${FLAGS:---layers 6 --dim 256 --heads 4 --context 128 --batch 32 --steps 4 --warmup 1 --numerics fast}
declare -A best
for r in $(seq "$rounds"); do
  for t in 1 2; do
    for side in A B; do
      if [[ $side = A ]]; then bin=$bin_a; e=; else bin=$bin_b; e=$env_b; fi
      # shellcheck disable=SC2086
      ms=$(env $e "$bin" $flags --threads "$t" 2>&1 | grep -o "min [0-9.]*" | awk '{print $2}')
      key=$side$t
      best[$key]=$(awk -v a="$ms" -v b="${best[$key]:-1e30}" 'BEGIN { print (a < b) ? a : b }')
      echo "round $r $side threads=$t min_ms=$ms"
    done
  done
done
for t in 1 2; do
  echo "threads=$t A_ms=${best[A$t]} B_ms=${best[B$t]} B/A=$(awk -v a="${best[A$t]}" -v b="${best[B$t]}" 'BEGIN { printf "%.3f", b / a }')"
done
