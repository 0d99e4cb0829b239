#!/usr/bin/env bash
# Installs what fxcc needs on a Debian machine, skipping what is already there:
# the system packages (compiler, CMake, protobuf-c, the ONNX schema and backend
# test data, OpenBLAS, Check, clang for the fuzzers, the Arm cross compiler
# and QEMU to run its firmware)
# and, for the scripts that make test models and run benchmarks, a Python
# virtual environment in .venv with onnx, onnxruntime, numpy and scikit-learn.
# Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake pkg-config
          libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata
          libopenblas-dev check clang libclang-rt-dev
          gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm
          python3 python3-venv python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import onnx, onnxruntime, numpy, sklearn" 2>/dev/null; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check onnx onnxruntime numpy scikit-learn
fi
