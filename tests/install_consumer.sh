#!/usr/bin/env bash
# Installs fxcc into a temporary prefix and builds projects that know nothing
# of the source tree against it, on the host:
#   - examples/cmake-consumer: find_package(fxcc) and fxcc_add_model (the
#     digits classifier, built against the installed fxcc::runtime); its
#     scores must match `fxcc run`'s within 1e-5 of the largest, and touching
#     the model must make the next build run fxcc again;
#   - the same model compiled with --runtime shared and built by hand with
#     pkg-config's flags for fxcc-runtime, checked the same way;
#   - fxcc --version and the man page are installed.
#   usage: install_consumer.sh BUILD_DIR SOURCE_DIR PYTHON
set -euo pipefail
build=$1
src=$2
python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > /dev/null
"$prefix/bin/fxcc" --version | grep -q "^fxcc [0-9]" || { echo "FAIL: fxcc --version"; exit 1; }
[ -f "$prefix/share/man/man1/fxcc.1" ] || { echo "FAIL: no man page"; exit 1; }

# One test image and the interpreter's scores for it.
cp "$src/examples/digits/digits.onnx" "$work/digits.onnx"
"$python" -c "
import numpy as np
x = np.load('$src/examples/digits/test_images.npy')[7:8].astype(np.float32)
x.tofile('$work/image.bin'); np.save('$work/image.npy', x)"
"$prefix/bin/fxcc" run "$work/digits.onnx" "$work/image.npy" -o "$work/ref" > /dev/null

# $1: a file of the consumer's printed scores.
check_scores() {
  "$python" - "$1" "$work/ref/output_0.npy" <<'PY'
import sys
import numpy as np
lines = open(sys.argv[1]).read().split("\n")
got = np.array([float(v) for v in lines if v and not v.startswith("class")], dtype=np.float64)
ref = np.load(sys.argv[2]).astype(np.float64).ravel()
err = np.abs(got - ref).max() if got.shape == ref.shape else float("inf")
tol = 1e-5 * max(np.abs(ref).max(), 1e-30)
print(f"  {len(got)} scores, max |diff| {err:.3g} (tolerance {tol:.3g})")
sys.exit(0 if err <= tol else 1)
PY
}

fail=0
echo "find_package(fxcc) + fxcc_add_model:"
cmake -S "$src/examples/cmake-consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DMODEL="$work/digits.onnx" > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
cmake --build "$work/consumer" > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
"$work/consumer/classify" "$work/image.bin" > "$work/scores_cmake.txt"
check_scores "$work/scores_cmake.txt" || { echo "FAIL: the CMake consumer's scores"; fail=1; }
[ ! -d "$work/consumer/fxcc_digits/fxrt" ] || { echo "FAIL: the runtime was copied"; fail=1; }
generated=$work/consumer/fxcc_digits/digits.c
before=$(stat -c %y "$generated")
sleep 1
touch "$work/digits.onnx"
cmake --build "$work/consumer" > "$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; exit 1; }
after=$(stat -c %y "$generated")
[ "$before" != "$after" ] || { echo "FAIL: touching the model did not run fxcc again"; fail=1; }

echo "pkg-config fxcc-runtime:"
"$prefix/bin/fxcc" compile "$work/digits.onnx" -o "$work/shared" --runtime shared --quiet
[ ! -d "$work/shared/fxrt" ] || { echo "FAIL: --runtime shared wrote fxrt/"; fail=1; }
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -std=c99 -O2 -Wall -Wextra -Werror -I"$work/shared" "$src/examples/cmake-consumer/classify.c" \
   "$work"/shared/*.c $(pkg-config --cflags --libs fxcc-runtime) -o "$work/classify_pc"
"$work/classify_pc" "$work/image.bin" > "$work/scores_pc.txt"
check_scores "$work/scores_pc.txt" || { echo "FAIL: the pkg-config build's scores"; fail=1; }

if [ $fail -eq 0 ]; then echo "install consumers: 2 passed, 0 failed"; else exit 1; fi
