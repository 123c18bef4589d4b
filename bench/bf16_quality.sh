#!/usr/bin/env bash
# bench/bf16_quality.sh — does a GPT trained with bfloat16 products (train --precision bf16) learn as well as
# the float32 run? Trains the `small` preset (3 blocks, D 96, H 4, T 64, B 16) twice with the same seed on
# Debian's licence texts (/usr/share/common-licenses, about 300 KB, concatenated in name order; the last 10%
# held out), once per precision, and reports both final held-out losses and their relative difference.
#
#   bench/bf16_quality.sh            2000 steps each
# Knobs: BUILD (default build), STEPS (2000), WARMUP (100, or a tenth of fewer than 1000 steps), THREADS (1),
# SEED (1). The last line is:
# RESULT size=small steps=<n> cpu=<model> fp32_held_out=<x> bf16_held_out=<y> relative_difference=<(y-x)/x>
#        fp32_seconds=<s> bf16_seconds=<s>
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
steps=${STEPS:-2000} threads=${THREADS:-1} seed=${SEED:-1}
warmup=${WARMUP:-$((steps >= 1000 ? 100 : steps / 10))}
[[ -x $build/bin/scratchgrad ]] || { echo "bf16_quality.sh: no $build/bin/scratchgrad (build it first)" >&2; exit 2; }
[[ -d /usr/share/common-licenses ]] || { echo "bf16_quality.sh: /usr/share/common-licenses is missing" >&2; exit 2; }

text=$(mktemp --suffix=.txt)
trap 'rm -f "$text"' EXIT
find /usr/share/common-licenses -maxdepth 1 -type f -print0 | sort -z | xargs -0 cat > "$text"
cpu=$("$root/bench/cpu_name.sh" --words)
echo "bf16_quality: $(wc -c < "$text") bytes of licence texts, $steps steps, $threads thread(s), seed $seed, on $cpu"

declare -A held_out seconds
for precision in fp32 bf16; do
  start=$(date +%s.%N)
  log=$("$build/bin/scratchgrad" train --model gpt --preset small --text "$text" --steps "$steps" --warmup "$warmup" \
        --seed "$seed" --threads "$threads" --precision "$precision")
  seconds[$precision]=$(echo "$(date +%s.%N) - $start" | bc)
  # "final loss 1.234, held-out 1.456 ..."
  held_out[$precision]=$(echo "$log" | sed -n 's/^final loss [0-9.]*, held-out \([0-9.]*\).*/\1/p')
  echo "$precision: held-out ${held_out[$precision]} after $steps steps (${seconds[$precision]} s)"
done
relative=$(echo "scale=6; (${held_out[bf16]} - ${held_out[fp32]}) / ${held_out[fp32]}" | bc)
echo "RESULT size=small steps=$steps cpu=$cpu fp32_held_out=${held_out[fp32]} bf16_held_out=${held_out[bf16]}" \
     "relative_difference=$relative fp32_seconds=${seconds[fp32]} bf16_seconds=${seconds[bf16]}"
