#!/usr/bin/env python3
"""`--quantize int8` on real models, against ONNX Runtime's float outputs.

- The bench's resnet8 and dscnn_kws (bench/make_models.py), calibrated on 32
  seeded standard-normal inputs: `fxcc verify` must find the compiled QDQ
  code equal to the interpreter on the QDQ graph (rtol 1e-4); the compiled
  code's outputs on the 32 inputs must have an SQNR >= 25 dB against ONNX
  Runtime running the float model, and fxcc's own report must give the same
  figure within 1 dB.  resnet8 once more with --weight-bits 7 (the weights in
  [-64, 64]: on AVX2 hosts without VNNI the GEMM's vpmaddubsw tile).
- The digits classifier (examples/digits), calibrated on the training split
  that scripts/train_digits.py used (scikit-learn's digits, 75%, seed 0):
  the compiled int8 code's accuracy on the 450 held-out images within 1
  point of ONNX Runtime's float accuracy, both computed here from the
  labels, and the report's int8 weight bytes at most 0.3x the float ones.

usage: quantize_models.py FXCC WORK    (exit 77: no numpy/onnxruntime/sklearn)
"""
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FXCC, WORK = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIN_SQNR_DB = 25.0
failures = []
passes = []


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return r.stdout


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    (passes if ok else failures).append(what)


def sqnr_db(ref, got):
    ref, got = np.asarray(ref, np.float64), np.asarray(got, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((got - ref) ** 2))


def quantized_main(model, calib, first_input, keep, extra=()):
    """verify (compiled QDQ == interpreter) keeping the build; its main."""
    out = run([FXCC, "verify", model, first_input, "--quantize", "int8", "--calibrate", calib,
               "--keep", keep, *extra])
    check("verify: ok" in out, f"{os.path.basename(model)}: compiled QDQ code agrees with the "
          f"interpreter ({out.strip().splitlines()[-1]})")
    return os.path.join(keep, "model", "main")


def run_main(main, inputs, work):
    """The compiled model's output 0 on each input (one process per input)."""
    os.makedirs(work, exist_ok=True)
    outs = []
    for k, x in enumerate(inputs):
        path = os.path.join(work, f"in_{k}.npy")
        np.save(path, x)
        run([main, "-o", work, path])
        outs.append(np.load(os.path.join(work, "output_0.npy")))
    return np.stack(outs)


def report(model, calib, labels=None, extra=()):
    cmd = [FXCC, "compile", model, "-o", os.path.join(WORK, "report_out"), "--report",
           "--quantize", "int8", "--calibrate", calib, *extra]
    if labels:
        cmd += ["--labels", labels]
    text = run(cmd)
    text = text[text.index("quantization (int8"):]
    print(text)
    return text


def bench_model(name, weight_bits=8):
    """weight_bits 7: the weights in [-64, 64], where the AVX2 GEMM takes its
    vpmaddubsw tile (exact only for such weights: verify checks it)."""
    extra = ("--weight-bits", "7") if weight_bits == 7 else ()
    tag = name + ("" if weight_bits == 8 else f" --weight-bits {weight_bits}")
    model = os.path.join(WORK, f"{name}.onnx")
    if not os.path.exists(model):
        run([sys.executable, os.path.join(ROOT, "bench", "make_models.py"), WORK, "--models", name])
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    rng = np.random.default_rng(2024)
    xs = rng.standard_normal((32, *inp.shape)).astype(np.float32)
    calib = os.path.join(WORK, f"{name}_calib.npy")
    np.save(calib, xs)
    first = os.path.join(WORK, f"{name}_calib_0.npy")
    np.save(first, xs[0])
    main = quantized_main(model, calib, first, os.path.join(WORK, f"{name}_w{weight_bits}_build"),
                          extra)
    got = run_main(main, xs, os.path.join(WORK, f"{name}_w{weight_bits}_runs"))
    ref = np.stack([sess.run(None, {inp.name: x})[0] for x in xs])
    db = sqnr_db(ref, got)
    check(db >= MIN_SQNR_DB, f"{tag}: compiled int8 output SQNR {db:.2f} dB >= {MIN_SQNR_DB} "
          f"against ONNX Runtime's float model")
    text = report(model, calib, extra=extra)
    said = float(re.search(r"output 0: SQNR\s+([0-9.]+) dB", text).group(1))
    # The report runs the interpreter; the compiled code sums in another
    # order, and a value that lands on the other side of a rounding boundary
    # moves by a whole quantization step: 1 dB allows for a few such flips.
    check(abs(said - db) <= 1.0, f"{tag}: the report's output SQNR {said:.2f} dB matches "
          f"{db:.2f} dB within 1 dB")


def digits():
    model = os.path.join(ROOT, "examples", "digits", "digits.onnx")
    data = load_digits()
    x = (data.data / 16.0).astype(np.float32)
    y = data.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0,
                                                        stratify=y)
    shipped = np.load(os.path.join(ROOT, "examples", "digits", "test_images.npy"))
    check(np.array_equal(shipped, x_test), "digits: the split is the demo's held-out split")
    calib = os.path.join(WORK, "digits_train.npy")
    np.save(calib, x_train)
    labels = os.path.join(WORK, "digits_train_labels.npy")
    np.save(labels, y_train)
    first = os.path.join(WORK, "digits_test_0.npy")
    np.save(first, x_test[:1])
    main = quantized_main(model, calib, first, os.path.join(WORK, "digits_build"))
    got = run_main(main, x_test[:, None, :], os.path.join(WORK, "digits_runs"))
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    ref = np.stack([sess.run(None, {name: xi[None, :]})[0] for xi in x_test])
    acc_f = float(np.mean(ref.reshape(len(x_test), -1).argmax(1) == y_test))
    acc_q = float(np.mean(got.reshape(len(x_test), -1).argmax(1) == y_test))
    check(abs(acc_f - acc_q) <= 0.01, f"digits: held-out accuracy int8 {acc_q:.4f} within 1 "
          f"point of float {acc_f:.4f}")
    text = report(model, calib, labels)
    m = re.search(r"float (\d+) bytes, int8 (\d+) bytes", text)
    fb, qb = int(m.group(1)), int(m.group(2))
    check(qb <= 0.3 * fb, f"digits: int8 weights {qb} bytes <= 0.3 x float {fb} bytes")


os.makedirs(WORK, exist_ok=True)
bench_model("resnet8")
bench_model("resnet8", weight_bits=7)
bench_model("dscnn_kws")
digits()
print(f"{len(passes)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
