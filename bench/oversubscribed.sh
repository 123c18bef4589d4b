#!/usr/bin/env bash
# bench/oversubscribed.sh — does a second thread still pay when the machine has more runnable jobs than
# cores? Times one fixed `scratchgrad train --model gpt` run at --threads 1 and --threads 2, each beside busy
# loops that bring the runnable jobs to LOAD per core (the run's own threads counted: on 2 cores at LOAD 2,
# 3 loops beside one thread and 2 beside two), RUNS times each, the two alternating, and prints the medians,
# their ratio and the CPU model. The target: at LOAD 2 the two-thread run takes at most 1.1× the one-thread
# run. LOAD=0 times the same runs with nothing started beside them (the unloaded case).
#
#   bench/oversubscribed.sh                         LOAD 2, RUNS 5
#   LOAD=0 bench/oversubscribed.sh                  the unloaded case
#   GOMP_SPINCOUNT=300000 bench/oversubscribed.sh   libgomp's own default wait (the variables pass through:
#                                                   scratchgrad keeps a user's OMP_WAIT_POLICY or GOMP_SPINCOUNT)
#
# Knobs: BUILD (build), RUNS (5), LOAD (2), STEPS (30), NICE (0). Needs build/bin/scratchgrad. Other jobs
# already running on the machine add to the load: the script prints the load average before it starts. On
# a shared machine NICE=-20 (root) runs the loops and the run above everything else, so that they compete
# mostly with one another (with LOAD=0: close to an idle machine). Linux shares the CPUs between sessions
# first (autogroups), so with NICE the script runs in a session of its own and gives that session the
# niceness too.
# The last line is machine-readable: RESULT load=<per core> t1_s=<median> t2_s=<median> ratio=<t2 / t1>
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
[[ $build = /* ]] || build=$root/$build
bin=$build/bin/scratchgrad
[[ -x $bin ]] || { echo "oversubscribed.sh: $bin not found (cmake --build build --target scratchgrad)" >&2; exit 1; }
runs=${RUNS:-5} load=${LOAD:-2} steps=${STEPS:-30} niceness=${NICE:-0}
cores=$(nproc)
if [[ $niceness != 0 && -e /proc/self/autogroup && -z ${OVERSUBSCRIBED_SESSION:-} ]]; then
  OVERSUBSCRIBED_SESSION=1 exec setsid -w "$0" "$@"
fi
if [[ -n ${OVERSUBSCRIBED_SESSION:-} ]]; then echo "$niceness" >/proc/self/autogroup; fi

work=$(mktemp -d)
loops=()
stop_loops() {
  for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${loops[@]}"; do wait "$pid" 2>/dev/null || true; done
  loops=()
}
trap 'stop_loops; rm -rf "$work"' EXIT

# The text: one fixed phrase list, so every run (and every machine) trains on the same bytes.
for i in $(seq 1 4000); do echo "line $i: aditi likes warm dosa, and the tests pass on two threads"; done >"$work/text.txt"
run=(train --model gpt --text "$work/text.txt" --layers 2 --dim 128 --heads 4 --context 64 --batch 16
     --steps "$steps" --warmup 2 --eval-every 1000000 --sample 0)

# time_run THREADS: sets `seconds` to the wall time of one run beside LOAD * cores - THREADS busy loops
time_run() {
  local threads=$1 n=$((load * cores - $1)) start end
  for ((i = 0; i < n; i++)); do
    nice -n "$niceness" bash -c 'while :; do :; done' &
    loops+=($!)
  done
  start=$(date +%s%N)
  nice -n "$niceness" "$bin" "${run[@]}" --threads "$threads" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }
  end=$(date +%s%N)
  stop_loops
  seconds=$(awk -v ns=$((end - start)) 'BEGIN {printf "%.3f", ns / 1e9}')
}

median() { tr ' ' '\n' | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "cpu: $("$root/bench/cpu_name.sh"), $cores cores"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); LOAD $load runnable jobs per core during each run, at nice $niceness"
echo "OMP_WAIT_POLICY=${OMP_WAIT_POLICY-(unset)} GOMP_SPINCOUNT=${GOMP_SPINCOUNT-(unset)}"
echo "run: scratchgrad ${run[*]} --threads 1|2"
t1=() t2=()
for ((r = 1; r <= runs; r++)); do
  time_run 1
  t1+=("$seconds")
  time_run 2
  t2+=("$seconds")
  echo "round $r: 1 thread ${t1[-1]} s, 2 threads ${t2[-1]} s"
done
m1=$(echo "${t1[*]}" | median)
m2=$(echo "${t2[*]}" | median)
ratio=$(awk -v a="$m1" -v b="$m2" 'BEGIN {printf "%.2f", b / a}')
echo "median of $runs: 1 thread $m1 s, 2 threads $m2 s; 2 threads take ${ratio}× the time of 1"
echo "RESULT load=$load t1_s=$m1 t2_s=$m2 ratio=$ratio"
