"""Does the default's reference fit find its best optimum? Its β grid + L-BFGS-B against 24 other starts.

The default BayesAME fits (α, β, σ², γ) on the references alone
(:func:`activeeval.gp.prior.fit_hyperparameters`: leave-one-out NLML of 20 pseudo-targets on 300 items,
L-BFGS-B from the best of six points of a β grid). The NLML has more than one local minimum (the linear term
γ → 0 is one branch), so the start matters. For each dataset and draw (the references: half of the models,
sampled as the backtest samples them, seeds 0 and 1), this fits from the default's start and from the 2 × 3 ×
2 × 2 = 24 starts α ∈ {0.02, 0.2}, β ∈ {1, 10, 100}, σ² ∈ {0.001, 0.05}, γ ∈ {0.0001, 0.3}, and prints the
default's NLML and the lowest any start reached (with its point, when lower by more than 0.001).

Usage (repository root; about an hour on one core for every dataset)::

    OPENBLAS_NUM_THREADS=1 ACTIVEEVAL_CACHE=off python benchmarks/fit_multistart.py
    OPENBLAS_NUM_THREADS=1 ACTIVEEVAL_CACHE=off python benchmarks/fit_multistart.py --datasets math --draws 1
    python benchmarks/fit_multistart.py --smoke                    # one dataset, one draw, two starts: seconds
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

import numpy as np

os.environ.setdefault("ACTIVEEVAL_CACHE", "off")  # every fit computed, none read from a user cache

from activeeval import datasets  # after the cache setting
from activeeval.experiments.protocol import sample_references
from activeeval.gp.prior import ReferenceFit, fit_hyperparameters

DATASETS = ("ifeval", "musr", "arc_challenge", "gsm", "math", "mmlu", "commonsense", "alpacaeval2",
            "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")
STARTS = tuple(itertools.product((0.02, 0.2), (1.0, 10.0, 100.0), (1e-3, 0.05), (1e-4, 0.3)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--draws", default="0,1", help="reference draws (seeds of sample_references)")
    parser.add_argument("--smoke", action="store_true", help="one small dataset, one draw, two starts")
    args = parser.parse_args(argv)
    names = ["wmt21_en-zh_chrf"] if args.smoke else [d for d in args.datasets.split(",") if d]
    draws = [0] if args.smoke else [int(d) for d in args.draws.split(",")]
    starts = STARTS[:2] if args.smoke else STARTS
    began = time.perf_counter()
    better = 0
    for name in names:
        matrix = datasets.load(name)
        for draw in draws:
            refs = matrix.select_models(sample_references(list(matrix.model_ids), 0.5, draw, 0))
            refs = refs.select_models([m for m, row in zip(refs.model_ids, refs.scores, strict=True)
                                       if not np.isnan(row).any()])
            fit = fit_hyperparameters(refs)
            best, where = fit.nlml, "the default's"
            for alpha, beta, sigma2, gamma in starts:
                start = ReferenceFit(alpha=alpha, beta=beta, sigma2=sigma2, tau0=fit.tau0, tau1=fit.tau1, gamma=gamma)
                other = fit_hyperparameters(refs, start=start)
                if other.nlml < best - 1e-3:
                    best = other.nlml
                    where = f"a={other.alpha:.3g} b={other.beta:.3g} s2={other.sigma2:.3g} g={other.gamma:.3g}"
            better += best < fit.nlml - 1e-3
            print(f"{name:18s} draw {draw}: default nlml {fit.nlml:.3f} (a={fit.alpha:.3g} b={fit.beta:.3g} "
                  f"s2={fit.sigma2:.3g} g={fit.gamma:.3g}); best of {len(starts)} starts {best:.3f} {where}",
                  flush=True)
    print(f"# {better} of {len(names) * len(draws)} fits improved on by another start; wall "
          f"{time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
