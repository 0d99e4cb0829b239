#!/usr/bin/env bash
# Compiles the portable-target code of the bundled examples, and the runtime
# it copies, for a Cortex-M4 with arm-none-eabi-gcc: -Werror, no libc beyond
# string.h and math.h.  Prints the flash (text+data) and RAM (bss + arena)
# each model needs.  digits is built a second time with --weights incbin: its
# NAME_weights.S must assemble with arm-none-eabi-gcc and define every weight
# symbol NAME.c declares.   usage: cross_arm.sh FXCC
set -euo pipefail
fxcc=$1
here=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v arm-none-eabi-gcc > /dev/null; then
  echo "arm-none-eabi-gcc not installed (scripts/setup.sh installs gcc-arm-none-eabi)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags=(-std=c99 -Wall -Wextra -Werror -pedantic -O2 -mcpu=cortex-m4 -mthumb -mfloat-abi=hard
       -mfpu=fpv4-sp-d16 -ffunction-sections -fdata-sections)
for spec in examples/seed.onnx:c examples/digits/digits.onnx:c examples/digits/digits.onnx:incbin; do
  model=${spec%:*}
  weights=${spec##*:}
  name=$(basename "$model" .onnx)
  out="$work/$name"
  rm -rf "$out" "$work"/*.o
  "$fxcc" compile "$here/$model" -o "$out" --name "$name" --target portable --weights "$weights" \
    --weights-section .rodata.flash_weights > /dev/null
  objs=()
  for c in "$out"/*.c "$out"/*.S "$out"/fxrt/*.c; do
    [ -e "$c" ] || continue
    o="$work/$(basename "$c" | tr . _)_$name.o"
    arm-none-eabi-gcc "${flags[@]}" -I"$out" -I"$out/fxrt" -c "$c" -o "$o"
    objs+=("$o")
  done
  if [ "$weights" = incbin ]; then
    blob="$work/${name}_weights_S_$name.o"
    [ -f "$blob" ] || { echo "FAIL: $name: --weights incbin wrote no ${name}_weights.S"; exit 1; }
    syms=$(sed -n "s/^extern const [a-z0-9_]* \(${name}_w_[A-Za-z0-9_]*\)\[.*/\1/p" "$out/$name.h")
    [ -n "$syms" ] || { echo "FAIL: $name: $name.h declares no blob weight"; exit 1; }
    for sym in $syms; do
      arm-none-eabi-nm "$blob" | grep -q " R $sym\$" ||
        { echo "FAIL: $name: $sym is not defined by ${name}_weights.S"; exit 1; }
    done
    arm-none-eabi-objdump -h "$blob" | grep -q "\.rodata\.flash_weights" ||
      { echo "FAIL: $name: the blob is not in --weights-section .rodata.flash_weights"; exit 1; }
    echo "ok: $name --weights incbin assembles for Cortex-M4: $(arm-none-eabi-size -A "$blob" | awk '/flash_weights/ {print $2}') bytes in .rodata.flash_weights"
    continue
  fi
  if grep -l -E '\b(malloc|calloc|realloc|free|printf|fopen)\s*\(' "$out"/fxrt/*.c "$out"/"$name".c; then
    echo "FAIL: $name: the portable code calls the C library beyond string.h/math.h"
    exit 1
  fi
  arena=$(sed -n "s/#define ${name}_ARENA_BYTES //p" "$out/$name.h")
  model_objs=("$work/${name}_c_$name.o")
  [ ! -f "$work/${name}_weights_c_$name.o" ] || model_objs+=("$work/${name}_weights_c_$name.o")
  model_size=$(arm-none-eabi-size -t "${model_objs[@]}" | tail -1)
  echo "ok: $name builds for Cortex-M4; model object text/data/bss: $(echo $model_size | awk '{print $1"/"$2"/"$3}') bytes, arena ${arena} bytes"
done

# --cpu: NAME.mk records each core's flags; the generated folder (digits,
# --target cortex-m, and the whole runtime: --runtime full) builds with them, -Werror; the
# int8 GEMM's tile uses SMLAD where the core has the DSP extension and
# plain C on the Cortex-M0+ (__ARM_FEATURE_DSP decides).
for cpu in cortex-m0plus cortex-m4 cortex-m7 cortex-m33 cortex-m55; do
  out="$work/cpu_$cpu"
  "$fxcc" compile "$here/examples/digits/digits.onnx" -o "$out" --name digits --target cortex-m \
    --cpu "$cpu" --runtime full > /dev/null
  arch=$(sed -n 's/^digits_ARCH_FLAGS := //p' "$out/digits.mk")
  case $arch in *"-mcpu=$cpu "*) ;; *) echo "FAIL: --cpu $cpu: digits.mk records '$arch'"; exit 1 ;; esac
  grep -q "set(digits_ARCH_FLAGS $arch)" "$out/CMakeLists.txt" ||
    { echo "FAIL: --cpu $cpu: CMakeLists.txt does not record $arch"; exit 1; }
  for c in "$out"/*.c "$out"/fxrt/*.c; do
    # shellcheck disable=SC2086 # the flags are words
    arm-none-eabi-gcc -std=c99 -Wall -Wextra -Werror -pedantic -O2 $arch -I"$out" -I"$out/fxrt" \
      -c "$c" -o "$out/$(basename "$c").o"
  done
  smlad=$(arm-none-eabi-objdump -d "$out/fxrt_nn_qgemm.c.o" | grep -c smlad || true)
  if [ "$cpu" = cortex-m0plus ]; then
    (( smlad == 0 )) || { echo "FAIL: --cpu $cpu: SMLAD in a core without the DSP extension"; exit 1; }
  else
    (( smlad > 0 )) || { echo "FAIL: --cpu $cpu: the int8 GEMM does not use SMLAD"; exit 1; }
  fi
  echo "ok: --cpu $cpu: $arch; the model and its runtime build; $smlad SMLAD in the int8 GEMM"
done
set +e
"$fxcc" compile "$here/examples/digits/digits.onnx" -o "$work/cpu_bad" --cpu cortex-m3 > /dev/null 2>&1
bad=$?
"$fxcc" compile "$here/examples/digits/digits.onnx" -o "$work/cpu_host" --cpu cortex-m4 > /dev/null 2>&1
host=$?
set -e
[ $bad -eq 2 ] && [ $host -eq 2 ] && [ ! -e "$work/cpu_bad" ] && [ ! -e "$work/cpu_host" ] ||
  { echo "FAIL: --cpu cortex-m3 (exit $bad) or --cpu with the host target (exit $host) not refused"; exit 1; }
echo "ok: an unknown --cpu and --cpu for the host are usage errors"
