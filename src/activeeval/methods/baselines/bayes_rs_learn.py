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

:func:`replay` plays every target of a backtest at once: with the shared
item order the regression does not depend on the target at all, so one fit
per n serves every target; only the prediction differs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import prior_estimate
from activeeval.methods.baselines._ridge import GramEigen, GramTracker, fit_bayesian_ridge, fit_many
from activeeval.methods.baselines.rs_mean import replay_inputs
from activeeval.methods.estimate import Estimate

__all__ = ["BayesRSLearn", "bayes_rs_learn_estimate", "replay"]

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


def replay(
    reference: ScoreMatrix, truths: np.ndarray, seed: int, *, missing: str = "models", **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Bayes-RS-Learn trajectories of every target played with method seed ``seed``.

    Equal (to round-off) to running :class:`BayesRSLearn` with ``seed`` on
    each target for n = 1..N items. All targets see the items in the order
    :func:`~activeeval.methods.base.random_order` gives, so at each n the
    regression (reference models' coreset scores → full scores) is the same
    for all of them: one fit per n (on the n × n Gram matrix while n < K;
    then on the K × K one, kept current by a rank-one update per item, see
    :class:`._ridge.GramTracker`), and one prediction per target.

    Parameters
    ----------
    reference : ScoreMatrix
    truths : ndarray of shape (T, N)
        Each target's full score row, items as in the reference.
    seed : int
    missing : {"models", "items", "auto"}
        Missing-score policy, as for the class.
    **options
        The class's stopping options (ignored: a replay runs to n = N).

    Returns
    -------
    means, vars : ndarrays of shape (T, N)
        R̂ and Var_R after n = 1..N observed items (column n − 1).
    """
    reference, truths = replay_inputs(reference, truths, seed, options, missing=missing, caller="replay")
    n_items, n_models = reference.n_items, reference.n_models
    order = random_order(int(seed), n_items)
    full = reference.scores.mean(axis=1)[None, :]
    x_all = reference.scores[:, order]  # items in play order
    y = truths[:, order]
    means = np.empty(y.shape)
    var = np.empty(y.shape)
    tracker: GramTracker | None = None
    pending: list[GramEigen] = []
    for n in range(1, n_items + 1):
        x = x_all[:, :n]
        x_offset = x.mean(axis=0)
        xc = x - x_offset
        if n_models > n:
            eigen = GramEigen.from_gram(xc, x_offset, xc.T @ xc, dual=False)
        else:
            if tracker is None:  # the first dual n from scratch, then one rank-one update per item
                tracker = GramTracker(xc @ xc.T)
            else:  # a new feature adds its centred column's outer product to X_c X_cᵀ
                tracker.add(xc[:, -1])
            eigen = GramEigen.from_eigen(xc, x_offset, tracker.values, tracker.vectors, dual=True)
        pending.append(eigen)
        if len(pending) == _BLOCK or n == n_items:
            fits = fit_many(pending, [full] * len(pending))
            for ev, fit in zip(pending, fits, strict=True):
                m = ev.n_features
                mean, v = fit.predict(y[:, :m])
                means[:, m - 1], var[:, m - 1] = mean[0], v[0]
            pending.clear()
    return means, var


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
