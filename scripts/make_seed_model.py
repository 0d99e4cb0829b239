#!/usr/bin/env python3
"""Writes the seed example: linear(x + param).clamp(min=0.0, max=1.0).

The model is what torch.fx traces for

    class Seed(nn.Module):
        def __init__(self):
            self.param = nn.Parameter(torch.rand(3, 4))
            self.linear = nn.Linear(4, 5)
        def forward(self, x):
            return self.linear(x + self.param).clamp(min=0.0, max=1.0)

built directly with onnx.helper so that no PyTorch is needed.  Also writes a
fixed input and the ONNX Runtime output for it, the independent reference the
tests compare fxcc's interpreter against.

usage: make_seed_model.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build():
    rng = np.random.default_rng(20261202)
    param = rng.random((3, 4), dtype=np.float32)
    weight = (rng.standard_normal((5, 4)) * 0.5).astype(np.float32)
    bias = (rng.standard_normal(5) * 0.1).astype(np.float32)
    inits = [
        numpy_helper.from_array(param, "param"),
        numpy_helper.from_array(weight, "linear.weight"),
        numpy_helper.from_array(bias, "linear.bias"),
        numpy_helper.from_array(np.array(0.0, np.float32), "clamp_min"),
        numpy_helper.from_array(np.array(1.0, np.float32), "clamp_max"),
    ]
    nodes = [
        helper.make_node("Add", ["x", "param"], ["add"], name="add"),
        helper.make_node("Gemm", ["add", "linear.weight", "linear.bias"], ["linear"],
                         name="linear", transB=1),
        helper.make_node("Clip", ["linear", "clamp_min", "clamp_max"], ["clamp"], name="clamp"),
    ]
    graph = helper.make_graph(
        nodes, "seed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("clamp", TensorProto.FLOAT, [3, 5])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="fxcc-seed",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "examples"
    os.makedirs(out, exist_ok=True)
    model = build()
    path = os.path.join(out, "seed.onnx")
    onnx.save(model, path)
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    np.save(os.path.join(out, "seed_input.npy"), x)
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    np.save(os.path.join(out, "seed_expected.npy"), y)
    print(f"wrote {path}, seed_input.npy, seed_expected.npy (ONNX Runtime {ort.__version__})")


if __name__ == "__main__":
    main()
