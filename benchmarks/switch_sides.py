"""How many targets a BayesAME method switches to the design-based estimate, and on which side of the references.

The efficiency protocol (50 % references sampled per seed, the first ``--targets`` targets of split draw 0 ×
``--seeds`` seeds, the backtest's method seeds). Each target is played until its method switches or ``--items``
items have been scored; the table counts, per method, the targets whose full-benchmark score lies above, inside
or below the references' range, and how many of each switched (with the switch's reason). A switch of a target
*inside* the range is a false alarm: its model-based estimate was worth more than the random items that replace
it (docs/benchmarks/history.md, "Issue 25 (stop 40)").

Usage (repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/switch_sides.py --dataset musr --regime interpolation --seeds 3 \\
        --methods 'bayesame,bayesame[warmup=10],bayesame[switch_z=0]'
    python benchmarks/switch_sides.py --smoke
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from activeeval import datasets
from activeeval.data.matrix import ScoreMatrix
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.methods.registry import make_method, parse_method_spec, split_method_list


def count(matrix: ScoreMatrix, regime: str, spec: str, targets: int, seeds: int, items: int) -> collections.Counter:
    """{(side, "switched" or "model", reason): targets} over ``seeds`` × ``targets`` runs."""
    split = make_split(matrix, regime, n_targets=targets, split_seed=0)
    name, options = parse_method_spec(spec)
    out: collections.Counter = collections.Counter()
    for s in range(seeds):
        ref = matrix.select_models(list(sample_references(split.pool, 0.5, s, 0)))
        full = ref.scores.mean(axis=1)
        lo, hi = float(full.min()), float(full.max())
        for target in split.targets[:targets]:
            truth = matrix.model_scores(target).astype(float)
            method = make_method(name, ref, seed=method_seed(0, s, 0), **options)
            for _ in range(min(items, matrix.n_items)):
                item = method.select()
                method.observe(item, float(truth[item]))
                if method.mode == "design":
                    break
            r = float(np.mean(truth))
            side = "above" if r > hi else "below" if r < lo else "inside"
            if method.mode == "design":
                out[(side, "switched", str(method.switch_reason))] += 1
            else:
                out[(side, "model", "-")] += 1
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="musr")
    ap.add_argument("--regime", default="interpolation")
    ap.add_argument("--methods", default="bayesame,bayesame[switch_z=0]")
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--items", type=int, default=80, help="play each target until it switches or this many items")
    ap.add_argument("--smoke", action="store_true", help="mmlu, 2 targets, 1 seed, 15 items (seconds)")
    args = ap.parse_args()
    if args.smoke:
        args.dataset, args.targets, args.seeds, args.items, args.methods = "mmlu", 2, 1, 15, "bayesame"
    print(f"{args.dataset} {args.regime}, {args.targets} targets x {args.seeds} seeds, up to {args.items} items")
    print(f"{'method':<44} {'side':<7} {'targets':>7} {'switched':>8}  reasons")
    matrix = datasets.load(args.dataset)  # once: every method plays the same splits
    for spec in split_method_list(args.methods):  # stripped, empty entries dropped
        t0 = time.perf_counter()
        got = count(matrix, args.regime, spec, args.targets, args.seeds, args.items)
        for side in ("above", "inside", "below"):
            total = sum(v for k, v in got.items() if k[0] == side)
            if not total:
                continue
            switched = {k[2]: v for k, v in got.items() if k[0] == side and k[1] == "switched"}
            reasons = ", ".join(f"{r} {v}" for r, v in sorted(switched.items())) or "-"
            print(f"{spec:<44} {side:<7} {total:>7} {sum(switched.values()):>8}  {reasons}")
        print(f"  ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
