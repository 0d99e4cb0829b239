#!/usr/bin/env python3
"""Writes the benchmark models: random weights (fixed seed), batch 1, float32.

    mlp          784-256-256-10, Gemm + Relu                      [1, 784]
    lenet        LeNet-5: Conv/Relu/MaxPool x2, Gemm 120-84-10    [1, 1, 28, 28]
    resnet8      MLPerf Tiny ResNet-8 (image classification)      [1, 3, 32, 32]
    dscnn_kws    MLPerf Tiny DS-CNN (keyword spotting)            [1, 1, 49, 10]
    mobilenetv2  MobileNet-v2, width 1.0                          [1, 3, 224, 224]
    transformer  one encoder layer: seq 128, d_model 256, 4 heads,
                 FFN 1024, exact Gelu written with Erf            [1, 128, 256]
    vww          MLPerf Tiny visual wake words: MobileNet-v1,
                 alpha 0.25, 2 classes                            [1, 3, 96, 96]
    ad_autoencoder  MLPerf Tiny anomaly detection: the fully
                 connected autoencoder 640-128x4-8-128x4-640      [1, 640]

The four MLPerf Tiny models (resnet8, dscnn_kws, vww, ad_autoencoder) have the
reference networks' layers and shapes (TensorFlow's "same" padding written as
explicit pads), with seeded random weights, not the trained ones.

Each model is built with onnx.helper (IR version 8, opset 17, which is what
fxcc's loader accepts), passed through onnx.checker and run once in ONNX
Runtime.  Writes OUT_DIR/NAME.onnx and OUT_DIR/NAME_input.npy for every model.
Weights use He-style scaling and BatchNormalization parameters near the
identity so that activations stay O(1) through the deep models and output
comparisons stay meaningful.

usage: make_models.py [OUT_DIR] [--models a,b,...]    (OUT_DIR defaults to bench/models)
"""
import argparse
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 20261202


class Builder:
    """Collects nodes and initializers; every helper returns its output name."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.count = {}

    def _uniq(self, base):
        k = self.count.get(base, 0)
        self.count[base] = k + 1
        return f"{base}{k}" if k else base

    def const(self, base, arr):
        name = self._uniq(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, base=None, **attrs):
        name = self._uniq(base or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    # Layers -----------------------------------------------------------------

    def conv(self, x, cin, cout, k, stride=1, pads=None, group=1, bias=True, base="conv"):
        kh, kw = (k, k) if isinstance(k, int) else k
        if pads is None:
            pads = [kh // 2, kw // 2, kh // 2, kw // 2]
        fan_in = (cin // group) * kh * kw
        w = (self.rng.standard_normal((cout, cin // group, kh, kw))
             * math.sqrt(2.0 / fan_in)).astype(np.float32)
        ins = [x, self.const(base + ".weight", w)]
        if bias:
            ins.append(self.const(base + ".bias",
                                  (self.rng.standard_normal(cout) * 0.05).astype(np.float32)))
        return self.op("Conv", ins, base, kernel_shape=[kh, kw], strides=[stride, stride],
                       pads=pads, group=group)

    def bn(self, x, c, base="bn"):
        r = self.rng
        p = [(r.uniform(0.7, 1.3, c)).astype(np.float32),
             (r.standard_normal(c) * 0.05).astype(np.float32),
             (r.standard_normal(c) * 0.05).astype(np.float32),
             (r.uniform(0.7, 1.3, c)).astype(np.float32)]
        names = [self.const(f"{base}.{n}", v) for n, v in zip(("scale", "bias", "mean", "var"), p)]
        return self.op("BatchNormalization", [x] + names, base, epsilon=1e-5)

    def gemm(self, x, fin, fout, base="fc"):
        w = (self.rng.standard_normal((fout, fin)) * math.sqrt(2.0 / fin)).astype(np.float32)
        b = (self.rng.standard_normal(fout) * 0.05).astype(np.float32)
        return self.op("Gemm", [x, self.const(base + ".weight", w), self.const(base + ".bias", b)],
                       base, transB=1)

    def linear(self, x, fin, fout, base="linear"):
        """x[..., fin] @ W[fin, fout] + b, the MatMul + Add form transformers export."""
        w = (self.rng.standard_normal((fin, fout)) / math.sqrt(fin)).astype(np.float32)
        b = (self.rng.standard_normal(fout) * 0.02).astype(np.float32)
        y = self.op("MatMul", [x, self.const(base + ".weight", w)], base + "_mm")
        return self.op("Add", [y, self.const(base + ".bias", b)], base)

    def relu(self, x):
        return self.op("Relu", [x])

    def relu6(self, x):
        lo = self.const("zero", np.array(0.0, np.float32))
        hi = self.const("six", np.array(6.0, np.float32))
        return self.op("Clip", [x, lo, hi], "relu6")

    def finish(self, inp, in_shape, out, out_shape):
        graph = helper.make_graph(
            self.nodes, self.name,
            [helper.make_tensor_value_info(inp, TensorProto.FLOAT, in_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)],
            initializer=self.inits)
        model = helper.make_model(graph, producer_name="fxcc-bench",
                                  opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        return model


# Models ---------------------------------------------------------------------

def mlp(seed):
    b = Builder("mlp", seed)
    x = "input"
    h = b.relu(b.gemm(x, 784, 256, "fc1"))
    h = b.relu(b.gemm(h, 256, 256, "fc2"))
    y = b.gemm(h, 256, 10, "fc3")
    return b.finish(x, [1, 784], y, [1, 10]), [1, 784]


def lenet(seed):
    b = Builder("lenet", seed)
    x = "input"
    h = b.relu(b.conv(x, 1, 6, 5, pads=[2, 2, 2, 2], base="conv1"))
    h = b.op("MaxPool", [h], "pool1", kernel_shape=[2, 2], strides=[2, 2])
    h = b.relu(b.conv(h, 6, 16, 5, pads=[0, 0, 0, 0], base="conv2"))
    h = b.op("MaxPool", [h], "pool2", kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Flatten", [h], "flatten", axis=1)
    h = b.relu(b.gemm(h, 16 * 5 * 5, 120, "fc1"))
    h = b.relu(b.gemm(h, 120, 84, "fc2"))
    y = b.gemm(h, 84, 10, "fc3")
    return b.finish(x, [1, 1, 28, 28], y, [1, 10]), [1, 1, 28, 28]


def resnet8(seed):
    """MLPerf Tiny image classification ResNet-8 (CIFAR-10)."""
    b = Builder("resnet8", seed)
    x = "input"
    h = b.relu(b.bn(b.conv(x, 3, 16, 3, base="conv"), 16))
    cin = 16
    for stage, (cout, stride) in enumerate([(16, 1), (32, 2), (64, 2)], start=1):
        s = f"stack{stage}"
        y = b.relu(b.bn(b.conv(h, cin, cout, 3, stride, base=s + ".conv1"), cout, s + ".bn1"))
        y = b.bn(b.conv(y, cout, cout, 3, base=s + ".conv2"), cout, s + ".bn2")
        short = h if stride == 1 and cin == cout else \
            b.conv(h, cin, cout, 1, stride, pads=[0, 0, 0, 0], base=s + ".shortcut")
        h = b.relu(b.op("Add", [short, y], s + ".add"))
        cin = cout
    h = b.op("GlobalAveragePool", [h], "gap")
    h = b.op("Flatten", [h], "flatten", axis=1)
    h = b.gemm(h, 64, 10, "fc")
    y = b.op("Softmax", [h], "softmax", axis=1)
    return b.finish(x, [1, 3, 32, 32], y, [1, 10]), [1, 3, 32, 32]


def dscnn_kws(seed):
    """MLPerf Tiny keyword spotting DS-CNN (small): 49x10 MFCC, 12 classes."""
    b = Builder("dscnn_kws", seed)
    x = "input"
    # Keras "same" padding for a 10x4 kernel, stride 2, on 49x10: 25x5 output,
    # the odd pad row at the bottom as TensorFlow places it.
    h = b.conv(x, 1, 64, (10, 4), 2, pads=[4, 1, 5, 1], base="conv1")
    h = b.relu(b.bn(h, 64, "bn1"))
    for i in range(1, 5):
        s = f"ds{i}"
        h = b.conv(h, 64, 64, 3, 1, group=64, base=s + ".dw")
        h = b.relu(b.bn(h, 64, s + ".dw_bn"))
        h = b.conv(h, 64, 64, 1, 1, pads=[0, 0, 0, 0], base=s + ".pw")
        h = b.relu(b.bn(h, 64, s + ".pw_bn"))
    h = b.op("AveragePool", [h], "avgpool", kernel_shape=[25, 5], strides=[25, 5])
    h = b.op("Flatten", [h], "flatten", axis=1)
    h = b.gemm(h, 64, 12, "fc")
    y = b.op("Softmax", [h], "softmax", axis=1)
    return b.finish(x, [1, 1, 49, 10], y, [1, 12]), [1, 1, 49, 10]


def _divisible(v, d=8):
    n = max(d, int(v + d / 2) // d * d)
    return n + d if n < 0.9 * v else n


def mobilenetv2(seed, width=1.0):
    b = Builder("mobilenetv2", seed)
    x = "input"
    cin = _divisible(32 * width)
    h = b.relu6(b.bn(b.conv(x, 3, cin, 3, 2, bias=False, base="stem"), cin, "stem_bn"))
    # (expansion t, channels c, repeats n, first stride s), as in the paper.
    cfg = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
    blk = 0
    for t, c, n, s in cfg:
        cout = _divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            p = f"block{blk}"
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
            blk += 1
    last = _divisible(1280 * max(1.0, width))
    h = b.conv(h, cin, last, 1, pads=[0, 0, 0, 0], bias=False, base="head")
    h = b.relu6(b.bn(h, last, "head_bn"))
    h = b.op("GlobalAveragePool", [h], "gap")
    h = b.op("Flatten", [h], "flatten", axis=1)
    y = b.gemm(h, last, 1000, "classifier")
    return b.finish(x, [1, 3, 224, 224], y, [1, 1000]), [1, 3, 224, 224]


def transformer(seed, seq=128, d=256, heads=4, ffn=1024):
    """One post-norm (BERT-style) encoder layer."""
    b = Builder("transformer", seed)
    x = "input"
    dh = d // heads

    def ln(v, base):
        g = b.const(base + ".weight", b.rng.uniform(0.8, 1.2, d).astype(np.float32))
        be = b.const(base + ".bias", (b.rng.standard_normal(d) * 0.02).astype(np.float32))
        return b.op("LayerNormalization", [v, g, be], base, axis=-1, epsilon=1e-5)

    split_shape = b.const("split_heads_shape", np.array([1, seq, heads, dh], np.int64))
    merge_shape = b.const("merge_heads_shape", np.array([1, seq, d], np.int64))

    def heads_of(v, base):
        r = b.op("Reshape", [v, split_shape], base + "_split")
        return b.op("Transpose", [r], base + "_heads", perm=[0, 2, 1, 3])   # [1, h, seq, dh]

    q = heads_of(b.linear(x, d, d, "q_proj"), "q")
    k = heads_of(b.linear(x, d, d, "k_proj"), "k")
    v = heads_of(b.linear(x, d, d, "v_proj"), "v")
    kt = b.op("Transpose", [k], "k_t", perm=[0, 1, 3, 2])                  # [1, h, dh, seq]
    scores = b.op("MatMul", [q, kt], "scores")
    scores = b.op("Mul", [scores, b.const("scale", np.array(1.0 / math.sqrt(dh), np.float32))],
                  "scores_scaled")
    attn = b.op("Softmax", [scores], "attn", axis=-1)
    ctx = b.op("MatMul", [attn, v], "context")                             # [1, h, seq, dh]
    ctx = b.op("Transpose", [ctx], "context_t", perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, merge_shape], "context_merged")
    h = b.op("Add", [x, b.linear(ctx, d, d, "out_proj")], "residual1")
    h = ln(h, "ln1")
    # Gelu(x) = 0.5 * x * (1 + erf(x / sqrt(2))), the form exporters write before opset 20.
    f = b.linear(h, d, ffn, "ffn1")
    e = b.op("Erf", [b.op("Div", [f, b.const("sqrt2", np.array(math.sqrt(2.0), np.float32))],
                          "gelu_div")], "gelu_erf")
    e = b.op("Add", [e, b.const("one", np.array(1.0, np.float32))], "gelu_add")
    g = b.op("Mul", [b.op("Mul", [f, e], "gelu_mul"),
                     b.const("half", np.array(0.5, np.float32))], "gelu")
    f = b.linear(g, ffn, d, "ffn2")
    h = b.op("Add", [h, f], "residual2")
    y = ln(h, "ln2")
    return b.finish(x, [1, seq, d], y, [1, seq, d]), [1, seq, d]


def vww(seed):
    """MLPerf Tiny visual wake words: MobileNet-v1 with width multiplier 0.25
    on 96x96x3, 2 classes (person / no person)."""
    b = Builder("vww", seed)
    x = "input"

    def same_pads(size, k, stride):
        # TensorFlow's "same": the odd padding row or column at the end.
        out = -(-size // stride)
        total = max((out - 1) * stride + k - size, 0)
        return total // 2, total - total // 2, out

    def conv_bn_relu(h, cin, cout, k, stride, size, group, base):
        lo, hi, out = same_pads(size, k, stride)
        h = b.conv(h, cin, cout, k, stride, pads=[lo, lo, hi, hi], group=group, base=base)
        return b.relu(b.bn(h, cout, base + "_bn")), out

    size = 96
    h, size = conv_bn_relu(x, 3, 8, 3, 2, size, 1, "conv1")
    cin = 8
    # (pointwise filters, depthwise stride) of the 13 separable layers.
    for i, (cout, stride) in enumerate([(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2),
                                        (128, 1), (128, 1), (128, 1), (128, 1), (128, 1),
                                        (256, 2), (256, 1)], start=1):
        h, size = conv_bn_relu(h, cin, cin, 3, stride, size, cin, f"sep{i}.dw")
        h, size = conv_bn_relu(h, cin, cout, 1, 1, size, 1, f"sep{i}.pw")
        cin = cout
    h = b.op("AveragePool", [h], "avgpool", kernel_shape=[size, size], strides=[size, size])
    h = b.op("Flatten", [h], "flatten", axis=1)
    h = b.gemm(h, cin, 2, "fc")
    y = b.op("Softmax", [h], "softmax", axis=1)
    return b.finish(x, [1, 3, 96, 96], y, [1, 2]), [1, 3, 96, 96]


def ad_autoencoder(seed):
    """MLPerf Tiny anomaly detection: a dense autoencoder on 640 features (5
    frames of 128 log-mel bins), Dense + BatchNormalization + ReLU layers of
    128 x4, 8, 128 x4, then a linear Dense back to 640."""
    b = Builder("ad_autoencoder", seed)
    x = "input"
    h, fin = x, 640
    for i, fout in enumerate([128, 128, 128, 128, 8, 128, 128, 128, 128], start=1):
        h = b.relu(b.bn(b.gemm(h, fin, fout, f"dense{i}"), fout, f"dense{i}_bn"))
        fin = fout
    y = b.gemm(h, fin, 640, "dense10")
    return b.finish(x, [1, 640], y, [1, 640]), [1, 640]


MODELS = {
    "mlp": mlp,
    "lenet": lenet,
    "resnet8": resnet8,
    "dscnn_kws": dscnn_kws,
    "mobilenetv2": mobilenetv2,
    "transformer": transformer,
    "vww": vww,
    "ad_autoencoder": ad_autoencoder,
}


def validate(model, x):
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    if not np.all(np.isfinite(y)):
        sys.exit(f"make_models: {model.graph.name} gives non-finite outputs in ONNX Runtime")
    return y


def main():
    ap = argparse.ArgumentParser(description="write the fxcc benchmark models")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("out_dir", nargs="?", default=os.path.join(here, "models"))
    ap.add_argument("--models", default=",".join(MODELS),
                    help="comma-separated subset of: " + ", ".join(MODELS))
    args = ap.parse_args()
    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in MODELS:
            sys.exit(f"make_models: unknown model '{m}' (known: {', '.join(MODELS)})")
    os.makedirs(args.out_dir, exist_ok=True)
    for i, name in enumerate(MODELS):
        if name not in names:
            continue
        model, in_shape = MODELS[name](SEED + i)
        x = np.random.default_rng(SEED + 100 + i).standard_normal(in_shape).astype(np.float32)
        y = validate(model, x)
        path = os.path.join(args.out_dir, name + ".onnx")
        onnx.save(model, path)
        np.save(os.path.join(args.out_dir, name + "_input.npy"), x)
        params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        print(f"{name:12s} {len(model.graph.node):4d} nodes {params / 1e6:7.3f} M params "
              f"-> {path}  out {list(y.shape)} |y|max {np.abs(y).max():.3g}")


if __name__ == "__main__":
    main()
