#!/usr/bin/env python3
"""Writes the two streaming models of tests/recurrent_streaming.py, as such
models ship: torch.onnx.export (the TorchScript exporter, opset 14) of a
module whose recurrent state comes in as graph inputs and goes out as graph
outputs, so that a caller feeds each chunk's state to the next.

- vad_lstm.onnx, a voice-activity detector: a chunk of 8 frames of 40 mel
  features [1, 40, 8] -> Conv1d(40, 32, 3) + ReLU -> LSTM(32, 32) with
  h0/c0 [1, 1, 32] -> Linear(32, 1) + Sigmoid on the last frame: outputs
  prob [1, 1], hn, cn.
- kws_gru.onnx, a keyword spotter: 10 frames of 20 MFCCs [1, 1, 10, 20] ->
  Conv2d(1, 4, 3, stride (1, 2)) + ReLU -> GRU(40, 32) with h0 [1, 1, 32]
  -> Linear(32, 12) on the last frame: outputs logits [1, 12], hn.

Only needed to regenerate the checked-in files (about 50 and 30 KB):
    /work/main/.venv/bin/python tests/recurrent/export_models.py tests/recurrent
"""
import os
import sys

import torch
from torch import nn


class VoiceActivity(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv1d(40, 32, 3, padding=1), nn.ReLU())
        self.lstm = nn.LSTM(32, 32, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x, h0, c0):
        y, (hn, cn) = self.lstm(self.front(x).transpose(1, 2), (h0, c0))
        return torch.sigmoid(self.head(y[:, -1])), hn, cn


class KeywordSpotter(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = nn.Sequential(nn.Conv2d(1, 4, 3, stride=(1, 2), padding=1), nn.ReLU())
        self.gru = nn.GRU(40, 32, batch_first=True)
        self.head = nn.Linear(32, 12)

    def forward(self, x, h0):
        f = self.front(x)  # [1, 4, 10, 10]
        f = f.permute(0, 2, 1, 3).reshape(1, 10, 40)
        y, hn = self.gru(f, h0)
        return self.head(y[:, -1]), hn


def main(out_dir):
    torch.manual_seed(0)
    vad = VoiceActivity().eval()
    torch.onnx.export(vad, (torch.randn(1, 40, 8), torch.zeros(1, 1, 32), torch.zeros(1, 1, 32)),
                      os.path.join(out_dir, "vad_lstm.onnx"), input_names=["x", "h0", "c0"],
                      output_names=["prob", "hn", "cn"], opset_version=14, dynamo=False)
    kws = KeywordSpotter().eval()
    torch.onnx.export(kws, (torch.randn(1, 1, 10, 20), torch.zeros(1, 1, 32)),
                      os.path.join(out_dir, "kws_gru.onnx"), input_names=["x", "h0"],
                      output_names=["logits", "hn"], opset_version=14, dynamo=False)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
