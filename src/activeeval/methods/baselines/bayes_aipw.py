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

:func:`replay` plays every target of a backtest at once: the targets share
the item order, hence the design matrix, so one eigendecomposition per n
serves them all.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import prior_estimate, worst_case_var
from activeeval.methods.baselines._ridge import GramEigen, GramTracker, RidgeFit, fit_eigen, fit_many
from activeeval.methods.baselines.rs_mean import replay_inputs
from activeeval.methods.estimate import Estimate

__all__ = ["BayesAIPW", "bayes_aipw_estimate", "replay"]

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


def replay(
    reference: ScoreMatrix, truths: np.ndarray, seed: int, *, missing: str = "models", **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Bayes-AIPW trajectories of every target played with method seed ``seed``.

    Equal (to round-off) to running :class:`BayesAIPW` with ``seed`` on each
    target for n = 1..N items. All targets see the items in the order
    :func:`~activeeval.methods.base.random_order` gives, so at each n they
    share the design φ_C: one eigendecomposition of its centred Gram matrix
    (the n × n one while n ≤ M; then the M × M one, kept current by a
    rank-one update per item, see :class:`._ridge.GramTracker`) serves every
    target, each with its own α, λ and number of rounds; the rounds of
    several n run as one vectorised loop (:func:`._ridge.fit_many`).

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
    phi = reference.scores.T[order]  # items in play order
    y = truths[:, order]
    means = np.empty(y.shape)
    var = np.empty(y.shape)
    means[:, 0], var[:, 0] = y[:, 0], worst_case_var(reference)  # n = 1, as the class
    means[:, -1], var[:, -1] = y.mean(axis=1), 0.0  # n = N: R* exactly
    total = phi.sum(axis=0)
    tracker: GramTracker | None = None
    prev_offset = phi[0]  # x̄ of the items observed before the current one
    pending: list[tuple[int, GramEigen, np.ndarray]] = []
    for n in range(2, n_items):
        x = phi[:n]
        x_offset = x.mean(axis=0)
        xc = x - x_offset
        if n <= n_models:
            eigen = GramEigen.from_gram(xc, x_offset, xc @ xc.T, dual=True)
        else:
            if tracker is None:  # the first primal n from scratch, then one rank-one update per item
                tracker = GramTracker(xc.T @ xc)
            else:  # Welford: X_cᵀX_c gains ((n − 1)/n) δδᵀ, δ = x_n − x̄_{n−1}
                tracker.add(x[-1] - prev_offset, (n - 1) / n)
            eigen = GramEigen.from_eigen(xc, x_offset, tracker.values, tracker.vectors, dual=False)
        prev_offset = x_offset
        d = (total - x_offset * n) / (n_items - n) - x_offset  # φ̄_U − φ̄_C
        pending.append((n, eigen, d))
        if len(pending) == _BLOCK or n == n_items - 1:
            fits = fit_many([p[1] for p in pending], [y[:, : p[0]] for p in pending])
            for (m, _, dm), fit in zip(pending, fits, strict=True):
                means[:, m - 1], var[:, m - 1] = _aipw(fit, dm, fit.y_offset, m, n_items)
            pending.clear()
    return means, var


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
