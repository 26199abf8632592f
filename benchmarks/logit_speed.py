"""Time per step of the paper's BayesAME with the Gaussian and the logit-normal likelihood (App. B.3).

Usage (repository root)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/logit_speed.py              # ifeval (binary), alpacaeval2 (continuous)
    OPENBLAS_NUM_THREADS=1 python benchmarks/logit_speed.py --datasets ifeval --targets 3

For each dataset, every second model (but the targets) is a reference; each
target is played to the end (n = N) with select + observe and the paper's
refits every 50 items. The table gives the mean time of a step over the whole
run, the estimate's absolute error at n = 10 % and 25 % of N (mean over the
targets), and the 95 % interval's coverage at those points. A speed and
sanity check, not an accuracy benchmark: that is the backtest (docs/backtest.md).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from activeeval.datasets import load
from activeeval.methods.bayesame_paper import BayesAMEPaper, PaperModelSettings


def run(dataset: str, likelihood: str, n_targets: int, n_items: int = 0) -> dict[str, float]:
    matrix = load(dataset).dropna("models")[0]
    if n_items:
        matrix = matrix.select_items(list(matrix.item_ids[:n_items]))
    models = list(matrix.model_ids)
    targets = models[3: 3 + 7 * n_targets: 7]
    refs = [m for k, m in enumerate(models) if k % 2 == 0 and m not in targets]
    reference = matrix.select_models(refs)
    n = matrix.n_items
    at = {"10%": max(1, n // 10), "25%": max(1, n // 4)}
    seconds, err, cover = 0.0, {k: [] for k in at}, {k: [] for k in at}
    for target in targets:
        truth = np.asarray(matrix.model_scores(target), dtype=float)
        method = BayesAMEPaper(reference, seed=1, model=PaperModelSettings(likelihood=likelihood))
        start = time.perf_counter()
        for _ in range(n):
            i = method.select()
            method.observe(i, float(truth[i]))
        seconds += time.perf_counter() - start
        for key, k in at.items():
            est = method.trajectory[k - 1]
            lo, hi = est.ci(0.95)
            err[key].append(abs(est.mean - truth.mean()))
            cover[key].append(lo <= truth.mean() <= hi)
    row = {"ms/step": 1e3 * seconds / (n * len(targets)), "B": BayesAMEPaper(reference, seed=0).n_buckets, "N": n}
    for key in at:
        row[f"|err|@{key}"] = float(np.mean(err[key]))
        row[f"cov@{key}"] = float(np.mean(cover[key]))
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default="ifeval,alpacaeval2")
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.datasets, args.targets, args.max_items = "math", 1, 40
    warnings.simplefilter("ignore")
    cols = ["B", "N", "ms/step", "|err|@10%", "|err|@25%", "cov@10%", "cov@25%"]
    print(f"{'dataset':<12} {'likelihood':<10} " + " ".join(f"{c:>10}" for c in cols))
    for dataset in args.datasets.split(","):
        for likelihood in ("gaussian", "logit"):
            row = run(dataset, likelihood, args.targets, args.max_items)
            cells = [f"{row[c]:>10d}" if c in ("B", "N") else f"{row[c]:>10.3f}" for c in cols]
            print(f"{dataset:<12} {likelihood:<10} " + " ".join(cells))


if __name__ == "__main__":
    main()
