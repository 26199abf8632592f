"""Cost of one backtest task per method: one seed, every target, n = 1..N, one core.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_backtest.py                      # ifeval, musr; both regimes
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_backtest.py --datasets ifeval --seeds 0 1 2 --slow

A task is what the runner's workers execute: sample one seed's references
(50 % of the pool), play the method on the 10 targets of the split to n = N,
keep the trajectories. Printed per (dataset, regime, method): the median
CPU time of a task over ``--seeds`` (each seed is one task; CPU time of this
single-threaded process, so that other jobs on the machine do not inflate
it; the wall time is printed too), the mode
(``replay`` = all targets at once through the method's fast replay, ``steps``
= each target step by step, ``copy`` = BayesAME-RS taken from BayesAME
because BayesAME selects at random there) and the extrapolated single-core
time of 200 seeds. ``--slow`` also times the step-by-step path for methods
with a replay (``--orders independent``), on one target, scaled to 10.

The sum of the 200-seed column over all rows, divided by the number of
workers, is what ``activeeval reproduce table1 --seeds 200`` should take on
an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import time

from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig, make_split, method_seed, sample_references
from activeeval.experiments.runner import run_task
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.registry import make_method, resolve_replay

ALL = (
    "bayesame", "bayesame-paper", "bayesame-paper-rs", "rs-mean", "seq-apw", "bayes-aipw", "bayes-rs-learn",
    "proeval", "irt",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["ifeval", "musr"])
    parser.add_argument("--regimes", nargs="+", default=["interpolation", "extrapolation"])
    parser.add_argument("--methods", nargs="+", default=list(ALL))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--slow", action="store_true", help="also time the step-by-step path of replayed methods")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.datasets, args.regimes, args.methods, args.slow = ["math"], ["interpolation"], ["rs-mean", "irt"], True

    rows = []
    total = 0.0
    for name in args.datasets:
        matrix = datasets.load(name)
        for regime in args.regimes:
            config = BacktestConfig(methods=tuple(args.methods), regime=regime, n_seeds=max(args.seeds) + 1)
            split = make_split(matrix, regime, config.n_targets, config.split_seed, config.gap)
            for method in args.methods:
                times, walls = [], []
                mode = "replay" if resolve_replay(method) is not None else "steps"
                for s in args.seeds:
                    start, cpu = time.perf_counter(), time.process_time()
                    _, _, means, _ = run_task(matrix, config, split, method, s)
                    times.append(time.process_time() - cpu)
                    walls.append(time.perf_counter() - start)
                    if means is None:  # BayesAME-RS where it would repeat BayesAME: the runner copies it
                        mode = "copy"
                med = statistics.median(times)
                wall = statistics.median(walls)
                slow = None
                if args.slow and mode == "replay":
                    refs = matrix.select_models(sample_references(split.pool, config.ref_fraction, args.seeds[0]))
                    m = make_method(method, refs, seed=method_seed(0, args.seeds[0], 0))
                    cpu = time.process_time()
                    run_fixed(m, matrix.model_scores(split.targets[0]), matrix.n_items)
                    slow = (time.process_time() - cpu) * len(split.targets)
                total += 200 * med
                rows.append((name, regime, method, mode, med, wall, 200 * med / 60, slow))
                print(f"  {name} {regime} {method}: {med:.2f} s CPU, {wall:.2f} s wall", flush=True)

    header = (f"{'dataset':8} {'regime':13} {'method':15} {'mode':6} {'task CPU s':>10} {'wall s':>7} "
              f"{'200 seeds (CPU min)':>20}")
    if args.slow:
        header += f" {'steps, 10 targets (s)':>22}"
    print()
    print(header)
    for name, regime, method, mode, med, wall, per200, slow in rows:
        line = f"{name:8} {regime:13} {method:15} {mode:6} {med:10.2f} {wall:7.2f} {per200:20.1f}"
        if args.slow:
            line += f" {slow:22.2f}" if slow is not None else f" {'':>22}"
        print(line)
    print(f"\nsum over rows, 200 seeds: {total / 60:.1f} CPU min; on 2 workers: {total / 120:.1f} min")
    by_method: dict[str, float] = {}
    for _, _, method, _, _, _, per200, _ in rows:
        by_method[method] = by_method.get(method, 0.0) + per200
    for method, minutes in by_method.items():
        print(f"  {method:<18} {minutes:7.1f} CPU min ({minutes / max(total / 60, 1e-12):.0%})")


if __name__ == "__main__":
    main()
