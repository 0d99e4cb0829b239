#!/usr/bin/env bash
# Builds fxcc and runs every test: the unit tests, the ONNX backend
# conformance suite and the malformed-input regressions, first in a normal
# build, then again under AddressSanitizer + UndefinedBehaviorSanitizer, then a
# short smoke run of each fuzzer.  The first two builds treat warnings as
# errors.
# Tests run as many at a time as there are cores (each is single-threaded).
# The sanitizer build also has fault injection (a counter per allocation,
# idle unless FXCC_FAIL_ALLOC_AT is set), which adds the alloc_failure test:
# every allocation of a compile fails in turn, leak-checked.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFXCC_WERROR=ON > /dev/null
cmake --build build -j"$jobs"
ctest --test-dir build -j"$jobs" --output-on-failure

cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DFXCC_SANITIZE=ON -DFXCC_FAULT_INJECTION=ON \
  -DFXCC_WERROR=ON > /dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -j"$jobs" --output-on-failure

if command -v clang > /dev/null; then
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DFXCC_FUZZ=ON > /dev/null
  cmake --build build-fuzz -j"$jobs" --target fuzz_onnx_load fuzz_tensor_file fuzz_graph_build fuzz_graph_parse
  scripts/fuzz_smoke.sh build-fuzz "${FXCC_FUZZ_SECONDS:-30}"
fi
