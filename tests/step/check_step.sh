#!/bin/sh
# tests/step/check_step.sh SOURCE_DIR — ctest's step.*: `make step` (tools/gdb/step.sh) in a fresh or
# existing debug tree (SOURCE_DIR/build-debug, as `make debug` makes it) for MmBackward0, SoftmaxBackward0
# and MaskedFillBackward0: each must stop in a loop of autograd/reference/ with Tensor::backward frame #8
# or nearer. An unknown node must be refused with exit 2 and the list of known ones. Exit 77 (skipped)
# when gdb is missing and cannot be installed (not root).
set -u
src=$1
cd "$src" || exit 1
if ! command -v gdb >/dev/null && [ "$(id -u)" != 0 ]; then
  echo "gdb is not installed and this is not root: skipped (apt-get install gdb)"
  exit 77
fi
fail=0
say() { echo "$*"; }

# An unknown node: refused before anything is built.
make --no-print-directory step OP=NoSuchBackward0 >/tmp/step-refused.$$ 2>&1
rc=$?
if [ $rc -ne 2 ] || ! grep -q "nodes it knows" /tmp/step-refused.$$ || ! grep -q "MmBackward0" /tmp/step-refused.$$; then
  say "FAIL: make step OP=NoSuchBackward0 exited $rc, expected 2 with the list of known nodes:"
  cat /tmp/step-refused.$$
  fail=1
fi
rm -f /tmp/step-refused.$$

for node in MmBackward0 SoftmaxBackward0 MaskedFillBackward0; do
  out=$(make --no-print-directory step OP=$node 2>&1)
  rc=$?
  frame0=$(printf '%s\n' "$out" | grep -m1 '^#0 ')
  depth=$(printf '%s\n' "$out" | grep -m1 '^#[0-9]* .*autograd::Tensor::backward' | sed 's/^#\([0-9]*\) .*/\1/')
  if [ $rc -ne 0 ] || ! printf '%s\n' "$frame0" | grep -q 'autograd/reference/' || [ -z "$depth" ] || [ "$depth" -gt 8 ]; then
    say "FAIL: make step OP=$node (exit $rc): frame #0 must be in autograd/reference/ and Tensor::backward frame #8 or nearer"
    printf '%s\n' "$out" | tail -n 40
    fail=1
  else
    say "ok: $node: $(printf '%s\n' "$out" | tail -n 1)"
  fi
done
exit $fail
