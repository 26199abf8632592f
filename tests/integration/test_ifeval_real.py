"""Real-data check: on IFEval, BayesAME beats RS-Mean after 10 % of the items.

Protocol (BayesAME paper §5, interpolation): hold out a target, sample 50 % of
the remaining models as references with each seed, observe 10 % of the items
and compare the RMSE of the two estimates over targets × seeds.
"""

from __future__ import annotations

import numpy as np
import pytest

from activeeval import BayesAME, RSMean, datasets
from activeeval.experiments.simulate import hold_out, run_fixed

N_TARGETS = 5
N_SEEDS = 10


@pytest.fixture(scope="module")
def errors() -> dict[str, np.ndarray]:
    matrix = datasets.load("ifeval")
    n_items = matrix.n_items
    n = int(0.1 * n_items)
    rng = np.random.default_rng(2026)
    targets = rng.choice(matrix.model_ids, size=N_TARGETS, replace=False)
    out: dict[str, list[float]] = {"bayesame": [], "rs-mean": [], "covered": []}
    for target in targets:
        split = hold_out(matrix, str(target))
        for seed in range(N_SEEDS):
            pool = split.reference.model_ids
            refs = np.random.default_rng(seed).choice(pool, size=len(pool) // 2, replace=False)
            reference = split.reference.select_models(refs)
            bayes = run_fixed(BayesAME(reference, seed=seed), split.truth, n)
            rs = run_fixed(RSMean(reference, seed=seed), split.truth, n)
            out["bayesame"].append(bayes.mean - split.true_score)
            out["rs-mean"].append(rs.mean - split.true_score)
            lo, hi = bayes.ci()
            out["covered"].append(float(lo <= split.true_score <= hi))
    return {k: np.asarray(v) for k, v in out.items()}


def test_bayesame_rmse_below_rs_mean_at_ten_percent(errors: dict[str, np.ndarray]) -> None:
    rmse_bayes = float(np.sqrt(np.mean(errors["bayesame"] ** 2)))
    rmse_rs = float(np.sqrt(np.mean(errors["rs-mean"] ** 2)))
    assert errors["bayesame"].size == N_TARGETS * N_SEEDS
    assert rmse_bayes < rmse_rs, (rmse_bayes, rmse_rs)


def test_bayesame_interval_is_not_overconfident(errors: dict[str, np.ndarray]) -> None:
    # 50 runs of a nominal 95 % interval: fewer than 80 % covered would mean the
    # interval is clearly too narrow (binomial P(X <= 40 | n=50, p=0.95) < 1e-4).
    assert errors["covered"].mean() >= 0.8, errors["covered"].mean()
