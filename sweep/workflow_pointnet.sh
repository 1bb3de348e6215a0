#!/usr/bin/env bash
# PointNet classification's fusion-count sweep, in the spirit of HFTA's
# benchmarks/_workflow_pointnet.sh: serial, concurrent and fused training of B = 1..8
# pointnet_cls (fxia22's PointNetCls, 10 classes) on the procedural `shapes` clouds of 1024
# points in minibatches of 32, three repeats of 2 warm-up + 5 timed steps each, then the plots.
# HFTA's fused PointNet rarely beats serial (per-point GEMMs are already large): the sweep says
# where that holds on this machine. Segmentation: MODEL=pointnet_seg (2500 points by default in
# HFTA; pass --npoints 2500).
#
#   sweep/workflow_pointnet.sh                   # results in results/pointnet_cls/
#   HFTA=build-x/hfta OUT=/tmp/r sweep/workflow_pointnet.sh --repeats 1   # later flags win
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_pointnet.sh "${MODEL:-pointnet_cls}" \
  --dataset shapes --npoints 1024 --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 \
  --batch-size 32 --warmup 2 --steps 5 --seed 1 "$@"
