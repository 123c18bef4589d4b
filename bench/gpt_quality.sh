#!/usr/bin/env bash
# bench/gpt_quality.sh — does scratchgrad's GPT learn as well as PyTorch's? Trains the `small` preset
# (3 blocks, D 96, H 4, T 64, B 16, AdamW lr 3e-3, 100 warm-up steps then cosine decay, weight decay 0.1,
# clip 1.0) and its PyTorch twin (bench/torch/gpt_train.py) on the same text, with the same steps and the
# same held-out split (the last 10%), and reports both held-out losses, steps per second and peak memory.
#
#   bench/gpt_quality.sh             about 1 MB of Debian's `fortunes` data files (installed with apt-get
#                                    when run as root; nothing of it is committed), 3000 steps each
# Knobs: BUILD (default build), STEPS (3000), WARMUP (100, or a tenth of fewer than 1000 steps), BYTES (1000000), THREADS (1), NUMERICS is not a knob yet:
# the GPT trains in the exact numerics. The last line is:
# RESULT size=small steps=<n> cpu=<model> scratchgrad_held_out=<x> torch_held_out=<y> difference=<x-y>
#        scratchgrad_steps_per_s=<a> torch_steps_per_s=<b> scratchgrad_rss_mb=<c> torch_rss_mb=<d>
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
steps=${STEPS:-3000} bytes=${BYTES:-1000000} threads=${THREADS:-1}
warmup=${WARMUP:-$((steps >= 1000 ? 100 : steps / 10))}
python=${PYTHON:-/usr/bin/python3}

need=()
[[ -d /usr/share/games/fortunes ]] || need+=(fortunes)
"$python" -c 'import torch' 2>/dev/null || need+=(python3-torch)
command -v /usr/bin/time >/dev/null && /usr/bin/time -f x true 2>/dev/null || need+=(time)
if ((${#need[@]})); then
  if [[ $(id -u) = 0 ]]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
  else
    echo "gpt_quality.sh: missing packages: ${need[*]} (sudo apt-get install -y ${need[*]})" >&2; exit 1
  fi
fi
[[ -x $build/bin/scratchgrad ]] || (cd "$root" && make build BUILD="$build")

text=$build/fortunes.txt  # the plain-text fortune files (not the .dat indexes), concatenated
set +o pipefail  # head stops reading early on purpose
find /usr/share/games/fortunes -maxdepth 1 \( -type f -o -type l \) ! -name '*.dat' ! -name '*.u8' -print0 | sort -z |
  xargs -0 cat 2>/dev/null | iconv -f utf-8 -t utf-8 -c 2>/dev/null | head -c "$bytes" > "$text"
set -o pipefail
cpu=$("$root/bench/cpu_name.sh" --words)
echo "gpt_quality: $(wc -c < "$text") bytes of fortunes, $steps steps, $threads thread(s), on $cpu"

rss() { sed -n 's/^MAXRSS=//p' "$1" | awk '{printf "%.0f", $1 / 1024}'; }
/usr/bin/time -f 'MAXRSS=%M' -o "$build/gpt_quality.sg.time" \
  "$build/bin/scratchgrad" train --model gpt --preset small --steps "$steps" --warmup "$warmup" --text "$text" --threads "$threads" \
  --eval-every $((steps / 10 > 0 ? steps / 10 : 1)) --sample 0 | tee "$build/gpt_quality.sg.log"
sg_val=$(sed -n 's/^final loss [0-9.]*, held-out \([0-9.]*\)$/\1/p' "$build/gpt_quality.sg.log")
sg_rate=$(grep '^step' "$build/gpt_quality.sg.log" | tail -1 | sed 's/.*| \([0-9]*\) tok\/s.*/\1/' | awk -v t=1024 '{printf "%.2f", $1 / t}')
/usr/bin/time -f 'MAXRSS=%M' -o "$build/gpt_quality.torch.time" \
  "$python" "$root/bench/torch/gpt_train.py" --text "$text" --steps "$steps" --warmup "$warmup" --threads "$threads" | tee "$build/gpt_quality.torch.log"
t_val=$(sed -n 's/.*held_out=\([0-9.]*\).*/\1/p' "$build/gpt_quality.torch.log")
t_rate=$(sed -n 's/.*steps_per_s=\([0-9.]*\).*/\1/p' "$build/gpt_quality.torch.log")
diff=$(awk -v a="$sg_val" -v b="$t_val" 'BEGIN { printf "%+.3f", a - b }')
echo "RESULT size=small steps=$steps cpu=$cpu scratchgrad_held_out=$sg_val torch_held_out=$t_val difference=$diff" \
     "scratchgrad_steps_per_s=$sg_rate torch_steps_per_s=$t_rate scratchgrad_rss_mb=$(rss "$build/gpt_quality.sg.time")" \
     "torch_rss_mb=$(rss "$build/gpt_quality.torch.time")"
