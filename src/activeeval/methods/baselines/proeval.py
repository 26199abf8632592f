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

:meth:`ProEval.replay` plays every target of a backtest at once (:func:`proeval_path`).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, cholesky, solve_triangular

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, NumericalError
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import fast_replay
from activeeval.methods.estimate import Estimate

__all__ = ["ProEval", "proeval_factor", "proeval_path", "proeval_posterior"]


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


def _check_noise_var(noise_var: float) -> float:
    if not (np.isfinite(noise_var) and noise_var > 0):
        raise ConfigurationError(f"noise_var must be a positive number, got {noise_var}; try 0.3 (ProEval's default)")
    return float(noise_var)


def proeval_path(
    m: np.ndarray, a: np.ndarray, order: np.ndarray, scores: np.ndarray, noise_var: float
) -> tuple[np.ndarray, np.ndarray]:
    """E[R | s_C] and Var(R | s_C) after each prefix C = order[:n], n = 1..N, for several targets.

    Parameters
    ----------
    m : ndarray of shape (n_items,)
    a : ndarray of shape (n_items, k)
        Prior mean and factor, from :func:`proeval_factor`.
    order : ndarray of int, shape (n_items,)
        A permutation of the items: the order of observation.
    scores : ndarray of shape (T, n_items)
        The targets' scores, indexed by item (not by order).
    noise_var : float
        σ².

    Returns
    -------
    means, vars : ndarrays of shape (T, n_items) and (n_items,)
        Column n − 1 is :func:`proeval_posterior` on ``order[:n]``; the
        variance does not depend on the scores.

    Notes
    -----
    In the order of observation the scores are jointly Gaussian with
    covariance K = A_o A_oᵀ + σ² I. With K = L Lᵀ (Cholesky), the leading
    n × n block of L is the Cholesky factor of K_CC, and forward substitution
    never changes earlier entries, so with u = L⁻¹ A_o ā (ā = Aᵀ1/N is
    Cov(θ, R) in factor form, A_o ā = Cov(s, R)) and v = L⁻¹ (s_o − m_o):

        R̂_n = m̄ + Σ_{k≤n} u_k v_k,   Var_R,n = āᵀā − Σ_{k≤n} u_k².

    The variance is accumulated from the end instead, Var_R,n = Var_R,N +
    Σ_{k>n} u_k² with Var_R,N from :func:`proeval_posterior` (the K × K
    form), so that no late variance is a small difference of large numbers.
    One O(N³/3) factorisation serves every n and every target.
    """
    order = np.asarray(order, dtype=np.intp)
    n_items = m.size
    if np.sort(order).tolist() != list(range(n_items)):
        raise ConfigurationError(f"order must be a permutation of the {n_items} items")
    scores = np.atleast_2d(np.asarray(scores, dtype=float))
    a_o = a[order]
    a_bar = a.mean(axis=0)
    cov = a_o @ a_o.T
    cov[np.diag_indices_from(cov)] += noise_var
    try:
        chol = cholesky(cov, lower=True, check_finite=False)
    except LinAlgError as exc:  # pragma: no cover - A Aᵀ + σ²I with σ² > 0 is positive definite
        raise NumericalError(f"ProEval prior covariance is not positive definite ({exc}); raise noise_var") from exc
    rhs = np.column_stack([a_o @ a_bar, (scores[:, order] - m[order]).T])
    solved = solve_triangular(chol, rhs, lower=True, check_finite=False)
    u, v = solved[:, 0], solved[:, 1:]
    means = m.mean() + np.cumsum(u[:, None] * v, axis=0).T
    _, var_full = proeval_posterior(m, a, order, np.zeros(n_items), noise_var)
    tail = np.zeros(n_items)
    tail[:-1] = np.cumsum((u * u)[:0:-1])[::-1]  # tail[n-1] = Σ_{k>n} u_k²
    return means, np.maximum(var_full + tail, 0.0)


class ProEval(BaseMethod):
    """ProEval baseline: empirical-covariance Gaussian prior over item abilities.

    Parameters
    ----------
    noise_var : float, default 0.3
        Observation noise σ² of s_i given θ_i. The empirical covariance is
        singular (rank ≤ K − 1), so a positive σ² is needed. The BayesAME
        paper gives none; 0.3 is the default of ProEval's own implementation
        (google-deepmind/proeval, ``BQPriorSampler(noise_variance=0.3)``,
        whose linear-kernel features ``(scores − mean)/√(K − 1)`` give exactly
        this prior). With it our IFEval extrapolation EW-IRMSE is near the
        paper's (``benchmarks/paper_gaps.py``); with 0.01 it was half.
    """

    name = "proeval"

    def __init__(self, reference, *, noise_var: float = 0.3, **kwargs) -> None:
        super().__init__(reference, **kwargs)
        self.noise_var = _check_noise_var(noise_var)
        self._m, self._a = proeval_factor(self.reference.scores)

    def _update(self, item: int, score: float) -> None:
        pass

    def _current_estimate(self) -> Estimate:
        mean, var = proeval_posterior(
            self._m, self._a, np.asarray(self._items, dtype=int), np.asarray(self._scores), self.noise_var
        )
        return Estimate(mean, var, len(self._items), self.n_items, self._bounds())

    @fast_replay
    def replay(
        reference: ScoreMatrix, truths: np.ndarray, seed: int, *, noise_var: float = 0.3
    ) -> tuple[np.ndarray, np.ndarray]:
        """ProEval trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`.

        All targets see the items in the order
        :func:`~activeeval.methods.base.random_order` gives, so one
        factorisation serves them all (:func:`proeval_path`).
        """
        noise_var = _check_noise_var(noise_var)
        m, a = proeval_factor(reference.scores)
        means, var = proeval_path(m, a, random_order(seed, reference.n_items), truths, noise_var)
        return means, np.broadcast_to(var, means.shape).copy()
