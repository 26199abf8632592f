"""Bayes-AIPW (BayesAME paper §5.1, baseline 4).

A Bayesian ridge regression s_i = φ_iᵀβ + ε_i, ε_i ~ N(0, α⁻¹), fitted on the
coreset with scikit-learn's ``BayesianRidge`` (its defaults, as in the paper,
including its intercept), predicts every item: μ_i = φ_iᵀ μ_β. The AIPW
estimator corrects the coreset mean by the predicted gap between the
unevaluated and the evaluated items. Items are selected at random.
"""

from __future__ import annotations

import numpy as np

from activeeval.methods.base import BaseMethod
from activeeval.methods.baselines._common import bayesian_ridge, prior_estimate, worst_case_var
from activeeval.methods.estimate import Estimate

__all__ = ["BayesAIPW", "bayes_aipw_estimate"]


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
    s_mean = float(scores.mean())
    if n >= n_items:
        return s_mean, 0.0
    unobserved = np.ones(n_items, dtype=bool)
    unobserved[observed] = False
    model = bayesian_ridge().fit(phi[observed], scores)
    mu = model.predict(phi)
    frac = (n_items - n) / n_items
    mean = s_mean + frac * (float(mu[unobserved].mean()) - float(mu[observed].mean()))
    d = phi[unobserved].mean(axis=0) - phi[observed].mean(axis=0)
    var = frac**2 * (float(d @ model.sigma_ @ d) + (1.0 / model.alpha_) * (1.0 / n + 1.0 / (n_items - n)))
    return mean, max(var, 0.0)


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
