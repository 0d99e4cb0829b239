#!/usr/bin/env python3
"""The Python half of `fxcc bench`: times ONNX Runtime and PyTorch eager on
the inputs fxcc wrote, one thread each, and reports back in a file the C side
parses.  The fxcc binary embeds this file and writes it into the bench's work
folder at run time; bench/bench.py imports TorchGraph from it.

    bench_reference.py --model M.onnx --out DIR [--input NAME=FILE]... [--const NAME=FILE]...
                       [--repeat N] [--min-round-ms MS] [--warmup W] [--skip ort,torch]
                       [--keep-input-defaults]

Writes DIR/ort_output_K.npy and DIR/torch_output_K.npy for the backends that
ran, and DIR/result.txt last (via a temporary name), one "key=value" per line:

    ort_status=ok | unavailable | failed      torch_status=...
    ort_reason=TEXT   (when not ok)           torch_reason=TEXT
    ort_ms=X          median, binding cost subtracted (see below)
    ort_raw_ms=X      median as timed from Python
    ort_binding_ms=X  median of an Identity model on the same inputs
    ort_repeat=N      ort_outputs=K           torch_ms=X  torch_repeat=N  torch_outputs=K
    ort_version=V                             torch_version=V

ONNX Runtime: an InferenceSession with one intra-op and one inter-op thread,
ORT_ENABLE_ALL, the CPU provider; `--warmup` untimed runs, then the median of
N.  The C side's timing has no Python call around it, so the median of an
Identity model with the same inputs (dtype and shape), timed the same way,
is subtracted: what is left is ORT's own work.

PyTorch: the ONNX graph replayed op by op with torch functional calls
(TorchGraph), under inference_mode, median of N.  An op the replay does not
know makes the torch row "unavailable: op X not in the torch replay" rather
than a wrong answer.

N is --repeat, raised for a backend whose runs take microseconds until one
round of N runs lasts --min-round-ms (estimated from five runs; at most 5000).
OPENBLAS_NUM_THREADS and OMP_NUM_THREADS are set to 1 before numpy loads.
"""
import os

# Before numpy, onnxruntime or torch load OpenBLAS or OpenMP: one thread.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

MAX_REPEAT = 5000


class ReplayError(Exception):
    """The torch replay cannot run this graph (an op or attribute it lacks)."""


def median_ms(fn, repeat, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def round_repeat(fn, repeat, min_round_ms):
    """repeat, raised until repeat runs of fn last min_round_ms."""
    if min_round_ms <= 0:
        return repeat
    est = median_ms(fn, 5, 0)
    return max(repeat, min(MAX_REPEAT, int(min_round_ms / max(est, 1e-4)) + 1))


# ONNX Runtime -----------------------------------------------------------------

def ort_session(ort, model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def identity_model(onnx, feeds):
    """An Identity per input: the cost of one call through the Python
    binding with these inputs and as many outputs."""
    h = onnx.helper
    ins, outs, nodes = [], [], []
    for k, (name, x) in enumerate(feeds.items()):
        dt = h.np_dtype_to_tensor_dtype(x.dtype)
        ins.append(h.make_tensor_value_info(f"x{k}", dt, list(x.shape)))
        outs.append(h.make_tensor_value_info(f"y{k}", dt, list(x.shape)))
        nodes.append(h.make_node("Identity", [f"x{k}"], [f"y{k}"]))
    g = h.make_graph(nodes, "identity", ins, outs)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString(), {f"x{k}": x for k, x in enumerate(feeds.values())}


def bench_ort(args, np, feeds, res):
    try:
        import onnx
        import onnxruntime as ort
    except ImportError as e:
        return "unavailable", f"{e.name or 'onnxruntime'} not importable"
    res["ort_version"] = ort.__version__
    try:
        sess = ort_session(ort, args.model)
        ys = sess.run(None, feeds)
        run = lambda: sess.run(None, feeds)  # noqa: E731
        repeat = round_repeat(run, args.repeat, args.min_round_ms)
        raw = median_ms(run, repeat, args.warmup)
        ident_bytes, ident_feeds = identity_model(onnx, feeds)
        ident = ort_session(ort, ident_bytes)
        binding = median_ms(lambda: ident.run(None, ident_feeds), max(repeat, 50), args.warmup)
    except Exception as e:  # ORT refusing a model is a result, not a crash
        return "failed", f"onnxruntime: {type(e).__name__}: {e}"
    for k, y in enumerate(ys):
        np.save(os.path.join(args.out, f"ort_output_{k}.npy"), np.ascontiguousarray(y))
    res.update(ort_ms=raw - binding, ort_raw_ms=raw, ort_binding_ms=binding, ort_repeat=repeat,
               ort_outputs=len(ys))
    return "ok", None


# PyTorch ----------------------------------------------------------------------

class TorchGraph:
    """Replays an ONNX graph with torch functional calls (eager mode).

    Covers the ops of bench/make_models.py's models and the usual CNN and
    transformer ops; anything else, or an attribute value it does not
    follow, raises ReplayError naming it (never a silently different
    answer).  Call it with the graph's runtime inputs in order (or by name
    with feeds=); it returns every graph output, in order."""

    def __init__(self, torch, model, consts=None):
        import onnx
        from onnx import numpy_helper
        self.t = torch
        self.F = torch.nn.functional
        self.g = model.graph
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
        self.w = {i.name: self._tensor(numpy_helper.to_array(i)) for i in self.g.initializer}
        for name, arr in (consts or {}).items():
            self.w[name] = self._tensor(arr)
        self.inputs = [i.name for i in self.g.input if i.name not in self.w]
        self.attrs = [{a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
                      for n in self.g.node]
        for n, a in zip(self.g.node, self.attrs):
            if n.domain not in ("", "ai.onnx") or not hasattr(self, "op_" + n.op_type):
                raise ReplayError(f"op {n.op_type} not in the torch replay")
            if n.op_type == "Constant":
                if "value" not in a:
                    raise ReplayError("Constant without a tensor value not in the torch replay")
                a["value"] = self._tensor(numpy_helper.to_array(a["value"]))

    def _tensor(self, arr):
        import numpy as np
        return self.t.from_numpy(np.array(arr, copy=True))

    def __call__(self, *xs, feeds=None):
        env = dict(self.w)
        if feeds is not None:
            env.update(feeds)
        else:
            if len(xs) != len(self.inputs):
                raise ReplayError(f"the graph takes {len(self.inputs)} inputs, {len(xs)} given")
            env.update(zip(self.inputs, xs))
        for n, a in zip(self.g.node, self.attrs):
            i = [env[s] if s else None for s in n.input]
            y = getattr(self, "op_" + n.op_type)(i, a, n)
            ys = y if isinstance(y, (tuple, list)) else (y,)
            for name, v in zip(n.output, ys):
                if name:
                    env[name] = v
        return tuple(env[o.name] for o in self.g.output)

    # helpers
    @staticmethod
    def _ints(v):
        return [int(x) for x in v.tolist()] if hasattr(v, "tolist") else [int(x) for x in v]

    def _axes(self, i, a, at):
        """Axes from the attribute (older opsets) or input `at` (newer)."""
        if len(i) > at and i[at] is not None:
            return self._ints(i[at])
        return list(a["axes"]) if "axes" in a else None

    @staticmethod
    def _need(a, key, ok, what):
        if key in a and a[key] not in ok:
            raise ReplayError(f"{what} with {key}={a[key]!r} not in the torch replay")

    def _pool_args(self, i, a, n):
        self._need(a, "auto_pad", (b"NOTSET", "NOTSET"), n.op_type)
        k = list(a["kernel_shape"])
        d = len(k)
        if i[0].dim() != d + 2 or d not in (1, 2, 3):
            raise ReplayError(f"{n.op_type} on rank {i[0].dim()} not in the torch replay")
        s = list(a.get("strides", [1] * d))
        p = list(a.get("pads", [0] * (2 * d)))
        return k, d, s, p

    # elementwise
    def op_Add(self, i, a, n): return i[0] + i[1]
    def op_Sub(self, i, a, n): return i[0] - i[1]
    def op_Mul(self, i, a, n): return i[0] * i[1]

    def op_Div(self, i, a, n):
        if i[0].is_floating_point():
            return i[0] / i[1]
        return self.t.div(i[0], i[1], rounding_mode="trunc")

    def op_Mod(self, i, a, n):
        # fmod=0 (integers only) takes the divisor's sign, as torch.remainder
        if a.get("fmod", 0):
            return self.t.fmod(i[0], i[1])
        return self.t.remainder(i[0], i[1])

    def op_Pow(self, i, a, n): return self.t.pow(i[0], i[1]).to(i[0].dtype)
    def op_Sqrt(self, i, a, n): return self.t.sqrt(i[0])
    def op_Exp(self, i, a, n): return self.t.exp(i[0])
    def op_Log(self, i, a, n): return self.t.log(i[0])
    def op_Neg(self, i, a, n): return -i[0]
    def op_Abs(self, i, a, n): return self.t.abs(i[0])
    def op_Reciprocal(self, i, a, n): return self.t.reciprocal(i[0])
    def op_Erf(self, i, a, n): return self.t.erf(i[0])
    def op_Tanh(self, i, a, n): return self.t.tanh(i[0])
    def op_Sigmoid(self, i, a, n): return self.t.sigmoid(i[0])
    def op_Relu(self, i, a, n): return self.F.relu(i[0])
    def op_LeakyRelu(self, i, a, n): return self.F.leaky_relu(i[0], a.get("alpha", 0.01))

    def op_HardSigmoid(self, i, a, n):
        return self.t.clamp(i[0] * a.get("alpha", 0.2) + a.get("beta", 0.5), 0.0, 1.0)

    def op_HardSwish(self, i, a, n): return self.F.hardswish(i[0])
    def op_Elu(self, i, a, n): return self.F.elu(i[0], a.get("alpha", 1.0))
    def op_Identity(self, i, a, n): return i[0]
    def op_Dropout(self, i, a, n): return i[0]

    def op_Clip(self, i, a, n):
        if self.opset < 11:
            lo, hi = a.get("min"), a.get("max")
        else:
            lo = float(i[1]) if len(i) > 1 and i[1] is not None else None
            hi = float(i[2]) if len(i) > 2 and i[2] is not None else None
        return self.t.clamp(i[0], lo, hi)

    def op_Cast(self, i, a, n):
        import numpy as np
        from onnx import helper
        dt = helper.tensor_dtype_to_np_dtype(a["to"])
        return i[0].to(self.t.from_numpy(np.zeros(1, dt)).dtype)

    # linear
    def op_Gemm(self, i, a, n):
        x = i[0].t() if a.get("transA", 0) else i[0]
        w = i[1].t() if a.get("transB", 0) else i[1]
        alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
        y = self.t.matmul(x, w)
        if alpha != 1.0:
            y = y * alpha
        if len(i) > 2 and i[2] is not None and beta != 0.0:
            y = y + (i[2] * beta if beta != 1.0 else i[2])
        return y

    def op_MatMul(self, i, a, n): return self.t.matmul(i[0], i[1])

    def op_Conv(self, i, a, n):
        self._need(a, "auto_pad", (b"NOTSET", "NOTSET"), "Conv")
        d = i[1].dim() - 2
        conv = {1: self.F.conv1d, 2: self.F.conv2d, 3: self.F.conv3d}.get(d)
        if conv is None or i[0].dim() != d + 2:
            raise ReplayError(f"Conv on rank {i[0].dim()} not in the torch replay")
        p = list(a.get("pads", [0] * (2 * d)))
        x = i[0]
        if p[:d] != p[d:]:
            pad = []
            for k in reversed(range(d)):
                pad += [p[k], p[k + d]]
            x = self.F.pad(x, pad)
            p = [0] * (2 * d)
        return conv(x, i[1], i[2] if len(i) > 2 else None, stride=a.get("strides", [1] * d),
                    padding=p[:d], dilation=a.get("dilations", [1] * d), groups=a.get("group", 1))

    def op_BatchNormalization(self, i, a, n):
        self._need(a, "training_mode", (0,), "BatchNormalization")
        return self.F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0, a.get("epsilon", 1e-5))

    def op_LayerNormalization(self, i, a, n):
        axis = a.get("axis", -1) % i[0].dim()
        shape = i[0].shape[axis:]
        w = i[1].expand(shape) if i[1].shape != shape else i[1]
        b = i[2] if len(i) > 2 and i[2] is not None else None
        if b is not None and b.shape != shape:
            b = b.expand(shape)
        return self.F.layer_norm(i[0], shape, w, b, a.get("epsilon", 1e-5))

    # pooling
    def op_MaxPool(self, i, a, n):
        k, d, s, p = self._pool_args(i, a, n)
        if len(n.output) > 1 and n.output[1]:
            raise ReplayError("MaxPool with Indices not in the torch replay")
        self._need(a, "storage_order", (0,), "MaxPool")
        fn = {1: self.F.max_pool1d, 2: self.F.max_pool2d, 3: self.F.max_pool3d}[d]
        dil = a.get("dilations", [1] * d)
        ceil = bool(a.get("ceil_mode", 0))
        x = i[0]
        if p[:d] != p[d:] or any(p[j] > k[j] // 2 for j in range(d)):
            if ceil:
                raise ReplayError("MaxPool with ceil_mode and uneven pads not in the torch replay")
            pad = []
            for j in reversed(range(d)):
                pad += [p[j], p[j + d]]
            x = self.F.pad(x, pad, value=float("-inf"))
            p = [0] * (2 * d)
        return fn(x, k, s, p[:d], dil, ceil_mode=ceil)

    def op_AveragePool(self, i, a, n):
        k, d, s, p = self._pool_args(i, a, n)
        if d == 3 or p[:d] != p[d:] or any(p[j] > k[j] // 2 for j in range(d)):
            raise ReplayError("AveragePool with these pads not in the torch replay")
        fn = {1: self.F.avg_pool1d, 2: self.F.avg_pool2d}[d]
        return fn(i[0], k, s, p[:d], ceil_mode=bool(a.get("ceil_mode", 0)),
                  count_include_pad=bool(a.get("count_include_pad", 0)))

    def op_GlobalAveragePool(self, i, a, n):
        return i[0].mean(dim=list(range(2, i[0].dim())), keepdim=True)

    def op_GlobalMaxPool(self, i, a, n):
        return self.t.amax(i[0], dim=list(range(2, i[0].dim())), keepdim=True)

    # reductions and normalizations
    def _softmax(self, fn, i, a, n):
        x = i[0]
        if self.opset < 13:
            axis = a.get("axis", 1) % x.dim()
            if axis != x.dim() - 1:  # the old "coerce to 2-D" form
                shape = x.shape
                return fn(x.reshape(*shape[:axis], -1), -1).reshape(shape)
            return fn(x, -1)
        return fn(x, a.get("axis", -1))

    def op_Softmax(self, i, a, n): return self._softmax(self.t.softmax, i, a, n)
    def op_LogSoftmax(self, i, a, n): return self._softmax(self.t.log_softmax, i, a, n)

    def _reduce(self, fn, i, a, n, axes_input_opset):
        axes = self._axes(i, a, 1) if self.opset >= axes_input_opset else a.get("axes")
        keep = bool(a.get("keepdims", 1))
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return i[0]
            axes = list(range(i[0].dim()))
        return fn(i[0], dim=[int(x) for x in axes], keepdim=keep)

    def op_ReduceMean(self, i, a, n): return self._reduce(self.t.mean, i, a, n, 18)
    def op_ReduceSum(self, i, a, n): return self._reduce(self.t.sum, i, a, n, 13)
    def op_ReduceMax(self, i, a, n): return self._reduce(self.t.amax, i, a, n, 18)
    def op_ReduceMin(self, i, a, n): return self._reduce(self.t.amin, i, a, n, 18)

    # shapes and layout
    def op_Constant(self, i, a, n): return a["value"]
    def op_Shape(self, i, a, n):
        dims = list(i[0].shape)[a.get("start", 0):a.get("end", None)]
        return self.t.tensor(dims, dtype=self.t.int64)

    def op_Gather(self, i, a, n):
        axis = a.get("axis", 0) % i[0].dim()
        idx = i[1].long()
        idx = self.t.where(idx < 0, idx + i[0].shape[axis], idx)
        return self.t.index_select(i[0], axis, idx.reshape(-1)).reshape(
            *i[0].shape[:axis], *idx.shape, *i[0].shape[axis + 1:])

    def op_Flatten(self, i, a, n):
        axis = a.get("axis", 1) % (i[0].dim() + 1) if i[0].dim() else 0
        lead = 1
        for v in i[0].shape[:axis]:
            lead *= v
        return i[0].reshape(lead, -1)

    def op_Reshape(self, i, a, n):
        shape = self._ints(i[1])
        if not a.get("allowzero", 0):
            shape = [i[0].shape[k] if v == 0 else v for k, v in enumerate(shape)]
        return i[0].reshape(shape)

    def op_Transpose(self, i, a, n):
        perm = a.get("perm", list(reversed(range(i[0].dim()))))
        return i[0].permute(list(perm))

    def op_Squeeze(self, i, a, n):
        axes = self._axes(i, a, 1)
        if axes is None:
            return self.t.squeeze(i[0])
        y = i[0]
        for ax in sorted((x % i[0].dim() for x in axes), reverse=True):
            y = y.squeeze(ax)
        return y

    def op_Unsqueeze(self, i, a, n):
        axes = self._axes(i, a, 1)
        rank = i[0].dim() + len(axes)
        y = i[0]
        for ax in sorted(x % rank for x in axes):
            y = y.unsqueeze(ax)
        return y

    def op_Concat(self, i, a, n):
        return self.t.cat([x for x in i if x is not None], a["axis"])

    def op_Slice(self, i, a, n):
        if self.opset < 10:
            raise ReplayError("Slice before opset 10 not in the torch replay")
        starts, ends = self._ints(i[1]), self._ints(i[2])
        axes = self._axes(i, a, 3) or list(range(len(starts)))
        steps = self._ints(i[4]) if len(i) > 4 and i[4] is not None else [1] * len(starts)
        index = [slice(None)] * i[0].dim()
        for s, e, ax, st in zip(starts, ends, axes, steps):
            if st <= 0:
                raise ReplayError(f"Slice with step {st} not in the torch replay")
            # Python's slice clamps out-of-range bounds as ONNX does (INT64_MAX ends)
            index[ax % i[0].dim()] = slice(s, e, st)
        return i[0][tuple(index)]

    def op_Split(self, i, a, n):
        axis = a.get("axis", 0)
        if len(i) > 1 and i[1] is not None:
            sizes = self._ints(i[1])
        elif "split" in a:
            sizes = list(a["split"])
        else:
            parts = a.get("num_outputs", len(n.output))
            total = i[0].shape[axis]
            step = -(-total // parts)
            sizes = [min(step, total - k * step) for k in range(parts)]
        return self.t.split(i[0], sizes, axis)


def bench_torch(args, np, feeds, consts, res):
    try:
        import onnx
    except ImportError:
        return "unavailable", "onnx not importable"
    try:
        import torch
    except ImportError:
        return "unavailable", "torch not importable"
    res["torch_version"] = torch.__version__
    torch.set_num_threads(1)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:  # only allowed before the first parallel work
        pass
    try:
        g = TorchGraph(torch, onnx.load(args.model), consts)
        tfeeds = {name: torch.from_numpy(x) for name, x in feeds.items()}
        with torch.inference_mode():
            ys = g(feeds=tfeeds)
            run = lambda: g(feeds=tfeeds)  # noqa: E731
            repeat = round_repeat(run, args.repeat, args.min_round_ms)
            ms = median_ms(run, repeat, args.warmup)
    except ReplayError as e:
        return "unavailable", str(e)
    except Exception as e:
        return "failed", f"torch replay: {type(e).__name__}: {e}"
    for k, y in enumerate(ys):
        np.save(os.path.join(args.out, f"torch_output_{k}.npy"), np.ascontiguousarray(y.numpy()))
    res.update(torch_ms=ms, torch_repeat=repeat, torch_outputs=len(ys))
    return "ok", None


# Report -----------------------------------------------------------------------

def one_line(s):
    return " ".join(str(s).split())[:400]


def write_result(out, res):
    path = os.path.join(out, "result.txt")
    with open(path + ".tmp", "w") as f:
        for key, v in res.items():
            f.write(f"{key}={v!r}\n" if isinstance(v, float) else f"{key}={one_line(v)}\n")
    os.replace(path + ".tmp", path)


def name_file(text, what):
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"bench_reference.py: {what} needs NAME=FILE, not '{text}'")
    return name, path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--input", action="append", default=[], help="NAME=FILE, a runtime input")
    ap.add_argument("--const", action="append", default=[], help="NAME=FILE, a frozen input")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--min-round-ms", type=float, default=200.0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--skip", default="")
    args = ap.parse_args()
    skip = set(s for s in args.skip.split(",") if s)
    os.makedirs(args.out, exist_ok=True)
    res = {}
    try:
        import numpy as np
    except ImportError:
        np = None
    inputs = [name_file(s, "--input") for s in args.input]
    consts = [name_file(s, "--const") for s in args.const]
    for key, fn in (("ort", bench_ort), ("torch", bench_torch)):
        if key in skip:
            status, reason = "unavailable", "skipped (--skip)"
        elif np is None:
            status, reason = "unavailable", "numpy not importable"
        else:
            feeds = {name: np.load(path) for name, path in inputs}
            if key == "ort":
                # ORT takes the frozen inputs as inputs: they are in the model.
                feeds.update((name, np.load(path)) for name, path in consts)
                status, reason = fn(args, np, feeds, res)
            else:
                status, reason = fn(args, np, feeds, {n: np.load(p) for n, p in consts}, res)
        res[key + "_status"] = status
        if reason:
            res[key + "_reason"] = reason
    write_result(args.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
