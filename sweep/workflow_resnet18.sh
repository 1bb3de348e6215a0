#!/usr/bin/env bash
# ResNet-18's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_resnet.sh: serial,
# concurrent and fused training of B = 1..8 ResNet-18s (torchvision's, 10 classes) on synthetic
# 3x32x32 minibatches of 64, three repeats of 2 warm-up + 5 timed steps each, then the plots.
# Sized to finish in minutes on a 2-core machine (timings and memory in docs/benchmarks.md).
#
#   sweep/workflow_resnet18.sh                   # results in results/resnet18/
#   HFTA=build-x/hfta OUT=/tmp/r sweep/workflow_resnet18.sh --repeats 1   # later flags win
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_resnet18.sh resnet18 --dataset synthetic \
  --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 --batch-size 64 --warmup 2 \
  --steps 5 --seed 1 "$@"
