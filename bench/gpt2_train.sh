#!/bin/sh
# gpt2_train.sh — a GPT-2 124M training step at B 4, T 64 (the real 50,257-token head), full and LoRA, on 1 and
# 2 threads: ours (bench_gpt2_train, fast numerics) and PyTorch 1.13's (bench/torch/gpt2_train.py), one after
# the other in the same run, each printing its RESULT line. PyTorch's MFU divides by the peak ours measured.
#   bench/gpt2_train.sh [build/bin] [steps]
set -eu
bin=${1:-build/bin}
steps=${2:-5}
here=$(dirname "$0")
grep -m1 "model name" /proc/cpuinfo
for threads in 1 2; do
  for mode in full lora; do
    ours=$("$bin/bench_gpt2_train" --mode "$mode" --threads "$threads" --steps "$steps" | tail -1)
    echo "ours:    $ours"
    peak=$(echo "$ours" | sed -n 's/.*peak_gflops=\([0-9.]*\).*/\1/p')
    echo "pytorch: $(/usr/bin/python3 "$here/torch/gpt2_train.py" --mode "$mode" --threads "$threads" --steps "$steps" \
      --peak-gflops "$peak" | tail -1)"
  done
done
