#!/usr/bin/env bash
# A short run of each libFuzzer target on its seed corpus: CI's smoke test
# that the parsers survive mutated input.  Long campaigns are run by hand:
#   build-fuzz/fuzz_onnx_load -max_total_time=3600 CORPUS_DIR
# usage: fuzz_smoke.sh BUILD_DIR SECONDS
set -euo pipefail
build=$1
seconds=$2
cd "$(dirname "$0")/.."
corpus="$build/corpus"
.venv/bin/python tests/fuzz/make_corpus.py "$corpus"
for fuzzer in fuzz_onnx_load fuzz_tensor_file fuzz_graph_build fuzz_graph_parse; do
  dir="$corpus/${fuzzer#fuzz_}"
  mkdir -p "$dir"
  echo "fuzz smoke: $fuzzer for ${seconds}s on $(ls "$dir" | wc -l) seeds"
  "$build/$fuzzer" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=0 "$dir" 2> "$build/$fuzzer.log" \
    || { tail -50 "$build/$fuzzer.log"; echo "fuzz smoke: $fuzzer found a crash"; exit 1; }
  grep -E '^(#[0-9]+.*DONE|Done)' "$build/$fuzzer.log" | tail -1 || true
done
