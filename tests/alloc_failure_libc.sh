#!/usr/bin/env bash
# Every heap allocation of `fxcc compile`, libc's own included (fopen,
# opendir, stdio buffers), fails in turn through the LD_PRELOAD shim
# alloc_shim.c, from the start of main to the process's exit; the project's
# own fault injection (alloc_failure.sh) reaches only fxcc's allocator.
# Each run must end in one of two ways:
#   - exit 1, every "fxcc: error:" line says "out of memory" (or names the
#     pass it happened in), and the output
#     folder is as it was before (absent, or the earlier compile's files and
#     the user's own untouched), with no DIR.tmp.N left beside it;
#   - exit 0 with the folder exactly a clean compile's (libc did without the
#     allocation: a stdio buffer, for instance).
# Each model is compiled into a new folder and into one holding an earlier
# compile and a file of the user's.  MODEL:STRIDE fails every STRIDEth
# allocation only, and the last 100 each (the files are written last).
#   usage: alloc_failure_libc.sh SHIM.so FXCC MODEL[:STRIDE]...
set -u
shim=$1
fxcc=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1 # no thread start-up per run: 1,000s of runs
fail=0
runs=0

# $1: the folder as it should be; $2: the folder found.  Silent when equal.
same_tree() {
  diff -r "$1" "$2" > "$work/diff" 2>&1
}

for spec in "$@"; do
  model=${spec%%:*}
  stride=1
  [ "$spec" != "$model" ] && stride=${spec##*:}
  rm -rf "$work/clean" "$work/counted"
  "$fxcc" compile "$model" -o "$work/clean" > /dev/null 2> "$work/stderr" || {
    echo "FAIL $model: the clean compile fails"; sed 's/^/    /' "$work/stderr"; exit 1; }
  count=$(FXCC_SHIM_FAIL_AT=count LD_PRELOAD=$shim "$fxcc" compile "$model" -o "$work/counted" \
            2>&1 > /dev/null | sed -n 's/^alloc_shim: \([0-9]*\) allocations$/\1/p')
  if [ -z "$count" ] || [ "$count" -lt 100 ]; then
    echo "FAIL $model: the shim counted '${count}' allocations (is it preloaded?)"
    exit 1
  fi
  # The folder a compile into an existing output starts from: an earlier
  # compile with one of its files changed, and a file of the user's.
  rm -rf "$work/before"
  cp -r "$work/clean" "$work/before"
  echo "/* edited */" >> "$work/before/fxrt/fxrt.h"
  mkdir "$work/before/build" && echo "user file" > "$work/before/build/keep.txt"
  rm -rf "$work/after"
  cp -r "$work/clean" "$work/after"
  mkdir "$work/after/build" && cp "$work/before/build/keep.txt" "$work/after/build/"

  for n in $( (seq 1 "$stride" "$count"; seq $((count > 100 ? count - 99 : 1)) "$count") |
             sort -nu); do
    for start in new existing; do
      out="$work/out"
      rm -rf "$out" "$out".tmp.*
      [ $start = existing ] && cp -r "$work/before" "$out"
      FXCC_SHIM_FAIL_AT=$n LD_PRELOAD=$shim "$fxcc" compile "$model" -o "$out" \
        > /dev/null 2> "$work/stderr"
      rc=$?
      runs=$((runs + 1))
      why=""
      if ls -d "$out".tmp.* > /dev/null 2>&1; then
        why="left $(basename "$(ls -d "$out".tmp.* | head -1)") behind"
      elif [ $rc -eq 0 ]; then
        expect="$work/clean"; [ $start = existing ] && expect="$work/after"
        same_tree "$expect" "$out" || why="exit 0 with an output unlike a clean compile's: $(head -c 300 "$work/diff")"
      elif [ $rc -ne 1 ]; then
        why="exit $rc"
      elif grep "^fxcc: error:" "$work/stderr" | grep -v "^fxcc: error: in pass [a-z0-9-]*$" |
             grep -qv "out of memory"; then
        why="an error other than out of memory"
      elif ! grep -q "^fxcc: error:" "$work/stderr"; then
        why="exit 1 without an error"
      elif [ $start = new ] && [ -e "$out" ]; then
        why="left a partial output folder"
      elif [ $start = existing ] && ! same_tree "$work/before" "$out"; then
        why="changed the existing output folder"
      fi
      if [ -n "$why" ]; then
        echo "FAIL $(basename "$model") allocation $n of $count ($start folder): $why"
        sed 's/^/    /' "$work/stderr" | head -5
        fail=$((fail + 1))
      fi
    done
  done
  echo "$(basename "$model"): $count allocations, failed at a stride of $stride and the last 100" \
       "into a new and an existing folder"
done

echo "$((runs - fail)) passed, $fail failed"
[ $fail -eq 0 ]
