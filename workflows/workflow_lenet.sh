#!/usr/bin/env bash
# LeNet's fusion-count sweep: serial, concurrent and fused training of B = 1..32 LeNets on
# synthetic 28x28 minibatches of 64, three repeats of 3 warm-up + 15 timed steps each, then the
# plots. Sized to finish in 4-7 minutes on the 2-core dev machines (fused B=32 needs ~2.7 GiB and
# concurrent B=32 ~4.4 GiB), up to 2 more when other processes force re-measurements.
#
#   workflows/workflow_lenet.sh                      # results in results/lenet/
#   HFTA=build-x/hfta OUT=/tmp/r workflows/workflow_lenet.sh --repeats 1   # later flags win
exec "$(dirname "$0")/sweep_workflow.sh" workflow_lenet.sh lenet --dataset synthetic \
  --B 1,2,4,8,16,32 --repeats 3 --batch-size 64 --warmup 3 --steps 15 -- "$@"
