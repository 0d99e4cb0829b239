#!/usr/bin/env bash
# Builds fxcc and runs it on the bundled examples: prints the seed model's
# graph the way FX shows it and checks the interpreter against ONNX Runtime;
# then compiles the digits classifier to C, builds it, and prints accuracy
# and time per inference on the held-out split for the generated C and the
# interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
cmake --build build -j"$(nproc)"

echo "== fxcc inspect examples/seed.onnx"
build/fxcc inspect examples/seed.onnx
echo "== fxcc run examples/seed.onnx examples/seed_input.npy -o build/seed_out"
build/fxcc run examples/seed.onnx examples/seed_input.npy -o build/seed_out
.venv/bin/python - <<'PY'
import numpy as np
got = np.load("build/seed_out/output_0.npy")
want = np.load("examples/seed_expected.npy")
print("output_0 =\n", got)
print("max abs error against ONNX Runtime: %.3g" % np.abs(got - want).max())
assert np.allclose(got, want, rtol=1e-5, atol=1e-6)
PY

echo
.venv/bin/python scripts/digits_demo.py build/fxcc build/demo
