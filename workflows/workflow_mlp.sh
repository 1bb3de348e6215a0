#!/usr/bin/env bash
# The MLP's fusion-count sweep: serial, concurrent and fused training of B = 1..64 MLPs
# (784-256-256-10) on synthetic minibatches of 64, three repeats of 50 warm-up + 500 timed steps
# each, then the plots. Sized to finish in 4-8 minutes on the 2-core dev machines (a step is
# well under a millisecond, so it needs many steps for each timed window to dwarf process
# start-up skew).
#
#   workflows/workflow_mlp.sh                        # results in results/mlp/
#   HFTA=build-x/hfta OUT=/tmp/r workflows/workflow_mlp.sh --repeats 1     # later flags win
exec "$(dirname "$0")/sweep_workflow.sh" workflow_mlp.sh mlp --dataset synthetic \
  --B 1,2,4,8,16,32,64 --repeats 3 --batch-size 64 --warmup 50 --steps 500 -- "$@"
