#!/usr/bin/env bash
# The MLP's fusion-count sweep, in the spirit of HFTA's benchmarks/_workflow_<model>.sh: serial,
# concurrent and fused training of B = 1..64 MLPs (784-256-256-10) on synthetic minibatches of
# 64, three repeats of 50 warm-up + 500 timed steps each, then the plots. Sized to finish in 4-8
# minutes on the 2-core dev machines (an MLP step is 0.25-0.7 ms, so it needs many steps for
# each timed window to dwarf process start-up skew).
#
#   workflows/workflow_mlp.sh                        # results in results/mlp/
#   HFTA=build-x/hfta OUT=/tmp/r workflows/workflow_mlp.sh --repeats 1     # later flags win
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hfta="${HFTA:-$root/build/hfta}"
out="${OUT:-results}"
if [[ ! -x "$hfta" ]]; then
  echo "workflow_mlp.sh: no hfta binary at $hfta: run ./scripts/build.sh first (or set HFTA)" >&2
  exit 1
fi
start=$(date +%s)
"$hfta" sweep --model mlp --dataset synthetic --modes serial,concurrent,fused \
  --B 1,2,4,8,16,32,64 --repeats 3 --batch-size 64 --warmup 50 --steps 500 --seed 1 \
  --out "$out" "$@"
echo "workflow_mlp.sh: done in $(( $(date +%s) - start )) s"
echo "  CSV:   $out/mlp/throughput.csv (one row per mode, B and repeat)"
echo "  plots: $out/mlp/throughput.png, $out/mlp/memory.png (gnuplot script: $out/mlp/sweep.gp)"
echo "  logs:  $out/mlp/logs/"
