"""How honest and how wide can an interval from random items alone be? The floors of a plain mean, measured.

Issue 25 asks for a median effective sample size (ESS) of at least 1 in every cell at 93–97 % coverage. ESS
compares the reported variance with S²(1 − n/N)/n, the variance of the mean of n random items computed from the
target's *own* item variance S² — which no method knows. This script measures what random sampling alone can do
against that bar, on the real targets of the efficiency protocol (``benchmarks/efficiency.py``: 50 % references
are irrelevant here, the targets are the same 20 per dataset and regime): for each target, ``--reps`` uniform
samples without replacement of n = 2.5, 5, 10 and 25 % of N items, and three symmetric 95 % intervals around their
mean p̂, each with the variance max(Wald, floor):

* ``wald``: the finite-population Wald variance s²(1 − n/N)/n alone (no floor);
* ``wilson``: the floor of RS-Mean and of the default's design-based phase
  (:func:`activeeval.design.sampling_var_floor`): the symmetric interval as wide as the longer side of Wilson's;
* ``split``: the same with α split between the two sides where the interval is narrowest (``split=True``);
* ``asym``: not symmetric — Wilson's own interval (L, U) at the effective sample size n(N − 1)/(N − n), the one
  the ``wilson`` floor widens to the longer side on both sides; its ESS counts its width, S²(1 − n/N)/n divided by
  ((U − L)/2z)² (what an interval reported as two bounds would buy: no method reports one yet).

Each cell prints coverage / median ESS. A second table gives the exact binomial coverage (N = ∞) of the same
intervals, averaged over p in [0.02, 0.98] and at its worst, by n.

Usage (repository root, package installed)::

    python benchmarks/floor_coverage.py                  # the 7 binary shared datasets, 50 samples per target
    python benchmarks/floor_coverage.py --smoke          # one dataset, a few samples: seconds
"""

from __future__ import annotations

import argparse
import time
from math import comb

import numpy as np

from activeeval import datasets
from activeeval.design import effective_sample_size, sampling_var_floor, wilson_bounds
from activeeval.experiments.protocol import make_split

Z = 1.959963984540054
BINARY = ("ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense")
BUDGETS = (0.025, 0.05, 0.10, 0.25)
FLOORS = ("wald", "wilson", "split")
COLUMNS = (*FLOORS, "asym")


def _variances(sample: np.ndarray, n_items: int) -> dict[str, float]:
    n = sample.size
    p = float(sample.mean())
    wald = float(sample.var(ddof=1)) * (1 - n / n_items) / n
    out = {"wald": wald}
    for name, split in (("wilson", False), ("split", True)):
        floor = float(sampling_var_floor(p, sample.min(), sample.max(), n, n_items, (0.0, 1.0), True, split=split))
        out[name] = max(wald, floor)
    return out


def measure(dataset: str, regime: str, reps: int, seed: int = 0) -> list[dict[str, tuple[float, float]]]:
    """Per budget: floor name -> (coverage, median ESS) over the regime's 20 targets × ``reps`` samples."""
    matrix = datasets.load(dataset)
    split = make_split(matrix, regime, n_targets=20, split_seed=0)
    n_items = matrix.n_items
    rng = np.random.default_rng([seed, BINARY.index(dataset), regime == "extrapolation"])
    rows = []
    for budget in BUDGETS:
        n = max(2, round(budget * n_items))
        hits: dict[str, list[bool]] = {f: [] for f in COLUMNS}
        ess: dict[str, list[float]] = {f: [] for f in COLUMNS}
        n_eff = float(effective_sample_size(n, n_items))
        for target in split.targets:
            y = matrix.model_scores(target).astype(float)
            truth, rs_var = float(y.mean()), float(y.var(ddof=1)) * (1 - n / n_items) / n
            for _ in range(reps):
                sample = y[rng.choice(n_items, n, replace=False)]
                p = float(sample.mean())
                for name, var in _variances(sample, n_items).items():
                    hits[name].append(abs(p - truth) <= Z * np.sqrt(var))
                    ess[name].append(rs_var / var if var > 0 else np.inf)
                lo, hi = (float(b) for b in wilson_bounds(p, n_eff, Z))
                hits["asym"].append(lo <= truth <= hi)
                ess["asym"].append(rs_var / ((hi - lo) / (2 * Z)) ** 2 if hi > lo else np.inf)
        rows.append({f: (float(np.mean(hits[f])), float(np.median(ess[f]))) for f in COLUMNS})
    return rows


def exact_binomial(n: int, grid: int = 49) -> dict[str, tuple[float, float]]:
    """floor -> (mean, min) exact coverage over p in [0.02, 0.98] of p̂ ± 1.96 sqrt(max(Wald, floor)), N = ∞
    (and ``asym``: of Wilson's interval itself)."""
    k = np.arange(n + 1)
    p_hat = k / n
    wald = p_hat * (1 - p_hat) / (n - 1)
    out = {}
    for name in FLOORS:
        if name == "wald":
            var = wald
        else:
            var = np.maximum(wald, sampling_var_floor(p_hat, 0.0, 1.0, np.full(n + 1, n), 10**12, (0.0, 1.0), True,
                                                      split=name == "split"))
        half = Z * np.sqrt(var)
        out[name] = _exact_coverage(n, p_hat - half, p_hat + half, grid)
    out["asym"] = _exact_coverage(n, *wilson_bounds(p_hat, np.full(n + 1, float(n)), Z), grid)
    return out


def _exact_coverage(n: int, lo: np.ndarray, hi: np.ndarray, grid: int) -> tuple[float, float]:
    """(mean, min) over p in [0.02, 0.98] of P(lo[k] <= p <= hi[k]), k ~ Binomial(n, p)."""
    k = np.arange(n + 1)
    covs = []
    for p in np.linspace(0.02, 0.98, grid):
        pmf = np.array([comb(n, j) * p**j * (1 - p) ** (n - j) for j in k])
        covs.append(float(pmf[(lo <= p) & (p <= hi)].sum()))
    return float(np.mean(covs)), float(np.min(covs))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(BINARY))
    parser.add_argument("--reps", type=int, default=50, help="random samples per target and budget")
    parser.add_argument("--smoke", action="store_true", help="one dataset, 2 samples per target: seconds")
    args = parser.parse_args(argv)
    names = ["mmlu"] if args.smoke else [d for d in args.datasets.split(",") if d]
    reps = 2 if args.smoke else args.reps
    start = time.perf_counter()
    head = " | ".join(f"{b:>5} " + " ".join(f"{f:>11}" for f in COLUMNS) for b in BUDGETS)
    print(f"random sampling's 95 % interval, coverage/median ESS, 20 targets x {reps} samples per cell")
    print(f"{'dataset':14s} {'regime':6s} {head}")
    for name in names:
        for regime in ("interpolation", "extrapolation"):
            rows = measure(name, regime, reps)
            cells = " | ".join(f"{b:>5} " + " ".join(f"{row[f][0]:.3f}/{row[f][1]:4.2f}" for f in COLUMNS)
                               for b, row in zip(BUDGETS, rows, strict=True))
            print(f"{name:14s} {regime[:6]:6s} {cells}", flush=True)
    print("\nexact binomial coverage, N = inf, mean / min over p in [0.02, 0.98]")
    print("   n " + " ".join(f"{f:>13}" for f in COLUMNS))
    for n in (10, 30) if args.smoke else (10, 14, 20, 30, 60, 100):
        cov = exact_binomial(n)
        print(f"{n:4d} " + " ".join(f"  {cov[f][0]:.3f}/{cov[f][1]:.3f}" for f in COLUMNS))
    print(f"\nwall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
