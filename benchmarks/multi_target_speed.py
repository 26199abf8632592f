"""Time per step of multi-target BayesAME (issue 13): K_t = 10 targets at B = 541 (IFEval) and B = 5 000 (MMLU-Pro).

For each configuration: 10 random targets, the rest of the models as
references; the warm start (every target on 10 % of the items) is played,
then ``--steps`` round-robin steps. Reported: median milliseconds per
``select`` and per ``observe`` (observe includes the estimate of the observed
target, as every driver asks for it), over the warm start and over the
round-robin steps separately, the refits (their count and median seconds,
fit and rebuild), the observations n at the end, and the peak resident
memory of the process.

B = 5 000: the MMLU-Pro items of 5 000 distinct reference vectors (one item
per bucket, drawn at random), so that B = N = 5 000 in the unique regime
where selection is by information gain.

    OPENBLAS_NUM_THREADS=1 python benchmarks/multi_target_speed.py [--steps 200] [--configs ifeval,mmlu_pro] \
        [--level coupled|separate]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np

from activeeval import datasets
from activeeval.gaussian import bucketize
from activeeval.methods.bayesame_multi import BayesAMEMulti


def _matrix(name: str, seed: int, max_items: int = 0):
    m = datasets.load(name)
    complete = [mid for mid, row in zip(m.model_ids, m.scores, strict=True) if not np.isnan(row).any()]
    m = m.select_models(complete)  # targets and references with every score
    rng = np.random.default_rng(seed)
    targets = list(rng.choice(list(m.model_ids), 10, replace=False))
    if name == "mmlu_pro":  # 5 000 items of distinct reference vectors
        ref_scores = m.drop_models(targets).scores
        buckets = bucketize(ref_scores.T, 0.0)
        picks = [int(rng.choice(buckets.members[b])) for b in rng.choice(buckets.n_buckets, 5000, replace=False)]
        m = m.select_items([m.item_ids[i] for i in sorted(picks)])
    if max_items:
        m = m.select_items(list(m.item_ids[:max_items]))
    return m, targets


def run(name: str, steps: int, seed: int, max_items: int = 0, **options: object) -> dict:
    m, targets = _matrix(name, seed, max_items)
    ref = m.drop_models(targets)
    truth = np.stack([np.asarray(m.model_scores(t), dtype=float) for t in targets])
    t0 = time.perf_counter()
    method = BayesAMEMulti(ref, targets, seed=seed, **options)
    build = time.perf_counter() - t0
    warm = method.warm_items_.size * method.n_targets
    times: dict[str, list[float]] = {"warm_select": [], "warm_observe": [], "select": [], "observe": []}
    refits: list[float] = []
    for step in range(warm + steps):
        a = time.perf_counter()
        t, i = method.select()
        b = time.perf_counter()
        fits = len(method.fits)
        method.observe(t, i, float(truth[t, i]))
        c = time.perf_counter()
        if len(method.fits) > fits:
            refits.append(c - b)
            continue
        phase = "warm_" if step < warm else ""
        times[phase + "select"].append(1e3 * (b - a))
        times[phase + "observe"].append(1e3 * (c - b))
    return {
        "config": name, "B": method.n_buckets, "N": method.n_items, "n": method.n_observed, "build s": build,
        **{f"{k} ms": float(np.median(v)) if v else float("nan") for k, v in times.items()},
        "refits": len(refits), "refit s": float(np.median(refits)) if refits else float("nan"),
        "peak MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="round-robin steps after the warm start")
    parser.add_argument("--configs", default="ifeval,mmlu_pro")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--level", default="coupled", choices=("coupled", "separate"),
                        help="the method's level option (separate: each target keeps its own level and slope terms)")
    parser.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items of each (0: all)")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.configs, args.max_items = 3, "ifeval", 60
    # the paper's 10 % shared start: it fills every target's observations fast (n = 5 000 at B = 5 000); the
    # default has none, and a step's work depends on n, not on the warm start or the coupling
    rows = [run(name, args.steps, args.seed, args.max_items, warm_start=0.1, level=args.level)
            for name in args.configs.split(",")]
    keys = list(rows[0])
    print(" | ".join(keys))
    for row in rows:
        print(" | ".join(f"{row[k]:.3g}" if isinstance(row[k], float) else str(row[k]) for k in keys))


if __name__ == "__main__":
    main()
