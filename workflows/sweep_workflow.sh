#!/usr/bin/env bash
# The skeleton every workflows/workflow_<model>.sh runs: one `hfta sweep` of serial, concurrent and
# fused training over B, in the spirit of HFTA's benchmarks/_workflow_<model>.sh, then where the
# results are. HFTA (the binary) and OUT (the results folder) come from the environment; flags
# after the model's own (the workflow script's arguments) win.
#
#   sweep_workflow.sh <script name> <model> <sweep flags...> -- <user flags...>
set -euo pipefail
script="$1" model="$2"
shift 2
flags=()
while (($#)) && [[ "$1" != "--" ]]; do flags+=("$1"); shift; done
(($#)) && shift
root="$(cd "$(dirname "$0")/.." && pwd)"
hfta="${HFTA:-$root/build/hfta}"
out="${OUT:-results}"
if [[ ! -x "$hfta" ]]; then
  echo "$script: no hfta binary at $hfta: run ./scripts/build.sh first (or set HFTA)" >&2
  exit 1
fi
start=$(date +%s)
"$hfta" sweep --model "$model" --modes serial,concurrent,fused --seed 1 "${flags[@]}" \
  --out "$out" "$@"
echo "$script: done in $(( $(date +%s) - start )) s"
echo "  CSV:   $out/$model/throughput.csv (one row per mode, B and repeat)"
echo "  plots: $out/$model/throughput.png, $out/$model/memory.png (gnuplot script: $out/$model/sweep.gp)"
echo "  logs:  $out/$model/logs/"
