#!/usr/bin/env python3
"""Streaming recurrent models, compiled, against ONNX Runtime chunk by chunk.

The two PyTorch exports in tests/recurrent/ (export_models.py says how they
were made; they are checked in, so this test needs no torch): a voice
activity detector (Conv1d + LSTM whose h/c are graph inputs and outputs +
Linear + Sigmoid) and a keyword spotter (Conv2d + GRU with its h + Linear).
Each is compiled with default flags (`fxcc compile`, -O2) for the host and
for --target portable and linked with a small C driver that calls NAME_run
for 50 chunks, feeding each call's state outputs back as the next call's
state inputs, both from separate buffers (ping-pong) and from the same
buffer (in place: the state's only reader is the recurrent node).  ONNX
Runtime runs the same 50 chunks feeding back its own state; every chunk's
outputs (the head's and the state) must agree within 1e-4 + 1e-4 x max |ref|.

usage: recurrent_streaming.py FXCC WORK    (exit 77: no numpy/onnxruntime/cc)
"""
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnxruntime as ort
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

FXCC, WORK = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
CHUNKS = 50
MODELS = ["vad_lstm", "kws_gru"]  # input k >= 1 is the state that output k returns
failures = []

if not shutil.which("cc"):
    print("skipped: no cc")
    sys.exit(77)


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        failures.append(what)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    return r.returncode, r.stdout + r.stderr


DRIVER = r"""
/* Streams CHUNKS chunks through NAME_run, the state fed back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "NAME.h"

static unsigned char arena[NAME_ARENA_BYTES > 0 ? NAME_ARENA_BYTES : 1]
    __attribute__((aligned(64)));

int main(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int chunks = atoi(argv[3]), in_place = strcmp(argv[4], "inplace") == 0;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (!in || !out)
        return 2;
    float *x = calloc(NAME_input_sizes[0], sizeof(float));
    float *head = calloc(NAME_output_sizes[0], sizeof(float));
    float *state[2][NAME_NUM_INPUTS];
    for (int k = 1; k < NAME_NUM_INPUTS; k++) {
        state[0][k] = calloc(NAME_input_sizes[k], sizeof(float)); /* zero state */
        state[1][k] = calloc(NAME_input_sizes[k], sizeof(float));
    }
    int cur = 0;
    for (int c = 0; c < chunks; c++) {
        if (fread(x, sizeof(float), NAME_input_sizes[0], in) != NAME_input_sizes[0])
            return 3;
        const void *inputs[NAME_NUM_INPUTS];
        void *outputs[NAME_NUM_OUTPUTS];
        inputs[0] = x;
        outputs[0] = head;
        for (int k = 1; k < NAME_NUM_INPUTS; k++) {
            inputs[k] = state[cur][k];
            outputs[k] = state[in_place ? cur : 1 - cur][k];
        }
        if (NAME_run(inputs, outputs, arena) != 0)
            return 4;
        if (!in_place)
            cur = 1 - cur;
        fwrite(head, sizeof(float), NAME_output_sizes[0], out);
        for (int k = 1; k < NAME_NUM_OUTPUTS; k++)
            fwrite(state[cur][k], sizeof(float), NAME_output_sizes[k], out);
    }
    fclose(out);
    fclose(in);
    return 0;
}
"""


def ort_stream(path, chunks):
    s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ins = s.get_inputs()
    state = [np.zeros(i.shape, np.float32) for i in ins[1:]]
    results = []
    for x in chunks:
        outs = s.run(None, {ins[0].name: x, **{i.name: v for i, v in zip(ins[1:], state)}})
        state = outs[1:]
        results.append(outs)
    return results


def build(model, target, work):
    """fxcc compile + the driver; returns the driver's path or None."""
    src = os.path.join(work, "src")
    rc, out = run([FXCC, "compile", os.path.join(HERE, "recurrent", model + ".onnx"), "-o", src,
                   "--name", model, "--target", target])
    check(rc == 0, f"{model} {target}: fxcc compile ({rc}) {out[-300:] if rc else ''}")
    if rc:
        return None
    with open(os.path.join(work, "driver.c"), "w") as f:
        f.write(DRIVER.replace("NAME", model))
    sources = [os.path.join(work, "driver.c"), os.path.join(src, model + ".c")]
    sources += [os.path.join(src, f) for f in sorted(os.listdir(src))
                if f.startswith(model + "_weights") and f.endswith((".c", ".S"))]
    rt = os.path.join(src, "fxrt")
    sources += [os.path.join(rt, f) for f in sorted(os.listdir(rt)) if f.endswith(".c")]
    flags = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-I", src, "-I", rt]
    libs = ["-lm"]
    if target == "host":
        flags += ["-DFXRT_USE_CBLAS"] + run(["pkg-config", "--cflags", "openblas"])[1].split()
        libs = run(["pkg-config", "--libs", "openblas"])[1].split() + libs
    exe = os.path.join(work, "stream")
    rc, out = run(["cc", *flags, *sources, "-o", exe, *libs])
    check(rc == 0, f"{model} {target}: the driver builds with -std=c99 -Wall -Wextra -Werror "
                   f"({rc}) {out[-500:] if rc else ''}")
    return exe if rc == 0 else None


os.makedirs(WORK, exist_ok=True)
for m, model in enumerate(MODELS):
    path = os.path.join(HERE, "recurrent", model + ".onnx")
    shape = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_inputs()[0].shape
    rng = np.random.default_rng(m)
    # a slowly varying signal, so that the state matters across chunks
    base = rng.standard_normal(shape).astype(np.float32)
    chunks = [(base * np.float32(np.sin(0.3 * c)) +
               0.5 * rng.standard_normal(shape)).astype(np.float32) for c in range(CHUNKS)]
    refs = ort_stream(path, chunks)
    for target in ("host", "portable"):
        work = os.path.join(WORK, f"{model}_{target}")
        os.makedirs(work, exist_ok=True)
        exe = build(model, target, work)
        if not exe:
            continue
        chunk_file = os.path.join(work, "chunks.bin")
        np.concatenate([c.ravel() for c in chunks]).tofile(chunk_file)
        for mode in ("pingpong", "inplace"):
            out_file = os.path.join(work, f"out_{mode}.bin")
            rc, out = run([exe, chunk_file, out_file, str(CHUNKS), mode])
            check(rc == 0, f"{model} {target} {mode}: {CHUNKS} chunks run ({rc})")
            if rc:
                continue
            got = np.fromfile(out_file, np.float32)
            per_chunk = sum(o.size for o in refs[0])
            check(got.size == per_chunk * CHUNKS, f"{model} {target} {mode}: output size")
            if got.size != per_chunk * CHUNKS:
                continue
            worst, worst_chunk = 0.0, -1
            ok = True
            for c in range(CHUNKS):
                pos = c * per_chunk
                for ref in refs[c]:
                    mine = got[pos:pos + ref.size].reshape(ref.shape)
                    pos += ref.size
                    err = float(np.abs(mine - ref).max())
                    if err > worst:
                        worst, worst_chunk = err, c
                    ok &= err <= 1e-4 + 1e-4 * float(np.abs(ref).max())
            check(ok, f"{model} {target} {mode}: every output of all {CHUNKS} chunks vs ONNX "
                      f"Runtime (worst max abs {worst:.3g}, chunk {worst_chunk})")

print(f"{len(failures)} failed" if failures else "all streaming checks passed")
sys.exit(1 if failures else 0)
