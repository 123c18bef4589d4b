#!/bin/sh
# tests/step/check_step.sh SOURCE_DIR BIN_DIR — ctest's step.*: every node tools/gdb/step.sh lists is in the
# first backward pass of its program (BIN_DIR's, SCRATCHGRAD_TRACE=first), and `make step` in a fresh or
# existing debug tree (SOURCE_DIR/build-debug, as `make debug` makes it) for MmBackward0, SoftmaxBackward0,
# MaskedFillBackward0 and RmsNormBackward0 (a Llama step): each must stop in a loop of autograd/reference/
# with Tensor::backward frame #8 or nearer. An unknown node must be refused with exit 2 and the list of known
# ones. Exit 77 (skipped) when gdb is missing and cannot be installed (not root).
set -u
src=$1 bin=$2
cd "$src" || exit 1
fail=0

# The table of nodes: each program's first backward pass has every node listed for it.
for program in readme_first_program mini_self_attention gpt_step llama_step; do
  ran=$(SCRATCHGRAD_TRACE=first "$bin/$program" 2>&1 >/dev/null | sed -n 's/^\[[0-9]*\/[0-9]*\] \([A-Za-z0-9]*\) .*/\1/p' | sort -u)
  for node in $(tools/gdb/step.sh --list | sed -n "s/^$program //p"); do
    if ! printf '%s\n' "$ran" | grep -qx "$node"; then
      echo "FAIL: tools/gdb/step.sh lists $node for $program, whose first backward pass has: $(echo $ran)"
      fail=1
    fi
  done
done

if ! command -v gdb >/dev/null && [ "$(id -u)" != 0 ]; then
  echo "gdb is not installed and this is not root: make step skipped (apt-get install gdb)"
  [ $fail -eq 0 ] && exit 77
  exit 1
fi
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

for node in MmBackward0 SoftmaxBackward0 MaskedFillBackward0 RmsNormBackward0; do
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
