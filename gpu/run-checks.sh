#!/usr/bin/env bash
# gpu/run-checks.sh — the GPU checks of issue 6 on a machine with an NVIDIA GPU and no package access:
# build scratchgrad with the CUDA backend, run the CUDA tests, then the GPU benchmark (ms per training step
# of the char model at the seed size and at D 256, T 128, B 32) beside PyTorch on CUDA when python3 has it.
#
#   bash gpu/run-checks.sh prepare   # once, where Debian's apt works (a developer machine): apt-get download
#                                    # + dpkg -x of the -dev packages the build needs into gpu/.deps (git-ignored)
#   bash gpu/run-checks.sh           # on the GPU machine, with gpu/.deps carried along: build, test, benchmark
#   bash gpu/run-checks.sh --all-tests   # the same, and the whole test suite (not only Cuda*) on that machine
#
# What the GPU machine must have: nvcc (CUDA 12 or newer, found on PATH, $CUDACXX or /usr/local/cuda), the
# NVIDIA driver, a C++20 g++, and make or ninja. cmake is taken from PATH when it is 3.25 or newer, else the
# Debian one from gpu/.deps. Everything after `prepare` stops within 5 minutes (SCRATCHGRAD_CHECK_BUDGET
# seconds, default 300); each stage gets what is left. Environment knobs: BUILD (build folder, default
# gpu/.build), CUDA_ARCHS (default: native, the GPU that is there), JOBS (default: nproc),
# SCRATCHGRAD_DEPS_CMAKE=1 (use gpu/.deps's cmake even when PATH has one).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
DEPS=$HERE/.deps
BUILD=${BUILD:-$HERE/.build}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 4)}
BUDGET=${SCRATCHGRAD_CHECK_BUDGET:-300}
ARCH_TRIPLET=x86_64-linux-gnu

say() { printf '== %s\n' "$*"; }
die() { printf 'run-checks: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ prepare (needs Debian's apt)
# Build dependencies: unpacked together into .deps/root (the build's CMAKE_PREFIX_PATH).
BUILD_PACKAGES=(libblis-dev libblis-openmp-dev libblis4 libblis4-openmp libfmt-dev libfmt9 libgtest-dev
                nlohmann-json3-dev libcli11-dev)
# BLIS's OpenMP runtime, kept apart: used only when the GPU machine has no libgomp.so.1 of its own.
GOMP_PACKAGES=(libgomp1)
# Debian's cmake and the libraries it links that a CUDA image may lack; used only when PATH has no cmake
# >= 3.25, with its own LD_LIBRARY_PATH (never the build's or the tests').
CMAKE_PACKAGES=(cmake cmake-data libjsoncpp25 librhash0 libuv1 libarchive13 libcurl4 libnghttp2-14 librtmp1
                libssh2-1 libpsl5 libldap-2.5-0 libunistring2)

unpack_into() {  # unpack_into DIR PACKAGE...
  local dir=$1; shift
  local tmp; tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download "$@") || { rm -rf "$tmp"; die "apt-get download $* failed (run apt-get update first?)"; }
  mkdir -p "$dir"
  for deb in "$tmp"/*.deb; do
    dpkg -x "$deb" "$dir"
    printf '%s\n' "$(basename "$deb")" >> "$DEPS/PACKAGES"
  done
  rm -rf "$tmp"
}

prepare() {
  command -v apt-get >/dev/null && command -v dpkg >/dev/null || die "prepare needs apt-get and dpkg (Debian)"
  if [ "$(dpkg --print-architecture)" != amd64 ]; then die "prepare downloads amd64 packages; run it on x86-64"; fi
  rm -rf "$DEPS"
  mkdir -p "$DEPS"
  : > "$DEPS/PACKAGES"
  say "downloading and unpacking into $DEPS"
  unpack_into "$DEPS/root" "${BUILD_PACKAGES[@]}"
  unpack_into "$DEPS/gomp" "${GOMP_PACKAGES[@]}"
  unpack_into "$DEPS/cmake" "${CMAKE_PACKAGES[@]}"
  # Trim what no build needs (the carried folder must stay small): docs, man pages, CMake's help, static BLIS.
  rm -rf "$DEPS"/*/usr/share/doc "$DEPS"/*/usr/share/man "$DEPS"/*/usr/share/lintian "$DEPS"/cmake/usr/share/cmake-*/Help \
         "$DEPS"/cmake/usr/share/emacs "$DEPS"/cmake/usr/share/vim "$DEPS"/cmake/usr/share/aclocal \
         "$DEPS"/cmake/usr/share/bash-completion "$DEPS"/cmake/usr/bin/cpack "$DEPS"/cmake/usr/bin/ctest \
         "$DEPS"/cmake/usr/bin/ccmake "$DEPS"/root/usr/lib/$ARCH_TRIPLET/blis-openmp/libblis.a \
         "$DEPS"/root/usr/lib/$ARCH_TRIPLET/blis-openmp/libblas.so*
  # Debian points libblis.so at /etc/alternatives; give the unpacked tree real links instead.
  local blis=$DEPS/root/usr/lib/$ARCH_TRIPLET
  ln -sfn blis-openmp/libblis.so.4 "$blis/libblis.so.4"
  ln -sfn blis-openmp/libblis.so.4 "$blis/libblis.so"
  rm -f "$blis/libblis.a"
  printf 'prepared on %s from %s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(. /etc/os-release && echo "$PRETTY_NAME")" > "$DEPS/README"
  say "done: $(du -sh "$DEPS" | cut -f1) in $DEPS ($(wc -l < "$DEPS/PACKAGES") packages)"
  echo "Carry gpu/.deps to the GPU machine with the working tree, then run: bash gpu/run-checks.sh"
}

# ------------------------------------------------------------------ the checks (GPU machine)
started=$SECONDS
left() { echo $(( BUDGET - (SECONDS - started) )); }
# run_bounded [--log FILE] LABEL SECONDS_CAP COMMAND...: runs with the smaller of the cap and what is left of
# the budget; with --log the output goes to FILE (compiler warnings would bury the results) and only a
# failure shows its last lines.
run_bounded() {
  local log=""
  if [ "$1" = --log ]; then log=$2; shift 2; fi
  local label=$1 cap=$2; shift 2
  local t; t=$(left)
  [ "$t" -gt "$cap" ] && t=$cap
  if [ "$t" -le 5 ]; then echo "run-checks: no time left for $label"; return 124; fi
  say "$label (up to ${t}s)"
  local rc
  if [ -n "$log" ]; then
    timeout --kill-after=5 "$t" "$@" > "$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && tail -n 60 "$log"
  else
    timeout --kill-after=5 "$t" "$@"
    rc=$?
  fi
  [ $rc -eq 124 ] && echo "run-checks: $label stopped after ${t}s"
  return $rc
}

version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n1)" = "$2" ]; }

find_cmake() {
  local c
  # SCRATCHGRAD_DEPS_CMAKE=1 skips PATH and uses the Debian cmake from gpu/.deps (to test that path)
  # PATH first, then the cmake of python3's pip package (CUDA images often ship that one only)
  local pip_cmake; pip_cmake=$(python3 -c 'import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, "cmake"))' 2>/dev/null)
  [ "${SCRATCHGRAD_DEPS_CMAKE:-0}" = 1 ] || for c in $(command -v -a cmake 2>/dev/null) $pip_cmake; do
    local v; v=$("$c" --version 2>/dev/null | head -n1 | awk '{print $3}')
    if [ -n "$v" ] && version_ge "$v" 3.25; then CMAKE=$c; return 0; fi
  done
  if [ -x "$DEPS/cmake/usr/bin/cmake" ]; then
    CMAKE_LIBS=$DEPS/cmake/usr/lib/$ARCH_TRIPLET
    CMAKE=$HERE/.deps/cmake-wrapper
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
      "$CMAKE_LIBS" "$DEPS/cmake/usr/bin/cmake" > "$CMAKE"
    chmod +x "$CMAKE"
    if ! "$CMAKE" --version >/dev/null 2>&1; then
      echo "run-checks: Debian's cmake from gpu/.deps does not start here; missing libraries:"
      LD_LIBRARY_PATH=$CMAKE_LIBS ldd "$DEPS/cmake/usr/bin/cmake" | grep 'not found'
      return 1
    fi
    return 0
  fi
  return 1
}

checks() {
  local all_tests=$1
  [ -d "$DEPS/root" ] || die "gpu/.deps is missing: run 'bash gpu/run-checks.sh prepare' where apt works, and carry gpu/.deps here"
  say "machine: $(uname -srm), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader || true
  else
    echo "nvidia-smi not found (the CUDA tests will skip if there is no driver)"
  fi
  find_cmake || die "no cmake >= 3.25 on PATH and none usable in gpu/.deps"
  say "cmake: $("$CMAKE" --version | head -n1) ($CMAKE)"
  local nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [ -x "$nvcc" ] || die "nvcc not found (PATH, \$CUDACXX, /usr/local/cuda/bin)"
  say "nvcc: $("$nvcc" --version | tail -n1)"

  local root=$DEPS/root/usr
  local generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # libblis.so.4 needs libgomp.so.1: the machine's own if it has one, else Debian's from gpu/.deps.
  if ! ldconfig -p 2>/dev/null | grep 'libgomp.so.1 ' >/dev/null; then  # (grep -q would SIGPIPE ldconfig)
    export LD_LIBRARY_PATH="$DEPS/gomp/usr/lib/$ARCH_TRIPLET${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "using Debian's libgomp.so.1 from gpu/.deps"
  fi
  # the link step of -fopenmp wants libgomp.so; if the compiler's own is missing, the Debian one serves
  if [ -z "$(g++ -print-file-name=libgomp.so | grep /)" ] || [ ! -e "$(g++ -print-file-name=libgomp.so)" ]; then
    ln -sfn libgomp.so.1 "$DEPS/gomp/usr/lib/$ARCH_TRIPLET/libgomp.so"
    export LIBRARY_PATH="$DEPS/gomp/usr/lib/$ARCH_TRIPLET${LIBRARY_PATH:+:$LIBRARY_PATH}"
  fi

  mkdir -p "$BUILD"
  run_bounded --log "$BUILD/configure.log" "configure" 90 "$CMAKE" -S "$ROOT" -B "$BUILD" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DSCRATCHGRAD_CUDA=ON -DSCRATCHGRAD_BENCH=OFF \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}" \
    -DCMAKE_PREFIX_PATH="$root" \
    -DBLIS_INCLUDE_DIR="$root/include/$ARCH_TRIPLET/blis-openmp" \
    -DBLIS_LIBRARY="$root/lib/$ARCH_TRIPLET/blis-openmp/libblis.so.4" || die "configure failed"
  # the build may take what is left but the ~100 s the tests and benchmarks need
  grep -E 'scratchgrad: CUDA|Found (BLIS|fmt|GTest)' "$BUILD/configure.log"
  local targets=(--target scratchgrad_tests bench_gpu)
  [ -f "$ROOT/examples/cli/CMakeLists.txt" ] && targets+=(scratchgrad)  # the command line, for `train --device cuda`
  [ "$all_tests" = 1 ] && targets=()  # the whole suite also runs the example programs: build everything
  run_bounded --log "$BUILD/build.log" "build" $(( $(left) - 100 )) \
    "$CMAKE" --build "$BUILD" -j "$JOBS" "${targets[@]}" || die "build failed (log: $BUILD/build.log)"
  echo "built ($(grep -c 'warning:' "$BUILD/build.log") compiler warnings; log: $BUILD/build.log)"

  local failed=0
  (cd "$BUILD" && run_bounded "CUDA tests" 120 ./bin/scratchgrad_tests --gtest_filter='Cuda*') || failed=1

  run_bounded "GPU benchmark (scratchgrad)" 90 "$BUILD/bin/bench_gpu" --steps 100 --warmup 10 || failed=1

  if [ -x "$BUILD/bin/scratchgrad" ]; then  # the workshop's run through the command line, on the GPU
    run_bounded "scratchgrad train --device cuda" 30 "$BUILD/bin/scratchgrad" train --device cuda || failed=1
  fi

  if [ ! -f "$ROOT/bench/torch/char_model.py" ]; then
    echo "bench/torch/char_model.py is not in this tree: no PyTorch comparison"
  elif python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for cfg in "--dim 24 --context 8 --batch 16" "--dim 256 --context 128 --batch 32"; do
      # shellcheck disable=SC2086
      run_bounded "GPU benchmark (PyTorch $cfg)" 60 python3 "$ROOT/bench/torch/char_model.py" $cfg --steps 100 \
        --warmup 10 --device cuda | tail -n 3 || true
    done
  else
    echo "PyTorch with CUDA is not importable here: no PyTorch comparison"
  fi

  if [ "$all_tests" = 1 ]; then  # ctest where the machine has one (gpu/.deps carries none), else the gtest binary
    if command -v ctest >/dev/null; then
      (cd "$BUILD" && run_bounded "whole test suite" 120 ctest --output-on-failure -j "$JOBS") || failed=1
    else
      (cd "$BUILD" && run_bounded "whole test suite" 120 ./bin/scratchgrad_tests) || failed=1
    fi
  fi
  say "finished in $((SECONDS - started))s: $([ $failed = 0 ] && echo 'all passed' || echo 'FAILURES above')"
  return $failed
}

case "${1:-}" in
  prepare) prepare ;;
  ""|check) checks 0 ;;
  --all-tests) checks 1 ;;
  -h|--help) sed -n '2,17p' "${BASH_SOURCE[0]}" ;;
  *) die "unknown argument '$1' (prepare, --all-tests, or nothing)" ;;
esac
