#!/usr/bin/env bash
# LeNet's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_lenet.sh: serial,
# concurrent and fused training of B = 1..32 LeNets on synthetic 28x28 minibatches of 64, three
# repeats of 3 warm-up + 15 timed steps each, then the plots. Sized to finish in 4-7 minutes on
# the 2-core dev machines (one LeNet step is 17 ms on the Zen 5, 31 ms on the Xeon; fused B=32
# needs ~2.7 GiB and concurrent B=32 ~4.4 GiB), up to 2 more when other processes force
# re-measurements.
#
#   workflows/workflow_lenet.sh                      # results in results/lenet/
#   HFTA=build-x/hfta OUT=/tmp/r workflows/workflow_lenet.sh --repeats 1   # later flags win
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hfta="${HFTA:-$root/build/hfta}"
out="${OUT:-results}"
if [[ ! -x "$hfta" ]]; then
  echo "workflow_lenet.sh: no hfta binary at $hfta: run ./scripts/build.sh first (or set HFTA)" >&2
  exit 1
fi
start=$(date +%s)
"$hfta" sweep --model lenet --dataset synthetic --modes serial,concurrent,fused \
  --B 1,2,4,8,16,32 --repeats 3 --batch-size 64 --warmup 3 --steps 15 --seed 1 \
  --out "$out" "$@"
echo "workflow_lenet.sh: done in $(( $(date +%s) - start )) s"
echo "  CSV:   $out/lenet/throughput.csv (one row per mode, B and repeat)"
echo "  plots: $out/lenet/throughput.png, $out/lenet/memory.png (gnuplot script: $out/lenet/sweep.gp)"
echo "  logs:  $out/lenet/logs/"
