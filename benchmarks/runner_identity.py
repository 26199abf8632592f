"""Backtest trajectories of a method saved to .npz, to check that a refactor changed nothing, bit for bit.

Run it once on the old code and once on the new, then compare::

    git worktree add /tmp/old 317f17f
    OPENBLAS_NUM_THREADS=1 PYTHONPATH=/tmp/old/src python benchmarks/runner_identity.py /tmp/old.npz musr,ifeval
    OPENBLAS_NUM_THREADS=1 python benchmarks/runner_identity.py /tmp/new.npz musr,ifeval
    python benchmarks/runner_identity.py --compare /tmp/old.npz /tmp/new.npz

(one seed, three targets, every n from 1 to N; ``--method`` default bayesame).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="the .npz to write (or, with --compare, the first of two to compare)")
    ap.add_argument("datasets", help="comma-separated dataset names (or, with --compare, the second .npz)")
    ap.add_argument("--method", default="bayesame")
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    if args.compare:
        a, b = np.load(args.out), np.load(args.datasets)
        for key in a.files:
            print(f"{key:<28} {str(a[key].shape):<14} identical: {np.array_equal(a[key], b[key])}")
        return
    warnings.simplefilter("ignore")  # incomplete reference models are dropped, as documented
    arrays = {}
    for name in args.datasets.split(","):
        cfg = BacktestConfig(methods=(args.method,), n_seeds=1, n_targets=3)
        r = run_backtest(datasets.load(name), cfg, workers=1)
        arrays[f"{name}_means"] = np.asarray(r.means[args.method])
        arrays[f"{name}_vars"] = np.asarray(r.vars[args.method])
    np.savez(args.out, **arrays)


if __name__ == "__main__":
    main()
