"""Exports a torchvision model with random weights to ONNX (opset 17), for the
large-weights figures in bench/RESULTS.md.  Random weights: the figures are
about compile and build cost, which depend on the sizes, not the values.

usage: /work/torchenv/bin/python bench/export_torchvision.py MODEL OUT.onnx
       MODEL is a torchvision.models name (resnet50, vgg19, ...)."""
import sys

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
    print(f"{out}: {sum(p.numel() for p in model.parameters()) * 4 / 2**20:.1f} MiB of weights")


if __name__ == "__main__":
    main()
