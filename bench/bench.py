#!/usr/bin/env python3
"""Benchmarks fxcc's generated C against its interpreter, ONNX Runtime and
(when it imports) PyTorch eager, single-threaded, batch 1.

For each model (made by bench/make_models.py into WORK/models if missing):

  C       fxcc compile MODEL -o WORK/NAME/c --emit-main (-O2, the default), a
          CMake Release build, then `main --repeat N -o OUT INPUT`; ms_per_run=X
          on stderr
  C -O0   the same with `fxcc compile -O0`: no optimization passes
  interp  fxcc run MODEL INPUT -o OUT --repeat N; ms_per_run=X on stderr
  ORT     onnxruntime, 1 intra-op and 1 inter-op thread, ORT_ENABLE_ALL,
          median of N runs after warm-up, minus the median of an Identity
          model on the same input (the Python binding's cost per call, which
          the C side does not pay)
  torch   the ONNX graph replayed op by op with torch functional calls
          (TorchGraph of tools/bench_reference.py, shared with fxcc bench), or
          for the torchvision models the torchvision module itself, median
          of N runs (only when torch imports)

The torchvision models (TORCHVISION_MODELS, random weights) are exported by
bench/export_torchvision.py on first use, which needs torch and torchvision
in the Python that runs this script.

Both C variants are built before any timing; then every backend is timed in
--rounds alternating rounds (default 3) and keeps its best round's median, so
that a slow spell of a shared machine does not land on one backend alone.

The C and interpreter outputs are compared with ONNX Runtime's before any
time is reported: past 1e-3 relative error (max abs error divided by the
largest reference magnitude) the model is marked WRONG, its times are left
out and the script exits with status 1.  A backend that fails to build or
run is marked FAIL the same way.  OPENBLAS_NUM_THREADS=1 and OMP_NUM_THREADS=1
are set for everything; OPENBLAS_CORETYPE is never changed (it is only
reported).  --out FILE appends the table to FILE with the date, `uname -a`,
the CPU model and the OpenBLAS core type.

usage: bench.py [--fxcc PATH] [--models a,b] [--repeat N] [--rounds R] [--out FILE]
                [--work DIR] [--skip c,c0,interp,ort,torch]
"""
import os

# Before numpy/onnxruntime load OpenBLAS or OpenMP: one thread everywhere.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OMP_NUM_THREADS"] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The torch replay of an ONNX graph is shared with `fxcc bench`, whose binary
# embeds tools/bench_reference.py: one copy, there.
sys.path.insert(0, os.path.join(ROOT, "tools"))
from bench_reference import ReplayError, TorchGraph  # noqa: E402
DEFAULT_MODELS = ["mlp", "lenet", "resnet8", "dscnn_kws", "mobilenetv2", "transformer"]
# Also accepted by --models: the trained example from scripts/train_digits.py.
EXTRA_MODELS = {"digits": os.path.join(ROOT, "examples", "digits", "digits.onnx")}
# Real-size networks, exported from torchvision with random weights (seed 0).
TORCHVISION_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "efficientnet_b0", "googlenet",
                      "densenet121", "convnext_tiny", "shufflenet_v2_x1_0", "squeezenet1_1"]
RTOL = 1e-3
TIMEOUT = 1800  # seconds for any one command (mobilenetv2's build is the slow one)
MS_RE = re.compile(r"ms_per_run=([0-9.eE+-]+)")


class BenchError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(cmd, what, cwd=None):
    """Runs cmd single-threaded; returns its stderr; raises BenchError on failure."""
    log("  $ " + " ".join(cmd))
    try:
        p = subprocess.run(cmd, cwd=cwd, env=os.environ.copy(), capture_output=True, text=True,
                           timeout=TIMEOUT)
    except FileNotFoundError as e:
        raise BenchError(f"{what}: {e}") from None
    except subprocess.TimeoutExpired:
        raise BenchError(f"{what}: timed out after {TIMEOUT} s") from None
    if p.returncode != 0:
        tail = "\n".join((p.stderr or p.stdout).strip().splitlines()[-15:])
        raise BenchError(f"{what} failed (exit {p.returncode}):\n{tail}")
    return p.stderr


def parse_ms(stderr, what):
    m = MS_RE.findall(stderr)
    if not m:
        raise BenchError(f"{what}: no ms_per_run=X on stderr:\n{stderr.strip()[-800:]}")
    return float(m[-1])


def read_output(out):
    """The first output written to out: a .npy file, or out/output_0.npy."""
    path = os.path.join(out, "output_0.npy") if os.path.isdir(out) else out
    if not os.path.isfile(path):
        raise BenchError(f"no output at {out}")
    return np.load(path)


def compare(y, ref, what):
    """Max abs error vs the reference; raises BenchError past RTOL relative."""
    if y.shape != ref.shape:
        y = y.reshape(ref.shape) if y.size == ref.size else y
        if y.shape != ref.shape:
            raise BenchError(f"{what}: output shape {list(y.shape)}, ORT gives {list(ref.shape)}")
    err = float(np.max(np.abs(y.astype(np.float64) - ref.astype(np.float64))))
    scale = max(float(np.max(np.abs(ref))), 1e-30)
    if not np.isfinite(err) or err / scale > RTOL:
        raise BenchError(f"{what}: WRONG output, max abs err {err:.3g} "
                         f"({err / scale:.3g} relative to max |ref| {scale:.3g}, limit {RTOL:g})")
    return err


# Backends ---------------------------------------------------------------------

def build_c(fxcc, model, work, level):
    """Compiles MODEL at -O<level> and builds its main; returns the executable."""
    cdir = os.path.join(work, f"c_O{level}")
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    run_cmd([fxcc, "compile", model, "-o", cdir, "--emit-main", f"-O{level}"], "fxcc compile")
    t1 = time.perf_counter()
    bdir = os.path.join(cdir, "build")
    run_cmd(["cmake", "-S", cdir, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release"], "cmake configure")
    run_cmd(["cmake", "--build", bdir, "-j", str(os.cpu_count() or 1)], "cmake build")
    t2 = time.perf_counter()
    exe = os.path.join(bdir, "main")
    if not os.path.isfile(exe):
        raise BenchError(f"the build made no {exe}")
    log(f"  -O{level}: compile {t1 - t0:.2f} s, C build {t2 - t1:.2f} s")
    return exe


def run_c(exe, inp, work, level, repeat):
    out = os.path.join(work, f"c_O{level}_out")
    _remove(out)
    os.makedirs(out)  # the generated main writes OUT/output_K.npy into an existing folder
    err = run_cmd([exe, "--repeat", str(repeat), "-o", out, inp], "generated main")
    return parse_ms(err, "generated main"), read_output(out)


def bench_interp(fxcc, model, inp, work, repeat):
    out = os.path.join(work, "interp_out")
    _remove(out)
    os.makedirs(work, exist_ok=True)
    err = run_cmd([fxcc, "run", model, inp, "-o", out, "--repeat", str(repeat)], "fxcc run")
    return parse_ms(err, "fxcc run"), read_output(out)


def _median_ms(fn, repeat, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def ort_session(model):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def binding_cost_ms(x, repeat, warmup):
    """ORT's per-call cost from Python: the median of an Identity model on
    x, which the C side's timing has no counterpart of."""
    import onnx.helper as h
    t = h.make_tensor_value_info("x", onnx.helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
    y = h.make_tensor_value_info("y", onnx.helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape))
    g = h.make_graph([h.make_node("Identity", ["x"], ["y"])], "identity", [t], [y])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    sess = ort_session(m.SerializeToString())
    return _median_ms(lambda: sess.run(None, {"x": x}), max(repeat, 50), warmup)


def torchvision_module(torch, name):
    """The module bench/export_torchvision.py exported, with the same weights
    (the same seed before the same constructor)."""
    import torchvision
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval()


def time_torch(torch, run, x, repeat, warmup):
    xt = torch.from_numpy(x)
    with torch.inference_mode():
        y = run(xt).numpy()
        ms = _median_ms(lambda: run(xt), repeat, warmup)
    return ms, y


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


# Report -------------------------------------------------------------------------

def fmt_ms(v):
    if isinstance(v, str):
        return v
    return f"{v:.3f}" if v < 10 else f"{v:.2f}" if v < 1000 else f"{v:.0f}"


def fmt_ratio(v, c):
    if isinstance(v, str) or isinstance(c, str) or c <= 0:
        return "-"
    return f"{v / c:.2f}x"


def table(rows, with_torch):
    cols = ["model", "C ms", "C -O0 ms", "interp ms", "ORT ms"] + \
        (["torch ms"] if with_torch else []) + ["O0/O2", "interp/C", "ORT/C"] + \
        (["torch/C"] if with_torch else []) + ["max err C", "max err C -O0", "max err interp"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in rows:
        c = r["c"]
        cells = [r["model"], fmt_ms(c), fmt_ms(r["c0"]), fmt_ms(r["interp"]), fmt_ms(r["ort"])]
        if with_torch:
            cells.append(fmt_ms(r["torch"]))
        cells += [fmt_ratio(r["c0"], c), fmt_ratio(r["interp"], c), fmt_ratio(r["ort"], c)]
        if with_torch:
            cells.append(fmt_ratio(r["torch"], c))
        cells += [r["err_c"], r["err_c0"], r["err_interp"]]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return platform.processor() or "unknown"
    for key in ("model name", "Model", "Hardware", "CPU part"):
        m = re.search(rf"^{key}\s*:\s*(.+)$", info, re.M)
        if m:
            return m.group(1).strip()
    return "unknown"


def git_rev():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip() or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def header(args, torch):
    uname = " ".join(platform.uname())
    try:
        uname = subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    lines = [
        f"## {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} (fxcc {git_rev()})",
        "",
        f"- uname: `{uname}`",
        f"- CPU: {cpu_model()}",
        f"- OPENBLAS_CORETYPE: {os.environ.get('OPENBLAS_CORETYPE') or 'auto'}",
        f"- threads: 1 (OPENBLAS_NUM_THREADS=1, OMP_NUM_THREADS=1, ORT intra/inter op 1)",
        "- ORT timed from Python, minus the median of an Identity model on the same input "
        "(the binding's cost per call)",
        f"- repeat: {args.repeat} runs per round (more for fast models, so that a round lasts "
        f"about {args.min_round_ms:g} ms), best of {args.rounds} alternating rounds; "
        f"onnxruntime {ort.__version__}"
        + (f", torch {torch.__version__}" if torch else ", torch not installed"),
    ]
    return "\n".join(lines)


# Main ---------------------------------------------------------------------------

def model_repeat(args, sess, feed):
    """--repeat, raised for a model of microseconds until one round of one
    backend lasts about --min-round-ms: a median of 50 runs of 20 us is one
    millisecond of machine time, which a slow spell of the machine covers
    whole.  ORT's time estimates the model's."""
    if sess is None or args.min_round_ms <= 0:
        return args.repeat
    est = _median_ms(lambda: sess.run(None, feed), 5, 1)
    return max(args.repeat, min(5000, int(args.min_round_ms / max(est, 1e-3))))


def ensure_models(names, models_dir):
    def missing(n):
        return not (os.path.isfile(os.path.join(models_dir, n + ".onnx"))
                    and os.path.isfile(os.path.join(models_dir, n + "_input.npy")))
    made = [n for n in names if n in DEFAULT_MODELS and missing(n)]
    if made:
        log(f"making {', '.join(made)} in {models_dir}")
        subprocess.run([sys.executable, os.path.join(HERE, "make_models.py"), models_dir,
                        "--models", ",".join(made)], check=True)
    for n in names:
        if n in TORCHVISION_MODELS and missing(n):
            log(f"exporting {n} to {models_dir}")
            os.makedirs(models_dir, exist_ok=True)
            subprocess.run([sys.executable, os.path.join(HERE, "export_torchvision.py"), n,
                            os.path.join(models_dir, n + ".onnx")], check=True)


def model_paths(name, models_dir, work):
    if name in EXTRA_MODELS:
        model = EXTRA_MODELS[name]
        images = np.load(os.path.join(os.path.dirname(model), "test_images.npy"))
        inp = os.path.join(work, name + "_input.npy")
        os.makedirs(work, exist_ok=True)
        np.save(inp, images[:1])
        return model, inp
    return os.path.join(models_dir, name + ".onnx"), os.path.join(models_dir, name + "_input.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fxcc", default="build/fxcc",
                    help="fxcc binary (default build/fxcc, relative to the current folder, "
                         "else to the repository root)")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated; known: " + ", ".join(DEFAULT_MODELS + list(EXTRA_MODELS)
                                                                + TORCHVISION_MODELS))
    ap.add_argument("--repeat", type=int, default=20, help="timed runs per backend (default 20)")
    ap.add_argument("--min-round-ms", type=float, default=200.0,
                    help="raise a fast model's repeat count until a round lasts this long "
                         "(estimated from ONNX Runtime; default 200)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs before ORT/torch timing")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating timing rounds per model; each backend keeps its best "
                         "round's median (default 3)")
    ap.add_argument("--out", help="append the table to this markdown file (e.g. bench/RESULTS.md)")
    ap.add_argument("--work", default=os.path.join("/tmp", f"fxcc-bench-{os.getuid()}"),
                    help="scratch folder for models, generated C and outputs")
    ap.add_argument("--models-dir", help="where the .onnx/_input.npy files are (default WORK/models)")
    ap.add_argument("--skip", default="",
                    help="comma-separated backends to skip: c,c0,interp,ort,torch")
    args = ap.parse_args()

    names = [m for m in args.models.split(",") if m]
    for m in names:
        if m not in DEFAULT_MODELS and m not in EXTRA_MODELS and m not in TORCHVISION_MODELS:
            ap.error(f"unknown model '{m}'")
    skip = set(s for s in args.skip.split(",") if s)
    backends = {"c", "c0", "interp", "ort", "torch"}
    if skip - backends:
        ap.error(f"unknown backend in --skip: {','.join(skip - backends)}")
    if "ort" in skip and not ({"c", "c0", "interp"} <= skip):
        ap.error("ORT is the reference the outputs are checked against; it cannot be skipped")
    fxcc = args.fxcc
    if not os.path.isabs(fxcc) and not os.path.exists(fxcc):
        fxcc = os.path.join(ROOT, fxcc)
    fxcc = os.path.abspath(fxcc)
    if not ({"c", "c0", "interp"} <= skip) and not os.access(fxcc, os.X_OK):
        sys.exit(f"bench: no fxcc binary at {fxcc} (build it, or pass --fxcc PATH)")

    torch = None
    if "torch" not in skip:
        try:
            import torch  # noqa: F811
            torch.set_num_threads(1)
            torch.set_num_interop_threads(1)
        except ImportError:
            torch = None

    models_dir = args.models_dir or os.path.join(args.work, "models")
    ensure_models(names, models_dir)

    rows, failures = [], []
    for name in names:
        log(f"== {name}")
        work = os.path.join(args.work, name)
        model, inp = model_paths(name, models_dir, work)
        x = np.load(inp)
        r = {"model": name, "c": "-", "c0": "-", "interp": "-", "ort": "-", "torch": "-",
             "err_c": "-", "err_c0": "-", "err_interp": "-"}
        # Everything is built before anything is timed, and the backends are
        # timed in alternating rounds, each keeping its best round: on a shared
        # machine a slow spell (another tenant, write-back after a build) then
        # hits one round of every backend instead of all of one backend's runs.
        sess = feed = ref = tgraph = None
        binding = 0.0
        if "ort" not in skip:
            sess = ort_session(model)
            feed = {sess.get_inputs()[0].name: x}
            (ref,) = sess.run(None, feed)[:1]
        repeat = model_repeat(args, sess, feed)
        if sess is not None:
            binding = binding_cost_ms(x, repeat, args.warmup)
            r["binding"] = binding
            log(f"  ORT's Python binding: {binding * 1e3:.1f} us per call, subtracted")
        runners = {}
        for key, level in (("c", 2), ("c0", 0)):
            if key in skip:
                continue
            try:
                exe = build_c(fxcc, model, work, level)
                runners[key] = (lambda e=exe, lv=level: run_c(e, inp, work, lv, repeat))
            except BenchError as e:
                r[key] = r["err_" + key] = "FAIL"
                failures.append(f"{name} [{key}]: {e}")
                log(f"  {key}: {e}")
        if "interp" not in skip:
            runners["interp"] = lambda: bench_interp(fxcc, model, inp, work, repeat)
        if torch is not None:
            try:
                if name in TORCHVISION_MODELS:
                    tgraph = torchvision_module(torch, name)
                else:
                    replay = TorchGraph(torch, onnx.load(model))
                    tgraph = lambda x, g=replay: g(x)[0]  # noqa: E731 (its first output)
            except (BenchError, ReplayError, ImportError) as e:
                r["torch"] = "FAIL"
                log(f"  torch: {e}")  # torch is a reference point, not fxcc: no exit status
        best = {}
        for round_ in range(args.rounds):
            if sess is not None:
                ms = _median_ms(lambda: sess.run(None, feed), repeat, args.warmup) - binding
                best["ort"] = min(best.get("ort", ms), ms)
            for key in list(runners):
                try:
                    ms, y = runners[key]()
                    if round_ == 0:
                        r["err_" + key] = f"{compare(y, ref, key):.2e}"
                    best[key] = min(best.get(key, ms), ms)
                except BenchError as e:
                    msg = str(e)
                    r[key] = "WRONG" if "WRONG" in msg else "FAIL"
                    r["err_" + key] = r[key]
                    failures.append(f"{name} [{key}]: {msg}")
                    log(f"  {key}: {msg}")
                    del runners[key]
            if tgraph is not None:
                try:
                    ms, yt = time_torch(torch, tgraph, x, repeat, args.warmup)
                    if round_ == 0:
                        compare(yt, ref, "torch")
                    best["torch"] = min(best.get("torch", ms), ms)
                except (BenchError, ReplayError) as e:
                    r["torch"] = "FAIL"
                    log(f"  torch: {e}")
                    tgraph = None
        for key, ms in best.items():
            if r[key] == "-":
                r[key] = ms
                log(f"  {key} {ms:.3f} ms" + (f", max err {r['err_' + key]}"
                                               if ("err_" + key) in r else ""))
        rows.append(r)

    text = table(rows, torch is not None)
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(header(args, torch) + "\n\n" + text + "\n\n")
        log(f"appended to {args.out}")
    if failures:
        log("\nFAILED:\n" + "\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
