# The front door. `make train` and `make test` work on a fresh Debian 12 machine: as root they install
# what is missing with apt-get; otherwise they print the apt-get line to run.
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
# libopenmpi-dev and openmpi-bin: data parallelism (nn/dist/) and its 2-rank tests; the build works without them.
PACKAGES = cmake g++ make ccache libblis-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
CMAKE_FLAGS ?=
# ccache (when installed) keeps every build folder's objects: a rebuild after a pull or a clean clone on the
# same machine compiles only what changed. The base folder makes entries shareable between clones in
# different places (paths inside the checkout are hashed relative to it).
export CCACHE_BASEDIR := $(CURDIR)
# With -g (the debug, sanitizer and fuzz builds) ccache also hashes the folder it compiles in, unless told
# not to: without this, a clone elsewhere would miss the cache for those builds.
export CCACHE_NOHASHDIR := 1
# (Asked when the recipe runs: `deps` may have just installed it.)
LAUNCHER = $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
# `make fuzz`: each libFuzzer target in tests/fuzz/ runs FUZZ_SECONDS on a copy of its corpus (clang build
# in FUZZ_BUILD, with ASan + UBSan); it fails if any target finds a crash. FUZZ_TARGETS picks some.
FUZZ_SECONDS ?= 60
FUZZ_BUILD   ?= build-fuzz
FUZZ_TARGETS ?= safetensors checkpoint text cli ops tokenizer
FUZZ_PACKAGES = $(PACKAGES) clang libclang-rt-14-dev

.PHONY: all deps configure build debug debug-configure step test train bench lab lab-deps clean fuzz fuzz-deps fuzz-build exercise exercises

all: build

# Installs the packages that are missing (dpkg -s says which).
deps:
	@missing=""; for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	  else \
	    echo "missing packages:$$missing"; echo "run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(LAUNCHER) $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# `make debug`: -O0 -g in DEBUG_BUILD, CPU tensors on the reference kernels by default (autograd/reference/:
# the plain loops, to step into; SCRATCHGRAD_KERNELS=cpu switches back). No CUDA, tests or benchmarks: it
# stays quick to build. docs/autograd.md has the gdb recipe (tools/gdb/step-into.gdb).
DEBUG_BUILD ?= build-debug
debug-configure: deps
	@cmake -S . -B $(DEBUG_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O0 -g" $(LAUNCHER) \
	  -DSCRATCHGRAD_REFERENCE_KERNELS_DEFAULT=ON -DSCRATCHGRAD_CUDA=OFF -DSCRATCHGRAD_TESTS=OFF -DSCRATCHGRAD_BENCH=OFF \
	  $(CMAKE_FLAGS) >/dev/null

debug: debug-configure
	@cmake --build $(DEBUG_BUILD) -j $(JOBS)

# `make step OP=MmBackward0` (any node name it knows; an unknown one is refused with the list): builds the one
# program of the debug tree whose graph has that node, runs it under gdb (tools/gdb/step-into.gdb), stops in
# the loop that computes the node's gradient and prints the backtrace and the loop (tools/gdb/step.sh).
step:
	@tools/gdb/step.sh --program-for "$(OP)" >/dev/null
	@$(MAKE) --no-print-directory deps PACKAGES="$(PACKAGES) gdb"
	@[ -f $(DEBUG_BUILD)/CMakeCache.txt ] || $(MAKE) --no-print-directory debug-configure
	@JOBS=$(JOBS) tools/gdb/step.sh $(DEBUG_BUILD) "$(OP)"

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

train: build
	@$(BUILD)/bin/scratchgrad train

# The exercises (docs/exercises.md): `make exercise N=6` (or `make exercise-6`) builds your files in
# examples/exercises/ into the checker and checks rung 6; `make exercises` checks the whole ladder. A failure's
# report gives the diagnosis; HINT=1 adds how to write it, which gives the answer away. The build is quiet:
# its output goes to EXERCISE_LOG, and a failed build shows only the errors in it.
EXERCISE_LOG = $(BUILD)/exercise-build.log
EXERCISE_HINT = $(if $(filter-out 0 no,$(HINT)),--hint)
EXERCISE_ERRORS = 'error:|Error at|undefined reference|missing packages|run: sudo'
EXERCISE_BUILD = mkdir -p $(BUILD); \
	echo "building the checker with your files (the first build takes minutes; its output: $(EXERCISE_LOG))"; \
	if ! { $(MAKE) --no-print-directory configure && cmake --build $(BUILD) -j $(JOBS) --target exercise_check; } \
	     >$(EXERCISE_LOG) 2>&1; then \
	  grep -E -B1 -A2 $(EXERCISE_ERRORS) $(EXERCISE_LOG) | head -n 30; \
	  echo "the build failed; all of its output: $(EXERCISE_LOG)"; exit 1; \
	fi

exercise:
	@if [ -z "$(N)" ]; then echo "usage: make exercise N=<1..15> [HINT=1] (or make exercise-6; make exercises for all 15)"; exit 2; fi
	@$(EXERCISE_BUILD)
	@$(BUILD)/bin/exercise_check $(EXERCISE_HINT) $(N)

exercise-%:
	@$(MAKE) --no-print-directory exercise N=$*

exercises:
	@$(EXERCISE_BUILD)
	@$(BUILD)/bin/exercise_check $(EXERCISE_HINT) all

fuzz-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(FUZZ_PACKAGES)"

fuzz-build: fuzz-deps
	@CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(LAUNCHER) -DSCRATCHGRAD_FUZZ=ON -DSCRATCHGRAD_MPI=OFF \
	  -DSCRATCHGRAD_TESTS=OFF -DSCRATCHGRAD_BENCH=OFF -DSCRATCHGRAD_CUDA=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

fuzz: fuzz-build
	@tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

bench: build
	@bench/compare.sh

# The lab page (examples/lab/), computed by the engine compiled to WebAssembly: builds build-wasm/lab/ and
# serves it on 127.0.0.1 (the folder also works opened from disk: build-wasm/lab/index.html).
LAB_PACKAGES = cmake make emscripten python3 libfmt-dev nlohmann-json3-dev
LAB_PORT ?= 8016
lab-deps:
	@$(MAKE) --no-print-directory deps PACKAGES="$(LAB_PACKAGES)"

lab: lab-deps
	@examples/lab/build.sh build-wasm
	@echo "the lab: http://127.0.0.1:$(LAB_PORT)/  (or open build-wasm/lab/index.html; Ctrl-C stops the server)"
	@cd build-wasm/lab && python3 -m http.server $(LAB_PORT) --bind 127.0.0.1

# 64-bit ARM (docs/arm.md): `make test-arm64` cross-compiles everything for aarch64 in ARM64_BUILD
# (cmake/aarch64-linux-gnu.cmake: Debian's cross compiler and the arm64 -dev packages, CUDA and MPI off) and
# runs the whole ctest suite under user-mode QEMU, then checks that the seed programs and a GPT trained in
# exact numerics give the same bytes as the x86-64 build in BUILD (tests/arm64/same_bits.sh). Not run there:
# step.* (gdb stepping through the host's debug tree), install.* (builds an outside project with the host's
# compiler) and lab.* (the WebAssembly page against native programs) test the host's tools, not ARM code.
# `make test-arm64-ci` is the CI's share: only the libraries, the seed programs and a small test program of
# the core suites (gradient checks, parity, the ops, the float functions) are built and run, the seed
# programs compared byte for byte.
ARM64_BUILD ?= build-arm64
ARM64_PACKAGES = cmake make ccache g++-aarch64-linux-gnu qemu-user libc6:arm64 libstdc++6:arm64 libgomp1:arm64 \
  libblis-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64 libcli11-dev nlohmann-json3-dev
ARM64_SKIP = ^(step\.|install\.|lab\.)
# Left to the full run: three parity tests that train the seed model again and again (over three minutes
# under QEMU; the seed program mini_self_attention already checks its 301 steps byte for byte).
ARM64_CI_LONG = Parity.OneUlpInOneStartingWeightMovesTheFinalLossByMoreThan1e3:Parity.LossOfAll301StepsFinalParametersAndGeneration:Parity.TheReferenceKernelsTrainTheSeedModelToTheSameText
SEED_PROGRAMS = $(basename $(notdir $(wildcard tests/reference/seed_programs/*.expected)))

.PHONY: arm64-deps arm64-configure test-arm64 test-arm64-ci

# The arm64 packages need dpkg to know the architecture (once per machine), then apt-get as for `deps`.
arm64-deps:
	@if ! dpkg --print-foreign-architectures | grep -qx arm64; then \
	  if [ "$$(id -u)" = 0 ]; then dpkg --add-architecture arm64 && apt-get update; \
	  else echo "run: sudo dpkg --add-architecture arm64 && sudo apt-get update"; exit 1; fi; \
	fi
	@$(MAKE) --no-print-directory deps PACKAGES="$(ARM64_PACKAGES)"

arm64-configure: arm64-deps
	@cmake -S . -B $(ARM64_BUILD) -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release $(LAUNCHER) \
	  -DSCRATCHGRAD_CUDA=OFF -DSCRATCHGRAD_MPI=OFF -DSCRATCHGRAD_BENCH=OFF $(CMAKE_FLAGS) >/dev/null

test-arm64: arm64-configure configure
	@cmake --build $(ARM64_BUILD) -j $(JOBS)
	@cd $(ARM64_BUILD) && ctest --output-on-failure -j $(JOBS) -E '$(ARM64_SKIP)'
	@cmake --build $(BUILD) -j $(JOBS) --target scratchgrad $(SEED_PROGRAMS)
	@tests/arm64/same_bits.sh $(BUILD)/bin $(ARM64_BUILD)/bin

test-arm64-ci: arm64-configure
	@cmake --build $(ARM64_BUILD) -j $(JOBS) --target scratchgrad_core_tests $(SEED_PROGRAMS)
	@cd $(ARM64_BUILD) && ctest --output-on-failure -j $(JOBS) -R '^seed_program'
	@qemu-aarch64 $(ARM64_BUILD)/bin/scratchgrad_core_tests --gtest_filter='-$(ARM64_CI_LONG)'

clean:
	rm -rf $(BUILD)
