#!/usr/bin/env bash
# Builds the libFuzzer targets and their seed corpora, then runs every target (two at a time) and
# prints, per target, its executions, coverage and corpus, and any crash, leak or timeout file.
#
#   fuzz/run.sh                      # 1,000,000 executions per target, in build-fuzz
#   RUNS=100000 fuzz/run.sh          # fewer
#   SECONDS_EACH=600 fuzz/run.sh     # and at most ten minutes per target
#   TARGETS="csv idx" fuzz/run.sh    # some targets only
#
# Environment: BUILD (build folder, default build-fuzz), RUNS, SECONDS_EACH, TARGETS, JOBS
# (targets at once, default 2), LEAKS (1 to let LeakSanitizer report, default 1).
# Files, under $BUILD/fuzz/: seeds/<reader> (made afresh each run by hfta_fuzz_seeds),
# corpus/<reader> (what libFuzzer found, kept between runs), logs/<reader>.log, and
# artifacts/<reader>-crash-* (-leak-*, -timeout-*, -oom-*): the inputs of findings.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-fuzz}
RUNS=${RUNS:-1000000}
SECONDS_EACH=${SECONDS_EACH:-0}
TARGETS=${TARGETS:-checkpoint safetensors idx cifar10 csv text shapenet plan_cache search_space sweep_results tune_state}
JOBS=${JOBS:-2}
LEAKS=${LEAKS:-1}

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -DHFTA_FUZZ=ON -DHFTA_NATIVE=ON
fi
names=()
for t in $TARGETS; do names+=("fuzz_$t"); done
cmake --build "$BUILD" --target "${names[@]}" hfta_fuzz_seeds -j"$JOBS"

out=$BUILD/fuzz
rm -rf "$out/seeds"
mkdir -p "$out/corpus" "$out/logs" "$out/artifacts"
"$BUILD/hfta_fuzz_seeds" "$out/seeds"

run_one() {
  local t=$1 max_len=4096
  [[ $t == cifar10 ]] && max_len=8192  # two 3073-byte records
  mkdir -p "$out/corpus/$t"
  local limit=(-runs="$RUNS")
  [[ $SECONDS_EACH != 0 ]] && limit+=(-max_total_time="$SECONDS_EACH")
  # UBSan stops at the first report (the libraries are built with -fno-sanitize-recover).
  "$BUILD/fuzz_$t" "$out/corpus/$t" "$out/seeds/$t" "${limit[@]}" -max_len=$max_len \
    -rss_limit_mb=2048 -timeout=10 -detect_leaks="$LEAKS" -print_final_stats=1 \
    -artifact_prefix="$out/artifacts/$t-" >"$out/logs/$t.log" 2>&1
  echo "fuzz_$t: exit $?"
}
# One thread per target: the readers' OpenMP loops over inputs of a few hundred bytes would spend
# most of each execution waking (or spinning) the other threads.
export OMP_NUM_THREADS=1
# The targets write each input to a file (the readers take paths): on tmpfs, not the disk, whose
# inode churn otherwise takes most of the time of the folder readers (ShapeNet, text corpora).
if [[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
export -f run_one
export BUILD RUNS SECONDS_EACH LEAKS out
printf '%s\n' $TARGETS | xargs -P "$JOBS" -I{} bash -c 'run_one {}' || true

echo
status=0
for t in $TARGETS; do
  log=$out/logs/$t.log
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  execs=$(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}' || true)
  echo "fuzz_$t: ${execs:-?} executions; last: ${last:-none}"
  echo "  corpus: $(ls "$out/corpus/$t" | wc -l) files; log: $log"
  for f in "$out/artifacts/$t-"*; do
    [[ -e $f ]] || continue
    echo "  FINDING: $f  (replay: $BUILD/fuzz_$t $f)"
    status=1
  done
done
exit $status
