#!/bin/bash
# The GPU machine's one command (docs/cuda.md). Gets the project's binaries (built there from the
# Debian packages carried in .device/, ../shared/device/README.md, or built here by
# scripts/pack_device_binaries.sh and carried in .device/bin.tar.xz), runs every CUDA test and the
# op harness's GPU cases, then times MLP, LeNet and ResNet-18 arrays on the GPU (`hfta sweep
# --device cuda`, HFTA's shapes) and PyTorch's B = 1 beside ours on the same GPU. Results land in
# $RESULTS, bundled at the end into $OUT/gpu_results.tar.gz (the device tool brings back 8 files):
#   tests.txt     one line per test executable: its exit status and gtest's summary
#   <test>.txt    each test executable's output
#   sweep/        the sweeps' throughput.csv and logs;  torch_compare.txt  PyTorch against hfta
#   conv_backends.txt  LeNet and ResNet-18 arrays of 32 with the convolutions on hfta's GEMMs, on
#                 cuDNN (one grouped call: as is, with the backward's atomic algorithms, with
#                 TF32; and B per-model calls) and on hfta's implicit-GEMM
#                 kernels (HFTA_CUDA_CONV), for docs/benchmarks.md's choice of library
#   cpu16/, cpu16.txt  stage cpu16: ResNet-18 and LeNet on the host's cores, fused B=16 against
#                 serial B=1 (CPU_MODELS, CPU_B, CPU_PLANS pick others)
# Steps are bounded by `timeout`, and every timeout by what is left of DEADLINE (seconds from the
# start, default 570: the device tool's 10 minutes a command, with time to bring $OUT back), so a
# hang costs minutes, not the whole lease, and a step that would start too late is skipped and
# says so in tests.txt. STAGES picks what runs, in this order (default "build tests sweep torch
# convs"; "carried" instead of "build" unpacks .device/bin.tar.xz; "cpu16", before the tests,
# sweeps CPU arrays on the host's cores; "profile" times each node of LeNet and ResNet-18 arrays,
# before convs); SWEEP_B the array sizes; JOBS how many test executables share the GPU at once;
# TESTS limits the tests stage to the test_cuda_* executables named (e.g. "model lm");
# CONV_BACKENDS the convs stage's backends.
set -uo pipefail
OUT=${OUT:-/tmp/gpu_check}
RESULTS=${RESULTS:-/tmp/gpu_results}
BUILD=${BUILD:-/tmp/build}
JOBS=${JOBS:-8}
STAGES=${STAGES:-build tests sweep torch convs}
SWEEP_B=${SWEEP_B:-1,2,4,8,16,32}
DEADLINE=${DEADLINE:-570}
mkdir -p "$OUT" "$RESULTS"
# One bundle back, whatever stops the script; tests.txt last, so the tool's output tail shows it.
bundle() {
  tar -czf "$OUT/gpu_results.tar.gz" -C "$RESULTS" .
  cat "$RESULTS/tests.txt" 2>/dev/null
}
trap bundle EXIT
has() { [[ " $STAGES " == *" $1 "* ]]; }
# within LIMIT NAME COMMAND...: runs COMMAND under `timeout` of LIMIT seconds or what is left of
# DEADLINE, whichever is less; with under 15 s left it is skipped, noted in tests.txt as NAME.
within() {
  local limit=$1 name=$2 left=$((DEADLINE - SECONDS))
  shift 2
  if ((left < 15)); then
    echo "$name: skipped, $DEADLINE s deadline reached" | tee -a "$RESULTS/tests.txt"
    return 124
  fi
  timeout $((left < limit ? left : limit)) "$@"
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$RESULTS/gpu.txt" 2>&1

if has build; then
  within 420 build env BUILD="$BUILD" bash .device/build-on-device.sh -DHFTA_CUDA=ON \
    > "$RESULTS/build.log" 2>&1
  echo "build: exit $?" | tee -a "$RESULTS/tests.txt"
fi
P=${P:-/opt/deb}
if has carried; then
  # Binaries built elsewhere (scripts/pack_device_binaries.sh) need the carried packages' shared
  # libraries and, for the tests' compiled-in paths, the source tree where they were built.
  mkdir -p "$P" "$BUILD"
  for f in .device/debs/*.deb; do dpkg -x "$f" "$P"; done
  tar -xJf .device/bin.tar.xz -C "$BUILD"
  source_dir=$(cat .device/source_dir)
  [ -e "$source_dir" ] || { mkdir -p "$(dirname "$source_dir")" && ln -s "$PWD" "$source_dir"; }
  echo "carried: binaries of $(cat .device/commit) unpacked into $BUILD" | tee -a "$RESULTS/tests.txt"
fi
L=$P/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$L:$L/openblas-openmp:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# cuDNN (loaded at run time, backend/cuda/cudnn.h): PyTorch's wheel carries one when the image
# has no system copy.
CUDNN_DIR=$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0] + '/lib')" 2>/dev/null)
[ -n "$CUDNN_DIR" ] && export LD_LIBRARY_PATH=$CUDNN_DIR:$LD_LIBRARY_PATH
[ -x "$BUILD/hfta" ] || { echo "no $BUILD/hfta: the build failed (build.log)"; exit 1; }
"$BUILD/hfta" --version > "$RESULTS/version.txt" 2>&1

if has cpu16; then
  # The host's cores as a many-core CPU (issue 32): fused arrays of CPU_B (default 16) models on
  # all of them under each of CPU_PLANS, against serial B = 1 on all of them (the sweep measures
  # that baseline whatever the modes), three repeats; before the GPU stages, on a quiet host.
  lscpu > "$RESULTS/lscpu.txt" 2>&1
  for m in ${CPU_MODELS:-resnet18 lenet}; do
    batch=64; [[ $m == resnet18 || $m == mobilenetv2 ]] && batch=32
    within 240 "cpu sweep $m" "$BUILD/hfta" sweep --model "$m" --threads "$(nproc)" --modes fused \
      --batch-size "$batch" --B "${CPU_B:-16}" --plan "${CPU_PLANS:-auto,threads:1}" --repeats 3 \
      --steps 10 --no-plot --out "$RESULTS/cpu16" >> "$RESULTS/cpu16.txt" 2>&1
    echo "cpu sweep $m: exit $?" | tee -a "$RESULTS/tests.txt"
  done
fi

if has tests; then
  # test NAME EXECUTABLE [ARGS...]: one test executable, its summary line in tests.txt.
  run_test() {
    local name=$1
    shift
    within 240 "$name" env OMP_NUM_THREADS=$threads_each OMP_WAIT_POLICY=passive "$@" \
      > "$RESULTS/$name.txt" 2>&1
    local status=$?
    echo "$name: exit $status; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$RESULTS/$name.txt" | tr '\n' ' ')" \
      | tee -a "$RESULTS/tests.txt"
  }
  # Up to JOBS executables share the GPU at once (each is small), and the host's cores: the CPU
  # runs some tests compare with would otherwise spin JOBS times nproc OpenMP threads.
  threads_each=$(($(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1))
  start_test() {
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
    run_test "$@" &
  }
  if [ -n "${TESTS:-}" ]; then
    for t in $TESTS; do start_test "test_cuda_$t" "$BUILD/test_cuda_$t"; done
  else
    # The whole-model tests first: they run longest.
    for t in "$BUILD"/test_cuda_model "$BUILD"/test_cuda_lm "$BUILD"/test_cuda_gan "$BUILD"/test_cuda_* \
      "$BUILD/test_device_memory" "$BUILD/test_device_dispatch"; do
      name=$(basename "$t")
      [[ $name == *.* || " ${started:-} " == *" $name "* ]] && continue
      started="${started:-} $name"
      start_test "$name" "$t"
    done
    # The op harness's GPU cases (tests/op_harness.h: the CPU cases' shapes, fused(B) against B
    # reference runs, garbage-filled outputs, fused == serial bit for bit on the device).
    for t in "$BUILD"/test_*; do
      name=$(basename "$t")
      case $name in test_cuda_* | test_device_* | *.*) continue ;; esac
      grep -q OnCuda "$t" && start_test "harness_${name#test_}" "$t" --gtest_filter='OnCuda*'
    done
  fi
  wait
fi

if has sweep; then
  for m in mlp lenet resnet18; do
    batch=64; [ "$m" = resnet18 ] && batch=32
    within 240 "sweep $m" "$BUILD/hfta" sweep --device cuda --model "$m" --batch-size "$batch" \
      --B "$SWEEP_B" --modes serial,fused --repeats 1 --warmup 5 --steps 30 --no-plot \
      --out "$RESULTS/sweep" > "$RESULTS/sweep_$m.txt" 2>&1
    echo "sweep $m: exit $?" | tee -a "$RESULTS/tests.txt"
  done
fi

if has torch; then
  within 240 torch_compare python3 benchmarks/torch_compare.py --hfta "$BUILD/hfta" --device cuda \
    --models mlp,lenet,resnet18 --threads "$(nproc)" --rounds 3 > "$RESULTS/torch_compare.txt" 2>&1
  echo "torch_compare: exit $?" | tee -a "$RESULTS/tests.txt"
fi

if has profile; then
  # Where a step's time goes on the device (HFTA_PROFILE: each node's forward and backward, the
  # stream synchronized around it), for LeNet and ResNet-18 arrays of 1 and 32.
  for m in lenet resnet18; do
    batch=64; [ "$m" = resnet18 ] && batch=32
    for B in 1 32; do
      echo "== $m B=$B" >> "$RESULTS/profile.txt"
      within 60 "profile $m B=$B" env HFTA_PROFILE=1 "$BUILD/hfta" trial --model "$m" \
        --device cuda --plan fused --B "$B" --batch-size "$batch" --warmup 3 --steps 10 \
        >> "$RESULTS/profile.txt" 2>&1
      echo "profile $m B=$B: exit $?" | tee -a "$RESULTS/tests.txt"
    done
  done
fi

if has convs; then
  # cudnn+atomic: the grouped call with the backward's atomic algorithms admitted
  # (HFTA_CUDNN_BACKWARD=atomic); cudnn+tf32: with TF32 tensor cores (HFTA_CUDA_TF32=1).
  for backend in ${CONV_BACKENDS:-gemm cudnn cudnn+atomic cudnn+tf32 cudnn-per-model implicit}; do
    conv=${backend%+*} cudnn_backward=deterministic tf32=0
    [ "$backend" = "$conv+atomic" ] && cudnn_backward=atomic
    [ "$backend" = "$conv+tf32" ] && tf32=1
    for m in lenet resnet18; do
      batch=64; [ "$m" = resnet18 ] && batch=32
      echo "HFTA_CUDA_CONV=$conv HFTA_CUDNN_BACKWARD=$cudnn_backward HFTA_CUDA_TF32=$tf32 $m B=32:" \
        >> "$RESULTS/conv_backends.txt"
      within 180 "conv backend $backend $m" env HFTA_CUDA_CONV="$conv" \
        HFTA_CUDNN_BACKWARD="$cudnn_backward" HFTA_CUDA_TF32="$tf32" "$BUILD/hfta" trial \
        --model "$m" --device cuda --plan fused --B 32 --batch-size "$batch" --warmup 5 \
        --steps 30 >> "$RESULTS/conv_backends.txt" 2>&1
      echo "conv backend $backend $m: exit $?" | tee -a "$RESULTS/tests.txt"
    done
  done
fi

