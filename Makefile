# The front door. `make train` and `make test` work on a fresh Debian 12 machine: as root they install
# what is missing with apt-get; otherwise they print the apt-get line to run.
BUILD ?= build
JOBS  ?= $(shell nproc 2>/dev/null || echo 2)
# libopenmpi-dev and openmpi-bin: data parallelism (nn/dist/) and its 2-rank tests; the build works without them.
PACKAGES = cmake g++ make libblis-dev libfmt-dev libgtest-dev libcli11-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin
CMAKE_FLAGS ?=

.PHONY: all deps configure build test train bench lab lab-deps clean

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
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

train: build
	@$(BUILD)/bin/scratchgrad train

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

clean:
	rm -rf $(BUILD)
