#!/usr/bin/env bash
# The int8 convolution kernels of a Cortex-M4 image call no libgcc
# arithmetic helper: the MLPerf Tiny DS-CNN of bench/make_models.py,
# quantized by fxcc (--quantize int8 --target cortex-m --cpu cortex-m4,
# calibrated on 32 seeded standard-normal inputs as firmware_qemu.sh does),
# built into examples/firmware's image, and the image's static call graph
# walked by tests/firmware_helpers.py from the runtime's int8 entry points
# (NAME_fxrt_qconv, NAME_fxrt_qconv_inplace and NAME_fxrt_qgemm: every
# convolution, 99% of the model's instructions): no 64-bit division
# (__aeabi_ldivmod, __udivmoddi4), no double (__aeabi_d*, __adddf3...), no
# soft-float or 64-bit shift routine may be reachable.  The walk from
# NAME_run is printed too, for the record: the reference paths of QGemm
# (fxrt_requantize), QuantizeLinear and QLinearAveragePool still reach
# double helpers (bench/RESULTS.md).
# usage: firmware_helpers.sh FXCC WORK PYTHON
set -euo pipefail
fxcc=$1
work=$2
python=$3
here=$(cd "$(dirname "$0")/.." && pwd)
for tool in arm-none-eabi-gcc arm-none-eabi-objdump; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool not installed (scripts/setup.sh installs gcc-arm-none-eabi)"
    exit 77
  fi
done
"$python" -c "import numpy, onnx" 2> /dev/null ||
  { echo "FAIL: $python lacks numpy or onnx (scripts/setup.sh makes .venv)"; exit 1; }
rm -rf "$work"
mkdir -p "$work/models"
"$python" "$here/bench/make_models.py" "$work/models" --models dscnn_kws > "$work/make_models.log"
"$python" -c "
import numpy as np, sys
rng = np.random.default_rng(2024)
np.save(sys.argv[1], rng.standard_normal((32, 1, 1, 49, 10)).astype(np.float32))
np.load(sys.argv[2]).tofile(sys.argv[3])
" "$work/models/calib.npy" "$work/models/dscnn_kws_input.npy" "$work/input.bin"
name=dscnn_int8
"$fxcc" compile "$work/models/dscnn_kws.onnx" -o "$work/gen" --target cortex-m --cpu cortex-m4 \
  --name "$name" --quantize int8 --calibrate "$work/models/calib.npy" > "$work/compile.log"
make -s -C "$here/examples/firmware" -j2 MODEL_DIR="$work/gen" BUILD="$work/build" \
  INPUTS="$work/input.bin" > "$work/make.log" 2>&1 ||
  { cat "$work/make.log"; echo "FAIL: the firmware example does not build"; exit 1; }
elf="$work/build/fw_model.elf"
arm-none-eabi-gcc -mcpu=cortex-m4 -dM -E - < /dev/null | grep -c "__ARM_FEATURE_DSP" > /dev/null ||
  { echo "FAIL: arm-none-eabi-gcc does not define __ARM_FEATURE_DSP for the Cortex-M4"; exit 1; }
symbols=$(arm-none-eabi-nm "$elf")
walked=0
for entry in "${name}_fxrt_qconv" "${name}_fxrt_qconv_inplace" "${name}_fxrt_qgemm"; do
  if grep -q " [Tt] $entry\$" <<< "$symbols"; then
    "$python" "$here/tests/firmware_helpers.py" "$elf" "$entry"
    walked=$((walked + 1))
  fi
done
# The DS-CNN's first layer runs fxrt_qconv, the others in place.
(( walked >= 2 )) || { echo "FAIL: only $walked int8 entry points in the image: the walk checked too little"; exit 1; }
echo "for the record, from ${name}_run (QEMU's profile hook is its indirect call):"
"$python" "$here/tests/firmware_helpers.py" "$elf" "${name}_run" --allow-indirect | sed 's/^/   /' || true
