#!/usr/bin/env bash
# Every bench model, compiled at -O2 for the host target, must give the
# unoptimized interpreter's numbers: `fxcc verify -O2` builds the generated C,
# runs it on the model's input and compares every output (rtol 1e-4, atol 1e-5
# scaled by the output's magnitude).  The models come from
# bench/make_models.py, made once into WORK.
# usage: bench_models_verify.sh FXCC WORK [MODEL...]
set -euo pipefail
fxcc=$1
work=$2
shift 2
cd "$(dirname "$0")/.."
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp lenet resnet8 dscnn_kws mobilenetv2 transformer)
python=.venv/bin/python
[ -x "$python" ] || python=python3
mkdir -p "$work"
missing=()
for m in "${models[@]}"; do
  [ -f "$work/$m.onnx" ] || missing+=("$m")
done
if [ ${#missing[@]} -gt 0 ]; then
  list=$(IFS=,; echo "${missing[*]}")
  "$python" bench/make_models.py "$work" --models "$list" > "$work/make_models.log"
fi
failed=0
for m in "${models[@]}"; do
  if out=$("$fxcc" verify -O2 "$work/$m.onnx" "$work/${m}_input.npy" 2>&1); then
    echo "$m: $(echo "$out" | grep 'max abs' | head -1)"
  else
    echo "$m: FAILED"
    echo "$out" | tail -20
    failed=1
  fi
done
exit $failed
