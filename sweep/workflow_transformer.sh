#!/usr/bin/env bash
# The Transformer language model's fusion-count sweep, in tokens/s (HFTA's examples/transformer:
# emsize 128, nhid 128, 2 layers, 2 heads, bptt 32): serial, concurrent and fused training of
# B = 1..8 models, 20 token streams per step, three repeats of 20 warm-up + 30 timed steps each,
# then the plots. The samples/s columns of throughput.csv count tokens for a language model.
# 20 warm-up steps: a threads plan's workers reach their steady speed only after ~20 steps
# (oneDNN's sgemm allocates its packing buffers per call; until glibc's per-thread heaps settle,
# fresh pages cost each worker page faults and TLB shootdowns of the other's core, which separate
# processes do not pay; docs/benchmarks.md), and a sweep measures the speed of long runs.
# Real text by default: Debian's fortunes (apt-get install fortunes); without it, or with
# DATA=synthetic, a seeded stream of a 10000-word vocabulary (no files needed).
#
#   sweep/workflow_transformer.sh                       # results in results/transformer/
#   DATA=synthetic OUT=/tmp/t sweep/workflow_transformer.sh --repeats 1   # later flags win
set -euo pipefail
fortunes=/usr/share/games/fortunes
if [[ "${DATA:-text}" != synthetic && -d "$fortunes" ]]; then
  data=(--dataset text --text-files "$fortunes")
else
  data=(--dataset synthetic-text --vocab 10000)
fi
exec "$(dirname "$0")/sweep_workflow.sh" workflow_transformer.sh transformer "${data[@]}" \
  --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 --batch-size 20 --warmup 20 \
  --steps 30 --seed 1 "$@"
