#!/usr/bin/env bash
# The Table 1 reproduction of docs/BENCHMARKS.md: `activeeval reproduce table1 --seeds 200`, run in
# three pieces (one per output folder; together they are every row of the full command, RS-Mean in
# each piece so that every folder has its own baseline), 2 worker processes, one BLAS thread each.
# Usage: benchmarks/run_table1.sh [SEEDS=200] [OUT=benchmarks/results/table1]
# Then:  python benchmarks/table1_report.py OUT_*/   (the markdown tables of docs/BENCHMARKS.md)
set -euo pipefail
SEEDS=${1:-200}; OUT=${2:-benchmarks/results/table1}
export OPENBLAS_NUM_THREADS=1
mkdir -p "$(dirname "$OUT")"
( time nice activeeval reproduce table1 --seeds "$SEEDS" --datasets ifeval --workers 2 --no-progress \
    --methods bayesame,bayesame-paper,bayesame-paper-rs,rs-mean --out "${OUT}_ifeval_bayesame_${SEEDS}" ) \
    > "${OUT}_ifeval_bayesame_${SEEDS}.txt" 2>&1
( time nice activeeval reproduce table1 --seeds "$SEEDS" --datasets musr --workers 2 --no-progress \
    --out "${OUT}_musr_all_${SEEDS}" ) > "${OUT}_musr_all_${SEEDS}.txt" 2>&1
( time nice activeeval reproduce table1 --seeds "$SEEDS" --datasets ifeval --workers 2 --no-progress \
    --methods rs-mean,seq-apw,bayes-aipw,bayes-rs-learn,proeval,irt --out "${OUT}_ifeval_baselines_${SEEDS}" ) \
    > "${OUT}_ifeval_baselines_${SEEDS}.txt" 2>&1
