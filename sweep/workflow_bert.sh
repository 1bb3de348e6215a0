#!/usr/bin/env bash
# BERT's fusion-count sweep, in tokens/s (HFTA's examples/bert: hidden 512, 8 pre-norm layers, 8
# heads, FF 2048, bptt 32, masked LM with 15% of positions predicted; the output layer runs on
# the predicted positions only): serial, concurrent and fused training of B = 1..8 models, 8
# token streams per step, three repeats of 1 warm-up + 3 timed steps each, then the plots. The
# samples/s columns of throughput.csv count tokens. On Debian's fortunes (vocabulary 61 356) a
# model takes 1.6 GB: B = 8 needs 12.8 GB (fused or concurrent), B = 16 more than 24 GB. With
# DATA=synthetic --vocab 30522 (BERT's own vocabulary size) a model takes 1.1 GB and B = 16 fits
# in 17 GB: `DATA=synthetic sweep/workflow_bert.sh --vocab 30522 --B 1,2,4,8,16`.
# Real text by default: Debian's fortunes (apt-get install fortunes); without it, or with
# DATA=synthetic, a seeded stream of a 10000-word vocabulary (no files needed).
#
#   sweep/workflow_bert.sh                                # results in results/bert/
#   DATA=synthetic OUT=/tmp/b sweep/workflow_bert.sh --repeats 1   # later flags win
set -euo pipefail
fortunes=/usr/share/games/fortunes
if [[ "${DATA:-text}" != synthetic && -d "$fortunes" ]]; then
  data=(--dataset text --text-files "$fortunes")
else
  data=(--dataset synthetic-text --vocab 10000)
fi
exec "$(dirname "$0")/sweep_workflow.sh" workflow_bert.sh bert "${data[@]}" \
  --modes serial,concurrent,fused --B 1,2,4,8 --repeats 3 --batch-size 8 --warmup 1 \
  --steps 3 --seed 1 "$@"
