"""Batch selection time of the paper's BayesAME (App. B.1) per strategy and batch size, at B = 541 and B = 5 000.

For each configuration a ``bayesame-paper`` method (the paper's Table 2
method; ``--method bayesame`` for the default) is built on the references,
observes ``--observed`` random items of a target (one hyperparameter refit
at n = 50 included), and then ``select_batch(k)`` is timed ``--repeats``
times (each with its own generator) for every strategy and k. Printed: the
median time per batch, and the batch's variance reduction β(A) (Eq. 12)
relative to the greedy batch's (> 1: a better batch than greedy).

Configurations: ``ifeval`` (bundled, N = 541 items; one model is the target,
the rest references) and ``mmlu_pro`` (bundled; 5 000 items of distinct
reference vectors drawn as in ``multi_target_speed.py``, so B = 5 000).

Usage (repository root):

    OPENBLAS_NUM_THREADS=1 python benchmarks/batch_selection_speed.py [--repeats 3] [--configs ifeval,mmlu_pro]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from activeeval import datasets
from activeeval.batch import STRATEGIES, batch_beta
from activeeval.gaussian import bucketize
from activeeval.methods.registry import make_method


def _matrix(name: str, seed: int):
    m = datasets.load(name)
    complete = [mid for mid, row in zip(m.model_ids, m.scores, strict=True) if not np.isnan(row).any()]
    m = m.select_models(complete)
    rng = np.random.default_rng(seed)
    target = str(rng.choice(list(m.model_ids)))
    if name == "mmlu_pro":  # 5 000 items of distinct reference vectors
        ref_scores = m.drop_models([target]).scores
        buckets = bucketize(ref_scores.T, 0.0)
        picks = [int(rng.choice(buckets.members[b])) for b in rng.choice(buckets.n_buckets, 5000, replace=False)]
        m = m.select_items([m.item_ids[i] for i in sorted(picks)])
    return m.drop_models([target]), np.asarray(m.model_scores(target), dtype=float)


def run(name: str, method_name: str, observed: int, repeats: int, sizes: list[int], seed: int) -> list[dict]:
    ref, truth = _matrix(name, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = make_method(method_name, ref, seed=seed)
        frozen = base.frozen_options()
        methods = {s: make_method(method_name, ref, seed=seed, batch_strategy=s, **frozen) for s in STRATEGIES}
    order = np.random.default_rng(seed).permutation(ref.n_items)[:observed]
    for m in methods.values():
        for i in order:
            m.observe(int(i), float(truth[i]))
    one = methods["greedy"]
    post = one.bucket_posterior
    cov = post.fantasy().batch_covariance(
        np.bincount(one.buckets.of_item[~one._observed], minlength=one.n_buckets).astype(float))
    rows = []
    for k in sizes:
        greedy_beta = None
        for strategy in STRATEGIES:
            m = methods[strategy]
            times, betas = [], []
            for r in range(repeats):
                t0 = time.perf_counter()
                batch = m.select_batch(k, rng=np.random.default_rng([seed, r]))
                times.append(time.perf_counter() - t0)
                betas.append(batch_beta(cov, m.buckets.of_item[batch]))
            beta = float(np.median(betas))
            if strategy == "greedy":
                greedy_beta = beta
            rows.append({"config": name, "B": one.n_buckets, "N": one.n_items, "|A|": k, "strategy": strategy,
                         "median ms": 1e3 * float(np.median(times)), "beta / greedy": beta / greedy_beta})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="ifeval,mmlu_pro")
    parser.add_argument("--method", default="bayesame-paper")
    parser.add_argument("--observed", type=int, default=60, help="items observed before the timing")
    parser.add_argument("--repeats", type=int, default=3, help="timed select_batch calls per strategy and |A|")
    parser.add_argument("--sizes", default="2,5,10")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.configs, args.observed, args.repeats, args.sizes = "ifeval", 5, 1, "2"
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for name in args.configs.split(","):
        rows.extend(run(name.strip(), args.method, args.observed, args.repeats, sizes, args.seed))
    header = f"{'config':<9} {'B':>5} {'N':>5} {'|A|':>4} {'strategy':<8} {'median ms':>10} {'beta/greedy':>12}"
    print(f"method {args.method}, {args.observed} items observed, median of {args.repeats} select_batch calls")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['config']:<9} {r['B']:>5} {r['N']:>5} {r['|A|']:>4} {r['strategy']:<8} {r['median ms']:>10.1f} "
              f"{r['beta / greedy']:>12.4f}")


if __name__ == "__main__":
    main()
