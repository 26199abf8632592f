"""How often BayesAME's hyperparameter refit collapses the kernel, and what that does to the estimate.

With the paper's fixed observation noise (σ² = 1e-4 in the unique regime) the
GP must reproduce every observed score almost exactly. When two items with
nearly the same reference vector get different scores from the target, the
NLML is minimised by a kernel with no correlation at all between distinct
items (β → ∞): the posterior of every unobserved item falls back to its prior
mean (the references' mean score on it), R̂ is pulled towards the references'
average, and Var(R) stays small, so the interval misses. A learned σ²
(``noise="learned"``, our extension) can explain the disagreement as noise
instead.

A run *collapses* when some refit sets β so large that two items whose
reference vectors differ in a single model have prior correlation below
0.01 (exp(−β/K) < 0.01, K = number of references). Printed per variant: runs,
collapsed share, and RMSE ×100 and 95 % coverage at n = N/4 over the collapsed
runs and over the others.

Usage (from the repository root; ~4 CPU min with the defaults)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/lengthscale_collapse.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/lengthscale_collapse.py --dataset ifeval --split-seeds 0,5 --seeds 10
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.registry import make_method, parse_method_spec

Z = 1.959963984540054


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ifeval")
    parser.add_argument("--regime", default="interpolation")
    parser.add_argument("--split-seeds", default="0,5")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--variants", default="bayesame-rs;bayesame-rs[noise=learned]",
                        help="method specs separated by ';'")
    args = parser.parse_args(argv)
    matrix = datasets.load(args.dataset)
    quarter = max(1, round(matrix.n_items / 4))
    print(f"# {matrix.name}, {args.regime}, 50 % references, split seeds {args.split_seeds}, {args.seeds} seeds "
          f"x 10 targets; error and coverage at n = {quarter} (N/4)")
    print(f"{'variant':>30}  {'runs':>5}  {'collapsed':>9}  {'RMSE coll.':>10}  {'cov coll.':>9}  "
          f"{'RMSE other':>10}  {'cov other':>9}  {'median final beta':>17}")
    for spec in args.variants.split(";"):
        name, options = parse_method_spec(spec)
        collapsed, errors, covered, finals = [], [], [], []
        for draw in (int(x) for x in args.split_seeds.split(",")):
            split = make_split(matrix, args.regime, 10, draw)
            for s in range(args.seeds):
                reference = matrix.select_models(sample_references(split.pool, 0.5, s))
                k = reference.n_models
                for target in split.targets:
                    truth = np.asarray(matrix.model_scores(target), dtype=float)
                    method = make_method(name, reference, seed=method_seed(0, s, 0), **options)
                    run_fixed(method, truth, matrix.n_items)
                    betas = [r.beta for r in method.refits]
                    collapsed.append(any(math.exp(-b / k) < 0.01 for b in betas))
                    finals.append(betas[-1] if betas else method.beta)
                    est = method.trajectory[quarter - 1]
                    err = est.mean - truth.mean()
                    errors.append(err)
                    covered.append(abs(err) <= Z * math.sqrt(max(est.var, 0.0)))
        c, e, v = np.array(collapsed), np.array(errors), np.array(covered)

        def cell(mask: np.ndarray) -> tuple[str, str]:
            if not mask.any():
                return "—", "—"
            return f"{100 * math.sqrt(float(np.mean(e[mask] ** 2))):.2f}", f"{float(v[mask].mean()):.3f}"

        rc, cc = cell(c)
        ro, co = cell(~c)
        print(f"{spec:>30}  {c.size:>5}  {c.mean():>9.3f}  {rc:>10}  {cc:>9}  {ro:>10}  {co:>9}  "
              f"{float(np.median(finals)):>17.3g}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
