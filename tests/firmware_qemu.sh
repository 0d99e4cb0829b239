#!/usr/bin/env bash
# The firmware example (examples/firmware) on QEMU's mps2-an386 Cortex-M4F:
# each model is compiled with `fxcc compile --target portable`, built into
# the example's image with arm-none-eabi-gcc through its NAME.mk, run under
# qemu-system-arm with semihosting, and every printed output (exact float
# bits) is compared with `fxcc run` on the same input: max |y - ref| <=
# 1e-5 x max |ref| (both run the same kernels in float32 and agree to about
# 1e-6; digits' softmax is saturated, so 1e-4 would let a bias off by 0.1
# pass).  Also checked: the weights are in flash, nothing links
# malloc, and the comparison does fail on a perturbed reference.  Prints per
# model what it adds to flash and RAM against the stub image, its measured
# stack, and its instruction count (QEMU -icount shift=0, SysTick ticks
# scaled by the firmware's calibration loop).
#
# Models: digits (examples/digits, --target portable, its weights as an
# .incbin blob so that NAME_weights.S goes through NAME.mk too) and the
# MLPerf Tiny DS-CNN of bench/make_models.py (--target cortex-m, weights as
# C arrays), whose RAM (data + bss + the stack it adds) must stay within
# 40 KiB and its flash within 100 KiB (102,400 bytes: 96 KiB until the
# register-tiled float kernels, fxrt_nn_conv_mcu.c, added 1.5 KB of code
# for 2.7x the speed; bench/RESULTS.md); and
# both quantized to int8 by fxcc (--quantize int8, --target cortex-m):
# the DS-CNN calibrated on 32 seeded standard-normal inputs, digits on 200
# held-out images other than the one it runs on.  And the DS-CNN pruned
# by 80% (magnitude) on the sparse kernels.  The int8 DS-CNN must add
# at most 48 KiB of flash and 20 KiB of RAM with its stack, and so must
# the DS-CNN quantized by ONNX Runtime (QOperator, scripts/
# make_quant_models.py), whose reference is the interpreter's QLinear ops
# at -O0 (the reference loops, against the firmware's packed kernels; both
# round the same, so its dequantized output must agree to 1e-5).  A quantized
# model's reference is `fxcc run -O2` with the same calibration, which
# quantizes the same way and runs the same integer kernels (QConvPacked,
# QGemm: integer sums and fixed-point requantization, no rounding choice
# left), so every 8-bit value inside agrees exactly; an integer output must
# be equal, and a float one (both models end in DequantizeLinear ->
# Softmax) within the same 1e-5 as the float models, far below what one
# quantization step of the logits moves it (about 1e-2 of the largest
# probability), so a single flipped step fails.
#
# Last, digits and the float DS-CNN linked into one image (make
# MODEL_DIR2=...), each with its own runtime under its --name's prefix:
# both must match their references.  And digits with its weights and
# arena placed in named sections (--weights-section, --arena-section).
#
# FXCC_FIRMWARE_MODELS adds more, space-separated
# NAME[/WEIGHTS][@TARGET][+CALIB.npy]=MODEL.onnx:IN0.npy[:IN1.npy...]
# (WEIGHTS: fxcc's --weights, c or incbin; TARGET: portable, the default,
# or cortex-m; CALIB: quantize to int8 calibrated on that file); the
# parser reads int8, uint8, int32 and int64 outputs too.
# usage: firmware_qemu.sh FXCC WORK PYTHON
set -euo pipefail
fxcc=$1
work=$2
python=$3
here=$(cd "$(dirname "$0")/.." && pwd)
for tool in qemu-system-arm arm-none-eabi-gcc; do
  if ! command -v "$tool" > /dev/null; then
    echo "SKIP: $tool not installed (scripts/setup.sh installs qemu-system-arm and gcc-arm-none-eabi)"
    exit 77
  fi
done
"$python" -c "import numpy, onnx, onnxruntime" 2> /dev/null ||
  { echo "FAIL: $python lacks numpy, onnx or onnxruntime (scripts/setup.sh makes .venv)"; exit 1; }

rm -rf "$work"
mkdir -p "$work/models"
"$python" "$here/bench/make_models.py" "$work/models" --models dscnn_kws > "$work/make_models.log"
"$python" -c "
import numpy as np, sys
images = np.load(sys.argv[1])
np.save(sys.argv[2], images[:1].reshape(1, 64).astype(np.float32))
" "$here/examples/digits/test_images.npy" "$work/models/digits_input.npy"

# Calibration inputs for the int8 models, from fixed seeds and images.
"$python" -c "
import numpy as np, sys
images = np.load(sys.argv[1])
np.save(sys.argv[2], images[1:201].reshape(200, 1, 64).astype(np.float32))
rng = np.random.default_rng(2024)
np.save(sys.argv[3], rng.standard_normal((32, 1, 1, 49, 10)).astype(np.float32))
" "$here/examples/digits/test_images.npy" "$work/models/digits_calib.npy" \
  "$work/models/dscnn_kws_calib.npy"

# The DS-CNN quantized by ONNX Runtime's quantize_static (QOperator:
# QLinearConv, QGemm, QLinearAveragePool, QLinearSoftmax), as the
# quant_models test makes it.
"$python" "$here/scripts/make_quant_models.py" "$work/models/ort" --models dscnn_kws \
  > "$work/make_quant_models.log" 2>&1 ||
  { cat "$work/make_quant_models.log"; echo "FAIL: scripts/make_quant_models.py"; exit 1; }

# The DS-CNN magnitude-pruned by 80% and written dense: for cortex-m the
# sparse-weights pass stores its layers as compressed rows (the sparse
# kernels with their banded, in-place firmware paths).
"$fxcc" prune "$work/models/dscnn_kws.onnx" --prune magnitude:0.8 \
  -o "$work/models/dscnn_kws_m80.onnx" > "$work/prune.log" 2>&1 ||
  { cat "$work/prune.log"; echo "FAIL: fxcc prune"; exit 1; }

digits="$here/examples/digits/digits.onnx:$work/models/digits_input.npy"
dscnn="$work/models/dscnn_kws.onnx:$work/models/dscnn_kws_input.npy"
specs=("digits/incbin=$digits"
       "dscnn_kws@cortex-m=$dscnn"
       "digits_int8@cortex-m+$work/models/digits_calib.npy=$digits"
       "dscnn_kws_int8@cortex-m+$work/models/dscnn_kws_calib.npy=$dscnn"
       "dscnn_kws_ort@cortex-m=$work/models/ort/dscnn_kws_qop.onnx:$work/models/ort/dscnn_kws_input.npy"
       "dscnn_kws_m80@cortex-m=$work/models/dscnn_kws_m80.onnx:$work/models/dscnn_kws_input.npy")
for extra in ${FXCC_FIRMWARE_MODELS:-}; do specs+=("$extra"); done

qemu=(qemu-system-arm -M mps2-an386 -nographic -monitor none -serial none
      -semihosting-config enable=on,target=native -icount shift=0)

# Reads a run's printed lines, checks the outputs against the reference
# .npy files, prints the measurements.  With --expect-mismatch the
# reference is perturbed first and a match is the failure.
compare() {
  "$python" - "$@" <<'PY'
import re, sys
import numpy as np

RTOL = 1e-5
DTYPES = {1: np.float32, 2: np.uint8, 3: np.int8, 6: np.int32, 7: np.int64}
args = sys.argv[1:]
perturb = args[0] == "--expect-mismatch"
if perturb:
    args = args[1:]
log_path, stub_log_path, name, refs = args[0], args[1], args[2], args[3:]

def parse(path):
    text = open(path).read()
    if not re.search(r"^done$", text, re.M):
        sys.exit(f"FAIL: {name}: {path}: the firmware did not finish:\n{text}")
    outputs, values, lines = [], {}, text.splitlines()
    i = 0
    while i < len(lines):
        m = re.fullmatch(r"output (\d+) (\S*) dtype (\d+) count (\d+)", lines[i])
        i += 1
        if m:
            dtype, count = DTYPES.get(int(m[3])), int(m[4])
            if dtype is None:
                sys.exit(f"FAIL: {name}: output {m[1]}: dtype {m[3]} not parsed by this test")
            words = []
            while len(words) < count:
                words += lines[i].split()
                i += 1
            bits = np.array([int(w, 16) for w in words], dtype=np.uint64)
            width = np.dtype(dtype).itemsize
            raw = bits.astype({1: np.uint8, 4: np.uint32, 8: np.uint64}[width])
            outputs.append(raw.view(dtype))
        else:
            kv = re.fullmatch(r"(\w+) (0x[0-9a-f]+|\d+)", lines[i - 1])
            if kv:
                values[kv[1]] = int(kv[2], 0)
    return outputs, values

outputs, values = parse(log_path)
_, stub_values = parse(stub_log_path)
if len(outputs) != len(refs):
    sys.exit(f"FAIL: {name}: the firmware printed {len(outputs)} outputs, the interpreter wrote {len(refs)}")
mismatch = []
for k, (got, ref_path) in enumerate(zip(outputs, refs)):
    ref = np.load(ref_path)
    if perturb:
        ref = ref.copy()
        flat = ref.reshape(-1)
        if np.issubdtype(ref.dtype, np.floating):
            flat[flat.size // 2] += 10 * RTOL * np.abs(ref).max() or 1
        else:  # one step; wraps at the type's edge, still a change
            flat[flat.size // 2] = flat[flat.size // 2] + ref.dtype.type(1)
    if got.size != ref.size:
        sys.exit(f"FAIL: {name}: output {k}: {got.size} values printed, the interpreter gives {ref.size}")
    ref64 = ref.reshape(-1).astype(np.float64)
    err = np.abs(got.astype(np.float64) - ref64).max()
    # Integers come from the same integer arithmetic on both sides: equal.
    tol = RTOL * np.abs(ref64).max() if np.issubdtype(ref.dtype, np.floating) else 0.0
    if not err <= tol:
        mismatch.append(f"output {k}: max |firmware - interpreter| {err:.3g} > {tol:.3g}")
    elif not perturb:
        print(f"ok: {name}: output {k} ({got.size} values) matches the interpreter: "
              f"max abs error {err:.3g} (tolerance {tol:.3g})")
if perturb:
    if not mismatch:
        sys.exit(f"FAIL: {name}: a perturbed reference was not caught")
    print(f"ok: {name}: a perturbed reference is caught ({mismatch[0]})")
    sys.exit(0)
if mismatch:
    sys.exit(f"FAIL: {name}: " + "; ".join(mismatch))
per_tick = values["calibration_instructions"] / values["calibration_systick_ticks"]
instructions = values["run_systick_ticks"] * per_tick
print(f"   {name}: stack {values['stack_used_bytes']} bytes (stub {stub_values['stack_used_bytes']}, "
      f"model adds {values['stack_used_bytes'] - stub_values['stack_used_bytes']}); "
      f"about {instructions:.0f} instructions per run ({values['run_systick_ticks']} SysTick ticks "
      f"x {per_tick:g} instructions per tick); DWT cycles {values['run_dwt_cycles']}"
      + (" (QEMU does not model the DWT cycle counter)" if values["run_dwt_cycles"] == 0 else ""))
PY
}

# fxcc's --report-json against the image: flash (text + data) and RAM
# (data + bss) that the model adds within REPORT_MARGIN of
# arm-none-eabi-size's, and the stack it estimates at least the stack the
# run was measured to add (a static bound from the frames of every call
# chain, so never below; REPORT_MARGIN is what the estimates leave out or
# count twice: the example's glue, libgcc routines that share one object,
# activations a model does not use, NAME_run's code per step).
REPORT_MARGIN=0.10
check_report() {
  "$python" - "$REPORT_MARGIN" "$@" <<'PY'
import json, re, sys
margin, report_path, make_log, compare_log, name = float(sys.argv[1]), *sys.argv[2:]
r = json.load(open(report_path))
adds = re.search(r"adds: flash (\d+) bytes .*RAM (\d+) bytes", open(make_log).read())
stack = int(re.search(r"model adds (\d+)\)", open(compare_log).read()).group(1))
flash, ram = int(adds.group(1)), int(adds.group(2))
fails = []
for what, est, got in (("flash", r["flash"]["total"], flash), ("RAM", r["ram"]["total"], ram)):
    if not abs(est - got) <= margin * got:
        fails.append(f"{what}: --report-json says {est}, the image adds {got} "
                     f"({100 * (est - got) / got:+.1f}%, margin {100 * margin:.0f}%)")
if not r["ram"]["stack"] >= stack:
    fails.append(f"stack: --report-json says {r['ram']['stack']}, the run used {stack} more than the stub")
if sum(l["weights"] for l in r["layers"]) != r["flash"]["weights"]:
    fails.append("the layers' weights do not add up to the total")
if fails:
    sys.exit(f"FAIL: {name}: " + "; ".join(fails))
print(f"ok: {name}: --report-json flash {r['flash']['total']} (image {flash}, "
      f"{100 * (r['flash']['total'] - flash) / flash:+.1f}%), RAM {r['ram']['total']} (image {ram}, "
      f"{100 * (r['ram']['total'] - ram) / ram:+.1f}%), stack {r['ram']['stack']} >= measured {stack}")
PY
}

for spec in "${specs[@]}"; do
  name=${spec%%=*}
  rest=${spec#*=}
  quantize=()
  ref_level=()
  if [[ $name == *+* ]]; then
    quantize=(--quantize int8 --calibrate "${name#*+}")
    ref_level=(-O2)
    name=${name%%+*}
  fi
  target=portable
  if [[ $name == *@* ]]; then
    target=${name#*@}
    name=${name%%@*}
  fi
  weights=()
  if [[ $name == */* ]]; then
    weights=(--weights "${name#*/}")
    name=${name%%/*}
  fi
  IFS=: read -r -a parts <<< "$rest"
  model=${parts[0]}
  inputs=("${parts[@]:1}")
  dir="$work/$name"
  mkdir -p "$dir/ref"
  "$fxcc" compile "$model" -o "$dir/gen" --target "$target" --name "$name" "${weights[@]}" \
    "${quantize[@]}" --report-json "$dir/report.json" > /dev/null
  "$fxcc" run "$model" "${inputs[@]}" -o "$dir/ref" "${ref_level[@]}" "${quantize[@]}" > /dev/null
  bins=()
  for k in "${!inputs[@]}"; do
    "$python" -c "import numpy as np, sys; np.load(sys.argv[1]).tofile(sys.argv[2])" \
      "${inputs[$k]}" "$dir/input_$k.bin"
    bins+=("$dir/input_$k.bin")
  done
  make -s -C "$here/examples/firmware" -j2 MODEL_DIR="$dir/gen" BUILD="$dir/build" \
    INPUTS="${bins[*]}" > "$dir/make.log" 2>&1 ||
    { cat "$dir/make.log"; echo "FAIL: $name: the firmware example does not build"; exit 1; }
  grep -A3 "arm-none-eabi-size" "$dir/make.log" | tail -3 | sed 's/^/   /'
  grep "adds:" "$dir/make.log" | sed 's/^/   /'

  elf="$dir/build/fw_model.elf"
  # Flash is below 0x00400000 on this board (mps2_an386.ld); a weight
  # anywhere else would be a copy in RAM.
  weights=$(arm-none-eabi-nm "$elf" | awk -v p="${name}_w_" 'index($3, p) == 1')
  [ -n "$weights" ] || { echo "FAIL: $name: no ${name}_w_ weight symbol in the image"; exit 1; }
  while read -r address _ symbol; do
    if (( 16#$address >= 0x400000 )); then
      echo "FAIL: $name: weight $symbol at 0x$address is not in flash"; exit 1
    fi
  done <<< "$weights"
  if arm-none-eabi-nm "$elf" | grep -Ew '(malloc|_malloc_r|calloc|free)$'; then
    echo "FAIL: $name: the image links an allocator"; exit 1
  fi
  echo "ok: $name: $(echo "$weights" | wc -l) weight symbols, all in flash; no allocator linked"

  for image in model stub; do
    if ! timeout 60 "${qemu[@]}" -kernel "$dir/build/fw_$image.elf" > "$dir/$image.log" 2>&1; then
      cat "$dir/$image.log"; echo "FAIL: $name: the $image image failed or timed out under QEMU"; exit 1
    fi
  done
  refs=()
  for f in "$dir"/ref/output_*.npy; do refs+=("$f"); done
  compare "$dir/model.log" "$dir/stub.log" "$name" "${refs[@]}" | tee "$dir/compare.log"
  flash_budget=0
  case $name in
    dscnn_kws) flash_budget=102400; ram_budget=40960 ;;
    dscnn_kws_int8 | dscnn_kws_ort) flash_budget=49152; ram_budget=20480 ;;
  esac
  if (( flash_budget > 0 )); then
    flash=$(sed -n 's/.*adds: flash \([0-9]*\) bytes.*/\1/p' "$dir/make.log")
    ram=$(sed -n 's/.*), RAM \([0-9]*\) bytes.*/\1/p' "$dir/make.log")
    stack=$(sed -n 's/.*model adds \([0-9]*\)).*/\1/p' "$dir/compare.log")
    (( flash <= flash_budget )) ||
      { echo "FAIL: $name adds $flash bytes of flash (> $flash_budget)"; exit 1; }
    (( ram + stack <= ram_budget )) ||
      { echo "FAIL: $name adds $ram bytes of RAM and $stack of stack (> $ram_budget)"; exit 1; }
    echo "ok: $name ($target) adds $flash bytes of flash (<= $flash_budget)," \
      "$((ram + stack)) of RAM with the stack (<= $ram_budget)"
  fi
  compare --expect-mismatch "$dir/model.log" "$dir/stub.log" "$name" "${refs[@]}"
  check_report "$dir/report.json" "$dir/make.log" "$dir/compare.log" "$name"
done
# Two models in one image (MODEL_DIR2): the float DS-CNN and digits, each
# with its own runtime copy (another kernel set: cortex-m and portable)
# under its own link names (fxrt/fxrt_names.h); both must run and match
# their references as they did alone, and no runtime function may keep its
# unprefixed name.
pair="$work/pair"
mkdir -p "$pair"
make -s -C "$here/examples/firmware" -j2 MODEL_DIR="$work/dscnn_kws/gen" \
  INPUTS="$work/dscnn_kws/input_0.bin" MODEL_DIR2="$work/digits/gen" \
  INPUTS2="$work/digits/input_0.bin" BUILD="$pair/build" > "$pair/make.log" 2>&1 ||
  { cat "$pair/make.log"; echo "FAIL: the two-model image does not build"; exit 1; }
syms=$(arm-none-eabi-nm "$pair/build/fw_model.elf")
for name in dscnn_kws digits; do
  echo "$syms" | grep -q " T ${name}_run$" && echo "$syms" | grep -q " T ${name}_fxrt_" ||
    { echo "FAIL: the two-model image lacks ${name}_run or ${name}_fxrt_ functions"; exit 1; }
done
if echo "$syms" | grep -E ' [TtDdBbRr] fxrt_'; then
  echo "FAIL: runtime symbols without a model's prefix in the two-model image"; exit 1
fi
timeout 120 "${qemu[@]}" -kernel "$pair/build/fw_model.elf" > "$pair/model.log" 2>&1 ||
  { cat "$pair/model.log"; echo "FAIL: the two-model image failed under QEMU"; exit 1; }
awk -v dir="$pair" '/^fxcc-firmware model / { n++ } { print > (dir "/block_" n ".log") }' "$pair/model.log"
for k in 1 2; do
  name=$([ $k = 1 ] && echo dscnn_kws || echo digits)
  head -1 "$pair/block_$k.log" | grep -qx "fxcc-firmware model $name" ||
    { cat "$pair/model.log"; echo "FAIL: the two-model image's run $k is not $name"; exit 1; }
  refs=()
  for f in "$work/$name"/ref/output_*.npy; do refs+=("$f"); done
  compare "$pair/block_$k.log" "$work/$name/stub.log" "$name (with the other model)" "${refs[@]}" |
    grep -v "^ "
done
echo "ok: dscnn_kws and digits linked into one image, $(grep -c ' T dscnn_kws_fxrt_' <<< "$syms") +" \
  "$(grep -c ' T digits_fxrt_' <<< "$syms") runtime functions under their prefixes; both ran"

# Placement: digits (--target cortex-m, weights as C arrays in NAME.c and
# NAME_weights.c) with --weights-section .model_weights and
# --arena-section .model_arena, sections the example's linker script maps
# to flash and RAM: every weight symbol and the arena must land there, and
# the model must still run and match.
placed="$work/placed"
mkdir -p "$placed"
"$fxcc" compile "$here/examples/digits/digits.onnx" -o "$placed/gen" --target cortex-m --name digits \
  --weights c --weights-section .model_weights --arena-section .model_arena > /dev/null
make -s -C "$here/examples/firmware" -j2 MODEL_DIR="$placed/gen" INPUTS="$work/digits/input_0.bin" \
  BUILD="$placed/build" > "$placed/make.log" 2>&1 ||
  { cat "$placed/make.log"; echo "FAIL: digits with placed sections does not build"; exit 1; }
table=$(arm-none-eabi-objdump -t "$placed/build/fw_model.elf")
placed_weights=$(awk '$NF ~ /^digits_w_/' <<< "$table")
[ "$(wc -l <<< "$placed_weights")" -ge 6 ] || { echo "FAIL: placed digits: weight symbols missing"; exit 1; }
if awk '$NF ~ /^digits_w_/ && $(NF - 2) != ".model_weights"' <<< "$table" | grep .; then
  echo "FAIL: placed digits: weights outside .model_weights"; exit 1
fi
awk '$NF == "arena" && $(NF - 2) == ".model_arena"' <<< "$table" | grep -q . ||
  { echo "FAIL: placed digits: the arena is not in .model_arena"; exit 1; }
timeout 60 "${qemu[@]}" -kernel "$placed/build/fw_model.elf" > "$placed/model.log" 2>&1 ||
  { cat "$placed/model.log"; echo "FAIL: placed digits failed under QEMU"; exit 1; }
refs=()
for f in "$work/digits"/ref/output_*.npy; do refs+=("$f"); done
compare "$placed/model.log" "$work/digits/stub.log" "digits (placed)" "${refs[@]}" | grep -v "^ "
echo "ok: placed digits: $(wc -l <<< "$placed_weights") weight symbols in .model_weights, the arena in .model_arena"

echo "ok: qemu $(qemu-system-arm --version | head -1 | awk '{print $4}'), $(arm-none-eabi-gcc --version | head -1)"
