#!/usr/bin/env bash
# The part workflow_lenet.sh and workflow_mlp.sh share: runs `hfta sweep --model MODEL FLAGS...`
# with the binary $HFTA (default build/hfta) into $OUT (default results), then says where the
# CSV, plots and logs are.
#
#   sweep/sweep_workflow.sh NAME MODEL FLAGS...     # NAME: the calling script, for messages
set -euo pipefail
name="$1" model="$2"
shift 2
root="$(cd "$(dirname "$0")/.." && pwd)"
hfta="${HFTA:-$root/build/hfta}"
out="${OUT:-results}"
if [[ ! -x "$hfta" ]]; then
  echo "$name: no hfta binary at $hfta: run ./scripts/build.sh first (or set HFTA)" >&2
  exit 1
fi
start=$(date +%s)
"$hfta" sweep --model "$model" --out "$out" "$@"
echo "$name: done in $(( $(date +%s) - start )) s"
echo "  CSV:   $out/$model/throughput.csv (one row per mode, B and repeat)"
echo "  plots: $out/$model/throughput.png, $out/$model/memory.png (gnuplot script: $out/$model/sweep.gp)"
echo "  logs:  $out/$model/logs/"
