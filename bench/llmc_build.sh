#!/bin/sh
# llmc_build.sh — build llm.c's CPU trainer (train_gpt2.c) from a checkout of llm.c, with its Makefile's flags,
# and write random inputs of its format beside it, for bench/gpt2_train.sh's llm.c line:
#   bench/llmc_build.sh /path/to/llm.c [OUT]      then: LLMC_DIR=OUT bench/gpt2_train.sh build/bin 3
# llm.c's source is not part of this repository; SRC is a checkout of github.com/karpathy/llm.c (train_gpt2.c and
# its llmc/ headers). OUT (default /tmp/llmc-bench) receives train_gpt2 and, when it has no gpt2_124M.bin yet,
# bench/llmc_inputs.py's random GPT-2 124M model, token files and tokenizer table; OUT may be SRC itself, but
# then llm.c's own gpt2_124M.bin and tiny_shakespeare files, if present, are used as they are.
# The flags are the Makefile's for train_gpt2 on Linux: CFLAGS -Ofast -Wno-unused-result -Wno-ignored-pragmas
# -Wno-unknown-attributes, -march=native when the compiler takes it, -fopenmp -DOMP and -lgomp when OpenMP
# is found, -lm; the compiler is make's default, cc (CC overrides it).
set -eu
if [ $# -lt 1 ] || [ ! -f "$1/train_gpt2.c" ]; then
  echo "usage: bench/llmc_build.sh LLMC_SOURCE_DIR [OUT]  (LLMC_SOURCE_DIR holds llm.c's train_gpt2.c)" >&2
  exit 2
fi
src=$1
out=${2:-/tmp/llmc-bench}
here=$(dirname "$0")
cc=${CC:-cc}
mkdir -p "$out"

cflags="-Ofast -Wno-unused-result -Wno-ignored-pragmas -Wno-unknown-attributes"
if printf 'int main() { return 0; }\n' | $cc -march=native -x c - -o /dev/null 2>/dev/null; then
  cflags="$cflags -march=native"
fi
ldlibs="-lm"
if echo | $cc -fopenmp -x c -E - >/dev/null 2>&1; then
  cflags="$cflags -fopenmp -DOMP"
  ldlibs="$ldlibs -lgomp"
else
  echo "llmc_build.sh: OpenMP not found; train_gpt2 will run on one thread whatever OMP_NUM_THREADS says" >&2
fi
echo "$cc $cflags $src/train_gpt2.c $ldlibs -o $out/train_gpt2"
# shellcheck disable=SC2086  # the flags are meant to split
$cc $cflags "$src/train_gpt2.c" $ldlibs -o "$out/train_gpt2"

if [ ! -f "$out/gpt2_124M.bin" ]; then
  python=python3
  # Debian's python3 usually has numpy, which makes the 500 MB of weights in seconds rather than a minute
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import numpy" 2>/dev/null; then python=/usr/bin/python3; fi
  "$python" "$here/llmc_inputs.py" "$out"
fi
