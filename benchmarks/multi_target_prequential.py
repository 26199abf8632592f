"""Is the joint method's early under-coverage in-sample optimism of its interval scale? (issue 13)

Plays the default ``bayesame-multi`` on one multi-target backtest seed (the
backtest's target set, 50 % references, the same method seed) and, when
every target has ``--marks`` items, prints per target: the standardised
error z = (R̂ − R)/sd, the interval scale the method uses (innovations
standardised under the *latest* fit) and the *prequential* scale (each
innovation standardised under the fit of its time, as it was observed),
and z had the prequential scale been used; then the count of |z| > 1.96.

    OPENBLAS_NUM_THREADS=1 python benchmarks/multi_target_prequential.py --dataset alpacaeval2 --seed 1
"""

from __future__ import annotations

import argparse

import numpy as np
from threadpoolctl import threadpool_limits

from activeeval import datasets
from activeeval.experiments.multi_target import make_target_split
from activeeval.experiments.protocol import method_seed, sample_references
from activeeval.methods.bayesame_multi import SCALE_SKIP, BayesAMEMulti


class Prequential(BayesAMEMulti):
    """The default, also keeping each target's innovations standardised as they were observed."""

    def _update(self, target: int, item: int, score: float) -> None:
        if not hasattr(self, "preq"):
            self.preq = [[] for _ in range(self.n_targets)]
        innovation, var = self.posterior.observe(target, int(self.buckets.of_item[item]), score)
        self.preq[target].append(innovation / np.sqrt(var))
        self._sum_obs[target] += score

    def prequential_scales(self) -> np.ndarray:
        z2 = [np.square(p[SCALE_SKIP:]) for p in self.preq]
        return np.array([(self.scale_prior + float(z.sum())) / (self.scale_prior + z.size) for z in z2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="alpacaeval2")
    parser.add_argument("--correlation", default="high")
    parser.add_argument("--targets", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1, help="the backtest's seed index")
    parser.add_argument("--marks", default="40,60,80,120")
    parser.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.targets, args.marks, args.max_items = 2, "5", 60
    marks = [int(x) for x in args.marks.split(",")]
    with threadpool_limits(1):
        matrix = datasets.load(args.dataset)
        if args.max_items:
            matrix = matrix.select_items(list(matrix.item_ids[: args.max_items]))
        split = make_target_split(matrix, args.correlation, args.targets, 0)
        reference = matrix.select_models(sample_references(split.pool, 0.5, args.seed, 0))
        targets = list(split.targets)
        truths = np.stack([np.asarray(matrix.model_scores(t), dtype=float) for t in targets])
        truth = truths.mean(axis=1)
        method = Prequential(reference, targets, seed=method_seed(0, args.seed, 0))
        k = 0
        while k < len(marks):
            t, item = method.select()
            method.observe(t, item, float(truths[t, item]))
            if min(method.n_observed_of(j) for j in range(len(targets))) == marks[k] and \
                    method.n_observed == marks[k] * len(targets):
                est = method.estimates()
                scale, preq = method.scales(), method.prequential_scales()
                z = np.array([(e.mean - r) / e.std for e, r in zip(est, truth, strict=True)])
                z_pre = z * np.sqrt(scale / preq)
                print(f"n = {marks[k]} per target ({len(method.fits)} fits)")
                print("  z           ", np.round(z, 2))
                print("  scale       ", np.round(scale, 2))
                print("  prequential ", np.round(preq, 2))
                print("  z (preq.)   ", np.round(z_pre, 2))
                print(f"  |z| > 1.96: {int((abs(z) > 1.96).sum())} with the scale, "
                      f"{int((abs(z_pre) > 1.96).sum())} with the prequential scale")
                k += 1


if __name__ == "__main__":
    main()
