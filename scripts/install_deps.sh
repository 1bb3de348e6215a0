#!/usr/bin/env bash
# Installs everything hfta needs from Debian 12's archive (run as root, or with sudo available).
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  libopenblas-openmp-dev   # OpenMP build of OpenBLAS: shares libgomp with oneDNN
  libdnnl-dev              # oneDNN 2.x
  ocl-icd-opencl-dev       # dnnl-config.cmake looks for OpenCL (a Recommends we skip otherwise)
  libomp-dev libfmt-dev libcli11-dev zlib1g-dev
  nlohmann-json3-dev       # checkpoint headers
  libpng-dev               # sample grids of generative models
  libgtest-dev libbenchmark-dev
  clang                    # ThreadSanitizer build (scripts/sanitize.sh thread), fuzz targets
  gnuplot-nox              # plots from `hfta sweep`
  dataset-fashion-mnist    # /usr/share/datasets/fashion-mnist
  fortunes-min fortunes    # plain English text in /usr/share/games/fortunes (language models)
  libopenmpi-dev openmpi-bin  # `mpirun -np K hfta tune` (optional: tune builds without MPI)
  python3-optuna           # `hfta tune --optuna` writes Optuna studies (optional at run time)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
