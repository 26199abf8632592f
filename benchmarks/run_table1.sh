#!/usr/bin/env bash
# Bounded Table 1 reproduction on a shared 2-core machine (2 worker processes, niced):
# the cheap methods (no per-step refits) with more seeds, the expensive ones with fewer.
# Usage: benchmarks/run_table1.sh [CHEAP_SEEDS=10] [EXPENSIVE_SEEDS=1] [OUT=benchmarks/results/table1]
# Then:  python benchmarks/table1_report.py OUT_*/   (markdown tables for docs/BENCHMARKS.md)
# The full run is simply:  activeeval reproduce table1 --seeds 200
set -euo pipefail
CHEAP=${1:-10}; EXP=${2:-1}; OUT=${3:-benchmarks/results/table1}
mkdir -p "$(dirname "$OUT")"
( time nice activeeval reproduce table1 --seeds "$CHEAP" --workers 2 --no-progress \
    --methods rs-mean,seq-apw,proeval,irt --out "${OUT}_cheap_${CHEAP}seeds" ) > "${OUT}_cheap_${CHEAP}seeds.txt" 2>&1
( time nice activeeval reproduce table1 --seeds "$EXP" --workers 2 --no-progress --datasets ifeval \
    --methods bayesame,bayesame-rs,bayes-aipw,bayes-rs-learn,rs-mean --out "${OUT}_ifeval_expensive_${EXP}seed" ) \
    > "${OUT}_ifeval_expensive_${EXP}seed.txt" 2>&1
( time nice activeeval reproduce table1 --seeds "$EXP" --workers 2 --no-progress --datasets musr \
    --methods bayesame,bayes-aipw,rs-mean --out "${OUT}_musr_expensive_${EXP}seed" ) \
    > "${OUT}_musr_expensive_${EXP}seed.txt" 2>&1
