#!/usr/bin/env bash
# tests/arm64/same_bits.sh X86_BIN ARM64_BIN — the same bytes from the x86-64 build and the aarch64 build
# (run under qemu-aarch64): each seed program's output, and a GPT trained in exact numerics for 60 steps
# (dropout on, so the random streams count too): its printed report, its checkpoint and its autograd graph
# (the nodes in creation order: an order that depended on the compiler would show here). `make test-arm64`
# runs it after the ARM test suite. Exits 1 at the first difference, naming it.
set -euo pipefail
x86=$(cd "$1" && pwd) arm=$(cd "$2" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
qemu=${SCRATCHGRAD_EMULATOR:-qemu-aarch64}
work=$(mktemp -d /tmp/scratchgrad_same_bits.XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0

same() {  # same WHAT FILE_A FILE_B
  if cmp -s "$2" "$3"; then echo "same bytes: $1"
  else echo "DIFFERENT: $1 ($(cmp "$2" "$3" 2>&1 | head -n 1))"; failed=1; fi
}

for expected in "$here"/../reference/seed_programs/*.expected; do
  program=$(basename "$expected" .expected)
  "$x86/$program" >"$work/$program.x86"
  "$qemu" "$arm/$program" >"$work/$program.arm64"
  same "seed program $program" "$work/$program.x86" "$work/$program.arm64"
done

# A small GPT on the workshop's text, exact numerics, every report and the sample printed (the timing
# columns dropped: "step 20 | loss 1.071 | 29773 tok/s | ..." is compared as "step 20 | loss 1.071").
train=(train --model gpt --preset tiny --layers 2 --dim 32 --heads 2 --context 16 --batch 8 --steps 60 --warmup 10
       --eval-every 20 --dropout 0.1 --numerics exact --threads 1 --seed 11 --save gpt.safetensors --graph gpt.dot)
for arch in x86 arm64; do
  if [ "$arch" = x86 ]; then run=("$x86/scratchgrad"); else run=("$qemu" "$arm/scratchgrad"); fi
  mkdir -p "$work/$arch"
  (cd "$work/$arch" && "${run[@]}" "${train[@]}" >report.raw 2>report.err) || { cat "$work/$arch/report.err"; exit 1; }
  sed 's/ | [0-9.]* tok\/s.*$//' "$work/$arch/report.raw" >"$work/$arch/report.txt"
done
same "GPT report (60 steps, exact numerics)" "$work/x86/report.txt" "$work/arm64/report.txt"
same "GPT checkpoint" "$work/x86/gpt.safetensors" "$work/arm64/gpt.safetensors"
same "GPT autograd graph (node order)" "$work/x86/gpt.dot" "$work/arm64/gpt.dot"
exit $failed
