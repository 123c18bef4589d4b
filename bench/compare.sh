#!/usr/bin/env bash
# bench/compare.sh — scratchgrad against PyTorch (from Python and from C++), side by side: milliseconds per
# training step and peak memory of the character model and of the GPT, in scratchgrad's two numerics, on 1
# and 2 threads.
#
#   bench/compare.sh                 build (Release, in build/) if needed, run everything (a quarter of an hour or more)
#
# Sizes: seed   char model  D 24,  T 8,   B 16, 1 head    (the workshop's model)
#        d256h1 char model  D 256, T 128, B 32, 1 head
#        d256h4 char model  D 256, T 128, B 32, 4 heads
#        small  GPT         3 blocks, D 96,  H 4, T 64,  B 16   (`scratchgrad train --model gpt --preset small`)
#        gpt6   GPT         6 blocks, D 256, H 4, T 128, B 32
# Each size has three programs that train the same model from the same seed on the same batches:
#   scratchgrad  build/bin/bench_char_model, build/bin/bench_gpt (bench/char_model.cpp, bench/gpt.cpp)
#   PyTorch      bench/torch/char_model.py, bench/torch/gpt.py (Python)
#   libtorch     build/bin/bench_libtorch_char_model, build/bin/bench_libtorch_gpt (bench/libtorch/: PyTorch's
#                C++ API, the same kernels without Python in between; built when libtorch is found — as root the
#                script installs Debian's libtorch-dev when it is missing)
# scratchgrad runs once per numerics (--numerics exact|fast, autograd/numerics.h); PyTorch and libtorch run once
# per size and thread count, and both numerics lines share their figures.
#
# PyTorch and libtorch run twice each: as installed (BLIS picks its own kernels), and "tuned", with
# BLIS_ARCH_TYPE set to the kernel family scratchgrad chose (skx -> 0, haswell -> 3; Debian's PyTorch does
# its matmuls in BLIS through libblas.so.3, so the variable reaches it too). All their runs get
# BLIS_NUM_THREADS=<threads>, so their BLIS calls use as many threads as scratchgrad's do
# (torch.set_num_threads / torch::set_num_threads alone do not reach BLIS).
#
# scratchgrad runs with your environment otherwise: SCRATCHGRAD_MATMUL=blis, for one, makes its large products
# use BLIS's optimised kernels (autograd/cpu/kernels/matmul.cpp); the header says which. Environment knobs:
#   BUILD        build directory (default build)
#   PYTHON       default /usr/bin/python3 (Debian's PyTorch)
#   CMAKE_FLAGS  extra flags for a first configure
#   SIZES        "seed d256h1 d256h4 small gpt6"
#   THREADS      "1 2"
#   NUMERICS     "exact fast" (scratchgrad's --numerics)
#   SEED_STEPS/SEED_WARMUP (3000/100), D256_STEPS/D256_WARMUP (15/3), SMALL_STEPS/SMALL_WARMUP (20/3),
#   GPT6_STEPS/GPT6_WARMUP (5/1): timed steps and warm-up steps per size. (A seed step takes ~47 µs: the
#   median of 300 of them, 14 ms of timing, moved by 1-2% between two runs of the same code, which was
#   enough to decide threads2<=threads1 at a size that never uses the second thread.)
#   REPEAT       rounds per configuration (1)
#   INSTALL_LIBTORCH  1 (default): as root, install Debian's libtorch-dev when it is missing; 0: never
#                install (bench/report.sh sets it: a report measures what the machine has)
#
# Each measurement is the median step time of one process; with REPEAT=k every configuration runs k
# interleaved rounds (scratchgrad in each numerics, PyTorch, PyTorch tuned, libtorch, libtorch tuned, again)
# and each side keeps its fastest median, which on a busy machine is the figure least disturbed by other
# work. Peak memory is the largest seen. The last lines are, per configuration (size, threads, numerics):
#
# RESULT size=<name> threads=<n> numerics=<exact|fast> cpu=<bench/cpu_name.sh --words: the model name, spaces as _> scratchgrad_ms=<x>
#        torch_ms=<y> torch_tuned_ms=<z> libtorch_ms=<u> libtorch_tuned_ms=<v> speedup=<y/x> speedup_tuned=<z/x>
#        speedup_libtorch=<u/x> speedup_libtorch_tuned=<v/x> scratchgrad_rss_mb=<a> torch_rss_mb=<b>
#        torch_base_rss_mb=<c> libtorch_rss_mb=<d> libtorch_base_rss_mb=<e> scratchgrad_base_rss_mb=<f>
#        scratchgrad_loss0=<l> torch_loss0=<m> libtorch_loss0=<k>
# CHECK size=<name> threads=<n> numerics=<exact|fast> cpu=<model> <target>:<met|missed|na> ...
#
# (one line each). torch_rss_mb is the PyTorch process's peak RSS, torch_base_rss_mb its RSS after
# `import torch`, before the model (libtorch_base_rss_mb, scratchgrad_base_rss_mb: theirs before the model).
# A CHECK line says which of issue 15's targets its RESULT line meets:
#   seed, exact:                       speedup>=25, speedup_libtorch>=10
#   d256h1 d256h4 small gpt6, fast:    speedup_tuned>=1.5, speedup_libtorch_tuned>=1.5
#   d256h1 d256h4 small gpt6, exact:   speedup_tuned>=1.0
#   every line:  memory   scratchgrad_rss_mb - scratchgrad_base_rss_mb <= (torch_rss_mb - torch_base_rss_mb) / 2
#                         (each side's own memory, above its process before the model)
#   2 threads:   threads2<=threads1   the 2-thread step is no slower than the 1-thread one, beyond 2%:
#                         two processes running the same configuration differ by up to ~1% here (the seed's
#                         3000-step medians, 1 thread: 47.7-48.1 µs), so at the seed size, where the second
#                         thread has nothing to do and both run the same code, the bare comparison is a coin
#                         toss. The RESULT lines keep both figures.
#                loss0    the three step-0 losses agree: within 0.0001 in exact numerics, 0.001 in fast
# A field is na when its program is missing or failed (the reason is printed as it happens).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
python=${PYTHON:-/usr/bin/python3}
[[ -x $python ]] || python=$(command -v python3 || echo python3)
sizes=${SIZES:-seed d256h1 d256h4 small gpt6}
threads_list=${THREADS:-1 2}
numerics_list=${NUMERICS:-exact fast}
seed_steps=${SEED_STEPS:-3000} seed_warmup=${SEED_WARMUP:-100}
d256_steps=${D256_STEPS:-15} d256_warmup=${D256_WARMUP:-3}
small_steps=${SMALL_STEPS:-20} small_warmup=${SMALL_WARMUP:-3}
gpt6_steps=${GPT6_STEPS:-5} gpt6_warmup=${GPT6_WARMUP:-1}
repeat=${REPEAT:-1}
jobs=$(nproc 2>/dev/null || echo 2)
for nm in $numerics_list; do
  [[ $nm = exact || $nm = fast ]] || { echo "compare.sh: NUMERICS takes exact and/or fast, got '$nm'" >&2; exit 2; }
done

# ---- libtorch: Debian's libtorch-dev, installed when missing (as root; otherwise say how) ----
if command -v dpkg >/dev/null && ! dpkg -s libtorch-dev >/dev/null 2>&1; then
  if [[ $(id -u) = 0 && ${INSTALL_LIBTORCH:-1} = 1 ]]; then
    echo "installing libtorch-dev (PyTorch's C++ API, for the libtorch twins)"
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libtorch-dev ||
      echo "compare.sh: libtorch-dev could not be installed: the libtorch columns are na" >&2
  else
    echo "libtorch-dev is not installed (sudo apt-get install -y libtorch-dev adds it): without a libtorch the libtorch columns are na"
  fi
fi

# ---- build ----
cache=$build/CMakeCache.txt
if [[ ! -f $cache ]] || ! grep -q '^SCRATCHGRAD_BENCH:BOOL=ON' "$cache"; then
  echo "configuring $build (Release, benchmarks on)"
  # shellcheck disable=SC2086
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSCRATCHGRAD_BENCH=ON ${CMAKE_FLAGS:-} >/dev/null || exit 1
elif grep -q '^Torch_DIR:PATH=Torch_DIR-NOTFOUND' "$cache" && dpkg -s libtorch-dev >/dev/null 2>&1; then
  echo "configuring $build again (libtorch is installed now)"
  cmake "$build" >/dev/null || exit 1
fi
echo "building bench_char_model and bench_gpt in $build"
cmake --build "$build" --target bench_char_model bench_gpt -j "$jobs" >"$build/bench_build.log" 2>&1 || {
  tail -30 "$build/bench_build.log"; echo "compare.sh: the build failed (log: $build/bench_build.log)" >&2; exit 1; }
have_libtorch=0
build_targets=$(cmake --build "$build" --target help 2>/dev/null)  # (not piped into grep -q: pipefail)
if grep -q bench_libtorch_gpt <<<"$build_targets"; then
  echo "building bench_libtorch_char_model and bench_libtorch_gpt in $build"
  if cmake --build "$build" --target bench_libtorch_char_model bench_libtorch_gpt -j "$jobs" \
    >"$build/bench_libtorch_build.log" 2>&1; then
    have_libtorch=1
  else
    tail -30 "$build/bench_libtorch_build.log"
    echo "compare.sh: the libtorch twins did not build (log: $build/bench_libtorch_build.log): their columns are na" >&2
  fi
else
  echo "this build found no libtorch: the libtorch columns are na"
fi

# ---- helpers ----
# field NAME TEXT: the value of NAME=value in the last line of TEXT, or "na"
field() { local v; v=$(tail -n 1 <<<"$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1); echo "${v:-na}"; }
# loss0 TEXT: the step-0 loss a benchmark printed ("loss: step 0 <x>, step <n> <y>"), or "na"
loss0() { local v; v=$(sed -n 's/^loss: step 0 \([^,]*\),.*/\1/p' <<<"$1" | head -n 1); echo "${v:-na}"; }
# ratio Y X: Y/X with two decimals, "na" when either is missing
ratio() { awk -v y="$1" -v x="$2" 'BEGIN { if (y == "na" || x == "na" || x + 0 == 0) print "na"; else printf "%.2f", y / x }'; }
# least A B / most A B: the smaller / larger of two numbers, either of which may be "na"
least() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "na") print b; else if (b == "na" || a + 0 <= b + 0) print a; else print b }'; }
most() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "na") print b; else if (b == "na" || a + 0 >= b + 0) print a; else print b }'; }
# model SIZE: which benchmark trains it (char_model or gpt)
model() { case $1 in seed | d256h1 | d256h4) echo char_model ;; *) echo gpt ;; esac; }
size_flags() {
  case $1 in
    seed)   echo "--dim 24 --context 8 --batch 16 --heads 1 --steps $seed_steps --warmup $seed_warmup" ;;
    d256h1) echo "--dim 256 --context 128 --batch 32 --heads 1 --steps $d256_steps --warmup $d256_warmup" ;;
    d256h4) echo "--dim 256 --context 128 --batch 32 --heads 4 --steps $d256_steps --warmup $d256_warmup" ;;
    small)  echo "--layers 3 --dim 96 --heads 4 --context 64 --batch 16 --steps $small_steps --warmup $small_warmup" ;;
    gpt6)   echo "--layers 6 --dim 256 --heads 4 --context 128 --batch 32 --steps $gpt6_steps --warmup $gpt6_warmup" ;;
    *) echo "compare.sh: unknown size '$1' (seed, d256h1, d256h4, small, gpt6)" >&2; exit 2 ;;
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
# Each side's figures for one configuration, by side (sg_exact, sg_fast, torch, torch_tuned, libtorch,
# libtorch_tuned): the fastest median, the largest peak and base memory, the step-0 loss.
declare -A ms rss base loss
# forget SIDE...: sets each SIDE's figures to na. record SIDE OUTPUT: folds one run's output into them.
forget() { local side; for side; do ms[$side]=na rss[$side]=na base[$side]=na loss[$side]=na; done; }
record() {
  ms[$1]=$(least "${ms[$1]}" "$(field ms_per_step "$2")")
  rss[$1]=$(most "${rss[$1]}" "$(field rss_mb "$2")")
  base[$1]=$(most "${base[$1]}" "$(field rss_base_mb "$2")")
  [[ ${loss[$1]} != na ]] || loss[$1]=$(loss0 "$2")
}
# at_least VALUE MIN / at_most VALUE MAX: met, missed, or na when VALUE or the bound is na
at_least() { awk -v v="$1" -v m="$2" 'BEGIN { if (v == "na" || m == "na") print "na"; else print (v + 0 >= m + 0 ? "met" : "missed") }'; }
at_most() { awk -v v="$1" -v m="$2" 'BEGIN { if (v == "na" || m == "na") print "na"; else print (v + 0 <= m + 0 ? "met" : "missed") }'; }
# no_slower X Y: X (ms) is at most Y plus the 2% two runs of one configuration can differ by
no_slower() { at_most "$1" "$(awk -v m="$2" 'BEGIN { if (m == "na") print "na"; else print m * 1.02 }')"; }
# agree TOLERANCE X Y...: met when every number of Y... (na ones skipped) is within TOLERANCE of X
agree() {
  local tol=$1 x=$2 y verdict=na; shift 2
  [[ $x != na ]] || { echo na; return; }
  for y; do
    [[ $y != na ]] || continue
    [[ $verdict != na ]] || verdict=met
    [[ $(awk -v a="$x" -v b="$y" -v t="$tol" 'BEGIN { d = a - b; if (d < 0) d = -d; print (d <= t + 1e-9 ? 1 : 0) }') = 1 ]] || verdict=missed
  done
  echo $verdict
}
# unrounded SPEEDUP_FIELD RESULT: the ratio behind a speedup field, from the two step times (the field
# itself is rounded to 2 decimals, and a check against it would count 1.495 as 1.5)
unrounded() {
  local slower
  case $1 in
    speedup) slower=torch_ms ;; speedup_tuned) slower=torch_tuned_ms ;;
    speedup_libtorch) slower=libtorch_ms ;; speedup_libtorch_tuned) slower=libtorch_tuned_ms ;;
    *) echo na; return ;;
  esac
  awk -v y="$(field "$slower" "$2")" -v x="$(field scratchgrad_ms "$2")" \
    'BEGIN { if (y == "na" || x == "na" || x + 0 == 0) print "na"; else printf "%.6f", y / x }'
}
# targets SIZE NUMERICS: issue 15's speed targets for one RESULT line, each FIELD>=MIN
targets() {
  case $1/$2 in
    seed/exact) echo "speedup>=25 speedup_libtorch>=10" ;;
    seed/fast) echo "" ;;
    */fast) echo "speedup_tuned>=1.5 speedup_libtorch_tuned>=1.5" ;;
    */exact) echo "speedup_tuned>=1.0" ;;
  esac
}

# ---- what we run on ----
cpu=$("$root/bench/cpu_name.sh" --words)  # (x86's model name, or the ARM core and board)
echo
echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "cpu:     $cpu, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "commit:  $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$root" diff --quiet HEAD -- autograd nn optim 2>/dev/null || echo ' (autograd/nn/optim modified)')"

kernel=$(field blis_kernel "$("$build/bin/bench_char_model" --steps 1 --warmup 0 | grep '^blis_kernel=')")
case $kernel in
  skx) tuned_arch=0 ;;
  haswell) tuned_arch=3 ;;
  *) tuned_arch= ;;
esac
echo "scratchgrad: numerics $numerics_list; BLIS kernels $kernel$( [[ -n ${BLIS_ARCH_TYPE:-} ]] && echo " (BLIS_ARCH_TYPE=$BLIS_ARCH_TYPE set by you)"), SCRATCHGRAD_MATMUL=${SCRATCHGRAD_MATMUL:-(unset)}"

have_torch=1
if torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
  echo "PyTorch:     $torch_version ($python)"
else
  have_torch=0
  echo "PyTorch is not importable with $python: its columns are na (set PYTHON=... to point at one)"
fi
((have_libtorch)) && echo "libtorch:    $build/bin/bench_libtorch_{char_model,gpt}"
echo "tuned runs:  BLIS_ARCH_TYPE=${tuned_arch:-<unset: no matching family, tuned = as installed>}"
echo

# ---- measure ----
results=()
declare -A one_thread_ms  # per size.numerics: the 1-thread step, for the 2-thread check
row() { printf '%-6s %3s %-5s | %10s %10s %10s %10s %10s | %7s %7s %7s %7s | %7s %7s %7s\n' "$@"; }
row size thr num sg_ms torch_ms tuned_ms lt_ms lt_tun_ms speedup tuned lt lt_tun sg_MB pt_MB pt_base
printf '%s\n' "-----------------------------------------------------------------------------------------------------------------------------"
for size in $sizes; do
  flags=$(size_flags "$size") || exit 2
  m=$(model "$size")
  for n in $threads_list; do
    forget torch torch_tuned libtorch libtorch_tuned
    for nm in $numerics_list; do forget "sg_$nm"; done
    for ((round = 1; round <= repeat; ++round)); do  # interleaved rounds; the fastest median of each side counts
      for nm in $numerics_list; do
        # shellcheck disable=SC2086
        record "sg_$nm" "$(run "scratchgrad $size threads=$n numerics=$nm" "$build/bin/bench_$m" $flags --threads "$n" --numerics "$nm")"
      done
      if ((have_torch)); then
        # shellcheck disable=SC2086
        record torch "$(run "torch $size threads=$n" env -u BLIS_ARCH_TYPE BLIS_NUM_THREADS="$n" \
          "$python" "$root/bench/torch/$m.py" $flags --threads "$n")"
        # shellcheck disable=SC2086
        [[ -z $tuned_arch ]] || record torch_tuned "$(run "torch tuned $size threads=$n" \
          env BLIS_ARCH_TYPE="$tuned_arch" BLIS_NUM_THREADS="$n" "$python" "$root/bench/torch/$m.py" $flags --threads "$n")"
      fi
      if ((have_libtorch)); then
        # shellcheck disable=SC2086
        record libtorch "$(run "libtorch $size threads=$n" env -u BLIS_ARCH_TYPE BLIS_NUM_THREADS="$n" \
          "$build/bin/bench_libtorch_$m" $flags --threads "$n")"
        # shellcheck disable=SC2086
        [[ -z $tuned_arch ]] || record libtorch_tuned "$(run "libtorch tuned $size threads=$n" \
          env BLIS_ARCH_TYPE="$tuned_arch" BLIS_NUM_THREADS="$n" "$build/bin/bench_libtorch_$m" $flags --threads "$n")"
      fi
    done
    if [[ -z $tuned_arch ]]; then  # scratchgrad runs BLIS's own choice of kernels: "tuned" is as installed
      ms[torch_tuned]=${ms[torch]} ms[libtorch_tuned]=${ms[libtorch]}
    fi
    y=${ms[torch]} z=${ms[torch_tuned]} u=${ms[libtorch]} v=${ms[libtorch_tuned]}
    b=$(most "${rss[torch]}" "${rss[torch_tuned]}") c=$(most "${base[torch]}" "${base[torch_tuned]}")
    d=$(most "${rss[libtorch]}" "${rss[libtorch_tuned]}") e=$(most "${base[libtorch]}" "${base[libtorch_tuned]}")

    for nm in $numerics_list; do
      x=${ms[sg_$nm]} a=${rss[sg_$nm]}
      s=$(ratio "$y" "$x") st=$(ratio "$z" "$x") sl=$(ratio "$u" "$x") slt=$(ratio "$v" "$x")
      row "$size" "$n" "$nm" "$x" "$y" "$z" "$u" "$v" "$s" "$st" "$sl" "$slt" "$a" "$b" "$c"
      result="RESULT size=$size threads=$n numerics=$nm cpu=$cpu scratchgrad_ms=$x torch_ms=$y torch_tuned_ms=$z"
      result+=" libtorch_ms=$u libtorch_tuned_ms=$v speedup=$s speedup_tuned=$st speedup_libtorch=$sl"
      result+=" speedup_libtorch_tuned=$slt scratchgrad_rss_mb=$a torch_rss_mb=$b torch_base_rss_mb=$c"
      result+=" libtorch_rss_mb=$d libtorch_base_rss_mb=$e scratchgrad_base_rss_mb=${base[sg_$nm]}"
      result+=" scratchgrad_loss0=${loss[sg_$nm]}"
      result+=" torch_loss0=${loss[torch]} libtorch_loss0=${loss[libtorch]}"

      check="CHECK size=$size threads=$n numerics=$nm cpu=$cpu"
      for target in $(targets "$size" "$nm"); do
        check+=" $target:$(at_least "$(unrounded "${target%%>=*}" "$result")" "${target#*>=}")"
      done
      # memory: each side's own, above what its process holds before the model (PyTorch's import, about
      # 230 MB; scratchgrad's libraries, about 5 MB): scratchgrad's at most half of PyTorch's
      half=$(awk -v b="$b" -v c="$c" 'BEGIN { if (b == "na" || c == "na") print "na"; else printf "%.1f", (b - c) / 2 }')
      own=$(awk -v a="$a" -v f="${base[sg_$nm]}" 'BEGIN { if (a == "na" || f == "na") print "na"; else printf "%.1f", a - f }')
      check+=" memory:$(at_most "$own" "$half")"
      # threads: the 2-thread step is never slower than the 1-thread one
      if [[ $n = 1 ]]; then one_thread_ms[$size.$nm]=$x
      elif [[ $n = 2 && -n ${one_thread_ms[$size.$nm]:-} ]]; then check+=" threads2<=threads1:$(no_slower "$x" "${one_thread_ms[$size.$nm]}")"; fi
      tolerance=$([[ $nm = exact ]] && echo 0.0001 || echo 0.001)
      check+=" loss0:$(agree "$tolerance" "${loss[sg_$nm]}" "${loss[torch]}" "${loss[libtorch]}")"
      results+=("$result" "$check")
    done
  done
done
echo
echo "speedup = PyTorch ms / scratchgrad ms (above 1: scratchgrad is faster); lt = libtorch; ms = median step time$( ((repeat > 1)) && echo ", fastest of $repeat rounds")"
echo "MB = peak resident memory of the whole process; pt_base: PyTorch's after \`import torch\` (about 230 MB), before the model"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%s\n' "${results[@]}"
