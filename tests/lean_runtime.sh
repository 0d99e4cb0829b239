#!/usr/bin/env bash
# A generated folder carries only the runtime sources its model calls:
# for each model and target, `fxcc compile --emit-main` writes the folder,
# every .c file in it is compiled once, and then
#   - all of them link into `main`, whose outputs match `fxcc run`'s
#     (1e-4 of the largest: main prints the same values the interpreter
#     computes, through other kernels at most);
#   - leaving out any one runtime source (fxrt/*.c) fails the link: no file
#     is there that the model does not call (a source that compiles to no
#     symbol for the target, its code being for another, carries nothing);
#   - --runtime full writes every runtime source, which the lean folder
#     must have fewer of.
# Models: the digits classifier (a GEMM chain) and the bench's ResNet-8
# (NCHWc convolutions, Winograd on the host, pools), made into the work
# folder.
#   usage: lean_runtime.sh FXCC PYTHON SOURCE_DIR
set -uo pipefail
fxcc=$1
python=$2
src=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$python" "$src/bench/make_models.py" "$work" --models resnet8 > /dev/null || exit 1
"$python" -c "import numpy as np
np.save('$work/digits_input.npy', np.load('$src/examples/digits/test_images.npy')[3:4].astype(np.float32))"
set -- "$src/examples/digits/digits.onnx:$work/digits_input.npy" \
       "$work/resnet8.onnx:$work/resnet8_input.npy"
fail=0
passed=0
blas_libs=$(pkg-config --libs openblas)
blas_cflags=$(pkg-config --cflags openblas)

for spec in "$@"; do
  model=${spec%%:*}
  input=${spec#*:}
  name=$(basename "$model" .onnx)
  "$fxcc" run "$model" "$input" -o "$work/ref_$name" > /dev/null || { echo "FAIL: fxcc run $model"; exit 1; }
  for target in host portable cortex-m; do
    dir=$work/$name-$target
    "$fxcc" compile "$model" -o "$dir" --name net --target $target --emit-main --quiet ||
      { echo "FAIL: $name $target: compile"; fail=$((fail + 1)); continue; }
    "$fxcc" compile "$model" -o "$work/full" --name net --target $target --runtime full --quiet
    flags=(-std=c99 -O1 -I"$dir" -I"$dir/fxrt")
    libs=(-lm)
    if [ $target = host ]; then
      # shellcheck disable=SC2206
      flags+=(-DFXRT_USE_CBLAS $blas_cflags); libs=($blas_libs -lm)
    fi
    objs=()
    for c in "$dir"/*.c "$dir"/*.S "$dir"/fxrt/*.c; do
      [ -f "$c" ] || continue
      cc "${flags[@]}" -c "$c" -o "$c.o" || { echo "FAIL: $name $target: $c"; exit 1; }
      objs+=("$c.o")
    done
    runtime=("$dir"/fxrt/*.c)
    full=("$work"/full/fxrt/*.c)
    why=""
    if ! cc "${objs[@]}" "${libs[@]}" -o "$dir/main" 2> "$dir/link.log"; then
      why="the folder does not link: $(grep -m1 'undefined reference' "$dir/link.log")"
    elif ! "$dir/main" -o "$dir/out" "$input" > /dev/null 2>&1; then
      why="main fails"
    elif ! "$python" -c "
import sys, numpy as np
a = np.load('$dir/out/output_0.npy').astype(np.float64); b = np.load('$work/ref_$name/output_0.npy').astype(np.float64)
sys.exit(0 if a.shape == b.shape and np.abs(a - b).max() <= 1e-4 * max(np.abs(b).max(), 1e-30) else 1)"; then
      why="main's outputs differ from fxcc run's"
    elif [ ${#runtime[@]} -ge ${#full[@]} ]; then
      why="${#runtime[@]} runtime sources, as many as the full runtime's ${#full[@]}"
    fi
    for c in "${runtime[@]}"; do
      [ -n "$why" ] && break
      rest=()
      for o in "${objs[@]}"; do [ "$o" = "$c.o" ] || rest+=("$o"); done
      # a source whose code is all for another target (fxrt_nn_conv_mcu.c
      # off the small build) compiles to nothing: no code of it is carried
      [ -z "$(nm --defined-only "$c.o" | grep -v ' [a-zA-Z] \.')" ] && continue
      if cc "${rest[@]}" "${libs[@]}" -o "$dir/main_without" 2> /dev/null; then
        why="links without $(basename "$c"): the model does not call it"
      fi
    done
    if [ -n "$why" ]; then
      echo "FAIL: $name ($target): $why"; fail=$((fail + 1))
    else
      echo "ok: $name ($target): ${#runtime[@]} of ${#full[@]} runtime sources, each needed" \
           "($(cd "$dir/fxrt" && ls -- *.c | tr '\n' ' '))"
      passed=$((passed + 1))
    fi
  done
done
echo "$passed passed, $fail failed"
[ $fail -eq 0 ]
