#!/usr/bin/env python3
"""Writes seed corpora for the fxcc fuzzers.

    python3 tests/fuzz/make_corpus.py OUT_DIR

OUT_DIR/onnx_load/    small ONNX backend-test models (a spread of features:
                      initializers, Constant nodes, multi-output ops, omitted
                      optional inputs, IR-3 input defaults, symbolic dims) and
                      the malformed models of tests/malformed/files
OUT_DIR/tensor_file/  .npy files of every supported dtype and rank 0-4 and the
                      backend tests' .pb tensors; each file starts with the
                      selector byte fuzz_tensor_file.c reads (0: .npy, 1: .pb)
OUT_DIR/graph_parse/  graph texts: the printed graphs of tests/golden (seed.txt
                      and the opt suites' golden files) and short inline forms
                      (types after a colon, wildcard constants, getitem, bad
                      lines)

Then, for example:
    fuzz_onnx_load -max_total_time=300 OUT_DIR/onnx_load
    fuzz_tensor_file -max_total_time=300 OUT_DIR/tensor_file
    fuzz_graph_parse -max_total_time=300 OUT_DIR/graph_parse
Needs numpy (and the ONNX backend test data in /usr/share/libonnx-testdata).
"""
import glob
import io
import os
import shutil
import sys

import numpy as np

NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
HERE = os.path.dirname(os.path.abspath(__file__))
MALFORMED = os.path.join(HERE, "..", "malformed", "files")
GOLDEN = os.path.join(HERE, "..", "golden")

# Inline graph texts in the forms graph_parse accepts beyond printer output.
GRAPH_TEXTS = {
    "short_form": "%x : placeholder[target=x] : float32[1, 4]\n"
                  "%e : call_function[target=Elu](args = (%x,))\n"
                  "%l : call_function[target=LeakyRelu](args = (%e,), kwargs = {alpha: 1})\n"
                  "return %l\n",
    "pattern": "%a : placeholder[target=a]\n%b : placeholder[target=b]\n%k : get_attr[target=k]\n"
               "%s : call_function[target=Add](args = (%a, %b))\n"
               "%m : call_function[target=Mul](args = (%s, %k))\n"
               "%r : call_function[target=Relu](args = (%m,))\nreturn (%r, %s)\n",
    "constants": "%x : placeholder[target=x] : float32[2, 3]\n%w : get_attr[target=w]\n"
                 "%one : get_attr[target=one]\n%idx : get_attr[target=idx]\n"
                 "%a : call_function[target=Add](args = (%x, %w))\n"
                 "%m : call_function[target=Mul](args = (%a, %one))\n"
                 "%g : call_function[target=Gather](args = (%m, %idx), kwargs = {axis: 1})\n"
                 "%c : call_function[target=Clip](args = (%g, None, %one))\nreturn (%c,)\n",
    "split": "%x : placeholder[target=x] : float32[2, 4]\n"
             "%sp : call_function[target=Split](args = (%x,), kwargs = {axis: 1})  # (float32[2, 2], float32[2, 2])\n"
             "%s0 : call_function[target=getitem](args = (%sp, 0))\n"
             "%s1 : call_function[target=getitem](args = (%sp, 1))\n"
             "%t : call_function[target=Transpose](args = (%s1,), kwargs = {perm: [1, 0]})\n"
             "%f : call_method[target=flatten](args = (%t,), kwargs = {axis: 0})\n"
             "return (%s0, %f)\n",
    "strings": "%x : placeholder[target=x] : float32[1, 1, 4, 4]\n"
               "%p : call_function[target=AveragePool](args = (%x,), kwargs = {auto_pad: 'SAME_UPPER', kernel_shape: [2, 2]})\n"
               "return (%p,)\n",
    "bad_line": "%x : placeholder[target=x]\n%y : call_function[target=Relu](args = (%x %x))\nreturn (%y,)\n",
}

MODELS = [
    "test_conv_with_strides_padding", "test_gemm_default_single_elem_vector_bias",
    "test_split_variable_parts_1d", "test_split_equal_parts_2d", "test_maxpool_with_argmax_2d_precomputed_pads",
    "test_dropout_default_mask", "test_constant", "test_constant_pad", "test_constantofshape_float_ones",
    "test_reshape_reduced_dims", "test_squeeze", "test_unsqueeze_axis_0", "test_clip_default_max",
    "test_batchnorm_example", "test_lstm_defaults", "test_topk", "test_slice", "test_transpose_default",
    "test_cast_FLOAT_to_DOUBLE", "test_add_bcast", "test_concat_2d_axis_0", "test_gather_0",
    "test_shape_start_1", "test_range_float_type_positive_delta_expanded", "test_resize_upsample_scales_linear",
    "test_if", "test_nonzero_example", "test_softmax_axis_1", "test_reduce_sum_keepdims_example",
    "test_averagepool_2d_pads", "test_instancenorm_example", "test_einsum_batch_diagonal",
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    models = os.path.join(out, "onnx_load")
    tensors = os.path.join(out, "tensor_file")
    os.makedirs(models, exist_ok=True)
    os.makedirs(tensors, exist_ok=True)

    for name in MODELS:
        src = os.path.join(NODE_TESTS, name, "model.onnx")
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(models, name + ".onnx"))
    # every IR-3 model small enough: input defaults from initializers
    for src in sorted(glob.glob(os.path.join(NODE_TESTS, "*", "model.onnx"))):
        with open(src, "rb") as f:
            head = f.read(2)
        if head == b"\x08\x03" and os.path.getsize(src) < 2048:
            shutil.copyfile(src, os.path.join(models, os.path.basename(os.path.dirname(src)) + ".onnx"))
    for src in sorted(glob.glob(os.path.join(MALFORMED, "*.onnx"))):
        shutil.copyfile(src, os.path.join(models, "malformed_" + os.path.basename(src)))

    def put(name, selector, data):
        with open(os.path.join(tensors, name), "wb") as f:
            f.write(bytes([selector]) + data)

    shapes = [(), (1,), (3,), (2, 3), (2, 1, 2), (1, 2, 2, 2), (0, 3)]
    dtypes = ["<f4", "<f8", "<i8", "<i4", "<i2", "|i1", "|u1", "<u2", "<u4", "<u8", "|b1"]
    for dt in dtypes:
        for shape in shapes:
            a = (np.arange(int(np.prod(shape)), dtype=np.float64) % 3).astype(np.dtype(dt)).reshape(shape)
            buf = io.BytesIO()
            np.save(buf, a)
            tag = dt.strip("<|") + "_" + ("x".join(map(str, shape)) or "scalar")
            put("npy_" + tag + ".npy", 0, buf.getvalue())
    for src in sorted(glob.glob(os.path.join(NODE_TESTS, "test_[a-c]*", "test_data_set_0", "*.pb")))[:60]:
        if os.path.getsize(src) < 4096:
            parts = src.split(os.sep)
            put("pb_" + parts[-3] + "_" + parts[-1], 1, open(src, "rb").read())
    for src in sorted(glob.glob(os.path.join(MALFORMED, "*.npy"))):
        put("malformed_" + os.path.basename(src), 0, open(src, "rb").read())
    for src in sorted(glob.glob(os.path.join(MALFORMED, "*.pb"))):
        put("malformed_" + os.path.basename(src), 1, open(src, "rb").read())
    texts = os.path.join(out, "graph_parse")
    os.makedirs(texts, exist_ok=True)
    for src in [os.path.join(GOLDEN, "seed.txt")] + sorted(glob.glob(os.path.join(GOLDEN, "opt", "*", "*.txt"))):
        parts = os.path.relpath(src, GOLDEN).replace(os.sep, "_")
        shutil.copyfile(src, os.path.join(texts, parts))
    for name, text in GRAPH_TEXTS.items():
        with open(os.path.join(texts, name + ".txt"), "w") as f:
            f.write(text)
    print("wrote %d models, %d tensors and %d graph texts under %s"
          % (len(os.listdir(models)), len(os.listdir(tensors)), len(os.listdir(texts)), out))


if __name__ == "__main__":
    main()
