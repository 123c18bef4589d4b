#!/bin/sh
# examples/assistant/run.sh — a tiny assistant from scratch on a CPU (`make assistant`; docs/finetuning.md).
#
#   examples/assistant/run.sh [BUILD] [OUT]       (BUILD: the build folder, default build; OUT: BUILD/assistant)
#
# 1. writes its own conversations (build/bin/make_conversations: two-digit addition, counting a letter,
#    spelling a word backwards; the held-out questions are none of the training ones);
# 2. trains a new small GPT on them with `scratchgrad train --task instruct` (ChatML, the loss on the replies
#    only; the tokenizer: bytes and ChatML's special tokens, so each digit and letter is a token);
# 3. answers the held-out questions: `scratchgrad eval --task instruct --responses` writes each reply beside
#    its expected answer and prints the exact answers; then, where the build has the chat command, a few
#    held-out questions asked through `scratchgrad chat`.
#
# THREADS (default 2), STEPS, and TRAIN_PER_TASK change the recipe; the figures in docs/finetuning.md are
# this script's defaults.
set -eu
BUILD=${1:-build}
OUT=${2:-$BUILD/assistant}
THREADS=${THREADS:-2}
STEPS=${STEPS:-1400}
TRAIN_PER_TASK=${TRAIN_PER_TASK:-7000}
HELD_OUT_PER_TASK=${HELD_OUT_PER_TASK:-100}
SG="$BUILD/bin/scratchgrad"

"$BUILD/bin/make_conversations" "$OUT" "$TRAIN_PER_TASK" "$HELD_OUT_PER_TASK" 1

start=$(date +%s)
"$SG" train --task instruct --data "$OUT/train.jsonl" --template chatml \
  --model gpt --layers 4 --dim 128 --heads 4 --context 128 \
  --batch 32 --steps "$STEPS" --warmup 100 --lr 3e-3 --eval-every 100 --seed 1 \
  --threads "$THREADS" --save "$OUT/assistant.safetensors"
trained=$(date +%s)

for task in add count reverse; do
  echo "held-out $task:"
  "$SG" eval --task instruct --checkpoint "$OUT/assistant.safetensors" --data "$OUT/held-out-$task.jsonl" \
    --responses "$OUT/replies-$task.jsonl" --tokens 64 --threads "$THREADS"
done
done_at=$(date +%s)
echo "training took $((trained - start)) s, answering the held-out questions $((done_at - trained)) s ($THREADS threads)"
echo "each reply beside its expected answer: $OUT/replies-*.jsonl"

# The chat command (scratchgrad chat), where this build has it: a few held-out questions, one a line, each a
# new conversation (/reset between them).
if "$SG" --help | grep -q '^  chat '; then
  echo "asked through scratchgrad chat:"
  for task in add count reverse; do
    head -n 3 "$OUT/questions-$task.txt" | while IFS= read -r question; do
      printf '%s\n/reset\n' "$question"
    done
  done | "$SG" chat --checkpoint "$OUT/assistant.safetensors" --threads "$THREADS"
fi
