#!/usr/bin/env python3
"""Writes a small CNN whose weights total 1.4 MB, for the large-weights test
(tests/large_weights.sh): Conv 3->64 3x3 (6.9 KB of filter), Relu, Conv
64->128 3x3 (295 KB), Relu, GlobalAveragePool, Flatten, Gemm 128->2048 (1 MB),
Relu, Gemm 2048->10 (80 KB).  Biases are small (under 4 KiB except the
2048-wide one), so the model has weights on both sides of fxcc's 4 KiB
threshold.  Also writes a fixed input and ONNX Runtime's output for it, the
independent reference the test compares the compiled model with.

usage: make_large_weights_model.py OUT_DIR
       (writes large.onnx, large_input.npy, large_expected.npy)
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper


def build():
    rng = np.random.default_rng(20261203)

    def weight(name, *shape):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        data = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)
        return numpy_helper.from_array(data, name)

    inits = [weight("conv1_w", 64, 3, 3, 3), weight("conv1_b", 64),
             weight("conv2_w", 128, 64, 3, 3), weight("conv2_b", 128),
             weight("fc1_w", 2048, 128), weight("fc1_b", 2048),
             weight("fc2_w", 10, 2048), weight("fc2_b", 10)]
    nodes = [
        helper.make_node("Conv", ["x", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1],
                         strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc1_w", "fc1_b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "fc2_w", "fc2_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "large_weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, rng.standard_normal((1, 3, 16, 16)).astype(np.float32)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model, x = build()
    path = os.path.join(out, "large.onnx")
    onnx.save(model, path)
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    (expected,) = session.run(None, {"x": x})
    np.save(os.path.join(out, "large_input.npy"), x)
    np.save(os.path.join(out, "large_expected.npy"), expected)


if __name__ == "__main__":
    main()
