"""Bayes-AIPW (BayesAME paper §5.1, baseline 4).

A Bayesian ridge regression s_i = φ_iᵀβ + ε_i, ε_i ~ N(0, α⁻¹), fitted on the
coreset, predicts every item: μ_i = φ_iᵀ μ_β. The AIPW estimator corrects
the coreset mean by the predicted gap between the unevaluated and the
evaluated items. Items are selected at random.

The regression is scikit-learn's ``BayesianRidge`` algorithm with its
defaults, as in the paper (including its intercept), reimplemented in the
eigenbasis of the centred Gram matrix (:mod:`._ridge`; tested equal to
scikit-learn, which is not needed at run time). Σ_β is the proper posterior
covariance (α XᵀX + λ I)⁻¹, which scikit-learn ≥ 1.7 also uses; older
scikit-learn versions dropped most of the null space of X when n ≤ M (see
:mod:`._ridge`).

:meth:`BayesAIPW.replay` plays every target of a backtest at once: the
targets share the item order, hence the design matrix, so one
eigendecomposition per n serves them all.
"""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import fast_replay, prior_estimate, worst_case_var
from activeeval.methods.baselines._ridge import GramEigen, RidgeFit, eigens_adding_rows, fit_eigen, fit_in_blocks
from activeeval.methods.estimate import Estimate

__all__ = ["BayesAIPW", "bayes_aipw_estimate"]

_BLOCK = 24  # replay: fits whose EM rounds run together (bounds the designs held at once)


def bayes_aipw_estimate(phi: np.ndarray, observed: np.ndarray, scores: np.ndarray) -> tuple[float, float]:
    """AIPW estimate and its posterior variance (SPEC §3, Bayes-AIPW).

    R̂ = s̄_C + ((N − n)/N) (μ̄_U − μ̄_C),
    Var_R = ((N − n)/N)² [ (φ̄_U − φ̄_C)ᵀ Σ_β (φ̄_U − φ̄_C) + α̂⁻¹ (1/n + 1/(N − n)) ].

    Parameters
    ----------
    phi : ndarray of shape (n_items, n_models)
        Reference scores φ_i of every item.
    observed : ndarray of int, shape (n,)
        Indices of the coreset C (n ≥ 2).
    scores : ndarray of shape (n,)
        s_C.

    Returns
    -------
    (float, float)
        R̂ and Var_R. With every item observed: (s̄, 0) = (R*, 0).
    """
    n_items = phi.shape[0]
    n = observed.size
    scores = np.asarray(scores, dtype=float)
    s_mean = float(scores.mean())
    if n >= n_items:
        return s_mean, 0.0
    unobserved = np.ones(n_items, dtype=bool)
    unobserved[observed] = False
    eigen = GramEigen.from_design(phi[observed])
    fit = fit_eigen(eigen, scores)
    d = phi[unobserved].mean(axis=0) - phi[observed].mean(axis=0)
    mean, var = _aipw(fit, d, np.array([s_mean]), n, n_items)
    return float(mean[0]), float(var[0])


def _aipw(
    fit: RidgeFit, d: np.ndarray, s_mean: np.ndarray, n: int, n_items: int
) -> tuple[np.ndarray, np.ndarray]:
    """The AIPW mean and variance of each fitted target, d = φ̄_U − φ̄_C."""
    g = fit.eigen.project_features(d[None, :])
    frac = (n_items - n) / n_items
    gap = fit.linear(g)[:, 0]  # μ̄_U − μ̄_C = dᵀ μ_β (the intercept cancels)
    quad = fit.quad(g, np.array([d @ d]))[:, 0]
    var = frac**2 * (quad + (1.0 / fit.alpha) * (1.0 / n + 1.0 / (n_items - n)))
    return s_mean + frac * gap, np.maximum(var, 0.0)


class BayesAIPW(BaseMethod):
    """Bayes-AIPW: random items, AIPW estimator with a Bayesian-ridge outcome model.

    With fewer than 2 observations the regression is not identified: the
    estimate is then the reference mean (n = 0) or the single score (n = 1),
    with the RS-Mean worst-case variance. R̂ = R* and Var_R = 0 at n = N.
    """

    name = "bayes-aipw"

    def _update(self, item: int, score: float) -> None:
        pass  # refitted from the observations at each estimate

    def _current_estimate(self) -> Estimate:
        n = len(self._items)
        if n == 0:
            mean, var = prior_estimate(self.reference)
            return Estimate(mean, var, 0, self.n_items, self._bounds())
        if n == 1:
            return Estimate(self._scores[0], worst_case_var(self.reference), 1, self.n_items, self._bounds())
        mean, var = bayes_aipw_estimate(
            self.reference.scores.T, np.asarray(self._items), np.asarray(self._scores)
        )
        return Estimate(mean, var, n, self.n_items, self._bounds())

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Bayes-AIPW trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`.

        All targets see the items in the order
        :func:`~activeeval.methods.base.random_order` gives, so at each n they
        share the design φ_C: one eigendecomposition of its centred Gram
        matrix (:func:`._ridge.eigens_adding_rows`: the n × n one while n ≤ M,
        then the M × M one kept current by rank-one updates) serves every
        target, each with its own α, λ and number of rounds; the rounds of
        several n run as one vectorised loop (:func:`._ridge.fit_in_blocks`).
        """
        n_items = reference.n_items
        order = random_order(seed, n_items)
        phi = reference.scores.T[order]  # items in play order
        y = truths[:, order]
        means = np.empty(y.shape)
        var = np.empty(y.shape)
        means[:, 0], var[:, 0] = y[:, 0], worst_case_var(reference)  # n = 1, as the class
        means[:, -1], var[:, -1] = y.mean(axis=1), 0.0  # n = N: R* exactly
        total = phi.sum(axis=0)
        eigens = eigens_adding_rows(phi, range(2, n_items))
        for fit in fit_in_blocks(eigens, lambda eigen: y[:, : eigen.n_samples], _BLOCK):
            n, x_offset = fit.eigen.n_samples, fit.eigen.x_offset
            d = (total - x_offset * n) / (n_items - n) - x_offset  # φ̄_U − φ̄_C
            means[:, n - 1], var[:, n - 1] = _aipw(fit, d, fit.y_offset, n, n_items)
        return means, var
