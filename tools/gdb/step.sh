#!/bin/sh
# tools/gdb/step.sh — `make step OP=NODE`: runs a program whose graph has the node NODE under gdb, in the
# `make debug` build, stops in the loop of autograd/reference/ that computes NODE's gradient, and prints
# the backtrace, the loop, and how many frames the loop is below Tensor::backward.
#
#   tools/gdb/step.sh --program-for NODE     the program that has NODE (exit 2, listing the nodes, if none)
#   tools/gdb/step.sh --list                 every node it knows, with its program ("program node" lines)
#   tools/gdb/step.sh BUILD_DIR NODE         builds that program in BUILD_DIR (configured) and steps
#
# The programs: the README's first program for its ops, the workshop's character model for attention's
# masked_fill and softmax, one step of a small GPT for the rest, and one step of a small Llama for the nodes
# it adds to a GPT's (examples/).
set -eu

readme="MmBackward0 TBackward0 SoftmaxBackward0 MulBackward0 SumBackward0"
char_model="MaskedFillBackward0 BmmBackward0 TransposeBackward0 DivBackward0 AddmmBackward0 ViewBackward0
  EmbeddingBackward0 AddBackward0 LogSoftmaxBackward0 NllLossBackward0"
gpt="NativeLayerNormBackward0 CausalScoresBackward TrilMatmulBackward LinearAfterGeluBackward UnsafeViewBackward0"
llama="RmsNormBackward0 RotaryEmbeddingBackward0 SiluBackward0 ExpandBackward0 CloneBackward0 UnsqueezeBackward0"

program_for() {
  for n in $readme; do [ "$n" = "$1" ] && echo readme_first_program && return 0; done
  for n in $char_model; do [ "$n" = "$1" ] && echo mini_self_attention && return 0; done
  for n in $gpt; do [ "$n" = "$1" ] && echo gpt_step && return 0; done
  for n in $llama; do [ "$n" = "$1" ] && echo llama_step && return 0; done
  return 1
}

refuse() {
  echo "make step: $1" >&2
  echo "  nodes it knows: the README's first program: $readme" >&2
  echo "  the workshop's character model: $(echo $char_model)" >&2
  echo "  a GPT step: $(echo $gpt)" >&2
  echo "  a Llama step: $(echo $llama)" >&2
  exit 2
}

if [ "$1" = "--list" ]; then
  for n in $readme $char_model $gpt $llama; do echo "$(program_for "$n") $n"; done
  exit 0
fi
if [ "$1" = "--program-for" ]; then
  [ -n "${2:-}" ] || refuse "which node? make step OP=<node name>, e.g. make step OP=MmBackward0"
  program_for "$2" || refuse "no program here has a node named '$2'"
  exit 0
fi

build=$1 node=$2
program=$(program_for "$node") || refuse "no program here has a node named '$node'"
cmake --build "$build" -j "${JOBS:-2}" --target "$program" >"$build/step-build.log" 2>&1 ||
  { tail -n 30 "$build/step-build.log" >&2; exit 1; }
here=$(cd "$(dirname "$0")" && pwd)
out="$build/step-$node.txt"
gdb -q -batch -nx -x "$here/step-into.gdb" -ex "backward-loop $node" "$build/bin/$program" >"$out" 2>&1 || true
# the backtrace and the loop, without the breakpoints' own chatter
sed -n '/^---- backtrace/,$p' "$out"
if grep -q "^---- $node has no loop" "$out"; then  # a view's node: nothing to step into
  sed -n "/^---- $node has no loop/,\$p" "$out"
  exit 0
fi
if ! grep -q '^---- backtrace' "$out"; then
  grep -v '^Breakpoint [0-9]* at\|^void autograd\|^bool autograd\|^long autograd\|^int autograd' "$out" | tail -n 20
  exit 1
fi
# frame #0's file, and the number of the frame of Tensor::backward
loop_file=$(grep -m1 '^#0 ' "$out" | sed -n 's/.* at \([^ ]*\):[0-9]*$/\1/p')
depth=$(grep -m1 '^#[0-9]* .*autograd::Tensor::backward' "$out" | sed 's/^#\([0-9]*\) .*/\1/')
echo
echo "make step: $node's gradient is computed in ${loop_file#$(pwd)/}; Tensor::backward is frame #${depth:-?}"
