"""ProEval (Huang et al., 2026), "new model with score features" (BayesAME paper §5.1, baseline 6).

The target's latent item abilities θ ∈ R^N are Gaussian with prior mean m
(the mean reference score of each item) and prior covariance Σ, the
empirical covariance of the reference models' scores; a score is
s_i = θ_i + ε_i, ε_i ~ N(0, σ²). The quantity estimated is R = (1/N) Σ_i θ_i:
R̂ = E[R | s_C], Var_R = Var(R | s_C). Items are selected at random (no
abstention rule).

Σ has rank ≤ K − 1, so we write θ = m + A z, z ~ N(0, I_K), A = Dᵀ/√(K − 1)
with D the centred reference scores (K × N); then Σ = A Aᵀ exactly and the
posterior of z is a K-dimensional Bayesian linear regression:

    P = I + A_Cᵀ A_C / σ²,   z̄ = P⁻¹ A_Cᵀ (s_C − m_C) / σ²,
    R̂ = m̄ + āᵀ z̄,   Var_R = āᵀ P⁻¹ ā,   ā = (1/N) Aᵀ 1.

By Woodbury this equals the N-dimensional GP formulas
R̂ = m̄ + (1/N) 1ᵀ Σ_{·C} (Σ_CC + σ² I)⁻¹ (s_C − m_C) (tested), at O(K²) per
observation and O(K³) per estimate. Because R is the mean of θ, not of s,
R̂ ≠ R* and Var_R > 0 even at n = N.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from activeeval.exceptions import ConfigurationError, NumericalError
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate

__all__ = ["ProEval", "proeval_factor", "proeval_posterior"]


def proeval_factor(reference_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prior mean m (n_items,) and factor A (n_items, n_models) with A Aᵀ = empirical covariance."""
    k = reference_scores.shape[0]
    m = reference_scores.mean(axis=0)
    a = (reference_scores - m).T / np.sqrt(k - 1)
    return m, a


def proeval_posterior(
    m: np.ndarray, a: np.ndarray, observed: np.ndarray, scores: np.ndarray, noise_var: float
) -> tuple[float, float]:
    """E[R | s_C] and Var(R | s_C) for R = mean(θ), θ ~ N(m, A Aᵀ), s_i = θ_i + N(0, σ²).

    Parameters
    ----------
    m : ndarray of shape (n_items,)
    a : ndarray of shape (n_items, k)
    observed : ndarray of int, shape (n,)
    scores : ndarray of shape (n,)
    noise_var : float
        σ².
    """
    a_c = a[observed]
    precision = np.eye(a.shape[1]) + a_c.T @ a_c / noise_var
    rhs = a_c.T @ (np.asarray(scores, dtype=float) - m[observed]) / noise_var
    a_bar = a.mean(axis=0)
    try:
        factor = cho_factor(precision, lower=True)
    except LinAlgError as exc:  # pragma: no cover - P ⪰ I is always positive definite
        raise NumericalError(f"ProEval posterior precision is not positive definite ({exc}); raise noise_var") from exc
    z_bar = cho_solve(factor, rhs)
    mean = float(m.mean() + a_bar @ z_bar)
    var = float(a_bar @ cho_solve(factor, a_bar))
    return mean, max(var, 0.0)


class ProEval(BaseMethod):
    """ProEval baseline: empirical-covariance Gaussian prior over item abilities.

    Parameters
    ----------
    noise_var : float, default 0.01
        Observation noise σ² of s_i given θ_i. The empirical covariance is
        singular (rank ≤ K − 1), so a positive σ² is needed; 0.01 (a score
        standard deviation of 0.1) is our choice, not a value from the paper.
    """

    name = "proeval"

    def __init__(self, reference, *, noise_var: float = 1e-2, **kwargs) -> None:  # noqa: ANN001
        super().__init__(reference, **kwargs)
        if not (np.isfinite(noise_var) and noise_var > 0):
            raise ConfigurationError(f"noise_var must be a positive number, got {noise_var}; try 0.01")
        self.noise_var = float(noise_var)
        self._m, self._a = proeval_factor(self.reference.scores)

    def _update(self, item: int, score: float) -> None:
        pass

    def _current_estimate(self) -> Estimate:
        mean, var = proeval_posterior(
            self._m, self._a, np.asarray(self._items, dtype=int), np.asarray(self._scores), self.noise_var
        )
        return Estimate(mean, var, len(self._items), self.n_items, self._bounds())
