#!/usr/bin/env bash
# Feeds every malformed file through the fxcc CLI and asserts a clean error:
# exit status 1 (2 for a bad command line), an "fxcc: error:" line on stderr, no sanitizer report, no
# signal, and nothing written to the output folder.
#   usage: run_malformed.sh FXCC FILES_DIR
# Models (*.onnx, or a folder holding model.onnx) go through `inspect` and
# `run`; tensor files (*.npy, *.pb) are given to `run` as the input of the
# seed example.
# An op fxcc does not implement is no longer an error in the CLI: it becomes a
# leaf op with a "fxcc: note:" line.  The models listed in leaf_models must
# inspect cleanly that way, and still fail cleanly in `run`, which has no
# --leaf-lib to run the leaf with; a leaf that cannot be typed fails inspect.
set -u
fxcc=$1
files=$2
here=$(cd "$(dirname "$0")" && pwd)
seed="$here/../../examples/seed.onnx"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
leaf_models=" unknown_op.onnx custom_domain_op.onnx "

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

check_leaf() { # name, then the command: succeeds, with a leaf note and no error
  local name=$1
  shift
  "$@" > "$work/stdout" 2> "$work/stderr"
  local rc=$?
  local why=""
  if [ $rc -ne 0 ]; then why="exit status $rc, expected 0 (an unknown op is a leaf)"; fi
  if ! grep -q '^fxcc: note: .*becomes a leaf op' "$work/stderr"; then why="$why; no leaf note"; fi
  if grep -qE '^fxcc: error: |AddressSanitizer|UndefinedBehaviorSanitizer|runtime error|LeakSanitizer' "$work/stderr"; then
    why="$why; an error or sanitizer report"
  fi
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
      if [[ "$leaf_models" == *" $name "* ]]; then
        check_leaf "inspect $name (leaf)" "$fxcc" inspect "$f"
      else
        check "inspect $name" "$fxcc" inspect "$f"
      fi
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
check "leaf without an output type" "$fxcc" inspect "$here/../leaf/untyped.onnx"
check "leaf without --leaf-lib" "$fxcc" run "$here/../leaf/cummax.onnx" \
  "$here/../leaf/cummax_input.npy" -o "$work/out"
check "missing --leaf-lib file" "$fxcc" run "$here/../leaf/cummax.onnx" \
  "$here/../leaf/cummax_input.npy" -o "$work/out" --leaf-lib "$work/none.so"
check "bad --leaf-type" "$fxcc" inspect "$here/../leaf/untyped.onnx" --leaf-type y=float32[4
check "wrong input shape" "$fxcc" run "$seed" "$here/../../examples/seed_expected.npy" -o "$work/out"

echo "malformed inputs: $pass passed, $fail failed"
[ $fail -eq 0 ] && [ $pass -gt 5 ]
