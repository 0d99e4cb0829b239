#!/usr/bin/env python3
"""Trains a small digit classifier and exports it to ONNX by hand.

The data is scikit-learn's bundled 8x8 digits set (load_digits, no download),
pixels scaled from 0..16 to 0..1.  The model is an MLPClassifier with hidden
layers (64, 32) and ReLU, written out with onnx.helper as

    image float32[1, 64] -> Gemm -> Relu -> Gemm -> Relu -> Gemm -> Softmax
                         -> probabilities float32[1, 10]

so no converter package is needed.  The ONNX model is checked with ONNX
Runtime against sklearn's predict_proba on every held-out image before
anything is written.

Writes OUT_DIR/digits.onnx, OUT_DIR/test_images.npy (float32 [N, 64], the
held-out 25% split, seed 0) and OUT_DIR/test_labels.npy (int64 [N]).

usage: train_digits.py OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

SEED = 0


def train():
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.25, random_state=SEED, stratify=y)
    clf = MLPClassifier(hidden_layer_sizes=(64, 32), activation="relu",
                        max_iter=600, random_state=SEED)
    clf.fit(x_train, y_train)
    return clf, x_test, y_test


def export(clf):
    # sklearn stores W as [in, out]; Gemm with transB=0 takes exactly that.
    inits, nodes = [], []
    prev = "image"
    layers = len(clf.coefs_)
    for i, (w, b) in enumerate(zip(clf.coefs_, clf.intercepts_)):
        wn, bn = f"fc{i}.weight", f"fc{i}.bias"
        inits.append(numpy_helper.from_array(w.astype(np.float32), wn))
        inits.append(numpy_helper.from_array(b.astype(np.float32), bn))
        out = f"fc{i}"
        nodes.append(helper.make_node("Gemm", [prev, wn, bn], [out], name=out))
        prev = out
        if i < layers - 1:
            nodes.append(helper.make_node("Relu", [prev], [f"relu{i}"], name=f"relu{i}"))
            prev = f"relu{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["probabilities"], name="softmax", axis=1))
    graph = helper.make_graph(
        nodes, "digits_mlp",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        initializer=inits)
    model = helper.make_model(graph, producer_name="fxcc-train-digits",
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def check(model, clf, x_test):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = np.concatenate([sess.run(None, {"image": x_test[i:i + 1]})[0]
                          for i in range(len(x_test))])
    want = clf.predict_proba(x_test)
    err = float(np.max(np.abs(got - want)))
    if err > 1e-4 or not np.array_equal(got.argmax(1), clf.predict(x_test)):
        sys.exit(f"train_digits: ONNX model disagrees with sklearn (max abs err {err:g})")
    return err


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: train_digits.py OUT_DIR")
    out = sys.argv[1]
    clf, x_test, y_test = train()
    model = export(clf)
    err = check(model, clf, x_test)
    os.makedirs(out, exist_ok=True)
    onnx.save(model, os.path.join(out, "digits.onnx"))
    np.save(os.path.join(out, "test_images.npy"), x_test)
    np.save(os.path.join(out, "test_labels.npy"), y_test)
    acc = float(np.mean(clf.predict(x_test) == y_test))
    print(f"digits: {len(y_test)} test images, accuracy {acc:.4f}, "
          f"ONNX vs sklearn max abs err {err:.2e}")


if __name__ == "__main__":
    main()
