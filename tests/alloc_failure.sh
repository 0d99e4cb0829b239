#!/usr/bin/env bash
# Proves that running out of memory anywhere in `fxcc compile` (loading, shape
# propagation, the -O2 passes, code generation) is reported and nothing else:
# for each model, counts the heap allocations of a clean compile, then fails
# allocation N for N = 1, 1 + STRIDE, ... up to that count and asserts
#   exit status 1, every "fxcc: error:" line says "out of memory" (or names
#   the pass it happened in),
#   no output folder left behind, no sanitizer report (leaks included).
# Needs fxcc built with -DFXCC_FAULT_INJECTION=ON.  A missing model in a
# folder named bench_models is made by bench/make_models.py (run from the
# source root).
#   usage: alloc_failure.sh FXCC MODEL[:STRIDE]...
set -u
fxcc=$1
shift
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
fail=0
runs=0

for spec in "$@"; do
  model=${spec%%:*}
  stride=1
  [ "$spec" != "$model" ] && stride=${spec##*:}
  if [ ! -f "$model" ] && [ "$(basename "$(dirname "$model")")" = bench_models ]; then
    python=.venv/bin/python
    [ -x "$python" ] || python=python3
    "$python" bench/make_models.py "$(dirname "$model")" --models "$(basename "$model" .onnx)" \
      > /dev/null || exit 1
  fi
  out="$work/out"
  rm -rf "$out"
  if ! FXCC_FAIL_ALLOC_AT=count "$fxcc" compile "$model" -o "$out" > /dev/null 2> "$work/stderr"; then
    echo "FAIL $model: the clean compile fails"
    sed 's/^/    /' "$work/stderr" | head -20
    exit 1
  fi
  count=$(sed -n 's/^fxcc: \([0-9]*\) allocations$/\1/p' "$work/stderr")
  if [ -z "$count" ] || [ "$count" -lt 1 ]; then
    echo "FAIL $model: no allocation count (is fxcc built with FXCC_FAULT_INJECTION?)"
    exit 1
  fi
  model_fail=0
  for ((n = 1; n <= count; n += stride)); do
    rm -rf "$out"
    FXCC_FAIL_ALLOC_AT=$n "$fxcc" compile "$model" -o "$out" > /dev/null 2> "$work/stderr"
    rc=$?
    runs=$((runs + 1))
    why=""
    [ $rc -ne 1 ] && why="exit status $rc, expected 1"
    grep -q '^fxcc: error: ' "$work/stderr" || why="$why; no 'fxcc: error:' line"
    # "in pass NAME" is context in front of the pass's own error.
    if grep '^fxcc: error: ' "$work/stderr" | grep -v '^fxcc: error: in pass [a-z0-9-]*$' |
        grep -qv 'out of memory'; then
      why="$why; an error other than out of memory"
    fi
    if grep -qE 'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error' "$work/stderr"; then
      why="$why; sanitizer report"
    fi
    [ -e "$out" ] && why="$why; left $out behind"
    if [ -n "$why" ]; then
      echo "FAIL $model, allocation $n of $count: ${why#; }"
      sed 's/^/    /' "$work/stderr" | head -30
      model_fail=$((model_fail + 1))
      fail=$((fail + 1))
    fi
  done
  echo "$model: $count allocations, $(( (count + stride - 1) / stride )) failure points, $model_fail wrong"
done
echo "alloc_failure: $runs runs, $fail wrong"
[ $fail -eq 0 ]
