"""Bayes-RS-Learn (BayesAME paper §5.1, baseline 5).

Random-Sampling-Learn of Zhang et al. (2025) with a Bayesian ridge: across the
K reference models, regress the full-benchmark score R*_k on the model's
scores on the coreset, R = s_Cᵀβ + ε, then predict the target from its own
coreset scores. scikit-learn ``BayesianRidge`` defaults (with its intercept).
Items are selected at random. R̂ ≠ R* in general, even at n = N.
"""

from __future__ import annotations

import numpy as np

from activeeval.methods.base import BaseMethod
from activeeval.methods.baselines._common import bayesian_ridge, prior_estimate
from activeeval.methods.estimate import Estimate

__all__ = ["BayesRSLearn", "bayes_rs_learn_estimate"]


def bayes_rs_learn_estimate(
    reference_scores: np.ndarray, observed: np.ndarray, scores: np.ndarray
) -> tuple[float, float]:
    """R̂ = s_Cᵀ μ_β + c, Var_R = s̃ᵀ Σ_β s̃ + α̂⁻¹ (SPEC §3, Bayes-RS-Learn).

    This is exactly ``BayesianRidge.predict(s_C, return_std=True)``. The
    sklearn default fits an intercept c, so the variance uses the target's
    scores centred by the reference models' mean coreset scores,
    s̃ = s_C − x̄; the paper's s_Cᵀ Σ_β s_C is the same formula without an
    intercept.

    Parameters
    ----------
    reference_scores : ndarray of shape (n_models, n_items)
    observed : ndarray of int, shape (n,)
    scores : ndarray of shape (n,)
        The target's s_C.
    """
    features = reference_scores[:, observed]
    full = reference_scores.mean(axis=1)
    model = bayesian_ridge().fit(features, full)
    mean, std = model.predict(np.asarray(scores, dtype=float)[None, :], return_std=True)
    return float(mean[0]), float(std[0]) ** 2


class BayesRSLearn(BaseMethod):
    """Bayes-RS-Learn: random items, Bayesian ridge across reference models.

    Before any observation the estimate is the reference mean with the
    reference models' variance of full scores.
    """

    name = "bayes-rs-learn"

    def _update(self, item: int, score: float) -> None:
        pass

    def _current_estimate(self) -> Estimate:
        if not self._items:
            mean, var = prior_estimate(self.reference)
            return Estimate(mean, var, 0, self.n_items, self._bounds())
        mean, var = bayes_rs_learn_estimate(self.reference.scores, np.asarray(self._items), np.asarray(self._scores))
        return Estimate(mean, var, len(self._items), self.n_items, self._bounds())
