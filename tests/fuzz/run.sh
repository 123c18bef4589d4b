#!/usr/bin/env bash
# run.sh BUILD SECONDS TARGET... — runs each libFuzzer target BUILD/bin/fuzz_TARGET for SECONDS on a fresh
# copy of its committed corpus (tests/fuzz/corpus/TARGET, copied to BUILD/fuzz/corpus/TARGET; what the
# run adds stays there, the committed seeds are not touched). Logs: BUILD/fuzz/TARGET.log; a crashing
# input: BUILD/fuzz/artifacts/TARGET/crash-*. Exits 1 if any target found a crash (or failed to run).
# FUZZ_JOBS targets run at once (default: one per core; each target is one process).
set -uo pipefail
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
out="$(cd "$build" && pwd)/fuzz"
mkdir -p "$out"
# Runs one target; its report goes to $out/TARGET.report, its status to $out/TARGET.status.
run_target() {
  local target=$1 bin="$build/bin/fuzz_$1" dict=()
  rm -rf "$out/corpus/$target" "$out/artifacts/$target"
  mkdir -p "$out/corpus/$target" "$out/artifacts/$target"
  cp "$here/corpus/$target"/* "$out/corpus/$target"/
  [ -f "$here/$target.dict" ] && dict=(-dict="$here/$target.dict")
  # the op fuzzer's programs grow with their bytes (an op takes 3 to 20): let inputs reach 16 ops
  [ "$target" = ops ] && dict+=(-max_len=512)
  "$bin" "${dict[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$target/" "$out/corpus/$target" >"$out/$target.log" 2>&1
  local status=$?
  {
    echo "== fuzz_$target: ${seconds}s (log: $out/$target.log)"
    # the last coverage line and the final stats: executions, speed, coverage
    grep -E '^#[0-9]+' "$out/$target.log" | tail -1
    grep -E 'stat::number_of_executed_units|stat::average_exec_per_sec' "$out/$target.log" | tr '\n' ' '
    echo
    if [ $status -ne 0 ]; then
      echo "fuzz_$target FAILED (exit $status): see $out/$target.log and $out/artifacts/$target/"
      grep -m1 -E 'ERROR: |FUZZ CHECK FAILED|runtime error' "$out/$target.log"
    fi
  } >"$out/$target.report"
  echo $status >"$out/$target.status"
}

jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
targets=("$@")
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  batch=("${targets[@]:first:jobs}")
  for target in "${batch[@]}"; do run_target "$target" & done
  wait
  for target in "${batch[@]}"; do cat "$out/$target.report"; done
done
failed=()
for target in "${targets[@]}"; do
  [ "$(cat "$out/$target.status" 2>/dev/null)" = 0 ] || failed+=("$target")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in: ${failed[*]}"
  exit 1
fi
echo "fuzz: every target ran ${seconds}s clean"
