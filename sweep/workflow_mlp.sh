#!/usr/bin/env bash
# The MLP's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_<model>.sh: serial,
# concurrent and fused training of B = 1..64 MLPs (784-256-256-10) on synthetic minibatches of
# 64, three repeats of 50 warm-up + 500 timed steps each, then the plots. An MLP step is short,
# so it takes many steps for each timed window to dwarf the skew of process start-up (timings in
# docs/benchmarks.md, "The sweep workflows").
#
#   sweep/workflow_mlp.sh                        # results in results/mlp/
#   HFTA=build-x/hfta OUT=/tmp/r sweep/workflow_mlp.sh --repeats 1     # later flags win
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_mlp.sh mlp --dataset synthetic \
  --modes serial,concurrent,fused --B 1,2,4,8,16,32,64 --repeats 3 --batch-size 64 --warmup 50 \
  --steps 500 --seed 1 "$@"
