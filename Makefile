# tern's entry points. `make test` and `make bench` install what they need (scripts/setup).
#   make test           configure, build and run the test suite (Debug, debug checks on)
#   make asan           the same suite under AddressSanitizer + UBSan (built with clang 19)
#   make tsan           the same suite under ThreadSanitizer
#                       (both build only what ctest runs: -DTERN_TESTED_ONLY=ON; what each CI
#                       step builds and its cold CPU cost: docs/reliability.md, "What CI builds")
#   make bench          build tern and the peers in release mode and run the quick pass of the
#                       benchmark suite (the table of every report docs/benchmark-methods.md
#                       describes, the cells that carry each report's point, three rounds of
#                       every comparison; within 8 minutes on a quiet 2-CPU machine, each table
#                       within its budget in bench/suite/tables.py; 24 minutes under a load
#                       average of 30 to 50; bench/REPORT.md)
#   make bench FULL=1   the whole matrix (within 45 minutes, quiet) plus the micro benchmarks;
#                       bench/full/REPORT.md. BENCH_ARGS passes options to bench/suite/run.py
#                       (e.g. --only 003)
#   make format         reformat the sources; make format-check only checks
#   make cross-aarch64  cross-build the aarch64 context switch and run its test under qemu
#   make fuzz           build the libFuzzer targets (clang 19) and run each for FUZZ_SECONDS (60)
#   make soak           the reliability soak (docs/reliability.md), SOAK_SECONDS (60) of load each
#   make install-check  build and install tern as README's "Build and install" says (no tests, no
#                       tools) into a scratch prefix, then build and run tests/install/consumer
#                       and examples/rpc against it

JOBS ?= $(shell nproc)
CTEST_ARGS ?=
FULL ?=
BENCH_ARGS ?=
CLANG_FORMAT ?= clang-format-19
GENERATOR := -G Ninja
SOURCES = $(shell git ls-files '*.h' '*.cc' 2>/dev/null)

.PHONY: setup test asan tsan bench soak install-check format format-check cross-aarch64 clean

setup:
	@bash scripts/setup

# ccache shares compiled objects between checkouts and build directories of this machine (a CI
# clone in another folder reuses what a developer built): paths below the checkout are hashed
# relative to it, and the build directory is left out of the hash of debug builds.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

# clang 19's ASan does not find Debian's llvm-symbolizer by itself: name it, so that ASan and
# libFuzzer reports show functions and lines.
export ASAN_SYMBOLIZER_PATH ?= $(shell command -v llvm-symbolizer 2>/dev/null)

define build_and_test
	cmake -S . -B $(1) $(GENERATOR) $(2)
	cmake --build $(1) -j $(JOBS)
	cd $(1) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)
endef

test: setup
	$(call build_and_test,build/debug,-DCMAKE_BUILD_TYPE=Debug)

# The sanitizer builds compile only what ctest runs (TERN_TESTED_ONLY: no header checks, no
# examples that no test runs, no seed generators; make test's build compiles those).
# The asan build links with lld (Debian's lld-19): a test binary links in about a fifth of the
# CPU time of GNU ld.
asan: setup
	$(call build_and_test,build/asan,-DCMAKE_BUILD_TYPE=Debug -DTERN_TESTED_ONLY=ON \
	  -DTERN_SANITIZE=address -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
	  -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld)

tsan: setup
	$(call build_and_test,build/tsan,-DCMAKE_BUILD_TYPE=Debug -DTERN_TESTED_ONLY=ON \
	  -DTERN_SANITIZE=thread)

bench:
	@bash scripts/setup --bench
	cmake -S . -B build/release $(GENERATOR) -DCMAKE_BUILD_TYPE=Release -DTERN_BUILD_TESTS=OFF \
	  -DTERN_BUILD_BENCH=ON
	cmake --build build/release -j $(JOBS)
	bash bench/peers/build.sh build/release
	bash bench/suite/venv.sh build/bench-venv
	$(if $(FULL),bash bench/micro/run.sh build/release)
	python3 bench/suite/run.py --build build/release $(if $(FULL),--full) $(BENCH_ARGS)

# make soak: bench/suite/soak.py against tern-echo and tern-rpc-server built in SOAK_BUILD with
# SOAK_CMAKE (a Release build by default; CI reuses make test's Debug build): 10,000 echo
# connections and 1,000 RPC callers for SOAK_SECONDS each, 10,000 idle connections, a connect
# flood, and RPC callers beside abusive clients (their p99 and the server's RSS bounded). Fails on
# any error, leak or growth.
SOAK_SECONDS ?= 60
SOAK_BUILD ?= build/release
SOAK_CMAKE ?= -DCMAKE_BUILD_TYPE=Release -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_BENCH=ON
soak: setup
	cmake -S . -B $(SOAK_BUILD) $(GENERATOR) $(SOAK_CMAKE)
	cmake --build $(SOAK_BUILD) -j $(JOBS) --target tern-echo tern-rpc-server tern-bench
	python3 bench/suite/soak.py --build $(SOAK_BUILD) --seconds $(SOAK_SECONDS)

# make install-check: in a fresh INSTALL_CHECK_BUILD, tern configured, built and installed with
# README's commands (Release, TERN_BUILD_TESTS=OFF, TERN_BUILD_TOOLS=OFF: the libraries, the
# examples and protoc-gen-tern only) into INSTALL_CHECK_BUILD/consumers/prefix; then
# tests/install/run_install_test.cmake (also ctest's install_test) builds tests/install/consumer
# and examples/rpc against that prefix with find_package(tern) and runs them, kv_server and
# kv_client against each other on 127.0.0.1.
INSTALL_CHECK_BUILD ?= build/install-check
install-check: setup
	rm -rf $(INSTALL_CHECK_BUILD)
	cmake -S . -B $(INSTALL_CHECK_BUILD)/tern $(GENERATOR) -DCMAKE_BUILD_TYPE=Release \
	  -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_TOOLS=OFF
	cmake --build $(INSTALL_CHECK_BUILD)/tern -j $(JOBS)
	cmake -DBUILD_DIR=$(INSTALL_CHECK_BUILD)/tern -DSOURCE_DIR=$(CURDIR) \
	  -DWORK_DIR=$(abspath $(INSTALL_CHECK_BUILD))/consumers -DGENERATOR=Ninja \
	  -P tests/install/run_install_test.cmake

format: setup
	$(CLANG_FORMAT) -i $(SOURCES)

format-check: setup
	$(CLANG_FORMAT) --dry-run -Werror $(SOURCES)

cross-aarch64: setup
	bash scripts/cross-aarch64

clean:
	rm -rf build

# make fuzz: build the libFuzzer targets of tests/fuzz with clang 19 (ASan + UBSan; tern::net,
# tern::rpc and the targets' parse entries instrumented for coverage) in FUZZ_BUILD, then run each
# target of FUZZ_TARGETS in turn for FUZZ_SECONDS on a copy of its seed corpus, printing its final
# stats. Any finding (crash, broken invariant, leak, timeout) stops make with an error.
# $(FUZZ_BUILD)/corpus/<target> keeps what earlier runs found; crashes go to
# $(FUZZ_BUILD)/artifacts/<target>-*.
FUZZ_SECONDS ?= 60
FUZZ_BUILD ?= build/fuzz
FUZZ_TARGETS ?= rpc_frame address header16 admin_http rpc_server_connection
.PHONY: fuzz
define run_fuzzer
	mkdir -p $(FUZZ_BUILD)/corpus/$(1) $(FUZZ_BUILD)/artifacts
	cp tests/fuzz/corpus/$(1)/* $(FUZZ_BUILD)/corpus/$(1)/
	@echo "=== $(1)_fuzz for $(FUZZ_SECONDS) s"
	$(FUZZ_BUILD)/tests/fuzz/$(1)_fuzz -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_BUILD)/artifacts/$(1)- $(FUZZ_BUILD)/corpus/$(1)

endef
fuzz: setup
	cmake -S . -B $(FUZZ_BUILD) $(GENERATOR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_FUZZ=ON \
	  -DTERN_SANITIZE=address -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(FUZZ_TARGETS:%=%_fuzz)
	$(foreach target,$(FUZZ_TARGETS),$(call run_fuzzer,$(target)))
