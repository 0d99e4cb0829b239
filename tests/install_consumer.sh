#!/usr/bin/env bash
# Installs fxcc into a temporary prefix and builds projects that know nothing
# of the source tree against it, on the host:
#   - examples/cmake-consumer: find_package(fxcc) and fxcc_add_model (the
#     digits classifier, built against the installed fxcc::runtime); its
#     scores must match `fxcc run`'s within 1e-5 of the largest, and touching
#     the model must make the next build run fxcc again;
#   - the same model compiled with --runtime shared and built by hand with
#     pkg-config's flags for fxcc-runtime, checked the same way;
#   - examples/cmake-consumer/firmware: the firmware example cross-built by
#     CMake with an arm-none-eabi toolchain file, fxcc_add_model compiling
#     the model for the Cortex-M4 (float, and int8 calibrated on other test
#     images), run on QEMU's mps2-an386; the printed outputs must match
#     `fxcc run` (the int8 build against `fxcc run -O2` with the same
#     calibration, which runs the same integer kernels) within 1e-5 of the
#     largest (skipped, saying so, without the cross compiler or QEMU);
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

passed=2
if command -v arm-none-eabi-gcc > /dev/null && command -v qemu-system-arm > /dev/null; then
  "$python" -c "
import numpy as np
np.save('$work/calib.npy', np.load('$src/examples/digits/test_images.npy')[100:300].astype(np.float32))"
  for kind in float int8; do
    echo "firmware ($kind), cross-built with fxcc_add_model:"
    calib=(); quantize=()
    if [ $kind = int8 ]; then
      calib=(-DCALIBRATE="$work/calib.npy")
      quantize=(-O2 --quantize int8 --calibrate "$work/calib.npy")
    fi
    fw=$work/fw_$kind
    cmake -S "$src/examples/cmake-consumer/firmware" -B "$fw" \
          -DCMAKE_TOOLCHAIN_FILE="$src/examples/cmake-consumer/firmware/arm-none-eabi.cmake" \
          -DCMAKE_PREFIX_PATH="$prefix" -DMODEL="$work/digits.onnx" -DINPUT="$work/image.bin" \
          "${calib[@]}" > "$fw.log" 2>&1 && cmake --build "$fw" >> "$fw.log" 2>&1 ||
      { cat "$fw.log"; echo "FAIL: the $kind firmware does not build"; exit 1; }
    "$prefix/bin/fxcc" run "$work/digits.onnx" "$work/image.npy" -o "$work/ref_$kind" \
      "${quantize[@]}" > /dev/null
    timeout 60 qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none \
      -semihosting-config enable=on,target=native -kernel "$fw/fw_model.elf" > "$fw.out" 2>&1
    "$python" - "$fw.out" "$work/ref_$kind/output_0.npy" <<'PY' || { echo "FAIL: the $kind firmware's outputs"; fail=1; }
import re, sys
import numpy as np
text = open(sys.argv[1]).read()
m = re.search(r"^output 0 \S* dtype 1 count (\d+)\n((?:[0-9a-f ]+\n)+)", text, re.M)
if not m or "\ndone" not in text:
    sys.exit(f"no float output in the firmware's log:\n{text}")
words = m[2].split()[: int(m[1])]
got = np.array([int(w, 16) for w in words], dtype=np.uint32).view(np.float32).astype(np.float64)
ref = np.load(sys.argv[2]).astype(np.float64).ravel()
err = np.abs(got - ref).max() if got.shape == ref.shape else float("inf")
tol = 1e-5 * max(np.abs(ref).max(), 1e-30)
print(f"  {len(got)} outputs, max |diff| {err:.3g} (tolerance {tol:.3g})")
sys.exit(0 if err <= tol else 1)
PY
    passed=$((passed + 1))
  done
else
  echo "firmware consumers skipped: no arm-none-eabi-gcc or qemu-system-arm"
fi

if [ $fail -eq 0 ]; then echo "install consumers: $passed passed, 0 failed"; else exit 1; fi
