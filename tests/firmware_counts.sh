#!/usr/bin/env bash
# The MLPerf Tiny models (bench/make_models.py: dscnn_kws, resnet8, vww,
# ad_autoencoder; seeded random weights) as firmware benchmarks with a
# regression check: each model float (fxcc compile --target cortex-m) and
# int8 (--quantize int8 --target cortex-m --cpu cortex-m4, calibrated on 16
# seeded standard-normal inputs), built into examples/firmware and run on
# QEMU's mps2-an386 (-icount shift=0).  The outputs must match `fxcc run`
# on the same input (int8 models: -O2 with the same calibration, which runs
# the same integer kernels: every value equal, the float softmax or output
# after the last DequantizeLinear within 1e-5 of the largest; float models
# within 1e-5 of the largest output, as tests/firmware_qemu.sh explains).
# Then each build's instructions per inference are compared with
# tests/firmware_counts.txt: more than 2% over fails (a regression), more
# than 2% under fails too, asking for the file to be updated; the flash and
# RAM (with the stack) it adds must stay within the file's budgets.  A
# count or budget of 0 is not checked (a line not measured yet).
#
# FXCC_FIRMWARE_COUNTS=MODEL[:BUILD],... runs only those builds.
# usage: firmware_counts.sh FXCC WORK PYTHON
set -euo pipefail
fxcc=$1
work=$2
python=$3
here=$(cd "$(dirname "$0")/.." && pwd)
counts="$here/tests/firmware_counts.txt"
for tool in qemu-system-arm arm-none-eabi-gcc; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool not installed (scripts/setup.sh installs qemu-system-arm and gcc-arm-none-eabi)"
    exit 77
  fi
done
"$python" -c "import numpy, onnx, onnxruntime" 2> /dev/null ||
  { echo "FAIL: $python lacks numpy, onnx or onnxruntime (scripts/setup.sh makes .venv)"; exit 1; }

wanted() {
  [ -z "${FXCC_FIRMWARE_COUNTS:-}" ] && return 0
  local item
  for item in ${FXCC_FIRMWARE_COUNTS//,/ }; do
    [ "$item" = "$1" ] || [ "$item" = "$1:$2" ] && return 0
  done
  return 1
}

rm -rf "$work"
mkdir -p "$work/models"
lines=$(grep -v '^#' "$counts" | grep .)
models=$(awk '{print $1}' <<< "$lines" | sort -u | paste -sd, -)
"$python" "$here/bench/make_models.py" "$work/models" --models "$models" > "$work/make_models.log"
# Calibration samples: 16 seeded standard-normal inputs of each model's shape.
"$python" - "$work/models" $(tr , ' ' <<< "$models") <<'PY'
import sys
import numpy as np
out, names = sys.argv[1], sys.argv[2:]
for k, name in enumerate(sorted(names)):
    x = np.load(f"{out}/{name}_input.npy")
    rng = np.random.default_rng(4242 + k)
    np.save(f"{out}/{name}_calib.npy", rng.standard_normal((16,) + x.shape).astype(np.float32))
PY

qemu=(qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none
      -semihosting-config enable=on,target=native -icount shift=0)
failures=0
while read -r name build expected flash_budget ram_budget; do
  wanted "$name" "$build" || continue
  model="$work/models/$name.onnx"
  input="$work/models/${name}_input.npy"
  dir="$work/${name}_$build"
  mkdir -p "$dir/ref"
  options=(--target cortex-m)
  ref_options=()
  if [ "$build" = int8 ]; then
    quant=(--quantize int8 --calibrate "$work/models/${name}_calib.npy")
    options+=("${quant[@]}" --cpu cortex-m4)
    ref_options=(-O2 "${quant[@]}")
  fi
  start=$SECONDS
  "$fxcc" compile "$model" -o "$dir/gen" --name "$name" "${options[@]}" > "$dir/compile.log" 2>&1 ||
    { cat "$dir/compile.log"; echo "FAIL: $name $build: fxcc compile"; exit 1; }
  "$fxcc" run "$model" "$input" -o "$dir/ref" "${ref_options[@]}" > "$dir/run.log" 2>&1 ||
    { cat "$dir/run.log"; echo "FAIL: $name $build: fxcc run"; exit 1; }
  "$python" -c "import numpy as np, sys; np.load(sys.argv[1]).tofile(sys.argv[2])" \
    "$input" "$dir/input.bin"
  make -s -C "$here/examples/firmware" -j2 MODEL_DIR="$dir/gen" BUILD="$dir/build" \
    INPUTS="$dir/input.bin" > "$dir/make.log" 2>&1 ||
    { cat "$dir/make.log"; echo "FAIL: $name $build: the firmware example does not build"; exit 1; }
  for image in model stub; do
    timeout 300 "${qemu[@]}" -kernel "$dir/build/fw_$image.elf" > "$dir/$image.log" 2>&1 ||
      { cat "$dir/$image.log"; echo "FAIL: $name $build: the $image image failed under QEMU"; exit 1; }
  done
  "$python" - "$name" "$build" "$expected" "$flash_budget" "$ram_budget" "$dir" \
    "$((SECONDS - start))" <<'PY' || failures=$((failures + 1))
import glob, re, sys
import numpy as np

name, build, expected, flash_budget, ram_budget, d, seconds = sys.argv[1:]
expected, flash_budget, ram_budget = int(expected), int(flash_budget), int(ram_budget)
what = f"{name} {build}"
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64}

def parse(path):
    """The outputs (exact values from their printed bits) and key values."""
    text = open(path).read()
    if not re.search(r"^done$", text, re.M):
        sys.exit(f"FAIL: {what}: {path}: the firmware did not finish:\n{text}")
    lines, outputs, values, i = text.splitlines(), [], {}, 0
    while i < len(lines):
        m = re.fullmatch(r"output (\d+) (\S*) dtype (\d+) count (\d+)", lines[i])
        i += 1
        if not m:
            kv = re.fullmatch(r"(\w+) (\d+)", lines[i - 1])
            if kv:
                values[kv[1]] = int(kv[2])
            continue
        dtype, count, words = DTYPES[int(m[3])], int(m[4]), []
        while len(words) < count:
            words += lines[i].split()
            i += 1
        width = np.dtype(dtype).itemsize
        bits = np.array([int(w, 16) for w in words], dtype=np.uint64)
        outputs.append(bits.astype({1: np.uint8, 4: np.uint32, 8: np.uint64}[width]).view(dtype))
    return outputs, values

outputs, values = parse(f"{d}/model.log")
_, stub = parse(f"{d}/stub.log")
refs = sorted(glob.glob(f"{d}/ref/output_*.npy"))
if len(outputs) != len(refs):
    sys.exit(f"FAIL: {what}: {len(outputs)} outputs printed, the interpreter wrote {len(refs)}")
for k, (got, path) in enumerate(zip(outputs, refs)):
    ref = np.load(path).reshape(-1)
    if got.size != ref.size:
        sys.exit(f"FAIL: {what}: output {k}: {got.size} values, the interpreter gives {ref.size}")
    floating = np.issubdtype(ref.dtype, np.floating)
    err = np.abs(got.astype(np.float64) - ref.astype(np.float64)).max()
    tol = 1e-5 * np.abs(ref.astype(np.float64)).max() if floating else 0.0
    if not err <= tol:
        sys.exit(f"FAIL: {what}: output {k}: max |firmware - fxcc run| {err:.3g} > {tol:.3g}")

make_log = open(f"{d}/make.log").read()
adds = re.search(r"adds: flash (\d+) bytes .*RAM (\d+) bytes", make_log)
flash = int(adds[1])
stack = values["stack_used_bytes"] - stub["stack_used_bytes"]
ram = int(adds[2]) + stack
per_tick = values["calibration_instructions"] / values["calibration_systick_ticks"]
instructions = round(values["run_systick_ticks"] * per_tick)
print(f"{what}: {instructions} instructions (expected {expected}), flash {flash} "
      f"(budget {flash_budget}), RAM {ram} with {stack} of stack (budget {ram_budget}); "
      f"{seconds} s")
fails = []
if expected and instructions > expected * 1.02:
    fails.append(f"{instructions} instructions, {100 * (instructions / expected - 1):.1f}% over "
                 f"tests/firmware_counts.txt's {expected} (more than 2%: a regression)")
if expected and instructions < expected * 0.98:
    fails.append(f"{instructions} instructions, {100 * (1 - instructions / expected):.1f}% under "
                 f"tests/firmware_counts.txt's {expected}: an improvement; write {instructions} "
                 f"on its '{name} {build}' line")
if flash_budget and flash > flash_budget:
    fails.append(f"adds {flash} bytes of flash (budget {flash_budget})")
if ram_budget and ram > ram_budget:
    fails.append(f"adds {ram} bytes of RAM with the stack (budget {ram_budget})")
if fails:
    sys.exit(f"FAIL: {what}: " + "; ".join(fails))
print(f"ok: {what}")
PY
done <<< "$lines"
if (( failures )); then
  echo "FAIL: $failures of the builds above"
  exit 1
fi
echo "ok: qemu $(qemu-system-arm --version | head -1 | awk '{print $4}'), $(arm-none-eabi-gcc --version | head -1)"
