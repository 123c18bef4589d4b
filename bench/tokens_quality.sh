#!/usr/bin/env bash
# bench/tokens_quality.sh — characters or BPE tokens: which teaches the same GPT more in the same steps?
# Trains the `small` preset (3 blocks, D 96, H 4, T 64, B 16, AdamW lr 3e-3, warm-up then cosine decay) three
# times on the same text, at equal steps: --tokenizer char, --tokenizer bpe --vocab-size 512 and
# --tokenizer bpe --vocab-size 2048. Each BPE is learned from the first nine tenths of the text only. Then
# each checkpoint is scored with `scratchgrad eval` on the same held-out file, the last tenth of the text's
# bytes (from a character's first byte, as the trainer splits it), with sliding windows over all of it: bits
# per byte is the one unit that compares across tokenizers (docs/tokenizer.md, "Bits per byte").
#
#   bench/tokens_quality.sh          about 1 MB of Debian's `fortunes` data files (installed with apt-get when
#                                    run as root; nothing of it is committed), 2000 steps each
# Knobs: BUILD (default build), STEPS (2000), WARMUP (100, or a tenth of fewer than 1000 steps), BYTES (1000000),
# THREADS (1), SAMPLE_BYTES (about how much text each model writes after the run, 300). Each model continues the
# prompt "The " sampled at temperature 0.8 (seed 1), for SAMPLE_BYTES times its held-out tokens per byte tokens, so
# that the samples are about equally long. One line per tokenizer, after the samples:
# RESULT tokenizer=<t> steps=<n> cpu=<model> held_out_bits_per_byte=<eval's, whole held-out file>
#        held_out_loss_per_token=<eval's> tokens_per_byte=<held-out tokens / bytes> train_seconds=<s>
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
steps=${STEPS:-2000} bytes=${BYTES:-1000000} threads=${THREADS:-1} sample_bytes=${SAMPLE_BYTES:-300}
warmup=${WARMUP:-$((steps >= 1000 ? 100 : steps / 10))}

if [[ ! -d /usr/share/games/fortunes ]]; then
  if [[ $(id -u) = 0 ]]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends fortunes
  else
    echo "tokens_quality.sh: missing package: fortunes (sudo apt-get install -y fortunes)" >&2; exit 1
  fi
fi
[[ -x $build/bin/scratchgrad ]] || (cd "$root" && make build BUILD="$build")

work=$build/tokens_quality
mkdir -p "$work"
text=$work/fortunes.txt  # the plain-text fortune files (not the .dat indexes), concatenated
set +o pipefail  # head stops reading early on purpose
find /usr/share/games/fortunes -maxdepth 1 \( -type f -o -type l \) ! -name '*.dat' ! -name '*.u8' -print0 | sort -z |
  xargs -0 cat 2>/dev/null | iconv -f utf-8 -t utf-8 -c 2>/dev/null | head -c "$bytes" > "$text"
set -o pipefail
# The held-out file: the last tenth of the bytes, moved forward past UTF-8 continuation bytes (0x80..0xBF).
size=$(wc -c < "$text")
split=$((size - size / 10))
while [[ $split -lt $size ]] && (( ($(od -An -tu1 -j "$split" -N1 "$text") & 0xC0) == 0x80 )); do split=$((split + 1)); done
held_out=$work/held_out.txt
tail -c +"$((split + 1))" "$text" > "$held_out"
cpu=$("$root/bench/cpu_name.sh" --words)
echo "tokens_quality: $size bytes of fortunes ($(wc -c < "$held_out") held out), $steps steps each, $threads thread(s), on $cpu"

run() {  # run NAME TOKENIZER-ARGS...
  local name=$1
  shift
  local log=$work/$name.log checkpoint=$work/$name.safetensors start end
  echo "== $name: scratchgrad train --model gpt --preset small $* --steps $steps"
  start=$(date +%s.%N)
  "$build/bin/scratchgrad" train --model gpt --preset small "$@" --steps "$steps" --warmup "$warmup" --text "$text" \
    --threads "$threads" --eval-every $((steps / 6 > 0 ? steps / 6 : 1)) --sample 0 --save "$checkpoint" | tee "$log"
  end=$(date +%s.%N)
  "$build/bin/scratchgrad" eval --checkpoint "$checkpoint" --text "$held_out" --threads "$threads" | tee "$work/$name.eval"
  local tokens loss bpb
  tokens=$(sed -n 's/^eval: \([0-9]*\) tokens.*/\1/p' "$work/$name.eval")
  loss=$(sed -n 's/^mean loss \([0-9.]*\) nats.*/\1/p' "$work/$name.eval")
  bpb=$(sed -n 's/.*bits per byte \([0-9.]*\)$/\1/p' "$work/$name.eval")
  local sample_tokens
  sample_tokens=$(awk -v t="$tokens" -v b="$(wc -c < "$held_out")" -v n="$sample_bytes" 'BEGIN { printf "%d", n * t / b + 0.5 }')
  SAMPLES+=("== $name, $sample_tokens tokens:" "$("$build/bin/scratchgrad" generate --checkpoint "$checkpoint" --prompt "The " \
    --tokens "$sample_tokens" --temperature 0.8 --seed 1 --threads "$threads")")
  RESULTS+=("RESULT tokenizer=$name steps=$steps cpu=$cpu held_out_bits_per_byte=$bpb held_out_loss_per_token=$loss $(
    awk -v t="$tokens" -v b="$(wc -c < "$held_out")" -v s="$start" -v e="$end" \
      'BEGIN { printf "tokens_per_byte=%.3f train_seconds=%.0f", t / b, e - s }')")
}

RESULTS=() SAMPLES=()
run char --tokenizer char
run bpe512 --tokenizer bpe --vocab-size 512
run bpe2048 --tokenizer bpe --vocab-size 2048
printf '%s\n' "${SAMPLES[@]}" "${RESULTS[@]}"
