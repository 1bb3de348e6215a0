#!/usr/bin/env bash
# DCGAN's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_dcgan.sh: serial,
# concurrent and fused training of B = 1..8 DCGAN generator/discriminator pairs (PyTorch's
# examples/dcgan, 64x64) on synthetic 3x64x64 minibatches of 64, three repeats of 2 warm-up + 5
# timed steps each (a step: D on real and fake, then G), then the plots. Throughput counts real
# images per second over all models.
#
#   sweep/workflow_dcgan.sh                      # results in results/dcgan/
#   HFTA=build-x/hfta OUT=/tmp/r sweep/workflow_dcgan.sh --image-size 32 --repeats 1
set -euo pipefail
exec "$(dirname "$0")/sweep_workflow.sh" workflow_dcgan.sh dcgan --dataset synthetic \
  --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 --batch-size 64 --warmup 2 \
  --steps 5 --seed 1 "$@"
