#!/usr/bin/env python3
"""Writes the leaf-op test models of tests/check_opt_leaf.c into tests/leaf/.

Each model holds an op fxcc does not implement (domain com.example); its
C implementation is tests/leaf/leaf_ops.c.  For the models that run, the
input and the expected outputs are stored as .npy, computed here with numpy
(an independent reference for the C functions):

  cummax.onnx   out = CumMaxRows(x * 2) + bias: the leaf's output type comes
                from value_info; the node carries ONNX attributes (axis, mode)
  rowmax.onnx   (vals, idx) = RowMaxShifted(x, w): two inputs (w an
                initializer), two outputs of two element types, typed by the
                graph outputs
  untyped.onnx  z = -SqrtChecked(x): nothing types the leaf's output y, so it
                needs --leaf-type y=float32[4]; SqrtChecked refuses negative
                input (returns 5)
  softsign.onnx y = Relu(Softsign(x)): ops fxcc implements, made leaves by name
                (--leaf Softsign runs leaf_ops.c's version; --leaf Relu has
                no implementation anywhere); value_info types s, since a
                leaf's types never come from fxcc's own shape functions

usage: make_leaf_models.py [OUT_DIR]   (default: tests/leaf next to this script)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
DOMAIN = "com.example"


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def model(nodes, inputs, outputs, initializers=(), value_info=()):
    graph = helper.make_graph(nodes, "leaf_test", inputs, outputs, list(initializers),
                              value_info=list(value_info))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                helper.make_opsetid(DOMAIN, 1)],
                          producer_name="make_leaf_models.py")
    m.ir_version = 8
    return m


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "leaf")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261203)

    def save(name, m, arrays):
        onnx.checker.check_model(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        for key, value in arrays.items():
            np.save(os.path.join(out, f"{name}_{key}.npy"), value)

    # cummax: running maximum along the last axis
    x = rng.standard_normal((2, 5)).astype(np.float32)
    bias = np.array([0.5, -1.0, 0.25, 2.0, -0.125], dtype=np.float32)
    two = np.array(2.0, dtype=np.float32)
    save("cummax", model(
        [helper.make_node("Mul", ["x", "two"], ["m"]),
         helper.make_node("CumMaxRows", ["m"], ["c"], domain=DOMAIN, name="cummax",
                          axis=1, mode="max"),
         helper.make_node("Add", ["c", "bias"], ["out"])],
        [f32("x", [2, 5])], [f32("out", [2, 5])],
        [numpy_helper.from_array(two, "two"), numpy_helper.from_array(bias, "bias")],
        [f32("c", [2, 5])]),
        {"input": x, "expected": np.maximum.accumulate(x * two, axis=1) + bias})

    # rowmax: max and first argmax of x + w along the last axis
    x = rng.standard_normal((3, 4)).astype(np.float32)
    w = np.array([0.0, 1.5, -0.5, 0.75], dtype=np.float32)
    shifted = x + w
    save("rowmax", model(
        [helper.make_node("RowMaxShifted", ["x", "w"], ["vals", "idx"], domain=DOMAIN,
                          name="rowmax")],
        [f32("x", [3, 4])],
        [f32("vals", [3]), helper.make_tensor_value_info("idx", TensorProto.INT64, [3])],
        [numpy_helper.from_array(w, "w")]),
        {"input": x, "expected_0": shifted.max(axis=1),
         "expected_1": shifted.argmax(axis=1).astype(np.int64)})

    # untyped: y has no value_info and is not a graph output
    x = np.array([0.0, 1.0, 2.25, 9.0], dtype=np.float32)
    save("untyped", model(
        [helper.make_node("SqrtChecked", ["x"], ["y"], domain=DOMAIN, name="sqrt_checked"),
         helper.make_node("Neg", ["y"], ["z"])],
        [f32("x", [4])], [f32("z", [4])]),
        {"input": x, "expected": -np.sqrt(x),
         "negative": np.array([1.0, -4.0, 2.0, 3.0], dtype=np.float32)})

    # softsign: default-domain ops that fxcc implements
    x = rng.standard_normal((2, 3)).astype(np.float32)
    save("softsign", model(
        [helper.make_node("Softsign", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
        [f32("x", [2, 3])], [f32("y", [2, 3])], value_info=[f32("s", [2, 3])]),
        {"input": x, "expected": np.maximum(x / (1 + np.abs(x)), 0)})


if __name__ == "__main__":
    main()
