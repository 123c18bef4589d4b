#!/bin/sh
# gpt2_train.sh — a GPT-2 124M training step at B 4, T 64 (the real 50,257-token head), full and LoRA, on 1 and
# 2 threads: ours (bench_gpt2_train, fast numerics) and PyTorch 1.13's (bench/torch/gpt2_train.py), one after
# the other in the same run, each printing its RESULT line. PyTorch's MFU divides by the peak ours measured.
#   bench/gpt2_train.sh [build/bin] [steps]
# PRECISIONS ("fp32") lists the precisions each runs in: "fp32 bf16" adds ours under --precision bf16 (the
# products on bfloat16 operands, AutocastGuard) and PyTorch's step under torch.autocast("cpu", bfloat16),
# after the float32 pair of the same mode and thread count; a bf16 MFU is over the bfloat16 path's peak.
# THREADS ("1 2") lists the thread counts, MODES ("full lora") the modes. WARMUP (2) untimed steps come
# first in ours and PyTorch's runs. PyTorch's lines need /usr/bin/python3 with
# Debian's python3-torch (PYTHON names another); without it they say it is absent. Besides its RESULT line,
# ours prints its step by phase and its matrix products' share ("ours phases:", "ours products:").
# With LLMC_DIR set to a folder holding a built llm.c train_gpt2 and its inputs (bench/llmc_build.sh makes one
# from a checkout of llm.c; llm.c's source is not in this repository), each thread count also runs llm.c's CPU
# trainer, full fine-tune only (it has no LoRA), under OMP_NUM_THREADS. Its B 4, T 64 are train_gpt2.c's own.
# Its line is the median of the "took" times it prints for steps 1..steps (step 0 allocates the gradients and
# AdamW's moments), stopped after that step; a "took" covers the batch's read, forward, zero_grad, backward
# and AdamW, and not the validation loss or the sampling it does every 10 and 20 steps. Its MFU uses the FLOPs
# and the peak of ours' full line at that thread count (llm.c's head is 50,304 wide, padded; the count is
# the 50,257 of ours).
set -eu
bin=${1:-build/bin}
steps=${2:-5}
warmup=${WARMUP:-2}
python=${PYTHON:-/usr/bin/python3}
here=$(dirname "$0")
have_torch=1
"$python" -c 'import torch' 2>/dev/null || have_torch=0
if [ -n "${LLMC_DIR:-}" ] && [ ! -x "$LLMC_DIR/train_gpt2" ]; then
  echo "gpt2_train.sh: LLMC_DIR=$LLMC_DIR holds no built train_gpt2 (bench/llmc_build.sh builds one)" >&2
  exit 2
fi

# llmc THREADS OURS_FULL_LINE: run llm.c's train_gpt2 until it has printed step `steps`, then stop it, and print
# its RESULT line
llmc() {
  peak=$(echo "$2" | sed -n 's/.*peak_gflops=\([0-9.]*\).*/\1/p')
  gflop=$(echo "$2" | sed -n 's/.*gflop_per_step=\([0-9.]*\).*/\1/p')
  last=$((steps > 40 ? 40 : steps))  # train_gpt2.c runs steps 0..40
  log=$(mktemp)
  # line-buffered, so that the log shows each step as it ends; exec, so that $! is train_gpt2 itself
  (cd "$LLMC_DIR" && OMP_NUM_THREADS=$1 exec stdbuf -oL ./train_gpt2 >"$log" 2>&1) &
  pid=$!
  trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
  while kill -0 "$pid" 2>/dev/null && [ "$(grep -c '^step ' "$log")" -le "$last" ]; do sleep 1; done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  trap - INT TERM
  awk -v last="$last" -v threads="$1" -v gflop="$gflop" -v peak="$peak" '
    # step 3: train loss 10.992853 (took 7787.507024 ms)
    /^step [0-9]+: train loss .* \(took / {
      step = $2 + 0
      if (step == 0) loss = $5
      else if (step <= last) ms[++n] = $7 + 0
      next
    }
    { output = output "\n  " $0 }
    END {
      if (n == 0) { print "no step timed; train_gpt2 printed:" output; exit 1 }
      for (i = 2; i <= n; i++) for (j = i; j > 1 && ms[j - 1] > ms[j]; j--) { t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t }
      median = n % 2 ? ms[(n + 1) / 2] : (ms[n / 2] + ms[n / 2 + 1]) / 2
      mfu = peak > 0 ? gflop / (median / 1e3) / (peak * threads) : 0
      printf "RESULT mode=full threads=%d ms_per_step=%.1f mfu=%.3f gflop_per_step=%s peak_gflops=%s loss=%s\n",
             threads, median, mfu, gflop, peak, loss
    }' "$log"
  rm -f "$log"
}

echo "cpu: $("$here/cpu_name.sh")"
for threads in ${THREADS:-1 2}; do
  ours_full=""
  for mode in ${MODES:-full lora}; do
   for precision in ${PRECISIONS:-fp32}; do
    log=$("$bin/bench_gpt2_train" --mode "$mode" --threads "$threads" --steps "$steps" --warmup "$warmup" \
      --precision "$precision")
    ours=$(echo "$log" | tail -1)
    echo "ours:    $ours"
    echo "ours phases: $(echo "$log" | sed -n 's/^median ms by phase: *//p')"
    echo "ours products: $(echo "$log" | sed -n 's/^matrix products: *//p')"
    if [ "$mode" = full ] && [ "$precision" = fp32 ]; then ours_full=$ours; fi
    peak=$(echo "$ours" | sed -n 's/.*peak_gflops=\([0-9.]*\).*/\1/p')
    if [ "$have_torch" = 1 ]; then
      echo "pytorch: $("$python" "$here/torch/gpt2_train.py" --mode "$mode" --threads "$threads" --steps "$steps" \
        --warmup "$warmup" --peak-gflops "$peak" --precision "$precision" | tail -1)"
    else
      echo "pytorch: absent ($python cannot import torch: apt-get install python3-torch)"
    fi
   done
  done
  if [ -n "${LLMC_DIR:-}" ]; then
    echo "llm.c:   $(llmc "$threads" "$ours_full")"
  fi
done
