#!/usr/bin/env python3
"""Writes int8 models quantized by ONNX Runtime's static quantizer, with an
input and ONNX Runtime's output for each, for tests/quant_models.py.

The float models are the bench's LeNet, ResNet-8 and DS-CNN (bench/make_models.py)
and a stack of MobileNet-v2 inverted-residual blocks on a 32x32 input (the
full MobileNet-v2 would make calibration slow).  Each is quantized with
onnxruntime.quantization.quantize_static (per-channel weights, uint8
activations, int8 weights in 7 bits (reduce_range), a calibration reader over
32 random inputs from a fixed seed) twice: in QDQ format (QuantizeLinear/DequantizeLinear pairs around
float ops) and in QOperator format (QLinearConv, QLinearMatMul and the
com.microsoft QLinear ops).  Writes OUT/NAME_FORMAT.onnx, OUT/NAME_input.npy
(one more random input, not a calibration one) and OUT/NAME_FORMAT_ort.npy
(ONNX Runtime's output on it).

reduce_range is what ONNX Runtime's quantization guide advises for CPUs
without VNNI: there its uint8 x int8 kernels use vpmaddubsw, whose int16 pair
sums saturate with full-range weights (255 x 127 x 2 > 32767), so its output
would be its kernels' rounding, not the model's; with 7-bit weights the pair
sums fit and ORT is exact on every x86, as fxcc is at any weight range.

usage: make_quant_models.py OUT [--models lenet,resnet8,...]
exit 77 when onnx or onnxruntime is missing (the test is then skipped).
"""
import argparse
import logging
import os
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnxruntime import quantization as q
except ImportError as e:
    print("skipped: %s (scripts/setup.sh makes the .venv)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import make_models as mm  # noqa: E402

SEED = 20261205
CALIBRATION_INPUTS = 32


def mobilenetv2_blocks(seed):
    """Stem, then four inverted-residual blocks (two with a residual Add),
    a 1x1 head, GlobalAveragePool and a classifier, on [1, 3, 32, 32]."""
    b = mm.Builder("mobilenetv2_blocks", seed)
    x = "input"
    cin = 16
    h = b.relu6(b.bn(b.conv(x, 3, cin, 3, 2, bias=False, base="stem"), cin, "stem_bn"))
    for i, (t, cout, stride) in enumerate([(1, 16, 1), (6, 24, 2), (6, 24, 1), (6, 32, 2)]):
        p = f"block{i}"
        hid = cin * t
        y = h
        if t != 1:
            y = b.conv(y, cin, hid, 1, pads=[0, 0, 0, 0], bias=False, base=p + ".expand")
            y = b.relu6(b.bn(y, hid, p + ".expand_bn"))
        y = b.conv(y, hid, hid, 3, stride, group=hid, bias=False, base=p + ".dw")
        y = b.relu6(b.bn(y, hid, p + ".dw_bn"))
        y = b.conv(y, hid, cout, 1, pads=[0, 0, 0, 0], bias=False, base=p + ".project")
        y = b.bn(y, cout, p + ".project_bn")
        if stride == 1 and cin == cout:
            y = b.op("Add", [h, y], p + ".add")
        h, cin = y, cout
    h = b.relu6(b.bn(b.conv(h, cin, 128, 1, pads=[0, 0, 0, 0], bias=False, base="head"),
                     128, "head_bn"))
    h = b.op("GlobalAveragePool", [h], "gap")
    h = b.op("Flatten", [h], "flatten", axis=1)
    y = b.gemm(h, 128, 10, "classifier")
    return b.finish(x, [1, 3, 32, 32], y, [1, 10]), [1, 3, 32, 32]


MODELS = {
    "lenet": mm.lenet,
    "resnet8": mm.resnet8,
    "dscnn_kws": mm.dscnn_kws,
    "mobilenetv2_blocks": mobilenetv2_blocks,
}


class RandomReader(q.CalibrationDataReader):
    def __init__(self, name, shape, seed):
        rng = np.random.default_rng(seed)
        self.feeds = iter([{name: rng.standard_normal(shape).astype(np.float32)}
                           for _ in range(CALIBRATION_INPUTS)])

    def get_next(self):
        return next(self.feeds, None)


def ort_run(path, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    logging.getLogger().setLevel(logging.ERROR)
    os.makedirs(args.out, exist_ok=True)
    formats = {"qdq": q.QuantFormat.QDQ, "qop": q.QuantFormat.QOperator}
    for name in args.models.split(","):
        model, shape = MODELS[name](mm.SEED)
        onnx.checker.check_model(model)
        float_path = os.path.join(args.out, name + "_float.onnx")
        onnx.save(model, float_path)
        # ORT's pre-processing folds BatchNormalization into the convolutions,
        # as its quantization guide asks, so that the quantizer sees Conv.
        q.quant_pre_process(float_path, float_path, skip_symbolic_shape=True)
        x = np.random.default_rng(SEED + 1).standard_normal(shape).astype(np.float32)
        np.save(os.path.join(args.out, name + "_input.npy"), x)
        for fmt, qf in formats.items():
            path = os.path.join(args.out, f"{name}_{fmt}.onnx")
            q.quantize_static(float_path, path, RandomReader("input", shape, SEED),
                              quant_format=qf, per_channel=True,
                              activation_type=q.QuantType.QUInt8,
                              weight_type=q.QuantType.QInt8, reduce_range=True)
            np.save(os.path.join(args.out, f"{name}_{fmt}_ort.npy"), ort_run(path, x))
            ops = sorted({(n.domain or "ai.onnx") + "." + n.op_type
                          for n in onnx.load(path).graph.node})
            print(f"{name}_{fmt}: {' '.join(ops)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
