"""group_norm_opsets.py - GroupNormalization's two forms through the conformance runner.

The onnx node suite tests GroupNormalization at opset 21 only, where scale
and bias hold one value per channel; opsets 18-20 hold one per group.  This
writes one case of each form in the backend-test layout, the reference
computed here with NumPy (the statistics per group, then the per-channel or
per-group affine), and runs fxcc_conformance on them, which must pass both.
usage: python group_norm_opsets.py CONFORMANCE OUT   (exit 77: no onnx)
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError as e:  # ctest reports the test as skipped
    print("skipped: %s (scripts/setup.sh makes the .venv)" % e)
    sys.exit(77)

EPSILON = 1e-3


def write_case(out, name, opset, groups, per_group, rng):
    x = rng.standard_normal((2, 6, 3, 4)).astype(np.float32)
    entries = groups if per_group else 6
    scale = rng.standard_normal(entries).astype(np.float32)
    bias = rng.standard_normal(entries).astype(np.float32)
    node = helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"],
                            num_groups=groups, epsilon=EPSILON)
    inputs = [("x", x), ("scale", scale), ("bias", bias)]
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)
                       for n, v in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    grouped = x.reshape(2, groups, -1).astype(np.float64)
    normed = ((grouped - grouped.mean(-1, keepdims=True)) /
              np.sqrt(grouped.var(-1, keepdims=True) + EPSILON)).reshape(x.shape)
    repeat = 6 // groups if per_group else 1
    y = (normed * np.repeat(scale, repeat).reshape(1, 6, 1, 1) +
         np.repeat(bias, repeat).reshape(1, 6, 1, 1)).astype(np.float32)
    data = os.path.join(out, name, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(out, name, "model.onnx"))
    for k, (n, v) in enumerate(inputs):
        with open(os.path.join(data, "input_%d.pb" % k), "wb") as f:
            f.write(numpy_helper.from_array(v, n).SerializeToString())
    with open(os.path.join(data, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "y").SerializeToString())
    return name


def main():
    conformance, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    names = [write_case(out, "test_group_norm_opset18_per_group", 18, 2, True, rng),
             write_case(out, "test_group_norm_opset21_per_channel", 21, 3, False, rng)]
    expected = os.path.join(out, "expected.txt")
    with open(expected, "w") as f:
        f.write("\n".join(names) + "\n")
    return subprocess.run([conformance, "--data", out, "--expected", expected, "-v"]).returncode


if __name__ == "__main__":
    sys.exit(main())
