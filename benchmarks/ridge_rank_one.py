"""What _ridge.py's LAPACK dlaed9 rank-one eigen-updates buy: the Bayes-AIPW and Bayes-RS-Learn replays with
them and with a fresh numpy eigh after every added row (the fallback), best of 3, and whether the two agree to
the bit (they do not: round-off, so replacing the updates would change the golden backtest).

Usage (repository root, package installed): OPENBLAS_NUM_THREADS=1 python benchmarks/ridge_rank_one.py
(``--smoke``: math's first 60 items, two targets, one timing each; tests/test_benchmarks.py runs it)
"""
import sys
import time

import numpy as np

import activeeval.methods.baselines._ridge as ridge
from activeeval.datasets import load
from activeeval.methods.baselines import BayesAIPW, BayesRSLearn

SMOKE = sys.argv[1:] == ["--smoke"]
for dataset in ("math",) if SMOKE else ("ifeval", "musr"):
    m = load(dataset)
    if SMOKE:
        m = m.select_items(list(m.item_ids[:60]))
    ids = list(m.model_ids)
    ref = m.select_models(ids[::2])
    truths = np.stack([m.model_scores(t) for t in ids[1:5 if SMOKE else 11:2]])
    print(dataset, "references x items:", ref.scores.shape, "targets:", truths.shape[0])
    for cls in (BayesAIPW, BayesRSLearn):
        out = {}
        for label, patch in (("dlaed9", False), ("eigh", True)):
            if patch:
                ridge._dlaed9 = lambda: None
            else:
                ridge._dlaed9.cache_clear() if hasattr(ridge._dlaed9, "cache_clear") else None
            best = np.inf
            for _ in range(1 if SMOKE else 3):
                t0 = time.perf_counter()
                res = cls.replay(ref, truths, 0)
                best = min(best, time.perf_counter() - t0)
            out[label] = (best, res)
            if patch:
                import importlib
                importlib.reload(ridge)  # restore (fresh _dlaed9)
        (tf, rf), (ts, rs) = out["dlaed9"], out["eigh"]
        diff = max(np.abs(rf[0] - rs[0]).max(), np.abs(rf[1] - rs[1]).max())
        same = np.array_equal(rf[0], rs[0]) and np.array_equal(rf[1], rs[1])
        print(f"  {cls.__name__:13s} dlaed9 {tf:6.2f} s   eigh {ts:6.2f} s   x{ts / tf:4.1f}   "
              f"max |diff| {diff:.1e}  bit-identical {same}")
