#!/usr/bin/env bash
# Configures and builds hfta (Release) into ./build. Where the CUDA toolkit is installed
# (/usr/local/cuda/bin/nvcc) the CUDA backend is built too, so that it keeps compiling (its GPU
# tests skip without a device; docs/cuda.md); pass -DHFTA_CUDA=OFF to leave it out.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=()
if [[ -x /usr/local/cuda/bin/nvcc && " $* " != *" -DHFTA_CUDA="* ]]; then cuda=(-DHFTA_CUDA=ON); fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cuda[@]}" "$@" >/dev/null
cmake --build build -j"$(nproc)"
