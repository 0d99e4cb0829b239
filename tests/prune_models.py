#!/usr/bin/env python3
"""`--prune` and `fxcc prune -o` on real models, against ONNX Runtime.

- The bench's resnet8 (residual Adds, BatchNorm, Flatten -> Gemm),
  dscnn_kws (depthwise convolutions) and lenet (Flatten -> Gemm after
  pools) from bench/make_models.py, channel-pruned by half and written as
  ONNX: the written model passes onnx.checker, its weights have the
  channel counts expected, ONNX Runtime on it equals fxcc's interpreter on
  the pruned graph (`fxcc run --prune`, rtol 1e-4 of the largest output),
  and `fxcc verify --prune` finds the compiled pruned code equal to it.
- Fraction 0 writes a model whose ONNX Runtime outputs equal the original
  model's and whose report gives the same parameter count.
- The digits classifier (examples/digits) pruned by half on its 450
  held-out images and labels: the report's accuracies (unpruned and
  pruned) equal the ones computed here with ONNX Runtime on the original
  and the written model, and MACs go down; magnitude:0.8 zeroes at least
  floor(80%) of every layer's weights in the written model, with the report's
  accuracy equal to ONNX Runtime's again.
- Sparse storage (the sparse-weights pass): ResNet-8 magnitude-pruned by
  90% (global) and the DS-CNN by 80%, written with `fxcc prune -o` and then
  compiled for the host and for portable: ONNX Runtime on the written model
  equals fxcc's interpreter on it, `fxcc verify` finds the compiled code
  (SparseConv/SparseGemm in it) equal to the interpreter, and
  `--report` says the pruned layers' weights shrank: below 35% (ResNet-8)
  and 50% (DS-CNN, whose depthwise layers stay dense) of dense on portable
  (on the host their small layers stay dense by the measured rule).
- A bad --prune spec exits 2 and a graph that holds fused kernels (-O2)
  exits 1, neither writing a file.

usage: prune_models.py FXCC WORK    (exit 77: no numpy/onnx/onnxruntime)
"""
import os
import re
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FXCC, WORK = sys.argv[1], sys.argv[2]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import make_models  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def ort_run(path, x):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def weights(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}, m


def layer_weight(path, op_name):
    """The weight (input 1) of node op_name in the written model."""
    w, m = weights(path)
    for n in m.graph.node:
        if n.name == op_name:
            return w[n.input[1]]
    raise KeyError(op_name)


os.makedirs(WORK, exist_ok=True)

# --- bench models ----------------------------------------------------------------

EXPECT = {  # node -> weight shape after channels:0.5
    "resnet8": {"conv": (8, 3, 3, 3), "stack1_conv2": (8, 8, 3, 3),
                "stack2_shortcut": (16, 8, 1, 1), "stack3_conv2": (32, 32, 3, 3),
                "fc": (10, 32)},
    "dscnn_kws": {"ds1_dw": (32, 1, 3, 3), "ds1_pw": (32, 32, 1, 1), "fc": (12, 32)},
    "lenet": {"conv1": (3, 1, 5, 5), "conv2": (8, 3, 5, 5), "fc1": (60, 200), "fc3": (10, 42)},
}
for i, name in enumerate(make_models.MODELS):
    if name not in EXPECT:
        continue
    model, shape = make_models.MODELS[name](make_models.SEED + i)
    src = os.path.join(WORK, name + ".onnx")
    onnx.save(model, src)
    x = np.random.default_rng(i).standard_normal(shape).astype(np.float32)
    xin = os.path.join(WORK, name + "_in.npy")
    np.save(xin, x)
    dst = os.path.join(WORK, name + "_p50.onnx")
    rc, out = run([FXCC, "prune", src, "--prune", "channels:0.5", "-o", dst])
    check(rc == 0 and os.path.exists(dst), f"{name}: fxcc prune -o ({rc}) {out[-300:] if rc else ''}")
    if rc:
        continue
    try:
        onnx.checker.check_model(onnx.load(dst), full_check=True)
        check(True, f"{name}: onnx.checker")
    except Exception as e:  # noqa: BLE001
        check(False, f"{name}: onnx.checker: {e}")
    for node, want in EXPECT[name].items():
        got = layer_weight(dst, node).shape
        check(got == want, f"{name}: {node} weight {got}, expected {want}")
    rc, out = run([FXCC, "run", src, xin, "--prune", "channels:0.5", "-o",
                   os.path.join(WORK, name + "_run")])
    check(rc == 0, f"{name}: fxcc run --prune ({rc}) {out[-300:] if rc else ''}")
    if rc == 0:
        mine = np.load(os.path.join(WORK, name + "_run", "output_0.npy"))
        ref = ort_run(dst, x)
        err = float(np.abs(mine - ref).max())
        check(err <= 1e-4 * float(np.abs(ref).max()) + 1e-7,
              f"{name}: interpreter on the pruned graph vs ONNX Runtime on the written "
              f"model: max abs {err:.3g}")
    rc, out = run([FXCC, "verify", src, xin, "--prune", "channels:0.5"])
    check(rc == 0 and "verify: ok" in out, f"{name}: fxcc verify --prune ({rc})")
    # fraction 0: nothing changes
    p0 = os.path.join(WORK, name + "_p0.onnx")
    rc, out = run([FXCC, "prune", src, "--prune", "channels:0", "-o", p0])
    m = re.search(r"parameters: (\d+) -> (\d+)", out)
    check(rc == 0 and m and m.group(1) == m.group(2), f"{name}: channels:0 keeps the parameters")
    if rc == 0:
        a, b = ort_run(src, x), ort_run(p0, x)
        err = float(np.abs(a - b).max())
        check(err <= 1e-6 * float(np.abs(a).max()) + 1e-8,
              f"{name}: channels:0 written model equals the original ({err:.3g})")

# --- digits -----------------------------------------------------------------------

digits = os.path.join(ROOT, "examples", "digits", "digits.onnx")
images = os.path.join(ROOT, "examples", "digits", "test_images.npy")
labels_path = os.path.join(ROOT, "examples", "digits", "test_labels.npy")
xs, labels = np.load(images), np.load(labels_path)


def ort_accuracy(path):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    inp = s.get_inputs()[0].name
    pred = [int(s.run(None, {inp: xs[k:k + 1]})[0].argmax()) for k in range(len(xs))]
    return float(np.mean(np.array(pred) == labels))


base_acc = ort_accuracy(digits)
for spec, tag in (("channels:0.5", "c50"), ("magnitude:0.8", "m80")):
    dst = os.path.join(WORK, f"digits_{tag}.onnx")
    rc, out = run([FXCC, "prune", digits, "--prune", spec, "--calibrate", images,
                   "--labels", labels_path, "-o", dst])
    print(out)
    m = re.search(r"accuracy unpruned ([0-9.]+), pruned ([0-9.]+)", out)
    check(rc == 0 and m is not None, f"digits {spec}: report with accuracies")
    if not m:
        continue
    acc = ort_accuracy(dst)
    check(abs(float(m.group(1)) - base_acc) < 1e-3,
          f"digits {spec}: unpruned accuracy {m.group(1)} = ONNX Runtime's {base_acc:.4f}")
    check(abs(float(m.group(2)) - acc) < 1e-3,
          f"digits {spec}: pruned accuracy {m.group(2)} = ONNX Runtime's on the written "
          f"model {acc:.4f}")
    if tag == "c50":
        macs = re.search(r"MACs: (\d+) -> (\d+)", out)
        check(macs and int(macs.group(2)) < 0.5 * int(macs.group(1)),
              f"digits {spec}: MACs more than halved")
        check(layer_weight(dst, "fc0").shape == (64, 32) and
              layer_weight(dst, "fc1").shape == (32, 16) and
              layer_weight(dst, "fc2").shape == (16, 10), f"digits {spec}: Gemm weights halved")
    else:
        for node in ("fc0", "fc1", "fc2"):
            w = layer_weight(dst, node)
            zeros = int(np.sum(w == 0))
            check(zeros >= int(0.8 * w.size), f"digits {spec}: {node} {zeros} of {w.size} zeros")

# --- sparse storage of magnitude-pruned weights -------------------------------------

# spec, the fewest layers sparse per target, the most bytes stored on portable
# as a share of dense (the DS-CNN's depthwise layers stay dense)
SPARSE = {"resnet8": ("magnitude:0.9:global", {"host": 0, "portable": 9}, 0.35),
          "dscnn_kws": ("magnitude:0.8", {"host": 0, "portable": 5}, 0.5)}
for i, name in enumerate(make_models.MODELS):
    if name not in SPARSE:
        continue
    spec, least_sparse, share = SPARSE[name]
    src = os.path.join(WORK, name + ".onnx")
    xin = os.path.join(WORK, name + "_in.npy")
    x = np.load(xin)
    dst = os.path.join(WORK, name + "_sparse.onnx")
    rc, out = run([FXCC, "prune", src, "--prune", spec, "-o", dst])
    check(rc == 0, f"{name} {spec}: fxcc prune -o ({rc}) {out[-300:] if rc else ''}")
    if rc:
        continue
    rc, out = run([FXCC, "run", dst, xin, "-o", os.path.join(WORK, name + "_sparse_run")])
    if rc == 0:
        mine = np.load(os.path.join(WORK, name + "_sparse_run", "output_0.npy"))
        ref = ort_run(dst, x)
        err = float(np.abs(mine - ref).max())
        check(err <= 1e-4 * float(np.abs(ref).max()) + 1e-7,
              f"{name} {spec}: interpreter vs ONNX Runtime on the pruned model: max abs {err:.3g}")
    else:
        check(False, f"{name} {spec}: fxcc run ({rc}) {out[-300:]}")
    for target in ("host", "portable"):
        rc, out = run([FXCC, "verify", dst, xin, "--target", target])
        check(rc == 0 and "verify: ok" in out,
              f"{name} {spec} {target}: compiled pruned model equals the interpreter ({rc}) "
              f"{out[-300:] if rc else ''}")
        outdir = os.path.join(WORK, f"{name}_sparse_{target}")
        rc, out = run([FXCC, "compile", src, "--prune", spec, "--target", target, "--report",
                       "-o", outdir])
        m = re.search(r"weights of the pruned layers: (\d+) bytes dense -> (\d+) bytes as stored "
                      r"\([0-9.]+x\); (\d+) layers? sparse", out)
        check(rc == 0 and m is not None, f"{name} {spec} {target}: report of the stored weights "
              f"({rc}) {out[-300:] if rc else ''}")
        if not m:
            continue
        dense, stored, layers = int(m.group(1)), int(m.group(2)), int(m.group(3))
        check(layers >= least_sparse[target],
              f"{name} {spec} {target}: {layers} layers sparse, at least {least_sparse[target]}")
        if target == "portable":
            check(stored < share * dense,
                  f"{name} {spec} portable: weights {dense} -> {stored} bytes, below "
                  f"{share:.0%}")
        else:
            check(stored <= dense and (stored < dense) == (layers > 0),
                  f"{name} {spec} host: weights {dense} -> {stored} bytes")
        code = open(os.path.join(outdir, name + ".c")).read()
        check((layers > 0) == ("fxrt_sparse_" in code),
              f"{name} {spec} {target}: the code calls the sparse kernels iff a layer is sparse")

# --- refusals -------------------------------------------------------------------------

bad = os.path.join(WORK, "bad.onnx")
if os.path.exists(bad):
    os.remove(bad)
rc, out = run([FXCC, "prune", digits, "--prune", "channels:2", "-o", bad])
check(rc == 2 and "--prune 'channels:2'" in out and not os.path.exists(bad),
      f"a bad spec exits 2 naming it, no file ({rc})")
rc, out = run([FXCC, "prune", digits, "--prune", "channels:0.5", "-O2", "-o", bad])
check(rc == 1 and "cannot be written as ONNX" in out and not os.path.exists(bad),
      f"fused kernels refused by the writer, no file ({rc})")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("all ok")
