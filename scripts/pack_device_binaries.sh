#!/bin/bash
# Packs what scripts/gpu_check.sh runs (hfta, op_bench, the CUDA tests and every test executable
# with OnCuda harness suites), built here, into .device/bin.tar.xz for the GPU machine, so that a
# call there spends its device time testing instead of compiling (`STAGES="carried tests ..."`).
# The binaries are stripped; the tests' compiled-in source directory and the commit travel beside
# them (.device/source_dir, .device/commit). Run from the project root after building:
#   scripts/pack_device_binaries.sh [BUILD_DIR]      (default build/)
set -euo pipefail
BUILD=${1:-build}
grep -q "^HFTA_CUDA:BOOL=ON" "$BUILD/CMakeCache.txt" ||
  { echo "$BUILD has no CUDA backend: configure it with -DHFTA_CUDA=ON" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for f in "$BUILD"/hfta "$BUILD"/op_bench "$BUILD"/test_*; do
  name=$(basename "$f")
  [[ -x $f && -f $f && $name != *.* ]] || continue
  case $name in
    hfta | op_bench | test_cuda_* | test_device_*) ;;
    *) grep -q OnCuda "$f" || continue ;;
  esac
  strip -o "$stage/$name" "$f"
done
mkdir -p .device
tar -C "$stage" -cf - . | xz -T0 -6 > .device/bin.tar.xz
sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" > .device/source_dir
git describe --always --dirty > .device/commit
echo "$(ls "$stage" | wc -l) executables, $(du -h .device/bin.tar.xz | cut -f1) in .device/bin.tar.xz"
