"""quant_models.py - int8 models from ONNX Runtime's static quantizer through fxcc.

scripts/make_quant_models.py writes a LeNet, a ResNet-8, a DS-CNN and a stack
of MobileNet-v2 blocks quantized by onnxruntime.quantization.quantize_static
(per-channel int8 weights, uint8 activations), in QDQ and in QOperator
format (QLinearConv, QGemm, QLinearAdd, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearSoftmax), with an input and ONNX Runtime's
output.  Each model runs through the interpreter (`fxcc run`, default flags)
and as compiled code, host and portable (`fxcc verify --keep`: compiled at
-O2, built with the runtime's objects from $FXCC_RUNTIME_CACHE, which ctest
sets, instead of a CMake build of the whole runtime per model, and checked
against the interpreter to within one output step), and every output is
compared with ONNX Runtime's:
  - at most one quantization step (the scale of the model's last
    DequantizeLinear) of difference per element (ORT's vector kernels round
    some values within a rounding error of a tie the other way);
  - SQNR >= 30 dB against ORT's output;
and after -O2 (qdq-fold for the QDQ models) no float Conv, Gemm or MatMul
remains in either format.
usage: python quant_models.py FXCC WORK [--models a,b]   (exit 77: no onnxruntime)
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
try:
    import numpy as np
    import onnx
    import onnxruntime  # noqa: F401  (make_quant_models needs it)
    from onnx import numpy_helper
except ImportError as e:
    print("skipped: %s (scripts/setup.sh makes the .venv)" % e)
    sys.exit(77)

FXCC, WORK = sys.argv[1], sys.argv[2]
MODELS = ["lenet", "resnet8", "dscnn_kws", "mobilenetv2_blocks"]
if len(sys.argv) > 4 and sys.argv[3] == "--models":
    MODELS = sys.argv[4].split(",")
FORMATS = ["qop", "qdq"]
MAX_STEPS, MIN_SQNR_DB = 1.0, 30.0
FLOAT_LINEAR = {"Conv", "Gemm", "MatMul", "ConvTranspose", "FusedConv", "FusedGemm", "ConvNCHWc"}
failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else " (%s)" % detail))
    if not ok:
        failures.append(what)


def run(*args):
    p = subprocess.run(args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def output_step(path):
    """The scale of the DequantizeLinear that makes the graph's output."""
    g = onnx.load(path).graph
    producer = {o: n for n in g.node for o in n.output}
    last = producer[g.output[0].name]
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    assert last.op_type == "DequantizeLinear", last.op_type
    return float(inits[last.input[1]])


def compare(ref, got, step, what):
    if got.shape != ref.shape:
        check(False, "%s: shape %s, ORT %s" % (what, got.shape, ref.shape))
        return
    steps = float(np.abs(got.astype(np.float64) - ref).max()) / step
    noise = float(((got.astype(np.float64) - ref) ** 2).sum())
    sqnr = float("inf") if noise == 0 else 10 * np.log10(float((ref.astype(np.float64) ** 2).sum()) / noise)
    check(steps <= MAX_STEPS + 1e-3 and sqnr >= MIN_SQNR_DB,
          "%s: max diff %.2f steps, SQNR %.1f dB" % (what, steps, sqnr))


def float_linear_after_o2(model):
    rc, out = run(FXCC, "inspect", "-O2", model)
    if rc != 0:
        return None
    found = set()
    for line in out.splitlines():
        if "call_function[target=" in line or "call_module[target=" in line:
            target = line.split("target=")[1].split("]")[0].split(".")[-1]
            if target in FLOAT_LINEAR and "# float32" in line:
                found.add(target)
    return found


def main():
    os.makedirs(WORK, exist_ok=True)
    models_dir = os.path.join(WORK, "models")
    rc, out = run(sys.executable, os.path.join(HERE, "..", "scripts", "make_quant_models.py"),
                  models_dir, "--models", ",".join(MODELS))
    if rc != 0:
        print(out)
        check(False, "make_quant_models.py")
        return 1
    for name in MODELS:
        x = os.path.join(models_dir, name + "_input.npy")
        for fmt in FORMATS:
            tag = "%s_%s" % (name, fmt)
            model = os.path.join(models_dir, tag + ".onnx")
            ref = np.load(os.path.join(models_dir, tag + "_ort.npy"))
            step = output_step(model)
            res = os.path.join(WORK, tag + "_interp")
            rc, out = run(FXCC, "run", model, x, "-o", res)
            check(rc == 0, "%s: fxcc run" % tag, out.strip()[-300:])
            if rc == 0:
                compare(ref, np.load(os.path.join(res, "output_0.npy")), step, tag + " interpreter")
            for target in ["host", "portable"]:
                kept = os.path.join(WORK, "%s_%s" % (tag, target))
                shutil.rmtree(kept, ignore_errors=True)
                rc, out = run(FXCC, "verify", model, x, "--target", target, "--keep", kept,
                              "--rtol", "0", "--atol", repr(step * 1.001))
                check(rc == 0, "%s: verify --target %s" % (tag, target), out.strip()[-300:])
                result = os.path.join(kept, "out", "output_0.npy")
                if os.path.exists(result):
                    compare(ref, np.load(result), step, "%s compiled %s" % (tag, target))
            found = float_linear_after_o2(model)
            check(found == set(), "%s: no float Conv/Gemm/MatMul after -O2" % tag,
                  str(sorted(found) if found else found))
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
