"""ir3_defaults.py - models from older exporters (IR 3) through the fxcc CLI.

IR 3 requires every initializer to be listed among the graph inputs too.  The
model made here does that for a Reshape's shape and for a weight, so its
output shape depends on an initializer-backed input.  Checked:
  - by default such inputs are constants: inspect, run, compile and verify
    work, and run gives ONNX Runtime's numbers;
  - with --keep-input-defaults they stay inputs: the shape must then be
    given, and the error says so, naming --const, --shape and the flag;
    given with --const, and the weight given as an input with a value other
    than its initializer, run gives ONNX Runtime's numbers for that feed;
  - an input declared with a shape its initializer does not have is a clean
    error (exit 1, file and input named), frozen or kept.
usage: python ir3_defaults.py FXCC WORK   (exit 77: no onnx/onnxruntime)
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # ctest reports the test as skipped
    print("skipped: %s (scripts/setup.sh makes the .venv)" % e)
    sys.exit(77)

RTOL, ATOL = 1e-5, 1e-6
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def make_model(path, weight_dims=(3, 4), weight=None):
    shape = np.array([3, 4], dtype=np.int64)
    if weight is None:
        weight = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["r"]),
         helper.make_node("Mul", ["r", "w"], ["y"])],
        "ir3",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, list(weight_dims))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(shape, "shape"), numpy_helper.from_array(weight, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    model.ir_version = 3
    onnx.save(model, path)
    return shape, weight


def fxcc(*args):
    p = subprocess.run([FXCC, *args], capture_output=True, text=True)
    return p.returncode, p.stderr


def npy_out(folder):
    return np.load(os.path.join(folder, "output_0.npy"))


def close(got, want):
    return got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL)


FXCC, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)
model = os.path.join(WORK, "ir3.onnx")
shape, weight = make_model(model)
x = np.arange(12, dtype=np.float32).reshape(2, 6) / 7.0
np.save(os.path.join(WORK, "x.npy"), x)
np.save(os.path.join(WORK, "shape.npy"), shape)
other_weight = (weight * -2.5 + 0.25).astype(np.float32)
np.save(os.path.join(WORK, "w.npy"), other_weight)


def reference(path):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


want_default = reference(model)
# ONNX Runtime treats an IR-3 initializer as a constant, so the reference for
# feeding w is the model whose initializer holds the fed value.
fed_model = os.path.join(WORK, "ir3_fed.onnx")
make_model(fed_model, weight=other_weight)
want_fed = reference(fed_model)

# Default: initializer-backed inputs are constants.
rc, err = fxcc("inspect", model)
check(rc == 0, "inspect by default (%s)" % err.strip()[:200])
out = os.path.join(WORK, "out_default")
rc, err = fxcc("run", model, os.path.join(WORK, "x.npy"), "-o", out)
check(rc == 0 and close(npy_out(out), want_default),
      "run by default matches ONNX Runtime (%s)" % err.strip()[:200])
rc, err = fxcc("compile", model, "-o", os.path.join(WORK, "compiled"))
check(rc == 0, "compile by default (%s)" % err.strip()[:200])
rc, err = fxcc("verify", model, os.path.join(WORK, "x.npy"))
check(rc == 0, "verify by default (%s)" % err.strip()[:200])

# --keep-input-defaults: the shape is an input again, and the error says how out.
for cmd in (["inspect", model], ["run", model, os.path.join(WORK, "x.npy"),
                                 os.path.join(WORK, "w.npy"), "-o", os.path.join(WORK, "no")]):
    rc, err = fxcc(*cmd, "--keep-input-defaults")
    named = all(s in err for s in ("must be a compile-time constant", "--const", "--shape",
                                   "--keep-input-defaults", "'shape'"))
    check(rc == 1 and err.startswith("fxcc: error: ") and named
          and not os.path.exists(os.path.join(WORK, "no")),
          "%s --keep-input-defaults fails naming the input and the flags (%s)"
          % (cmd[0], err.strip()[:300]))
out = os.path.join(WORK, "out_kept")
rc, err = fxcc("run", model, os.path.join(WORK, "x.npy"), os.path.join(WORK, "w.npy"), "-o", out,
               "--keep-input-defaults", "--const", "shape=" + os.path.join(WORK, "shape.npy"))
check(rc == 0 and close(npy_out(out), want_fed),
      "run --keep-input-defaults --const with w fed matches ONNX Runtime (%s)"
      % err.strip()[:200])

# A declaration its initializer contradicts is a clean error either way.
bad = os.path.join(WORK, "ir3_bad_decl.onnx")
make_model(bad, weight_dims=(4, 3))
for flags in ([], ["--keep-input-defaults"]):
    rc, err = fxcc("inspect", bad, *flags)
    check(rc == 1 and err.startswith("fxcc: error: ") and "ir3_bad_decl.onnx" in err
          and "'w'" in err and "initializer" in err,
          "inspect %s of an input declared unlike its initializer fails cleanly (%s)"
          % (" ".join(flags) or "(default)", err.strip()[:200]))

print("%d failure(s)" % len(failures))
sys.exit(1 if failures else 0)
