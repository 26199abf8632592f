"""Why a target just beyond every reference is missed: the default's state on chosen targets, step by step.

`benchmarks/efficiency.py --ref-fraction 1 --regimes extrapolation` found the
default's interval below the coverage band on AlpacaEval 2 (docs/benchmarks/history.md,
"The default with every other model a reference"), from a few targets that
miss in every seed. This script runs the default on such targets, with every
non-target model of the split a reference (the efficiency table's split,
draw 0, and its seed 0 for each target), and prints at each ``--at`` n:

* the mode (``model`` or ``design``) and where it switched;
* the estimate, its 95 % interval and the truth (the target's full score);
* the interval scale (the target's own innovations against the model's
  expectation: above 1 the target varies more than the model expects);
* the strongest reference's full score and the references' mean, and on the
  items chosen so far the target's mean, the references' mean there, and
  their difference against the same difference over every item.

Usage (from the repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/edge_targets.py                        # AlpacaEval 2, targets 7, 14, 19
    OPENBLAS_NUM_THREADS=1 python benchmarks/edge_targets.py --dataset gsm --targets 0-4 --at 20,50
    python benchmarks/edge_targets.py --smoke                                        # seconds: CI keeps it running
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, parse_draws
from activeeval.methods.registry import make_method


def run_target(matrix, split, index: int, method: str, at: list[int]) -> list[str]:
    """The lines of one target: its state at each n of ``at`` (the items chosen by the method itself)."""
    target = split.targets[index]
    ref = matrix.select_models(list(split.pool))
    truth = np.asarray(matrix.model_scores(target), dtype=float)
    ref_full = np.asarray(ref.scores, dtype=float).mean(1)
    ref_items = np.asarray(ref.scores, dtype=float).mean(0)
    meth = make_method(method, ref, seed=method_seed(0, 0, index))
    lines = [f"target {index} {target}: truth {truth.mean():.4f}; {ref.n_models} references, the strongest "
             f"{ref_full.max():.4f}, their mean {ref_full.mean():.4f}"]
    chosen: list[int] = []
    for n in sorted(set(at)):
        while meth.n_observed < min(n, matrix.n_items):
            item = meth.select()
            meth.observe(item, truth[item])
            chosen.append(item)
        est = meth.estimate()
        lo, hi = est.ci()
        idx = np.asarray(chosen)
        gap_chosen = float((truth[idx] - ref_items[idx]).mean())
        gap_all = float((truth - ref_items).mean())
        switched = getattr(meth, "switched_at", None)
        lines.append(
            f"  n={meth.n_observed:<4} {getattr(meth, 'mode', '-'):<6} switched at {switched!s:<4} "
            f"est {est.mean:.4f} [{lo:.4f}, {hi:.4f}] {'covers' if lo <= truth.mean() <= hi else 'MISSES'}; "
            f"scale {getattr(meth, 'scale', float('nan')):.2f}; chosen items: target {truth[idx].mean():.4f}, "
            f"references {ref_items[idx].mean():.4f}, target - references {gap_chosen:+.4f} (every item "
            f"{gap_all:+.4f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="alpacaeval2")
    parser.add_argument("--regime", default="extrapolation")
    parser.add_argument("--n-targets", type=int, default=20, help="targets of the split (the efficiency table's 20)")
    parser.add_argument("--targets", default="7,14,19", help="which of them, e.g. 0-4 or 7,14,19")
    parser.add_argument("--at", default="20,40,80", help="the numbers of items to report at")
    parser.add_argument("--method", default="bayesame")
    parser.add_argument("--smoke", action="store_true", help="seconds: mmlu, one target, n = 10")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dataset, args.targets, args.at = "mmlu", "0", "10"
    warnings.simplefilter("ignore")  # the missing-score notes: the documented default policy
    matrix = datasets.load(args.dataset)
    split = make_split(matrix, args.regime, n_targets=args.n_targets, split_seed=0)
    at = [int(a) for a in args.at.split(",") if a]
    for index in parse_draws(args.targets):
        print("\n".join(run_target(matrix, split, index, args.method, at)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
