#!/usr/bin/env python3
"""The README's main job: compile the bundled digits classifier with fxcc,
build the generated C, run it and fxcc's interpreter on the held-out test
split, and print the accuracy and the time per inference of both.

usage: digits_demo.py FXCC WORK_DIR
"""
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "examples", "digits")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def ms_per_run(stderr):
    m = re.search(r"ms_per_run=([0-9.]+)", stderr)
    if not m:
        sys.exit("no ms_per_run in: " + stderr)
    return float(m.group(1))


def main():
    fxcc, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    model = os.path.join(EXAMPLE, "digits.onnx")
    images = np.load(os.path.join(EXAMPLE, "test_images.npy"))
    labels = np.load(os.path.join(EXAMPLE, "test_labels.npy"))
    out_c = os.path.join(work, "digits_c")
    print(f"== fxcc compile {os.path.relpath(model)} -o {out_c} --emit-main")
    print(run([fxcc, "compile", model, "-o", out_c, "--name", "digits", "--emit-main"]).stdout.strip())
    run(["cmake", "-S", out_c, "-B", os.path.join(out_c, "build"), "-DCMAKE_BUILD_TYPE=Release"])
    run(["cmake", "--build", os.path.join(out_c, "build")])
    main_exe = os.path.join(out_c, "build", "main")

    inputs = os.path.join(work, "digits_inputs")
    os.makedirs(inputs, exist_ok=True)
    correct = {"C": 0, "interpreter": 0}
    for i, image in enumerate(images):
        path = os.path.join(inputs, f"image_{i}.npy")
        np.save(path, image.reshape(1, 64).astype(np.float32))
        for kind, cmd in (("C", [main_exe]), ("interpreter", [fxcc, "run", model])):
            out = os.path.join(work, f"out_{kind}")
            run(cmd + ["-o", out, path] if kind == "C" else cmd + [path, "-o", out])
            probs = np.load(os.path.join(out, "output_0.npy"))
            correct[kind] += int(np.argmax(probs) == labels[i])
    n = len(labels)
    first = os.path.join(inputs, "image_0.npy")
    t_c = ms_per_run(run([main_exe, "--repeat", "2000", "-o", os.path.join(work, "out_C"), first]).stderr)
    t_i = ms_per_run(run([fxcc, "run", model, first, "-o", os.path.join(work, "out_interpreter"),
                          "--repeat", "2000"]).stderr)
    print(f"\ndigits test split: {n} images (8x8, scikit-learn load_digits)")
    print(f"  generated C : accuracy {correct['C'] / n:.3f}  {t_c * 1000:8.2f} us per inference")
    print(f"  interpreter : accuracy {correct['interpreter'] / n:.3f}  {t_i * 1000:8.2f} us per inference")
    if correct["C"] != correct["interpreter"]:
        sys.exit("the generated C and the interpreter disagree")


if __name__ == "__main__":
    main()
