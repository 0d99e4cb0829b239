#!/usr/bin/env bash
# Compiles the portable-target code of the bundled examples, and the runtime
# it copies, for a Cortex-M4 with arm-none-eabi-gcc: -Werror, no libc beyond
# string.h and math.h.  Prints the flash (text+data) and RAM (bss + arena)
# each model needs.   usage: cross_arm.sh FXCC
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
for model in examples/seed.onnx examples/digits/digits.onnx; do
  name=$(basename "$model" .onnx)
  out="$work/$name"
  "$fxcc" compile "$here/$model" -o "$out" --name "$name" --target portable > /dev/null
  objs=()
  for c in "$out"/*.c "$out"/fxrt/*.c; do
    o="$work/$(basename "$c" .c)_$name.o"
    arm-none-eabi-gcc "${flags[@]}" -I"$out" -I"$out/fxrt" -c "$c" -o "$o"
    objs+=("$o")
  done
  if grep -l -E '\b(malloc|calloc|realloc|free|printf|fopen)\s*\(' "$out"/fxrt/*.c "$out"/"$name".c; then
    echo "FAIL: $name: the portable code calls the C library beyond string.h/math.h"
    exit 1
  fi
  arena=$(sed -n "s/#define ${name}_ARENA_BYTES //p" "$out/$name.h")
  model_size=$(arm-none-eabi-size -t "$work/${name}_$name.o" | tail -1)
  echo "ok: $name builds for Cortex-M4; model object text/data/bss: $(echo $model_size | awk '{print $1"/"$2"/"$3}') bytes, arena ${arena} bytes"
done
