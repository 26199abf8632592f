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
import tempfile
import warnings

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest


def save(out: str, names: str, method: str) -> None:
    """Each dataset's means and variances of ``method`` (one seed, three targets) into the .npz ``out``."""
    warnings.simplefilter("ignore")  # incomplete reference models are dropped, as documented
    arrays = {}
    for name in names.split(","):
        cfg = BacktestConfig(methods=(method,), n_seeds=1, n_targets=3)
        r = run_backtest(datasets.load(name), cfg, workers=1)
        arrays[f"{name}_means"] = np.asarray(r.means[method])
        arrays[f"{name}_vars"] = np.asarray(r.vars[method])
    np.savez(out, **arrays)


def compare(first: str, second: str) -> None:
    a, b = np.load(first), np.load(second)
    for key in a.files:
        print(f"{key:<28} {a[key].shape!s:<14} identical: {np.array_equal(a[key], b[key])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", help="the .npz to write (or, with --compare, the first of two to compare)")
    ap.add_argument("datasets", nargs="?", help="comma-separated dataset names (or, with --compare, the second .npz)")
    ap.add_argument("--method", default="bayesame")
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("--smoke", action="store_true",
                    help="math's rs-mean arrays written twice to a temporary folder and compared "
                         "(tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            save(f"{tmp}/a.npz", "math", "rs-mean")
            save(f"{tmp}/b.npz", "math", "rs-mean")
            compare(f"{tmp}/a.npz", f"{tmp}/b.npz")
        return
    if args.out is None or args.datasets is None:
        ap.error("give OUT and DATASETS (or --smoke)")
    if args.compare:
        compare(args.out, args.datasets)
    else:
        save(args.out, args.datasets, args.method)


if __name__ == "__main__":
    main()
