#!/usr/bin/env bash
# MobileNetV3's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_mobilenet.sh
# (which sweeps V2 and V3): serial, concurrent and fused training of B = 1..8 MobileNetV3s
# (torchvision's, width 1.0, 10 classes; small by default, MODEL=mobilenetv3_large for the large
# one) on synthetic 3x32x32 minibatches of 64, three repeats of 2 warm-up + 5 timed steps each,
# then the plots (timings and memory in docs/benchmarks.md).
#
#   sweep/workflow_mobilenetv3.sh                # results in results/mobilenetv3_small/
#   MODEL=mobilenetv3_large HFTA=build-x/hfta sweep/workflow_mobilenetv3.sh --repeats 1
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_mobilenetv3.sh "${MODEL:-mobilenetv3_small}" \
  --dataset synthetic --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 --batch-size 64 \
  --warmup 2 --steps 5 --seed 1 "$@"
