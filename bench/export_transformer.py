"""Exports one torch.nn.TransformerEncoderLayer (batch_first, eval, dropout 0,
ReLU FFN of 4 x d_model, random weights from seed 0) to ONNX (opset 17,
TorchScript exporter), with a seeded random input beside it (OUT without
.onnx, plus _input.npy): the small batch-1 encoder layers where a fixed cost
per node and per GEMM call shows, next to make_models.py's larger hand-built
`transformer`.  fxcc bench times the exported graph in PyTorch by replaying
it (TorchGraph), so only this script needs torch to make the model.

usage: PYTHON bench/export_transformer.py D_MODEL SEQ OUT.onnx
       PYTHON one with torch and onnx; 4 heads, so D_MODEL a multiple of 4."""
import sys

import numpy as np
import torch


class EncoderLayer(torch.nn.Module):
    """The layer called with its flags as Python constants: traced directly,
    the exporter passes is_causal on as a tensor, which
    scaled_dot_product_attention refuses."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        return self.layer(x, src_mask=None, is_causal=False)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    d_model, seq, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    if d_model <= 0 or d_model % 4 or seq <= 0:
        sys.exit(f"D_MODEL must be a positive multiple of 4 and SEQ positive, not {d_model}, {seq}")
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=4 * d_model,
                                             dropout=0.0, batch_first=True).eval()
    example = torch.randn(1, seq, d_model)
    # The fused fast path (aten::_transformer_encoder_layer_fwd) has no ONNX
    # form; without it the exporter writes the layer's MatMuls, Softmax and
    # LayerNormalizations.
    torch.backends.mha.set_fastpath_enabled(False)
    with torch.no_grad():
        torch.onnx.export(EncoderLayer(layer), (example,), out, opset_version=17, dynamo=False,
                          input_names=["input"], output_names=["output"])
    stem = out[:-5] if out.endswith(".onnx") else out
    np.save(stem + "_input.npy",
            np.random.default_rng(0).standard_normal((1, seq, d_model)).astype(np.float32))
    print(f"{out}: d_model {d_model}, seq {seq}, "
          f"{sum(p.numel() for p in layer.parameters()) * 4 / 2**10:.0f} KiB of weights")


if __name__ == "__main__":
    main()
