#!/usr/bin/env bash
# Feeds every malformed file through the fxcc CLI and asserts a clean error:
# exit status 1 (2 for a bad command line), an "fxcc: error:" line on stderr, no sanitizer report, no
# signal, and nothing written to the output folder.
#   usage: run_malformed.sh FXCC FILES_DIR
# Models (*.onnx, or a folder holding model.onnx) go through `inspect` and
# `run`; tensor files (*.npy, *.pb) are given to `run` as the input of the
# seed example.
set -u
fxcc=$1
files=$2
here=$(cd "$(dirname "$0")" && pwd)
seed="$here/../../examples/seed.onnx"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0

check() { # name, then the command
  local name=$1
  shift
  local out="$work/out"
  rm -rf "$out"
  "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  local why=""
  if [ $rc -ne 1 ] && [ $rc -ne 2 ]; then why="exit status $rc, expected 1 (bad input) or 2 (bad command line)"; fi
  if ! grep -q '^fxcc: error: ' "$work/stderr"; then why="$why; no 'fxcc: error:' line"; fi
  if grep -qE 'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error|LeakSanitizer' "$work/stderr"; then
    why="$why; sanitizer report"
  fi
  if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then why="$why; wrote output files"; fi
  if [ -n "$why" ]; then
    echo "FAIL $name: ${why#; }"
    sed 's/^/    /' "$work/stderr" | head -20
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
    [ -n "${VERBOSE:-}" ] && echo "ok   $name: $(head -1 "$work/stderr")"
  fi
}

shopt -s nullglob
for f in "$files"/*; do
  name=$(basename "$f")
  case "$f" in
    *.onnx)
      check "inspect $name" "$fxcc" inspect "$f"
      check "run $name" "$fxcc" run "$f" -o "$work/out" ;;
    *.npy|*.pb)
      check "run seed < $name" "$fxcc" run "$seed" "$f" -o "$work/out" ;;
    *)
      if [ -d "$f" ] && [ -f "$f/model.onnx" ]; then
        check "inspect $name/model.onnx" "$fxcc" inspect "$f/model.onnx"
        check "run $name/model.onnx" "$fxcc" run "$f/model.onnx" -o "$work/out"
      fi ;;
  esac
done
# Command-line mistakes are bad input too.
check "run without -o" "$fxcc" run "$seed" "$here/../../examples/seed_input.npy" --shape
check "missing model" "$fxcc" inspect "$work/does_not_exist.onnx"
check "missing input file" "$fxcc" run "$seed" "$work/none.npy" -o "$work/out"
check "unbound --shape name" "$fxcc" inspect "$seed" --shape nosuchinput=1x2
check "wrong input shape" "$fxcc" run "$seed" "$here/../../examples/seed_expected.npy" -o "$work/out"

echo "malformed inputs: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 5 ]
