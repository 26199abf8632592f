"""Accuracy and honesty at the automatic stop, on real data.

Usage::

    python benchmarks/bench_stop.py                          # ifeval, alpacaeval2; 20 targets x 3 seeds
    python benchmarks/bench_stop.py --datasets gsm --targets 10 --seeds 2 --epsilon2 0.05

For each dataset, ``--targets`` models are drawn (seed 2026) among those with
complete scores; each is held out in turn and every other model is a
reference (the setting of ``activeeval demo``). Each method runs with the
paper's stopping rule (ε1 = 0.005, W = 30, the given ε2) and ``--seeds``
seeds. The table gives, per method: the realised coverage of the nominal
95 % interval at the stop, the RMSE of the estimate at the stop (x100), the
mean fraction of the benchmark used, and the mean interval width.

Methods (``--methods``, registry specs): the default BayesAME (``bayesame``),
the paper's algorithm with its fixed noise σ² (``bayesame-paper``) and with σ²
learned by the NLML (``bayesame-paper[noise=learned]``), and RS-Mean with the
Eq. 9 variance (and its rare-event floor) under the same stopping rule.
"""

from __future__ import annotations

import argparse
import time
import warnings
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from activeeval import datasets
from activeeval.experiments.simulate import hold_out, run_until_stop
from activeeval.methods.registry import make_method, parse_method_spec, split_method_list
from activeeval.stopping import WindowCIRule

METHODS = "bayesame,bayesame-paper,bayesame-paper[noise=learned],rs-mean"


def one_run(args: tuple[str, str, str, int, float]) -> tuple[str, str, float, float, float, int, int]:
    dataset, target, method, seed, epsilon2 = args
    warnings.simplefilter("ignore")  # missing-score notes: the drop policy is the documented default
    split = hold_out(datasets.load(dataset), target)
    name, options = parse_method_spec(method)
    m = make_method(name, split.reference, seed=seed, **options)
    run_until_stop(m, split.truth, WindowCIRule(epsilon2=epsilon2))
    est = m.estimate()
    lo, hi = est.ci()
    return dataset, method, est.mean - split.true_score, float(lo <= split.true_score <= hi), hi - lo, \
        est.n_observed, est.n_items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="*", default=["ifeval", "alpacaeval2"])
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epsilon2", type=float, default=0.03)
    parser.add_argument("--methods", default=METHODS, help="comma-separated method specs")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.datasets, args.targets, args.seeds, args.methods, args.workers = ["math"], 2, 1, "rs-mean", 1
    args.methods = split_method_list(args.methods)

    tasks = []
    for name in args.datasets:
        matrix = datasets.load(name)
        complete = [m for m, row in zip(matrix.model_ids, matrix.scores, strict=True) if not np.isnan(row).any()]
        targets = np.random.default_rng(2026).choice(complete, size=min(args.targets, len(complete)), replace=False)
        tasks += [(name, str(t), meth, s, args.epsilon2) for t in targets for meth in args.methods
                  for s in range(args.seeds)]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one_run, tasks, chunksize=4))
    wall = time.perf_counter() - start

    print(f"epsilon2 = {args.epsilon2}, {args.targets} targets x {args.seeds} seeds per dataset, "
          f"wall {wall:.0f} s with {args.workers} workers")
    header = f"{'dataset':<14} {'method':<30} {'runs':>5} {'coverage':>9} {'RMSE x100':>10} " \
             f"{'used %':>7} {'width':>7}"
    print(header)
    print("-" * len(header))
    for name in args.datasets:
        for meth in args.methods:
            rows = [r for r in results if r[0] == name and r[1] == meth]
            err = np.array([r[2] for r in rows])
            print(
                f"{name:<14} {meth:<30} {len(rows):>5} {np.mean([r[3] for r in rows]):>9.3f} "
                f"{100 * np.sqrt(np.mean(err**2)):>10.3f} {100 * np.mean([r[5] / r[6] for r in rows]):>7.1f} "
                f"{np.mean([r[4] for r in rows]):>7.4f}"
            )


if __name__ == "__main__":
    main()
