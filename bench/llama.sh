#!/bin/sh
# llama.sh — a Llama-family model at SmolLM2-135M's shape, ours (bench_llama, fast numerics) and PyTorch 1.13's
# (bench/torch/llama.py) one after the other in the same run, each printing its RESULT line: cached greedy
# generation (tokens/s, and ours beside the memory's bound) and a training step at B 4, T 64 (ms and MFU;
# PyTorch's MFU divides by the peak ours measured).
#   bench/llama.sh [build/bin] [steps]
# THREADS ("1 2") lists the thread counts; TOKENS (64) the cached steps; WARMUP (2) the untimed training
# steps. PyTorch's lines need /usr/bin/python3 with Debian's python3-torch (PYTHON names another).
set -eu
bin=${1:-build/bin}
steps=${2:-5}
tokens=${TOKENS:-64}
warmup=${WARMUP:-2}
python=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
have_torch=1
"$python" -c 'import torch' 2>/dev/null || have_torch=0
pytorch() {
  if [ "$have_torch" = 1 ]; then "$python" "$here/torch/llama.py" "$@" | tail -1
  else echo "absent ($python cannot import torch: apt-get install python3-torch)"; fi
}

grep -m1 "model name" /proc/cpuinfo
for threads in ${THREADS:-1 2}; do
  echo "ours:    $("$bin/bench_llama" generate --threads "$threads" --tokens "$tokens" | tail -1)"
  echo "pytorch: $(pytorch generate --threads "$threads" --tokens "$tokens")"
  ours=$("$bin/bench_llama" train --threads "$threads" --steps "$steps" --warmup "$warmup" | tail -1)
  echo "ours:    $ours"
  peak=$(echo "$ours" | sed -n 's/.*peak_gflops=\([0-9.]*\).*/\1/p')
  echo "pytorch: $(pytorch train --threads "$threads" --steps "$steps" --warmup "$warmup" --peak-gflops "$peak")"
done
