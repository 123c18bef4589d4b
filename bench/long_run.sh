#!/usr/bin/env bash
# bench/long_run.sh — does memory stay flat over a long run? Trains the seed's character model for 100k
# steps and a GPT (the `small` preset, on the project's own docs as text) for 2k steps, reading the trainer's resident memory (VmRSS in
# /proc/<pid>/status) every 0.2 s. A leak shows as RSS that keeps growing after the first steps; the
# script fails if the last quarter's peak is more than 5% (and 2 MB) above the peak of the second quarter.
#
#   bench/long_run.sh                 both runs (a few minutes on 2 cores)
# Knobs: BUILD (default build), SEED_STEPS (100000), GPT_STEPS (2000), GPT_PRESET (small), THREADS (1).
# One line per run:
# RESULT run=<seed|gpt> steps=<n> cpu=<model> seconds=<s> rss_q1_mb=<a> rss_q2_mb=<b> rss_q3_mb=<c> rss_q4_mb=<d> flat=<yes|no>
# (rss_qK_mb: the peak RSS within the K-th quarter of the run's samples.)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
seed_steps=${SEED_STEPS:-100000} gpt_steps=${GPT_STEPS:-2000} preset=${GPT_PRESET:-small} threads=${THREADS:-1}
[[ -x $build/bin/scratchgrad ]] || (cd "$root" && make build BUILD="$build")
cpu=$("$root/bench/cpu_name.sh" --words)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# Runs the trainer with "$@", sampling its RSS (kB) into $work/rss, then prints the RESULT line.
measure() {
  local name=$1 steps=$2
  shift 2
  local start=$SECONDS
  "$build/bin/scratchgrad" train --steps "$steps" --threads "$threads" "$@" > "$work/$name.out" &
  local pid=$!
  : > "$work/rss"
  while kill -0 "$pid" 2>/dev/null; do
    awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null >> "$work/rss" || true
    sleep 0.2
  done
  wait "$pid" || { echo "long_run: the $name run failed:" >&2; tail -n 5 "$work/$name.out" >&2; exit 1; }
  local verdict
  verdict=$(awk -v name="$name" -v steps="$steps" -v cpu="$cpu" -v secs=$((SECONDS - start)) '
    { rss[NR] = $1 }
    END {
      if (NR < 8) { print "too-short"; exit }
      for (q = 1; q <= 4; ++q) {
        peak[q] = 0
        for (i = int((q - 1) * NR / 4) + 1; i <= int(q * NR / 4); ++i) if (rss[i] > peak[q]) peak[q] = rss[i]
      }
      growth = peak[4] - peak[2]
      flat = (growth <= 2048 || growth <= 0.05 * peak[2]) ? "yes" : "no"
      printf "RESULT run=%s steps=%d cpu=%s seconds=%d rss_q1_mb=%.1f rss_q2_mb=%.1f rss_q3_mb=%.1f rss_q4_mb=%.1f flat=%s\n",
             name, steps, cpu, secs, peak[1] / 1024, peak[2] / 1024, peak[3] / 1024, peak[4] / 1024, flat
    }' "$work/rss")
  echo "$verdict"
  [[ $verdict == *flat=yes* ]] || failed=1
}

echo "long_run: $seed_steps seed steps and $gpt_steps GPT ($preset) steps, $threads thread(s), on $cpu"
measure seed "$seed_steps" --eval-every $((seed_steps / 10))
cat "$root"/docs/*.md "$root"/README.md > "$work/text.txt"  # some 200 kB of English that every checkout has
measure gpt "$gpt_steps" --model gpt --preset "$preset" --text "$work/text.txt" --eval-every $((gpt_steps / 10))
exit "$failed"
