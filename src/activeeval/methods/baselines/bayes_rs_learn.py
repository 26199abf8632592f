"""Bayes-RS-Learn (BayesAME paper §5.1, baseline 5).

Random-Sampling-Learn of Zhang et al. (2025) with a Bayesian ridge: across the
K reference models, regress the full-benchmark score R*_k on the model's
scores on the coreset, R = s_Cᵀβ + ε, then predict the target from its own
coreset scores. Items are selected at random. R̂ ≠ R* in general, even at
n = N.

The regression is scikit-learn's ``BayesianRidge`` algorithm with its
defaults (with its intercept), reimplemented in the eigenbasis of the centred
Gram matrix (:mod:`._ridge`; tested equal to scikit-learn, which is not
needed at run time). Σ_β is the proper posterior covariance
(α XᵀX + λ I)⁻¹, which scikit-learn ≥ 1.7 also uses; older scikit-learn
versions dropped most of the null space of X when K ≤ n (see :mod:`._ridge`).

:meth:`BayesRSLearn.replay` plays every target of a backtest at once: with
the shared item order the regression does not depend on the target at all,
so one fit per n serves every target; only the prediction differs.
"""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import fast_replay, prior_estimate
from activeeval.methods.baselines._ridge import eigens_adding_columns, fit_bayesian_ridge, fit_in_blocks
from activeeval.methods.estimate import Estimate

__all__ = ["BayesRSLearn", "bayes_rs_learn_estimate"]

_BLOCK = 32  # replay: fits whose EM rounds run together (bounds the designs held at once)


def bayes_rs_learn_estimate(
    reference_scores: np.ndarray, observed: np.ndarray, scores: np.ndarray
) -> tuple[float, float]:
    """R̂ = s_Cᵀ μ_β + c, Var_R = s̃ᵀ Σ_β s̃ + α̂⁻¹ (SPEC §3, Bayes-RS-Learn).

    This is ``BayesianRidge.predict(s_C, return_std=True)`` (its standard
    deviation squared), with the proper Σ_β. The fit has an intercept c, so
    the variance uses the target's scores centred by the reference models'
    mean coreset scores, s̃ = s_C − x̄, as scikit-learn's ``predict`` does;
    the paper's s_Cᵀ Σ_β s_C is the same formula without an intercept.

    Parameters
    ----------
    reference_scores : ndarray of shape (n_models, n_items)
    observed : ndarray of int, shape (n,)
    scores : ndarray of shape (n,)
        The target's s_C.
    """
    fit = fit_bayesian_ridge(reference_scores[:, observed], reference_scores.mean(axis=1))
    mean, var = fit.predict(np.asarray(scores, dtype=float)[None, :])
    return float(mean[0, 0]), float(var[0, 0])


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

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Bayes-RS-Learn trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`.

        All targets see the items in the order
        :func:`~activeeval.methods.base.random_order` gives, so at each n the
        regression (reference models' coreset scores → full scores) is the
        same for all of them: one fit per n (:func:`._ridge.eigens_adding_columns`:
        on the n × n Gram matrix while n < K, then on the K × K one kept
        current by rank-one updates), and one prediction per target.
        """
        n_items = reference.n_items
        order = random_order(seed, n_items)
        full = reference.scores.mean(axis=1)[None, :]
        y = truths[:, order]
        means = np.empty(y.shape)
        var = np.empty(y.shape)
        eigens = eigens_adding_columns(reference.scores[:, order], range(1, n_items + 1))  # items in play order
        for fit in fit_in_blocks(eigens, lambda eigen: full, _BLOCK):
            m = fit.eigen.n_features
            mean, v = fit.predict(y[:, :m])
            means[:, m - 1], var[:, m - 1] = mean[0], v[0]
        return means, var
