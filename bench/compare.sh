#!/usr/bin/env bash
# bench/compare.sh — scratchgrad against PyTorch, side by side: milliseconds per training step of the
# character model and peak memory, at the seed's size and at D 256, on 1 and 2 threads.
#
#   bench/compare.sh                 build (Release, in build/) if needed, run everything (a few minutes)
#
# Sizes: seed   D 24,  T 8,   B 16, 1 head   (the workshop's model)
#        d256h1 D 256, T 128, B 32, 1 head
#        d256h4 D 256, T 128, B 32, 4 heads
# PyTorch runs twice per configuration: as installed (BLIS picks its own kernels), and "tuned", with
# BLIS_ARCH_TYPE set to the kernel family scratchgrad chose (skx -> 0, haswell -> 3; Debian's PyTorch does
# its matmuls in BLIS through libblas.so.3, so the variable reaches it too). Both PyTorch runs get
# BLIS_NUM_THREADS=<threads>, so its BLIS calls use as many threads as scratchgrad's do (torch.set_num_threads
# alone does not reach BLIS).
#
# scratchgrad runs with your environment: SCRATCHGRAD_MATMUL=blis, for one, makes its large products use
# BLIS's optimised kernels instead of the default bit-exact ones (autograd/cpu/matmul.cpp); the header says
# which. Environment knobs: BUILD (build directory, default build), PYTHON (default /usr/bin/python3, Debian's
# PyTorch), CMAKE_FLAGS (extra flags for a first configure), SIZES ("seed d256h1 d256h4"), THREADS ("1 2"),
# SEED_STEPS/SEED_WARMUP (300/30), D256_STEPS/D256_WARMUP (15/3), REPEAT (1).
#
# Each measurement is the median step time of one process; with REPEAT=k every configuration runs k
# interleaved rounds (scratchgrad, PyTorch, PyTorch tuned, again) and each side keeps its fastest median,
# which on a busy machine is the figure least disturbed by other work. Peak memory is the largest seen. The last lines, one per configuration, are:
# RESULT size=<seed|d256h1|d256h4> threads=<n> scratchgrad_ms=<x> torch_ms=<y> speedup=<y/x> torch_tuned_ms=<z> speedup_tuned=<z/x> scratchgrad_rss_mb=<a> torch_rss_mb=<b>
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
python=${PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=$(command -v python3 || echo python3)
sizes=${SIZES:-seed d256h1 d256h4}
threads_list=${THREADS:-1 2}
seed_steps=${SEED_STEPS:-300} seed_warmup=${SEED_WARMUP:-30}
d256_steps=${D256_STEPS:-15} d256_warmup=${D256_WARMUP:-3}
repeat=${REPEAT:-1}
jobs=$(nproc 2>/dev/null || echo 2)

# ---- build ----
bench_bin=$build/bin/bench_char_model
cache=$build/CMakeCache.txt
if [[ ! -f $cache ]] || ! grep -q '^SCRATCHGRAD_BENCH:BOOL=ON' "$cache"; then
  echo "configuring $build (Release, benchmarks on)"
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSCRATCHGRAD_BENCH=ON ${CMAKE_FLAGS:-} >/dev/null || exit 1
fi
echo "building bench_char_model in $build"
cmake --build "$build" --target bench_char_model -j "$jobs" >"$build/bench_build.log" 2>&1 || {
  tail -30 "$build/bench_build.log"; echo "compare.sh: the build failed (log: $build/bench_build.log)" >&2; exit 1; }

# ---- helpers ----
# field NAME TEXT: the value of NAME=value in the last line of TEXT, or "na"
field() { local v; v=$(tail -n 1 <<<"$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1); echo "${v:-na}"; }
# ratio Y X: Y/X with two decimals, "na" when either is missing
ratio() { awk -v y="$1" -v x="$2" 'BEGIN { if (y == "na" || x == "na" || x + 0 == 0) print "na"; else printf "%.2f", y / x }'; }
# least A B / most A B: the smaller / larger of two numbers, either of which may be "na"
least() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "na") print b; else if (b == "na" || a + 0 <= b + 0) print a; else print b }'; }
most() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "na") print b; else if (b == "na" || a + 0 >= b + 0) print a; else print b }'; }
size_flags() {
  case $1 in
    seed)   echo "--dim 24 --context 8 --batch 16 --heads 1 --steps $seed_steps --warmup $seed_warmup" ;;
    d256h1) echo "--dim 256 --context 128 --batch 32 --heads 1 --steps $d256_steps --warmup $d256_warmup" ;;
    d256h4) echo "--dim 256 --context 128 --batch 32 --heads 4 --steps $d256_steps --warmup $d256_warmup" ;;
    *) echo "compare.sh: unknown size '$1' (seed, d256h1, d256h4)" >&2; exit 2 ;;
  esac
}
# run LABEL COMMAND...: runs one benchmark, echoes its output; on failure shows why and prints nothing
run() {
  local label=$1 out; shift
  if ! out=$("$@" 2>&1); then
    echo "  $label failed: $(tail -n 3 <<<"$out" | tr '\n' ' ')" >&2
    return 0
  fi
  echo "$out"
}

# ---- what we run on ----
echo
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit:  $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- autograd nn optim 2>/dev/null || echo ' (autograd/nn/optim modified)')"

kernel=$(field blis_kernel "$("$bench_bin" --steps 1 --warmup 0 | grep '^blis_kernel=')")
case $kernel in
  skx) tuned_arch=0 ;;
  haswell) tuned_arch=3 ;;
  *) tuned_arch= ;;
esac
echo "scratchgrad BLIS kernels: $kernel$( [[ -n ${BLIS_ARCH_TYPE:-} ]] && echo " (BLIS_ARCH_TYPE=$BLIS_ARCH_TYPE set by you)"), SCRATCHGRAD_MATMUL=${SCRATCHGRAD_MATMUL:-(unset)}"

have_torch=1
if torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  echo "PyTorch:  $torch_version ($python); tuned runs use BLIS_ARCH_TYPE=${tuned_arch:-<unset: no matching family>}"
else
  have_torch=0
  echo "PyTorch is not importable with $python: its columns are na (set PYTHON=... to point at one)"
fi
echo

# ---- measure ----
results=()
printf '%-7s %3s | %12s %12s %8s %12s %8s | %9s %9s\n' size thr scratchgrad_ms torch_ms speedup tuned_ms speedup sg_rss_MB pt_rss_MB
printf '%s\n' "--------------------------------------------------------------------------------------------------------"
for size in $sizes; do
  flags=$(size_flags "$size") || exit 2
  for n in $threads_list; do
    x=na y=na z=na a=na b=na
    for ((round = 1; round <= repeat; ++round)); do  # interleaved rounds; the fastest median of each side counts
      # shellcheck disable=SC2086
      sg=$(run "scratchgrad $size threads=$n" "$bench_bin" $flags --threads "$n")
      x=$(least "$x" "$(field ms_per_step "$sg")") a=$(most "$a" "$(field rss_mb "$sg")")
      ((have_torch)) || continue
      # shellcheck disable=SC2086
      pt=$(run "torch $size threads=$n" env -u BLIS_ARCH_TYPE BLIS_NUM_THREADS="$n" \
        "$python" "$root/bench/torch/char_model.py" $flags --threads "$n")
      y=$(least "$y" "$(field ms_per_step "$pt")") b=$(most "$b" "$(field rss_mb "$pt")")
      if [[ -n $tuned_arch ]]; then
        # shellcheck disable=SC2086
        ptt=$(run "torch tuned $size threads=$n" env BLIS_ARCH_TYPE="$tuned_arch" BLIS_NUM_THREADS="$n" \
          "$python" "$root/bench/torch/char_model.py" $flags --threads "$n")
        z=$(least "$z" "$(field ms_per_step "$ptt")") b=$(most "$b" "$(field rss_mb "$ptt")")
      fi
    done
    [[ -n $tuned_arch ]] || z=$y  # scratchgrad runs BLIS's own choice of kernels: "tuned" is PyTorch as installed
    s=$(ratio "$y" "$x") st=$(ratio "$z" "$x")
    printf '%-7s %3s | %12s %12s %8s %12s %8s | %9s %9s\n' "$size" "$n" "$x" "$y" "$s" "$z" "$st" "$a" "$b"
    results+=("RESULT size=$size threads=$n scratchgrad_ms=$x torch_ms=$y speedup=$s torch_tuned_ms=$z speedup_tuned=$st scratchgrad_rss_mb=$a torch_rss_mb=$b")
  done
done
echo
echo "speedup = PyTorch ms / scratchgrad ms (above 1: scratchgrad is faster); ms = median step time$( ((repeat > 1)) && echo ", fastest of $repeat rounds")"
echo "rss = peak resident memory of the whole process (PyTorch's includes about 230 MB for importing torch; its own line shows rss_base_mb)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%s\n' "${results[@]}"
