#!/usr/bin/env bash
# bench/report.sh — the figures of docs/performance.md and of docs/gpt2.md's "Measured speed", from one build
# of one commit on one machine, printed as the markdown tables those docs hold: run it, paste its output.
#
#   bench/report.sh              everything, about a quarter of an hour on 2 cores once the build exists
#   bench/report.sh --quick      every piece with the fewest steps: does it all run? (no figure to keep)
#   bench/report.sh --docs       everything, then each table replaces its block in docs/performance.md and
#                                docs/gpt2.md (between <!-- report:ID --> and <!-- /report:ID -->)
#
# The tables (each piece's own header says more):
#   peak        one core's multiply-add peak          build/bin/bench_ops --benchmark_filter=core_peak
#   compare     training steps beside PyTorch and libtorch, char model and GPT, 1 and 2 threads
#                                                     bench/compare.sh
#   products    single products at gpt6's and GPT-2's shapes, ours beside BLIS's sgemm, warm and cold
#                                                     build/bin/bench_ops
#   phases      where a step's time goes, seed and gpt6  build/bin/bench_char_model, bench_gpt --phases
#   attention   peak memory against T, composed attention and the flash op   bench/scaling.sh
#   generate    GPT-2 124M cached generation beside PyTorch   build/bin/bench_gpt2_generate,
#                                                     bench/torch/gpt2_generate.py
#   train       a GPT-2 124M training step beside PyTorch and llm.c   bench/gpt2_train.sh
#
# PyTorch is a reference, never a dependency: Debian's python3-torch (1.13, run as /usr/bin/python3) and, for
# the libtorch columns, libtorch-dev. llm.c's CPU trainer runs when LLMC_DIR holds a train_gpt2 that
# bench/llmc_build.sh built, or LLMC_SRC is a checkout of llm.c (built into /tmp/llmc-bench). The script
# installs nothing: a comparison whose tool is absent says so in its table.
#
# Knobs: THREADS ("1 2": the thread counts of every piece that runs on several; the one-thread pieces stay),
# BUILD (build; configured Release with the benchmarks when it is not), PYTHON (/usr/bin/python3),
# LLMC_DIR, LLMC_SRC, LOGS (each piece's raw output, default /tmp/scratchgrad-report). Progress goes to
# stderr, the tables to stdout (and to $LOGS/report.md).
set -uo pipefail
export LC_ALL=C  # decimal points, whatever the locale

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0 docs=0
for arg; do
  case $arg in
    --quick) quick=1 ;;
    --docs) docs=1 ;;
    -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "report.sh: unknown argument '$arg' (--quick, --docs, --help)" >&2; exit 2 ;;
  esac
done
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bin
python=${PYTHON:-/usr/bin/python3}
threads_list=${THREADS:-1 2}
for n in $threads_list; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "report.sh: THREADS takes thread counts (\"1 2\"), got '$n'" >&2; exit 2; }
done
logs=${LOGS:-/tmp/scratchgrad-report}
mkdir -p "$logs"
start=$SECONDS
say() { printf '[%3d s] %s\n' $((SECONDS - start)) "$*" >&2; }

# ---- what we run on, and at which commit: every table's caption names both ----
cpu_model=$("$root/bench/cpu_name.sh")
cpu_family=$(grep -m1 'cpu family' /proc/cpuinfo | sed 's/^[^:]*:[[:space:]]*//')
cpu_flags=" $(grep -m1 '^flags' /proc/cpuinfo | sed 's/^[^:]*://') "
has_flag() { [[ $cpu_flags = *" $1 "* ]]; }
features=()
for f in avx2 avx512f avx512_bf16; do has_flag "$f" && features+=("$f") || features+=("no $f"); done
[[ $cpu_flags = *" amx_"* ]] && features+=("amx") || features+=("no amx")
feature_list=$(printf '%s, ' "${features[@]}")
cpu_line="$cpu_model (cpu family $cpu_family; ${feature_list%, }), $(nproc) cores"
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git -C "$root" diff --quiet HEAD -- autograd nn optim bench CMakeLists.txt 2>/dev/null; then
  commit="$commit with uncommitted changes"
fi
# The settings of the environment that change what runs, when set: they go into every caption too.
settings=
for v in THREADS OMP_WAIT_POLICY SCRATCHGRAD_MATMUL SCRATCHGRAD_KERNELS SCRATCHGRAD_NUMERICS SCRATCHGRAD_DENORMALS BLIS_ARCH_TYPE; do
  [[ -n ${!v:-} ]] && settings+=" $v=${!v}"
done
caption() {
  echo "*$1 From one run of \`${settings:+${settings# } }bench/report.sh$( ((quick)) && echo " --quick")\` at \`$commit\` on $cpu_line.*"
}

# ---- the tools beside ours ----
have_torch=0 torch_version=
if torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null); then have_torch=1; fi
torch_absent="absent ($python cannot import torch; Debian: apt-get install python3-torch)"
if [[ -z ${LLMC_DIR:-} && -n ${LLMC_SRC:-} ]]; then
  say "building llm.c's train_gpt2 from $LLMC_SRC"
  if "$root/bench/llmc_build.sh" "$LLMC_SRC" /tmp/llmc-bench >"$logs/llmc_build.log" 2>&1; then
    LLMC_DIR=/tmp/llmc-bench
  else
    say "llm.c did not build ($logs/llmc_build.log)"
  fi
fi
have_llmc=0
[[ -n ${LLMC_DIR:-} && -x ${LLMC_DIR:-}/train_gpt2 ]] && have_llmc=1
llmc_absent="absent (no llm.c: set LLMC_SRC to a checkout of it, or LLMC_DIR to what bench/llmc_build.sh made)"

# ---- build ----
cache=$build/CMakeCache.txt
if [[ ! -f $cache ]] || ! grep -q '^SCRATCHGRAD_BENCH:BOOL=ON' "$cache"; then
  say "configuring $build (Release, benchmarks on)"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSCRATCHGRAD_BENCH=ON >"$logs/configure.log" 2>&1 ||
    { tail -20 "$logs/configure.log" >&2; exit 1; }
fi
targets=(bench_char_model bench_gpt bench_gpt2_generate bench_gpt2_train)
help=$(cmake --build "$build" --target help 2>/dev/null)
have_ops=0
grep -q 'bench_ops' <<<"$help" && { targets+=(bench_ops); have_ops=1; }
say "building ${targets[*]} in $build"
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" >"$logs/build.log" 2>&1 ||
  { tail -30 "$logs/build.log" >&2; echo "report.sh: the build failed ($logs/build.log)" >&2; exit 1; }
ops_absent="absent (bench_ops is built when Google Benchmark is installed; Debian: libbenchmark-dev)"

# ---- helpers ----
# (The tables are made of many small look-ups: these stay inside bash where they can.)
# field NAME LINE: the value of NAME=value in LINE, or na
field() {
  local word
  for word in $2; do [[ $word == "$1="* ]] && { echo "${word#*=}"; return; }; done
  echo na
}
# num X [FORMAT]: X printed with FORMAT, na as "—"; without a FORMAT, as many decimals as a time of its size
# needs (0.0394, 1.80, 49.2, 786)
num() {
  [[ -n $1 && $1 != na ]] || { echo "—"; return; }
  # shellcheck disable=SC2059  # the format is the caller's
  [[ -z ${2:-} ]] || { printf "$2\n" "$1"; return; }
  awk -v x="$1" 'BEGIN { f = x >= 100 ? "%.0f" : x >= 10 ? "%.1f" : x >= 1 ? "%.2f" : "%.3g"; printf f "\n", x }'
}
# pct FRACTION: a fraction as a percentage with one decimal
pct() { awk -v x="$1" 'BEGIN { if (x == "na" || x == "") print "—"; else printf "%.1f%%\n", 100 * x }'; }
# ratio Y X: Y / X as "1.23×", or —
ratio() { awk -v y="$1" -v x="$2" 'BEGIN { if (y == "na" || x == "na" || y == "" || x == "" || x + 0 == 0) print "—"; else printf "%.2f×\n", y / x }'; }
# verdict VALUE MIN: met when VALUE >= MIN, missed below it, — when VALUE is na
verdict() { awk -v v="$1" -v m="$2" 'BEGIN { if (v == "na" || v == "") print "—"; else print (v + 0 >= m + 0 ? "met" : "missed") }'; }
# over Y X: Y / X unrounded, na when either is missing
over() { awk -v y="$1" -v x="$2" 'BEGIN { if (y == "na" || x == "na" || y == "" || x == "" || x + 0 == 0) print "na"; else printf "%.4f\n", y / x }'; }
# the RESULT line of a piece's log whose fields include every NAME=VALUE given, e.g. result LOG size=seed threads=1
result() {
  local log=$1; shift
  awk -v want="$*" '/RESULT / { n = split(want, w, " "); ok = 1
    for (i = 1; i <= n; i++) if (index(" " $0 " ", " " w[i] " ") == 0) ok = 0
    if (ok) line = $0 } END { print line }' "$log"
}

# ---- 1. one core's peak, and the products alone (bench_ops) ----
ops_csv=$logs/ops.csv
min_time=$( ((quick)) && echo 0.01 || echo 0.1)
if ((have_ops)); then
  say "bench_ops: one core's peak and the products alone (about 2 minutes)"
  SCRATCHGRAD_THREADS=1 BLIS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$bin/bench_ops" --benchmark_format=csv \
    --benchmark_min_time="$min_time" \
    --benchmark_filter='core_peak|matmul_numerics_bench|blis_sgemm_bench|matmul_cold_bench' \
    >"$ops_csv" 2>"$logs/ops.err" || say "bench_ops failed ($logs/ops.err)"
fi
# gflops NAME: GFLOP/s of the benchmark whose name (between its function's name and its timing) is NAME.
# A one-thread benchmark timed by the clock (real_time) is rated per second of its thread's CPU time, the
# time it had the core (bench_ops' header: the steadier figure where other jobs share the machine; on an
# idle machine the two agree); a cold product's time (manual_time) is the product's alone, by the clock.
gflops() {
  [[ -s $ops_csv ]] || { echo na; return; }
  awk -F, -v want="$1" '{ name = $1; gsub(/"/, "", name); split(name, p, "/")
    if (p[2] != want || $9 == "true" || $NF + 0 <= 0) next
    rate = $NF; if (p[3] == "real_time" && $4 + 0 > 0) rate = $NF * $3 / $4
    printf "%.1f\n", rate / 1e9; found = 1 }
    END { if (!found) print "na" }' "$ops_csv" | head -n 1
}
# gflops_like PREFIX: the same for the one benchmark whose name starts with PREFIX
gflops_like() {
  [[ -s $ops_csv ]] || { echo na; return; }
  local name
  name=$(awk -F, -v want="$1" '{ n = $1; gsub(/"/, "", n); split(n, p, "/"); if (index(p[2], want) == 1) print p[2] }' "$ops_csv" | head -n 1)
  [[ -n $name ]] && gflops "$name" || echo na
}
blis_kernel=$(awk -F, '/blis_sgemm_bench/ { l = $8; gsub(/"/, "", l); if (l != "") { print l; exit } }' "$ops_csv" 2>/dev/null)
peak=$(gflops avx512_fma)
[[ $peak = na ]] && peak=$(gflops avx2_fma)
of_peak() { awk -v x="$1" -v p="$peak" 'BEGIN { if (x == "na" || p == "na" || p + 0 == 0) print "—"; else printf "%.0f%%\n", 100 * x / p }'; }

# ---- 2. training steps beside PyTorch and libtorch (compare.sh) ----
say "bench/compare.sh: the char model and the GPT beside PyTorch and libtorch"
if ((quick)); then
  steps_env=(SEED_STEPS=20 SEED_WARMUP=2 D256_STEPS=1 D256_WARMUP=0 SMALL_STEPS=2 SMALL_WARMUP=0 GPT6_STEPS=1 GPT6_WARMUP=0)
else
  steps_env=(SEED_STEPS=500 SEED_WARMUP=50 D256_STEPS=5 D256_WARMUP=1 SMALL_STEPS=8 SMALL_WARMUP=1 GPT6_STEPS=2 GPT6_WARMUP=1)
fi
env "${steps_env[@]}" THREADS="$threads_list" BUILD="$build" PYTHON="$python" INSTALL_LIBTORCH=0 "$root/bench/compare.sh" \
  >"$logs/compare.log" 2>&1 || say "compare.sh failed ($logs/compare.log)"
have_libtorch=0
grep -q '^libtorch: ' "$logs/compare.log" && have_libtorch=1
libtorch_absent="absent (no libtorch in this build; Debian: libtorch-dev)"
tuned=$(sed -n 's/^tuned runs:  BLIS_ARCH_TYPE=//p' "$logs/compare.log")

# ---- 3. where a step's time goes ----
phase_steps=$( ((quick)) && echo "--steps 1 --warmup 0" || echo "--steps 3 --warmup 1")
seed_steps=$( ((quick)) && echo "--steps 20 --warmup 2" || echo "--steps 2000 --warmup 100")
say "phases of a seed step and a gpt6 step"
# shellcheck disable=SC2086
"$bin/bench_char_model" --dim 24 --context 8 --batch 16 --heads 1 --threads 1 --numerics exact $seed_steps \
  --phases >"$logs/phases_seed.log" 2>&1 || say "bench_char_model --phases failed"
# shellcheck disable=SC2086
"$bin/bench_gpt" --layers 6 --dim 256 --heads 4 --context 128 --batch 32 --threads 1 --numerics fast $phase_steps \
  --phases >"$logs/phases_gpt6.log" 2>&1 || say "bench_gpt --phases failed"

# ---- 4. attention's memory against T ----
say "bench/scaling.sh: attention's memory against T"
t_list=$( ((quick)) && echo "64 128" || echo "128 256 512 1024")
for shape in "64 1" "256 4"; do
  read -r d h <<<"$shape"
  ATTENTION="blocked flash" D_LIST='' T_LIST="$t_list" FIXED_D=$d HEADS=$h STEPS=1 WARMUP=0 BUILD="$build" \
    "$root/bench/scaling.sh" >"$logs/scaling_d${d}_h$h.log" 2>&1 || say "scaling.sh failed (D $d)"
done

# ---- 5. GPT-2 cached generation ----
say "GPT-2 124M cached generation, ours and PyTorch's, threads: $threads_list"
gen_flags=$( ((quick)) && echo "--tokens 4 --loads 1" || echo "--tokens 64 --loads 3")
torch_gen_flags=$( ((quick)) && echo "--tokens 4" || echo "--tokens 64")
for n in $threads_list; do
  # shellcheck disable=SC2086
  "$bin/bench_gpt2_generate" $gen_flags --threads "$n" >"$logs/generate_ours_$n.log" 2>&1 || say "bench_gpt2_generate failed"
  if ((have_torch)); then
    # shellcheck disable=SC2086
    "$python" "$root/bench/torch/gpt2_generate.py" $torch_gen_flags --threads "$n" >"$logs/generate_torch_$n.log" 2>&1 ||
      say "gpt2_generate.py failed"
  fi
done

# ---- 6. a GPT-2 training step ----
say "GPT-2 124M training steps: ours, PyTorch's$( ((have_llmc)) && echo " and llm.c's")"
train_steps=$( ((quick)) && echo 1 || echo 2)
train_warmup=$( ((quick)) && echo 0 || echo 1)
(
  ((have_llmc)) && export LLMC_DIR || unset LLMC_DIR
  THREADS=$threads_list WARMUP=$train_warmup PYTHON="$python" "$root/bench/gpt2_train.sh" "$bin" "$train_steps"
) >"$logs/train.log" 2>&1 || say "gpt2_train.sh failed ($logs/train.log)"
say "measured; writing the tables"

# ==== the tables ====
# Each table, with its caption and the lines that go with it, sits between <!-- report:ID --> and
# <!-- /report:ID -->, as in the docs: --docs replaces each such block there with this run's.
open_block=
# begin ID TITLE: ends the open block, prints the title and opens block ID
begin() {
  end_block
  printf '### %s\n\n<!-- report:%s -->\n' "$2" "$1"
  open_block=$1
}
end_block() {
  [[ -n $open_block ]] || return 0
  printf '<!-- /report:%s -->\n\n' "$open_block"
  open_block=
}
report() {
  local size n nm line check missed y u label

  begin peak "One core's peak"
  caption "\`bench_ops --benchmark_filter=core_peak\`: independent multiply-add chains in assembly (autograd/cpu/runtime/core_peak.h), one thread, GFLOP per second of its CPU time."
  echo
  echo "| loop | fused multiply-add | multiply, then add |"
  echo "|---|---|---|"
  if ((have_ops)); then
    for isa in avx512 avx2; do
      label=AVX2; [[ $isa = avx512 ]] && label=AVX-512
      echo "| $label | $(num "$(gflops ${isa}_fma)" %.1f) | $(num "$(gflops ${isa}_mul_add)" %.1f) |"
    done | sed 's/| — | — |$/| absent: no such unit on this CPU | |/'
  else
    echo "| $ops_absent | | |"
  fi
  echo

  begin compare "Training steps beside PyTorch"
  local columns="PyTorch"
  [[ $tuned = [0-9]* ]] && columns="PyTorch and libtorch with \`BLIS_ARCH_TYPE=$tuned\` (BLIS's kernels of the family scratchgrad picks)"
  caption "\`bench/compare.sh\` (${steps_env[*]}): median ms a step, peak RSS of the whole process; × is their step over ours. $columns."
  echo
  echo "| size | threads | numerics | ours ms | PyTorch ms | libtorch ms | × PyTorch | × libtorch | ours MB | PyTorch MB | targets missed |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
  for size in seed d256h1 d256h4 small gpt6; do
    for n in $threads_list; do
      for nm in exact fast; do
        line=$(result "$logs/compare.log" "size=$size" "threads=$n" "numerics=$nm")
        [[ -n $line ]] || { echo "| $size | $n | $nm | failed | | | | | | | |"; continue; }
        check=$(grep "^CHECK size=$size threads=$n numerics=$nm " "$logs/compare.log" | tail -n 1)
        missed=$(tr ' ' '\n' <<<"$check" | sed -n 's/:missed$//p' | tr '\n' ' ' | sed 's/ $//; s/ /, /g')
        y=$(field torch_tuned_ms "$line") u=$(field libtorch_tuned_ms "$line")
        local py_cell lt_cell
        py_cell=$(num "$y") lt_cell=$(num "$u")
        ((have_torch)) || py_cell="absent"
        ((have_libtorch)) || lt_cell="absent"
        echo "| $size | $n | $nm | $(num "$(field scratchgrad_ms "$line")") | $py_cell | $lt_cell | $(ratio "$y" "$(field scratchgrad_ms "$line")") | $(ratio "$u" "$(field scratchgrad_ms "$line")") | $(num "$(field scratchgrad_rss_mb "$line")" %.1f) | $(num "$(field torch_rss_mb "$line")" %.1f) | ${missed:-—} |"
      done
    done
  done
  echo
  ((have_torch)) || echo "PyTorch: $torch_absent."
  ((have_libtorch)) || echo "libtorch: $libtorch_absent."
  ((have_torch && have_libtorch)) || echo
  if [[ $tuned = [0-9]* ]]; then
    begin installed "PyTorch and libtorch as installed"
    caption "The same run's PyTorch and libtorch as installed (BLIS picks its own kernels) and tuned (\`BLIS_ARCH_TYPE=$tuned\`), median ms a step."
    echo
    echo "| size | threads | PyTorch as installed | PyTorch tuned | libtorch as installed | libtorch tuned |"
    echo "|---|---|---|---|---|---|"
    for size in seed d256h1 d256h4 small gpt6; do
      for n in $threads_list; do
        line=$(result "$logs/compare.log" "size=$size" "threads=$n" "numerics=exact")
        echo "| $size | $n | $(num "$(field torch_ms "$line")") | $(num "$(field torch_tuned_ms "$line")") | $(num "$(field libtorch_ms "$line")") | $(num "$(field libtorch_tuned_ms "$line")") |"
      done
    done
    echo
  fi

  begin floor "The floor a step's products set"
  caption "Each size's matrix products (2·m·n·k each, the causal products' skipped half left out, docs/performance.md) over the fused peak above: the fastest the step could be with every product at the peak and nothing else taking time. MFU is that floor over the measured step (the table above: one thread, fast numerics)."
  echo
  echo "| size | products a step | floor at the peak | ours, ms | MFU |"
  echo "|---|---|---|---|---|"
  local gflop_row sz g unit floor_ms
  for gflop_row in "seed 0.001862 MFLOP" "d256h1 5.725 GFLOP" "d256h4 5.725 GFLOP" "small 2.161 GFLOP" "gpt6 120.9 GFLOP"; do
    read -r sz g unit <<<"$gflop_row"
    line=$(result "$logs/compare.log" "size=$sz" "threads=1" "numerics=fast")
    floor_ms=$(awk -v g="$g" -v p="$peak" 'BEGIN { if (p == "na" || p + 0 == 0) print "na"; else printf "%.4f\n", 1000 * g / p }')
    echo "| $sz | $(awk -v g="$g" -v u="$unit" 'BEGIN { printf "%s %s\n", (u == "MFLOP" ? g * 1000 : g), u }') | $(num "$floor_ms") ms | $(num "$(field scratchgrad_ms "$line")") | $(pct "$(over "$floor_ms" "$(field scratchgrad_ms "$line")")") |"
  done
  echo

  begin products "The products alone"
  caption "\`bench_ops\`, one thread: GFLOP per second of CPU time of one product repeated on the same operands (Bᵀ, Aᵀ: a transposed view, as Linear's weight and the weight gradient's input are), ours beside BLIS's \`bli_sgemm\` (its \`${blis_kernel:-?}\` kernels); of peak: ours fast over the fused peak above."
  echo
  echo "| product (m × n × k) | in gpt6 | ours exact | ours fast | BLIS | of peak |"
  echo "|---|---|---|---|---|---|"
  if ((have_ops)); then
    local f
    f=$(gflops fast_1024x1024x1024)
    echo "| 1024 × 1024 × 1024 | — | $(num "$(gflops exact_1024x1024x1024)" %.1f) | $(num "$f" %.1f) | $(num "$(gflops blis_1024x1024x1024)" %.1f) | $(of_peak "$f") |"
    f=$(gflops fast_4096x256x256)
    echo "| 4096 × 256 × 256 | q, k, v and the projection's input gradients | $(num "$(gflops exact_4096x256x256)" %.1f) | $(num "$f" %.1f) | $(num "$(gflops blis_4096x256x256)" %.1f) | $(of_peak "$f") |"
    local row name what dims
    for row in "expand_4096x1024x256_bt|the feed-forward's expand, forward|4096 × 1024 × 256, Bᵀ" \
               "contract_4096x256x1024_bt|the contract, forward|4096 × 256 × 1024, Bᵀ" \
               "input_grad_4096x256x1024|the expand's input gradient|4096 × 256 × 1024" \
               "weight_grad_1024x256x4096_at|the expand's weight gradient|1024 × 256 × 4096, Aᵀ" \
               "weight_grad_256x1024x4096_at|the contract's weight gradient|256 × 1024 × 4096, Aᵀ"; do
      IFS='|' read -r name what dims <<<"$row"
      f=$(gflops "fast_gpt6_$name")
      echo "| $dims | $what | | $(num "$f" %.1f) | $(num "$(gflops "blis_gpt6_$name")" %.1f) | $(of_peak "$f") |"
    done
  else
    echo "| $ops_absent | | | | | |"
  fi
  echo

  begin phases "Where a step's time goes"
  caption "\`bench_char_model --phases\` (the seed, exact) and \`bench_gpt --phases\` (gpt6, fast), one thread: the mean ms of each part of a step."
  echo
  local seed_phases gpt6_phases seed_ms gpt6_ms
  seed_phases=$(sed -n 's/^mean ms per phase: *//p' "$logs/phases_seed.log")
  gpt6_phases=$(sed -n 's/^mean ms per phase: *//p' "$logs/phases_gpt6.log")
  seed_ms=$(field ms_mean "$(tail -n 1 "$logs/phases_seed.log")") gpt6_ms=$(field ms_mean "$(tail -n 1 "$logs/phases_gpt6.log")")
  echo "| phase | seed, ms | seed, share | gpt6, ms | gpt6, share |"
  echo "|---|---|---|---|---|"
  awk -v s="$seed_phases" -v g="$gpt6_phases" -v st="$seed_ms" -v gt="$gpt6_ms" 'BEGIN {
    ns = split(s, a, " "); for (i = 1; i < ns; i += 2) { sv[a[i]] = a[i + 1]; order[++k] = a[i] }
    ng = split(g, b, " "); for (i = 1; i < ng; i += 2) { gv[b[i]] = b[i + 1]; if (!(b[i] in sv)) order[++k] = b[i] }
    for (j = 1; j <= k; j++) { p = order[j]
      printf "| %s | %s | %s | %s | %s |\n", p,
        (p in sv) ? sprintf("%.4f", sv[p]) : "—", (p in sv && st > 0) ? sprintf("%.0f%%", 100 * sv[p] / st) : "—",
        (p in gv) ? sprintf("%.1f", gv[p]) : "—", (p in gv && gt > 0) ? sprintf("%.0f%%", 100 * gv[p] / gt) : "—" }
    printf "| whole step (mean) | %.4f | | %.1f | |\n", st, gt }'
  echo

  begin attention "Attention's memory"
  caption "\`ATTENTION=\"blocked flash\" D_LIST= T_LIST=\"$t_list\" STEPS=1 WARMUP=0 bench/scaling.sh\` with \`FIXED_D\` 64 and 256, \`HEADS\` 1 and 4: the char model at B 32, one thread, fast numerics; peak RSS of the whole process in MB, and ms a step."
  echo
  echo "| T | D 64, 1 head: composed | flash | D 256, 4 heads of 64: composed | flash |"
  echo "|---|---|---|---|---|"
  local T cells log_file attention l
  for T in $t_list; do
    cells=""
    for log_file in "$logs/scaling_d64_h1.log" "$logs/scaling_d256_h4.log"; do
      for attention in blocked flash; do
        l=$(grep "^SCALING sweep=T attention=$attention T=$T " "$log_file" | tail -n 1)
        cells+=" $(num "$(field rss_mb "$l")" %.1f) MB, $(num "$(field ms_per_step "$l")" %.0f) ms |"
      done
    done
    echo "| $T |$cells"
  done
  echo

  begin gpt2-generate "GPT-2 124M: cached generation"
  caption "\`bench_gpt2_generate $gen_flags --threads N\` and \`bench/torch/gpt2_generate.py $torch_gen_flags --threads N\`: greedy from a prompt of 16 ids, fast numerics; the bound is the weights' bytes over the read bandwidth the bench measures on its threads."
  echo
  # one column per program and thread count: ours on each, then PyTorch on each
  local -a ours_lines torch_lines
  local header="| |" rule="|---" cells
  for n in $threads_list; do
    ours_lines+=("$(tail -n 1 "$logs/generate_ours_$n.log" 2>/dev/null)")
    torch_lines+=("$(tail -n 1 "$logs/generate_torch_$n.log" 2>/dev/null)")
    header+=" ours, $n thread$( ((n > 1)) && echo s) |"
    rule+="|---"
  done
  for n in $threads_list; do
    if ((have_torch)); then header+=" PyTorch $torch_version, $n thread$( ((n > 1)) && echo s) |"
    else header+=" PyTorch, $n thread$( ((n > 1)) && echo s): $torch_absent |"; fi
    rule+="|---"
  done
  echo "$header"
  echo "$rule|"
  # gen_row LABEL FIELD FORMAT [ours]: a row of FIELD from every column (or from ours alone)
  gen_row() {
    local l cells="| $1 |"
    for l in "${ours_lines[@]}"; do cells+=" $(num "$(field "$2" "$l")" "$3") |"; done
    for l in "${torch_lines[@]}"; do
      if [[ ${4:-} = ours ]]; then cells+=" |"; else cells+=" $(num "$(field "$2" "$l")" "$3") |"; fi
    done
    echo "$cells"
  }
  gen_row "tokens/s" tokens_per_s %.1f
  gen_row "cached step, median ms" ms_per_token %.1f
  gen_row "CPU time a step (all threads), ms" cpu_ms_per_token %.1f
  local i targets_bound="" targets_torch=""
  cells="| ours ÷ PyTorch, tokens/s |"
  for i in "${!ours_lines[@]}"; do
    cells+=" $(ratio "$(field ms_per_token "${torch_lines[$i]}")" "$(field ms_per_token "${ours_lines[$i]}")") |"
  done
  echo "$cells$(printf ' |%.0s' "${torch_lines[@]}")"
  gen_row "read bandwidth, GB/s" read_gb_s %.1f ours
  gen_row "bound a token, ms" bound_ms_per_token %.1f ours
  cells="| of the bound reached |"
  for i in "${!ours_lines[@]}"; do cells+=" $(pct "$(field of_bound "${ours_lines[$i]}")") |"; done
  echo "$cells$(printf ' |%.0s' "${torch_lines[@]}")"
  gen_row "peak RSS, MB (weights $(num "$(field weights_mb "${ours_lines[0]}")" %.0f))" rss_mb %.0f
  gen_row "load, median ms (file in the page cache)" load_ms %.0f ours
  echo
  local -a counts
  read -ra counts <<<"$threads_list"
  for i in "${!ours_lines[@]}"; do
    n=${counts[$i]}
    targets_bound+="${targets_bound:+, }$(verdict "$(field of_bound "${ours_lines[$i]}")" 0.7) on $n"
    targets_torch+="${targets_torch:+, }$(verdict "$(over "$(field ms_per_token "${torch_lines[$i]}")" "$(field ms_per_token "${ours_lines[$i]}")")" 1.5) on $n"
  done
  echo "Targets (by threads): a cached step at 70% of the bound or nearer: $targets_bound; 1.5× PyTorch's tokens/s: $targets_torch."
  echo

  begin gpt2-train "GPT-2 124M: a training step"
  caption "\`WARMUP=$train_warmup bench/gpt2_train.sh build/bin $train_steps\`: B 4, T 64, the 50,257-token head, fast numerics, median of $train_steps steps after $train_warmup; MFU over the peak bench_gpt2_train measures in its own process; × is their step over ours."
  echo
  echo "| | threads | step, ms | CPU time, ms | MFU | × | peak RSS, MB | first loss |"
  echo "|---|---|---|---|---|---|---|---|"
  local mode who ours theirs label
  for n in $threads_list; do
    for mode in full lora; do
      ours=$(grep "^ours: *RESULT mode=$mode threads=$n " "$logs/train.log" | tail -n 1)
      echo "| ours, $mode | $n | $(num "$(field ms_per_step "$ours")" %.0f) | $(num "$(field cpu_ms_per_step "$ours")" %.0f) | $(pct "$(field mfu "$ours")") | | $(num "$(field rss_mb "$ours")" %.0f) | $(num "$(field loss "$ours")" %.3f) |"
      for who in pytorch llm.c; do
        [[ $who = llm.c && $mode = lora ]] && continue
        label="PyTorch $torch_version"
        [[ $who = llm.c ]] && label="llm.c"
        theirs=$(grep "^$who: *RESULT mode=$mode threads=$n " "$logs/train.log" | tail -n 1)
        if [[ -z $theirs ]]; then
          if [[ $who = llm.c ]] && ((!have_llmc)); then echo "| llm.c, full | $n | $llmc_absent | | | | | |"
          elif [[ $who = pytorch ]] && ((!have_torch)); then echo "| PyTorch, $mode | $n | $torch_absent | | | | | |"
          else echo "| $label, $mode | $n | failed (see $logs/train.log) | | | | | |"; fi
          continue
        fi
        echo "| $label, $mode | $n | $(num "$(field ms_per_step "$theirs")" %.0f) | $(num "$(field cpu_ms_per_step "$theirs")" %.0f) | $(pct "$(field mfu "$theirs")") | $(ratio "$(field ms_per_step "$theirs")" "$(field ms_per_step "$ours")") | $(num "$(field rss_mb "$theirs")" %.0f) | $(num "$(field loss "$theirs")" %.3f) |"
      done
    done
  done
  echo
  local full targets_mfu="" targets_torch="" targets_llmc=""
  theirs_ms() { field ms_per_step "$(grep "^$1: *RESULT mode=full threads=$2 " "$logs/train.log" | tail -n 1)"; }
  for n in $threads_list; do
    full=$(grep "^ours: *RESULT mode=full threads=$n " "$logs/train.log" | tail -n 1)
    local mfu_target=0.65
    ((n == 1)) && mfu_target=0.75
    targets_mfu+="${targets_mfu:+, }$(awk -v t="$mfu_target" 'BEGIN { printf "%.0f%%", 100 * t }') on $n: $(verdict "$(field mfu "$full")" "$mfu_target")"
    targets_torch+="${targets_torch:+, }$(verdict "$(over "$(theirs_ms pytorch "$n")" "$(field ms_per_step "$full")")" 1.3) on $n"
    targets_llmc+="${targets_llmc:+, }$(verdict "$(over "$(theirs_ms llm.c "$n")" "$(field ms_per_step "$full")")" 3) on $n"
  done
  echo "Targets, full fine-tune (by threads): MFU $targets_mfu; 1.3× PyTorch's step: $targets_torch; 3× llm.c's: $targets_llmc."
  echo
  local peaks
  peaks=$(grep '^ours: *RESULT' "$logs/train.log" | sed -n 's/.*peak_gflops=\([0-9.]*\).*/\1/p' | sort -n | sed -n '1p;$p' | tr '\n' ' ')
  echo "One core's peak, the best of each process's measurements: $(awk '{ if (NF == 2 && $1 != $2) printf "%.1f–%.1f", $1, $2; else if (NF) printf "%.1f", $1; else printf "—" }' <<<"$peaks") GFLOP/s; model FLOPs a step: $(num "$(field gflop_per_step "$(grep -m1 '^ours: *RESULT mode=full' "$logs/train.log")")" %.1f) GFLOP full, $(num "$(field gflop_per_step "$(grep -m1 '^ours: *RESULT mode=lora' "$logs/train.log")")" %.1f) LoRA."
  echo

  begin gpt2-train-split "GPT-2 124M: where a training step's time goes"
  caption "The same run's steps of ours split: the matrix products (their own FLOPs over their time, autograd/cpu/runtime/product_tally.h) and the rest; and the median ms of each phase."
  echo
  echo "| | threads | step, ms | products, ms | products ÷ peak | the rest, ms | forward and loss | backward | clip's norms | AdamW |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
  local phases step pms
  for n in $threads_list; do
    for mode in full lora; do
      ours=$(grep "^ours: *RESULT mode=$mode threads=$n " "$logs/train.log" | tail -n 1)
      phases=$(grep -A1 "^ours: *RESULT mode=$mode threads=$n " "$logs/train.log" | sed -n 's/^ours phases: *//p' | tail -n 1)
      step=$(field ms_per_step "$ours") pms=$(field products_ms "$ours")
      echo "| $mode | $n | $(num "$step" %.0f) | $(num "$pms" %.0f) | $(pct "$(field products_util "$ours")") | $(awk -v s="$step" -v p="$pms" 'BEGIN { if (s == "na" || p == "na") print "—"; else printf "%.0f\n", s - p }') | $(awk -v ph="$phases" 'BEGIN {
          n = split(ph, a, " "); for (i = 1; i < n; i += 2) v[a[i]] = a[i + 1]
          printf "%s | %s | %s | %s\n", ("forward+loss" in v ? sprintf("%.0f", v["forward+loss"]) : "—"), ("backward" in v ? sprintf("%.0f", v["backward"]) : "—"),
            ("clip" in v ? sprintf("%.0f", v["clip"]) : "—"), ("adamw" in v ? sprintf("%.0f", v["adamw"]) : "—") }') |"
    done
  done
  echo

  begin gpt2-products "GPT-2 124M: its products alone"
  caption "\`bench_ops --benchmark_filter='gpt2_'\`, one thread: GPT-2's products at B 4 × T 64 = 256 rows, GFLOP/s: warm, repeated on the same operands, per second of CPU time (BLIS's \`bli_sgemm\` beside it), and cold, with 256 MB written before each product so that its operands come from memory, as a step's weights do, by the clock."
  echo
  echo "| product (M × N × K) | forward x·Wᵀ: warm (BLIS), cold | input gradient g·W | weight gradient gᵀ·x |"
  echo "|---|---|---|---|"
  if ((have_ops)); then
    local shape dims pass cell
    for row in "qkv|q/k/v fused 256 × 2304 × 768" "proj|q, k, v, projection 256 × 768 × 768" "expand|expand 256 × 3072 × 768" \
               "contract|contract 256 × 768 × 3072" "head|head 256 × 50257 × 768"; do
      IFS='|' read -r shape dims <<<"$row"
      cell=""
      for pass in forward input_grad weight_grad; do
        cell+=" $(num "$(gflops_like "fast_gpt2_${shape}_${pass}_")" %.0f) ($(num "$(gflops_like "blis_gpt2_${shape}_${pass}_")" %.0f)), $(num "$(gflops_like "fast_cold_gpt2_${shape}_${pass}_")" %.0f) |"
      done
      echo "| $dims |$cell"
    done
  else
    echo "| $ops_absent | | | |"
  fi
  echo
  end_block
}
report | tee "$logs/report.md"

# --docs: each block of the report replaces the block of the same ID in the docs
if ((docs)); then
  for doc in "$root/docs/performance.md" "$root/docs/gpt2.md"; do
    awk 'FNR == NR {
           if ($0 ~ /^<!-- report:[a-z0-9-]+ -->$/) { id = substr($0, 13, length($0) - 16); inside = 1 }
           if (inside) block[id] = block[id] $0 "\n"
           if ($0 ~ /^<!-- \/report:/) inside = 0
           next }
         /^<!-- report:[a-z0-9-]+ -->$/ { id = substr($0, 13, length($0) - 16)
           if (id in block) { printf "%s", block[id]; skipping = 1; next } }
         skipping { if ($0 ~ /^<!-- \/report:/) skipping = 0; next }
         { print }' "$logs/report.md" "$doc" >"$doc.new" && mv "$doc.new" "$doc"
  done
  say "pasted into docs/performance.md and docs/gpt2.md (git diff shows what moved)"
fi
say "done in $(((SECONDS - start) / 60)) min $(((SECONDS - start) % 60)) s; raw output in $logs"
