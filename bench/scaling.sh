#!/usr/bin/env bash
# bench/scaling.sh — how scratchgrad's training step time and peak memory grow with the context T and the
# width D of the character model (B 32, 1 head), next to the O(B·(T²·D + T·D²)) arithmetic of one step.
#
#   bench/scaling.sh               T = 64 128 256 512 1024 at D 256, then D = 64 128 256 512 1024 at T 128
#   ATTENTION="blocked flash" D_LIST= bench/scaling.sh
#                                  the T sweep with the composed attention, then with the flash op: peak RSS
#                                  grows like T² with the first (the [B, T, T] scores, probabilities and their
#                                  gradients) and like T with the second
#
# Needs build/bin/bench_char_model (bench/compare.sh builds it). Knobs: BUILD, THREADS (1), BATCH (32),
# HEADS (1), T_LIST, D_LIST (empty skips that sweep), FIXED_D (256), FIXED_T (128), STEPS (5), WARMUP (1),
# ATTENTION, one or several of: auto (the model's default: the composed ops, the masked half of the
# attention products skipped past 32 positions, and the flash op past 128 and the head dim under fast
# numerics), blocked (the composed ops, the masked half skipped past 32, at every length), dense (the
# workshop's ops at every length), flash (scaled_dot_product_attention at every length: O(T·D) memory).
# Default: blocked.
# SCRATCHGRAD_NUMERICS (exact|fast) passes through to the benchmark.
# GFLOP is the arithmetic of the step's matrix products: each forward product plus the two backward
# products that give its inputs' gradients, 2 flops per multiply-add, so 6·B·T·D·(3D + V) for the four
# linears (q, k, v, head) and 6·B·T²·D·2 for the two attention products (the masked half included, as a
# dense product computes it): 6·B·T·D·(3D + V + 2T). At the seed's size that is 1.86 MFLOP.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bin/bench_char_model
[[ -x $bin ]] || { echo "scaling.sh: $bin not found (run bench/compare.sh or build the bench_char_model target)" >&2; exit 1; }
threads=${THREADS:-1} B=${BATCH:-32} heads=${HEADS:-1}
t_list=${T_LIST-64 128 256 512 1024} d_list=${D_LIST-64 128 256 512 1024}
fixed_d=${FIXED_D:-256} fixed_t=${FIXED_T:-128}
steps=${STEPS:-5} warmup=${WARMUP:-1} attention_list=${ATTENTION:-blocked}
V=13  # the workshop text's vocabulary

field() { local v; v=$(tail -n 1 <<<"$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1); echo "${v:-na}"; }

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $threads thread(s), B $B, heads $heads, numerics ${SCRATCHGRAD_NUMERICS:-fast (default)}"
printf '%-6s %-9s %6s %6s | %10s %10s %8s %9s %9s\n' sweep attention T D ms_per_step GFLOP GFLOP/s rss_MB base_MB
sweep() {  # sweep NAME ATTENTION T D
  local out ms rss base gflop
  out=$("$bin" --dim "$4" --context "$3" --batch "$B" --heads "$heads" --threads "$threads" --steps "$steps" --warmup "$warmup" --attention "$2" 2>&1) || {
    echo "  $2 T $3 D $4 failed: $(tail -n 2 <<<"$out" | tr '\n' ' ')"; return; }
  ms=$(field ms_per_step "$out") rss=$(field rss_mb "$out") base=$(field rss_base_mb "$out")
  gflop=$(awk -v B="$B" -v T="$3" -v D="$4" -v V="$V" 'BEGIN { printf "%.3f", 6 * B * T * D * (3 * D + V + 2 * T) / 1e9 }')
  printf '%-6s %-9s %6s %6s | %10s %10s %8s %9s %9s\n' "$1" "$2" "$3" "$4" "$ms" "$gflop" \
    "$(awk -v g="$gflop" -v ms="$ms" 'BEGIN { if (ms == "na") print "na"; else printf "%.1f", g / (ms / 1000) }')" "$rss" "$base"
  lines+=("SCALING sweep=$1 attention=$2 T=$3 D=$4 ms_per_step=$ms gflop=$gflop rss_mb=$rss rss_base_mb=$base")
}
lines=()
for attention in $attention_list; do
  for T in $t_list; do sweep T "$attention" "$T" "$fixed_d"; done
  for D in $d_list; do sweep D "$attention" "$fixed_t" "$D"; done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${lines[@]}"
