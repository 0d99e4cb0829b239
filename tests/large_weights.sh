#!/usr/bin/env bash
# The large-weights path: a model with 1.4 MB of weights
# (scripts/make_large_weights_model.py) compiled with --weights incbin and
# with --weights c, each folder built with its own CMakeLists.txt, run, and
# its output compared with ONNX Runtime's (rtol 1e-4, atol 1e-5).  Also checks
# the files each mode writes, and that no C file holds an array of more than
# 4096 bytes in NAME.c or, in incbin mode, anywhere.  Debug builds (-O0) keep it
# under 10 s: the runtime's sources are most of the build, and the model is small.
# usage: large_weights.sh FXCC WORK
set -euo pipefail
fxcc=$1
work=$2
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || python=python3
rm -rf "$work"
mkdir -p "$work"
"$python" scripts/make_large_weights_model.py "$work"

# Largest C array (bytes) declared with an initializer in the given files.
largest_array() {
  "$python" - "$@" <<'PY'
import re, sys
sizes = {"float": 4, "double": 8, "int64_t": 8, "int32_t": 4, "uint64_t": 8, "int8_t": 1,
         "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "bool": 1}
largest = 0
for path in sys.argv[1:]:
    for m in re.finditer(r"const (\w+) \w+\[(\d+)\] = \{", open(path).read()):
        largest = max(largest, sizes.get(m.group(1), 8) * int(m.group(2)))
print(largest)
PY
}

for mode in incbin c; do
  out="$work/$mode"
  "$fxcc" compile "$work/large.onnx" -o "$out" --name large --weights "$mode" --emit-main > /dev/null
  if [ "$mode" = incbin ]; then
    [ -f "$out/large_weights.bin" ] && [ -f "$out/large_weights.S" ] ||
      { echo "FAIL: incbin: no large_weights.bin/.S"; exit 1; }
    [ ! -e "$out/large_weights.c" ] || { echo "FAIL: incbin wrote large_weights.c"; exit 1; }
    blob=$(stat -c %s "$out/large_weights.bin")
    [ "$blob" -gt 1400000 ] || { echo "FAIL: incbin: blob of $blob bytes"; exit 1; }
    checked=("$out"/*.c)
  else
    [ -f "$out/large_weights.c" ] || { echo "FAIL: c: no large_weights.c"; exit 1; }
    [ ! -e "$out/large_weights.bin" ] || { echo "FAIL: c wrote large_weights.bin"; exit 1; }
    checked=("$out/large.c")
  fi
  biggest=$(largest_array "${checked[@]}")
  [ "$biggest" -le 4096 ] ||
    { echo "FAIL: $mode: a $biggest-byte array in ${checked[*]}"; exit 1; }
  cmake -S "$out" -B "$out/build" -DCMAKE_BUILD_TYPE=Debug \
        -DCMAKE_C_FLAGS="-Werror -pedantic" > "$out/cmake.log" 2>&1 ||
    { cat "$out/cmake.log"; exit 1; }
  cmake --build "$out/build" -j2 > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; exit 1; }
  mkdir -p "$out/run"
  "$out/build/main" -o "$out/run" "$work/large_input.npy"
  "$python" - "$out/run/output_0.npy" "$work/large_expected.npy" "$mode" <<'PY'
import sys
import numpy as np
got, want = np.load(sys.argv[1]), np.load(sys.argv[2])
err = np.abs(got.astype(np.float64) - want)
ok = got.shape == want.shape and np.all(err <= 1e-5 + 1e-4 * np.abs(want))
print(f"{sys.argv[3]}: max abs error {err.max():.3g} against ONNX Runtime: {'ok' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
PY
done
