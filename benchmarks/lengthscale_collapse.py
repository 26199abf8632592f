"""How often BayesAME's hyperparameter refit collapses the kernel, and what that does to the estimate.

With the paper's fixed observation noise (σ² = 1e-4 in the unique regime) the
GP must reproduce every observed score almost exactly. For some targets the
NLML is minimised by a kernel with no correlation at all between distinct
items (β → ∞): the posterior of every unobserved item then falls back to its
prior mean (the references' mean score on it), so the paper's estimator in the
unique regime (Eq. 3, w = 1/N, the posterior mean) is pulled towards the
references' average, while Var(R | s_C) stays small and the interval misses.

A run *has collapsed* at n when a refit up to n has set β so large that two
items whose reference vectors differ in a single model have prior correlation
below 0.01 (exp(−β/K) < 0.01, K = number of references). Printed per variant,
at n = fraction · N, for the collapsed runs and for the others: the RMSE × 100
and the 95 % coverage of

* ``eq3``: the paper's estimate R̂_Bayes (w = 1/N) with ± z·sqrt(Var(R | s_C));
* ``eq4+A3``: the control-variate estimate R̂_CV (Eq. 4, w = 1/n) with
  ± z·sqrt(Var(R | s_C) + (R̂_Bayes − R̂_CV)²), the posterior MSE of R̂_CV
  (the paper's App. A.3 diagnostic). R̂_CV plugs in the *posterior* means of
  the observed buckets, so where the posterior reproduces the observed scores
  (as it does with a tiny σ²) it equals R̂_Bayes and cannot catch the bias.

and σ² at n (its median over runs, and the share of runs at the lower bound
1e-5 of the search: only ``noise="learned"`` moves it).

Usage (from the repository root; ~3 CPU min with the defaults)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/lengthscale_collapse.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/lengthscale_collapse.py --split-seeds 0,5 --seeds 20 --fraction 0.5
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.bayesame_paper import HYPER_LOWER
from activeeval.methods.registry import make_method, parse_method_spec

Z = 1.959963984540054


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="ifeval")
    parser.add_argument("--regime", default="interpolation")
    parser.add_argument("--split-seeds", default="0,5", help="target draws (interpolation), comma-separated")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--fraction", type=float, default=0.25, help="n = fraction x N")
    parser.add_argument("--variants", default="bayesame-paper-rs;bayesame-paper-rs[noise=learned];bayesame-paper",
                        help="method specs separated by ';'")
    parser.add_argument("--targets", type=int, default=10, help="targets per draw")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dataset, args.split_seeds, args.seeds, args.fraction, args.variants, args.targets = (
            "math", "0", 1, 0.02, "bayesame-paper-rs", 2)
    matrix = datasets.load(args.dataset)
    n_at = max(1, round(args.fraction * matrix.n_items))
    print(f"# {matrix.name}, {args.regime}, 50 % references, split seeds {args.split_seeds}, {args.seeds} seeds "
          f"x {args.targets} targets; at n = {n_at} ({args.fraction:g} N); RMSE x100 / 95 % coverage")
    head = ["variant", "runs", "collapsed", "eq3 coll.", "eq4+A3 coll.", "eq3 other", "eq4+A3 other",
            "sigma2 median", "at 1e-5 bound"]
    widths = [30, 5, 9, 14, 14, 14, 14, 13, 13]
    print("  ".join(f"{h:>{w}}" for h, w in zip(head, widths, strict=True)))
    for spec in args.variants.split(";"):
        name, options = parse_method_spec(spec)
        rows = []  # (collapsed, err_bayes, covered_bayes, err_cv, covered_cv)
        sigma2 = []
        for draw in (int(x) for x in args.split_seeds.split(",")):
            split = make_split(matrix, args.regime, args.targets, draw)
            for s in range(args.seeds):
                reference = matrix.select_models(sample_references(split.pool, 0.5, s))
                k = reference.n_models
                for target in split.targets:
                    truth = np.asarray(matrix.model_scores(target), dtype=float)
                    method = make_method(name, reference, seed=method_seed(0, s, 0), **options)
                    run_fixed(method, truth, n_at)
                    collapsed = any(math.exp(-r.beta / k) < 0.01 for r in method.refits)
                    bayes, cv = method._estimators()
                    var = max(method.estimate().var, 0.0)
                    mse = var + (bayes - cv) ** 2  # == method.posterior_mse()
                    r_star = float(truth.mean())
                    sigma2.append(method.sigma2_)
                    rows.append((collapsed, bayes - r_star, abs(bayes - r_star) <= Z * math.sqrt(var),
                                 cv - r_star, abs(cv - r_star) <= Z * math.sqrt(mse)))
        table = np.array(rows, dtype=float)
        coll = table[:, 0] == 1

        def cell(mask: np.ndarray, col: int) -> str:
            if not mask.any():
                return "—"
            rmse = 100 * math.sqrt(float(np.mean(table[mask, col] ** 2)))  # noqa: B023 - called within this iteration
            return f"{rmse:.2f} / {table[mask, col + 1].mean():.3f}"  # noqa: B023 - called within this iteration

        cells = [spec, str(len(rows)), f"{coll.mean():.3f}", cell(coll, 1), cell(coll, 3), cell(~coll, 1),
                 cell(~coll, 3), f"{float(np.median(sigma2)):.3g}",
                 f"{float(np.mean(np.isclose(sigma2, HYPER_LOWER))):.3f}"]
        print("  ".join(f"{c:>{w}}" for c, w in zip(cells, widths, strict=True)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
