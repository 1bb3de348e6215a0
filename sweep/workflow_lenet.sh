#!/usr/bin/env bash
# LeNet's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_lenet.sh: serial,
# concurrent and fused training of B = 1..32 LeNets on synthetic 28x28 minibatches of 64, three
# repeats of 3 warm-up + 15 timed steps each, then the plots. The step counts keep the whole
# sweep to minutes on a 2-core machine (timings and memory in docs/benchmarks.md, "The sweep
# workflows").
#
#   sweep/workflow_lenet.sh                      # results in results/lenet/
#   HFTA=build-x/hfta OUT=/tmp/r sweep/workflow_lenet.sh --repeats 1   # later flags win
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_lenet.sh lenet --dataset synthetic \
  --modes serial,concurrent,fused --B 1,2,4,8,16,32 --repeats 3 --batch-size 64 --warmup 3 \
  --steps 15 --seed 1 "$@"
