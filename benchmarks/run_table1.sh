#!/usr/bin/env bash
# The Table 1 reproduction of docs/BENCHMARKS.md: `activeeval reproduce table1 --seeds 200`, run in
# three pieces (one per output folder; together they are every row of the full command, RS-Mean in
# each piece so that every folder has its own baseline), 2 worker processes, one BLAS thread each.
# Usage: benchmarks/run_table1.sh [SEEDS=200] [OUT=benchmarks/results/table1]
# Then:  python benchmarks/table1_report.py OUT_*/   (the markdown tables of docs/BENCHMARKS.md)
# `benchmarks/run_table1.sh --smoke`: the same three commands with 1 seed and RS-Mean only, into a temporary
# folder (tests/test_benchmarks.py runs it).
set -euo pipefail
if [[ "${1:-}" == --smoke ]]; then
  SEEDS=1; OUT=$(mktemp -d)/table1
  trap 'status=$?; [[ $status == 0 ]] || cat "$(dirname "$OUT")"/*.txt >&2; rm -rf "$(dirname "$OUT")"' EXIT
  BAYESAME=rs-mean; ALL=rs-mean; BASELINES=rs-mean
  NICE=()  # run at the test's priority: niced on a busy machine, three small commands can wait for minutes
  WORKERS=1  # 2 would start two worker processes per command to share one seed
else
  NICE=(nice); WORKERS=2
  SEEDS=${1:-200}; OUT=${2:-benchmarks/results/table1}
  BAYESAME=bayesame,bayesame-paper,bayesame-paper-rs,rs-mean
  ALL=bayesame,bayesame-paper,bayesame-paper-rs,rs-mean,seq-apw,bayes-aipw,bayes-rs-learn,proeval,irt
  BASELINES=rs-mean,seq-apw,bayes-aipw,bayes-rs-learn,proeval,irt
fi
export OPENBLAS_NUM_THREADS=1
mkdir -p "$(dirname "$OUT")"
( time "${NICE[@]}" activeeval reproduce table1 --seeds "$SEEDS" --datasets ifeval --workers "$WORKERS" --no-progress \
    --methods "$BAYESAME" --out "${OUT}_ifeval_bayesame_${SEEDS}" ) \
    > "${OUT}_ifeval_bayesame_${SEEDS}.txt" 2>&1
( time "${NICE[@]}" activeeval reproduce table1 --seeds "$SEEDS" --datasets musr --workers "$WORKERS" --no-progress \
    --methods "$ALL" --out "${OUT}_musr_all_${SEEDS}" ) > "${OUT}_musr_all_${SEEDS}.txt" 2>&1
( time "${NICE[@]}" activeeval reproduce table1 --seeds "$SEEDS" --datasets ifeval --workers "$WORKERS" --no-progress \
    --methods "$BASELINES" --out "${OUT}_ifeval_baselines_${SEEDS}" ) \
    > "${OUT}_ifeval_baselines_${SEEDS}.txt" 2>&1
