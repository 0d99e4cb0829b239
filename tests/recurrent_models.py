#!/usr/bin/env python3
"""RNN, LSTM and GRU (ir/ops/nn_recurrent.c) against ONNX Runtime.

Small one-node models made here with onnx.helper cover the attribute
combinations: forward, reverse and bidirectional; layout 0 and 1;
sequence_lens with unequal lengths (a graph input); initial states as
graph inputs; peepholes; clip; input_forget; linear_before_reset 0 and 1;
non-default activations with activation_alpha/activation_beta (every
function the spec lists); absent optional inputs (empty names) and outputs
(Y, Y_h or Y_c left out); opsets 7 (no layout), 14 and 22 (skipped, saying
so, while the frontend caps the opset below 22).  For each:

- `fxcc run` (the interpreter) equals ONNX Runtime on every output within
  1e-5 + 1e-4 x max |ref| (ONNX Runtime has no layout 1: its reference is
  the same case in layout 0, transposed);
- `fxcc verify` finds the compiled code (host and --target portable) equal
  to the interpreter.

A model whose R does not fit hidden_size exits 1 naming the node and R's
shape, writing nothing.

usage: recurrent_models.py FXCC WORK    (exit 77: no numpy/onnx/onnxruntime)
"""
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FXCC, WORK = sys.argv[1], sys.argv[2]
failures = []
GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def make_case(op, S, B, I, H, seed, direction="forward", layout=0, attrs=None, bias=True,
              seq_lens=None, init_h=False, init_c=False, peep=False, outputs=("Y", "Y_h"),
              opset=14, scale=0.5):
    """A one-node model; returns (model, feeds in graph-input order)."""
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    G = GATES[op]
    inits = [numpy_helper.from_array((scale * rng.standard_normal((D, G * H, I))).astype(np.float32), "W"),
             numpy_helper.from_array((scale * rng.standard_normal((D, G * H, H))).astype(np.float32), "R")]
    names = ["X", "W", "R"]
    graph_inputs, feeds = [], []
    # data drawn in layout 0's shapes, transposed for layout 1, so that the
    # layout-0 twin of a case (ONNX Runtime has no layout 1) sees the same values
    xshape = (B, S, I) if layout else (S, B, I)
    graph_inputs.append(helper.make_tensor_value_info("X", TensorProto.FLOAT, xshape))
    x = rng.standard_normal((S, B, I)).astype(np.float32)
    feeds.append(x.transpose(1, 0, 2).copy() if layout else x)
    if bias:
        inits.append(numpy_helper.from_array((scale * rng.standard_normal((D, 2 * G * H))).astype(np.float32), "B"))
    names.append("B" if bias else "")
    if seq_lens is not None:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, (B,)))
        feeds.append(np.array(seq_lens, dtype=np.int32))
    names.append("sequence_lens" if seq_lens is not None else "")
    sshape = (B, D, H) if layout else (D, B, H)
    for present, name in ((init_h, "initial_h"), (init_c, "initial_c")):
        if name == "initial_c" and op != "LSTM":
            continue
        if present:
            graph_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, sshape))
            v = rng.standard_normal((D, B, H)).astype(np.float32)
            feeds.append(v.transpose(1, 0, 2).copy() if layout else v)
        names.append(name if present else "")
    if op == "LSTM":
        if peep:
            inits.append(numpy_helper.from_array((scale * rng.standard_normal((D, 3 * H))).astype(np.float32), "P"))
        names.append("P" if peep else "")
    while names and not names[-1]:
        names.pop()
    out_names = ["Y", "Y_h", "Y_c"][:3 if op == "LSTM" else 2]
    node_outs = [n if n in outputs else "" for n in out_names]
    while not node_outs[-1]:
        node_outs.pop()
    yshape = (B, S, D, H) if layout else (S, D, B, H)
    graph_outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, yshape if n == "Y" else sshape)
                     for n in out_names if n in outputs]
    kw = dict(attrs or {})
    kw["hidden_size"] = H
    kw["direction"] = direction
    if opset >= 14:
        kw["layout"] = layout
    node = helper.make_node(op, names, node_outs, name=f"/recurrent/{op}", **kw)
    graph = helper.make_graph([node], "recurrent", graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 21 else 10
    onnx.checker.check_model(model)
    return model, feeds


ACT_LSTM = {"activations": ["HardSigmoid", "ScaledTanh", "Softsign",
                            "Sigmoid", "Elu", "Softplus"],
            "activation_alpha": [0.3, 0.8, 0.7], "activation_beta": [0.45, 1.5]}
CASES = {
    "rnn_defaults": dict(op="RNN", S=5, B=2, I=3, H=4),
    "rnn_bidir_seq_lens": dict(op="RNN", S=6, B=3, I=3, H=4, direction="bidirectional",
                               seq_lens=[6, 2, 4], init_h=True,
                               attrs={"activations": ["Relu", "LeakyRelu"],
                                      "activation_alpha": [0.2]}),
    "rnn_reverse_layout1_clip": dict(op="RNN", S=5, B=2, I=4, H=3, direction="reverse", layout=1,
                                     init_h=True, attrs={"clip": 0.6}, scale=1.5),
    "rnn_affine_thresholded": dict(op="RNN", S=4, B=2, I=3, H=5, direction="bidirectional",
                                   attrs={"activations": ["Affine", "ThresholdedRelu"],
                                          "activation_alpha": [0.5, 0.1],
                                          "activation_beta": [0.25]}),
    "rnn_opset7_no_bias": dict(op="RNN", S=3, B=1, I=2, H=3, bias=False, opset=7,
                               outputs=("Y_h",)),
    "lstm_bidir_peepholes_seq_lens": dict(op="LSTM", S=6, B=3, I=4, H=5,
                                          direction="bidirectional", seq_lens=[6, 3, 1],
                                          init_h=True, init_c=True, peep=True,
                                          outputs=("Y", "Y_h", "Y_c")),
    "lstm_reverse_layout1_clip": dict(op="LSTM", S=5, B=2, I=3, H=4, direction="reverse",
                                      layout=1, init_h=True, init_c=True,
                                      attrs={"clip": 0.8}, scale=1.5,
                                      outputs=("Y_h", "Y_c")),
    "lstm_input_forget_peepholes": dict(op="LSTM", S=5, B=2, I=3, H=4, peep=True,
                                        attrs={"input_forget": 1}, outputs=("Y", "Y_c")),
    "lstm_activations_bidir": dict(op="LSTM", S=4, B=2, I=3, H=4, direction="bidirectional",
                                   init_h=True, attrs=ACT_LSTM, outputs=("Y", "Y_h", "Y_c")),
    "lstm_layout1_seq_lens_only_y_c": dict(op="LSTM", S=5, B=3, I=3, H=4, layout=1,
                                           seq_lens=[2, 5, 4], outputs=("Y_c",)),
    "lstm_opset22": dict(op="LSTM", S=4, B=1, I=6, H=8, opset=22, init_h=True, init_c=True,
                         outputs=("Y", "Y_h", "Y_c")),
    "gru_bidir_seq_lens": dict(op="GRU", S=6, B=3, I=4, H=5, direction="bidirectional",
                               seq_lens=[1, 6, 4], init_h=True),
    "gru_lbr_reverse_layout1": dict(op="GRU", S=5, B=2, I=3, H=4, direction="reverse", layout=1,
                                    init_h=True, attrs={"linear_before_reset": 1},
                                    outputs=("Y",)),
    "gru_lbr_bidir_clip_seq_lens": dict(op="GRU", S=5, B=2, I=3, H=4, direction="bidirectional",
                                        seq_lens=[3, 5], attrs={"linear_before_reset": 1,
                                                                "clip": 0.7}, scale=1.5),
    "gru_activations": dict(op="GRU", S=4, B=2, I=3, H=4,
                            attrs={"activations": ["HardSigmoid", "Softsign"],
                                   "activation_alpha": [0.25], "activation_beta": [0.4]},
                            outputs=("Y_h",)),
    "gru_opset7_no_bias": dict(op="GRU", S=4, B=2, I=3, H=4, bias=False, opset=7,
                               outputs=("Y", "Y_h")),
}

def reference(spec, seed):
    """ONNX Runtime's outputs for a case; layout 1 through its layout-0 twin."""
    layout = spec.get("layout", 0)
    model, feeds = make_case(seed=seed, **dict(spec, layout=0))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, {inp.name: v for inp, v in zip(sess.get_inputs(), feeds)})
    if layout:
        outs = [o.transpose(2, 0, 1, 3) if o.ndim == 4 else o.transpose(1, 0, 2) for o in outs]
    return outs


os.makedirs(WORK, exist_ok=True)
for i, (name, spec) in enumerate(CASES.items()):
    spec = dict(spec)
    model, feeds = make_case(seed=100 + i, **spec)
    path = os.path.join(WORK, name + ".onnx")
    onnx.save(model, path)
    inputs = []
    for k, v in enumerate(feeds):
        f = os.path.join(WORK, f"{name}_in{k}.npy")
        np.save(f, v)
        inputs.append(f)
    refs = reference(spec, 100 + i)
    out_dir = os.path.join(WORK, name + "_run")
    rc, out = run([FXCC, "run", path, *inputs, "-o", out_dir])
    if rc and f"opset {spec.get('opset')} is not supported" in out:
        print(f"skip {name}: this fxcc reads no opset {spec.get('opset')} ({out.strip()[-120:]})")
        continue
    check(rc == 0, f"{name}: fxcc run ({rc}) {out[-400:] if rc else ''}")
    if rc == 0:
        for k, ref in enumerate(refs):
            mine = np.load(os.path.join(out_dir, f"output_{k}.npy"))
            err = float(np.abs(mine - ref).max()) if mine.shape == ref.shape else float("inf")
            check(err <= 1e-5 + 1e-4 * float(np.abs(ref).max()),
                  f"{name}: output {k} {ref.shape} vs ONNX Runtime: max abs {err:.3g}")
    for target in ("host", "portable"):
        rc, out = run([FXCC, "verify", path, *inputs, "--target", target])
        check(rc == 0 and "verify: ok" in out,
              f"{name}: fxcc verify --target {target} ({rc}) {out[-400:] if rc else ''}")

# a bad shape: R sized for another hidden_size
model, feeds = make_case("LSTM", 3, 1, 2, 4, seed=7)
model.graph.node[0].attribute[[a.name for a in model.graph.node[0].attribute].index("hidden_size")].i = 3
bad = os.path.join(WORK, "lstm_bad_hidden.onnx")
onnx.save(model, bad)
np.save(os.path.join(WORK, "bad_in.npy"), feeds[0])
bad_out = os.path.join(WORK, "bad_run")
rc, out = run([FXCC, "run", bad, os.path.join(WORK, "bad_in.npy"), "-o", bad_out])
check(rc == 1 and "/recurrent/LSTM" in out and "W is float32[1, 16, 2]" in out
      and not os.path.exists(bad_out),
      f"bad hidden_size: exit 1 naming the node and W's shape ({rc}: {out.strip()[-300:]})")

print(f"{len(failures)} failed" if failures else "all recurrent model checks passed")
sys.exit(1 if failures else 0)
