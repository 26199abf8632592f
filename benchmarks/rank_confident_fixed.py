"""Wrong confident calls of the adaptive ranker vs fixed-length CAT on the same held-out sets (no sequential stops).

Separates the two suspects when confident pairwise calls are wrong too often:
the ranker's sequential decisions (a pair's confidence re-read after every
item) and the pairwise confidence itself. Fixed-length CAT gives every model
``--items`` items and decides once, at the end.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/rank_confident_fixed.py --dataset musr --seeds 3 [--no-local-error]
"""

from __future__ import annotations

import argparse
import warnings

from activeeval import datasets
from activeeval.experiments import ranking_eval as ev
from activeeval.methods.cat import fit_calibration
from activeeval.ranking import AdaptiveRanker, rank_fixed_length


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="musr")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--no-local-error", action="store_true", help="CAT without the local error check")
    ap.add_argument("--folds", type=int, default=5, help="held-out sets of 4 per seed")
    ap.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        args.dataset, args.seeds, args.items, args.folds, args.max_items = "math", 1, 11, 1, 60
    warnings.simplefilter("ignore")  # incomplete reference models are dropped, as documented
    m = datasets.load(args.dataset)
    if args.max_items:
        m = m.select_items(list(m.item_ids[: args.max_items]))
    tot = {"fixed-length": [0, 0], "adaptive": [0, 0]}
    for s in range(args.seeds):
        for group in ev.backtest_folds(m, folds=args.folds, holdout=4, seed=s):
            ref, _ = m.drop_models(group).dropna("models")
            cal = fit_calibration(ref.scores)
            make = ev.method_factory("cat", ref, calibration=cal, seed=s,
                                     **({"local_error": False} if args.no_local_error else {}))
            score = ev._oracle(m, ref)
            cols = [m.item_index(i) for i in ref.item_ids]
            truth = {g: float(m.scores[m.model_index(g), cols].mean()) for g in group}
            fixed = rank_fixed_length(group, make, score, n_items=args.items)
            adaptive = AdaptiveRanker(group, make, score, budget=args.items * len(group), min_items=10).run()
            for key, r in (("fixed-length", fixed), ("adaptive", adaptive)):
                right, total = ev.confident_counts(r, truth)
                tot[key][0] += total - right
                tot[key][1] += total
    check = "without" if args.no_local_error else "with"
    print(f"{args.dataset}, {args.seeds} seeds x {args.folds} folds of 4, {args.items} items per model, "
          f"{check} the local error check")
    for key, (wrong, total) in tot.items():
        print(f"  {key:<13} {wrong} wrong of {total} confident pairs")


if __name__ == "__main__":
    main()
