"""Exports a torchvision model with random weights to ONNX (opset 17), and a
seeded random input beside it (OUT without .onnx, plus _input.npy), for the
real-size rows of bench/bench.py and the large-weights figures in
bench/RESULTS.md.  Random weights: the figures are about speed and compile
cost, which depend on the sizes, not the values.  bench.py rebuilds the same
module (seed 0, then the constructor) to time PyTorch eager.

usage: PYTHON bench/export_torchvision.py MODEL OUT.onnx
       MODEL is a torchvision.models name (resnet50, vgg19, ...); PYTHON one
       with torch, torchvision and onnx."""
import sys

import numpy as np
import torch
import torchvision


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    example = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(model, (example,), out, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["logits"])
    stem = out[:-5] if out.endswith(".onnx") else out
    np.save(stem + "_input.npy", np.random.default_rng(0).random((1, 3, 224, 224), np.float32))
    print(f"{out}: {sum(p.numel() for p in model.parameters()) * 4 / 2**20:.1f} MiB of weights")


if __name__ == "__main__":
    main()
