"""Where a BayesAME method's intervals miss: runs still model-based against runs switched to the design-based estimate.

``benchmarks/efficiency.py`` gives one coverage per cell; this replays the same runs one item at a time (the
efficiency protocol: 50 % references sampled per seed (``--ref-fraction``), ``--targets`` targets × ``--seeds``
seeds, the backtest's method seeds: one per seed index, shared by the targets) and splits each budget's runs by the
method's regime at that n. Per budget it prints, for the model-based and the design-based runs: how many, their
coverage of the target's full-benchmark score, their median effective sample size (the efficiency table's ESS) and
the confident misses (|error| > 3 sd); then the same for all runs together, with their mean absolute error × 100
(the cell of the efficiency table, on these runs).

Usage (repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/where_misses.py --dataset arc_challenge --regime extrapolation
    OPENBLAS_NUM_THREADS=1 python benchmarks/where_misses.py --dataset ifeval --method 'bayesame[warmup=10]'
    OPENBLAS_NUM_THREADS=1 python benchmarks/where_misses.py --dataset math --method 'bayesame[selection=hybrid]' --bias
    OPENBLAS_NUM_THREADS=1 python benchmarks/where_misses.py --dataset musr --regime interpolation --reasons
    OPENBLAS_NUM_THREADS=1 python benchmarks/where_misses.py --dataset musr --ref-fraction 1   # every other model

``--reasons`` prints instead, per budget, the runs switched by then, counted by the test that switched them
(``BayesAME.switch_test``: the 95 % interval outside the references' range, the paired test, ``switch_z``, the
misfit test) and by where the target's full-benchmark score is against the references' range (below, inside,
above), with the design-based runs' coverage and median ESS per test: a switch of a target inside the range is
what a switch costs where the references do describe the target (in interpolation most targets are inside, not all:
the references are a random half of the pool).

``--bias`` (a method whose design-based estimate keeps every random item, ``selection=hybrid``) prints instead,
per budget, the mean signed error × 100 (± its standard error over the runs) of the design-based estimate with every
item at full weight, for the runs that have switched by then and for those that have not: a switch fires when the
early scores look extreme, so given that it fired, the items before it are biased outwards. The standard error
treats the runs as independent; the targets of one seed often draw the same first items, so it understates.
    python benchmarks/where_misses.py --smoke
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from activeeval import datasets
from activeeval.experiments.metrics import covered, standardised_errors
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.methods.registry import make_method, parse_method_spec

Z = 1.959963984540054
BUDGETS = (0.025, 0.05, 0.10, 0.25)


def replay(dataset: str, regime: str, spec: str, targets: int, seeds: int, budgets=BUDGETS,
           ref_fraction: float = 0.5) -> list[list[tuple]]:
    """Per budget, one (regime, error, sd, ess, design error, switch test, target's side, shift) per run.

    The design error is that of the design-based estimate with every random item at full weight (nan without one);
    the switch test is ``switch_test`` (None before a switch); the side is where the target's full score is against
    the references' range ("below", "inside", "above"); the shift is ``Estimate.shift`` (the interval's two sides)."""
    matrix = datasets.load(dataset)
    split = make_split(matrix, regime, n_targets=targets, split_seed=0)
    n_items = matrix.n_items
    checks = [max(2, round(b * n_items)) for b in budgets]
    name, options = parse_method_spec(spec)
    out: list[list[tuple]] = [[] for _ in checks]
    for s in range(seeds):
        ref = matrix.select_models(list(sample_references(split.pool, ref_fraction, s, 0)))
        full = ref.mean_scores()
        for target in split.targets[:targets]:
            truth = matrix.model_scores(target).astype(float)
            side = ("below" if truth.mean() < full.min() else "above" if truth.mean() > full.max() else "inside")
            # the backtest's shared_order: one method seed per seed index, the same for every target
            method = make_method(name, ref, seed=method_seed(0, s, 0), **options)
            for n in range(1, max(checks) + 1):
                item = method.select()
                method.observe(item, float(truth[item]))
                if n in checks:
                    est = method.estimate()
                    rs_var = truth.var(ddof=1) * (1 - n / n_items) / n
                    sd = float(np.sqrt(est.var))
                    ess = rs_var / est.var if est.var > 0 else np.inf
                    design = getattr(method, "_design", None)
                    raw = (design.estimate(method._worst_var)[0] - truth.mean()
                           if design is not None and design.count else float("nan"))
                    out[checks.index(n)].append((getattr(method, "regime", "-"), est.mean - truth.mean(), sd, ess,
                                                 raw, getattr(method, "switch_test", None), side, est.shift))
    return out


def _summary(runs: list[tuple]) -> tuple[float, float, int, float]:
    """(coverage, median ESS, misses beyond 3 sd, MAE × 100) of some runs of :func:`replay`."""
    # the reported interval, each side as long as the method says (Estimate.shift: two-sided floors), as
    # efficiency.py counts it; the error as estimate minus truth, against a truth of 0
    err = np.array([r[1] for r in runs])
    var = np.array([r[2] for r in runs]) ** 2
    shift = np.array([r[7] for r in runs])
    zero = np.zeros(err.shape)
    hit = covered(err, var, zero, shifts=shift)
    wild = standardised_errors(err, var, zero, shifts=shift) > 3
    return (float(np.mean(hit)), float(np.median([r[3] for r in runs])), int(np.sum(wild)),
            100 * float(np.mean(np.abs(err))))


def _print_bias(budgets, runs: list[list[tuple]]) -> None:
    print("the design-based estimate, every item at full weight: mean signed error x 100 (se), runs")
    print(f"{'n/N':>6}  {'switched':>20}  {'not switched':>20}  {'all':>20}")
    for b, cell in zip(budgets, runs, strict=True):
        parts = []
        for kind in ("design-based", "model-based", None):
            err = np.array([r[4] for r in cell if kind is None or r[0] == kind])
            err = err[np.isfinite(err)]
            if err.size < 2:
                parts.append(f"{'-':>20}")
                continue
            se = err.std(ddof=1) / np.sqrt(err.size)
            parts.append(f"{100 * err.mean():+7.2f} ({100 * se:4.2f}) {err.size:>4}")
        print(f"{b:>6}  {parts[0]:>20}  {parts[1]:>20}  {parts[2]:>20}")


def _print_reasons(budgets, runs: list[list[tuple]]) -> None:
    print("runs switched by then, by the test that switched them and the target's side of the references' range;")
    print("each test's runs: cov / median ESS")
    tests = ("interval", "paired", "switch_z", "misfit")
    print(f"{'n/N':>6} {'runs':>5} {'switched':>9}  " + "  ".join(f"{t:>30}" for t in tests))
    for b, cell in zip(budgets, runs, strict=True):
        switched = [r for r in cell if r[5] is not None]
        parts = []
        for t in tests:
            sel = [r for r in switched if r[5] == t]
            if not sel:
                parts.append(f"{'-':>30}")
                continue
            sides = "/".join(str(sum(r[6] == side for r in sel)) for side in ("below", "inside", "above"))
            cov, ess, _, _ = _summary(sel)
            parts.append(f"{len(sel):>4} ({sides:>9}) {cov:5.3f} {ess:5.2f}")
        print(f"{b:>6} {len(cell):>5} {len(switched):>9}  " + "  ".join(f"{p:>30}" for p in parts))
    print("(in brackets: targets below / inside / above the references' range)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="arc_challenge")
    parser.add_argument("--regime", default="extrapolation")
    parser.add_argument("--method", default="bayesame")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--bias", action="store_true",
                        help="the design-based estimate's signed error, runs switched by then against the others")
    parser.add_argument("--ref-fraction", type=float, default=0.5,
                        help="share of the pool drawn as references per seed (1: every non-target model, as "
                             "efficiency.py --ref-fraction 1)")
    parser.add_argument("--reasons", action="store_true",
                        help="the runs switched by each budget, by the test that switched them and the target's side")
    parser.add_argument("--smoke", action="store_true", help="mmlu, 2 targets x 1 seed, two budgets: seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dataset, args.targets, args.seeds = "mmlu", 2, 1
    budgets = BUDGETS[:2] if args.smoke else BUDGETS
    start = time.perf_counter()
    runs = replay(args.dataset, args.regime, args.method, args.targets, args.seeds, budgets, args.ref_fraction)
    print(f"{args.method} on {args.dataset} {args.regime}, {args.targets} targets x {args.seeds} seeds, "
          f"{100 * args.ref_fraction:g} % of the pool as references")
    if args.reasons:
        _print_reasons(budgets, runs)
        print(f"wall {time.perf_counter() - start:.0f} s")
        return 0
    if args.bias:
        _print_bias(budgets, runs)
        print(f"wall {time.perf_counter() - start:.0f} s")
        return 0
    print(f"{'n/N':>6} {'runs':>5}  {'model-based: runs cov ESS >3sd':>32}  {'design-based: runs cov ESS >3sd':>33}"
          f"  {'all: cov ESS MAE':>18}")
    for b, cell in zip(budgets, runs, strict=True):
        parts = []
        for kind in ("model-based", "design-based"):
            sel = [r for r in cell if r[0] == kind]
            if not sel:
                parts.append(f"{0:>11} {'-':>5} {'-':>5} {'-':>5}")
                continue
            cov, ess, wild, _ = _summary(sel)
            parts.append(f"{len(sel):>11} {cov:5.3f} {ess:5.2f} {wild:>5}")
        cov, ess, _, mae = _summary(cell)
        print(f"{b:>6} {len(cell):>5}  {parts[0]:>32}  {parts[1]:>33}  {f'{cov:5.3f} {ess:5.2f} {mae:6.2f}':>18}")
    if args.smoke:  # every table's code runs in CI
        _print_reasons(budgets, runs)
    print(f"wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
