"""Pure maths of the IRT baseline: 2-PL (binary) and Beta IRT (continuous).

Not the continuous-CAT model of :mod:`activeeval.irt.continuous`: this is the paper's
IRT baseline (BayesAME §5.1, baseline 7).

Response models, for model j with ability θ_j and item i with discrimination
a_i and difficulty b_i, η_ij = a_i θ_j − b_i, μ_ij = σ(η_ij):

* **2-PL** (p-IRT, Polo et al. 2024): s_ij ~ Bernoulli(μ_ij).
* **Beta IRT** (Noel & Dauvier 2007 style, logistic mean): s_ij ~
  Beta(μ_ij φ_i, (1 − μ_ij) φ_i) with an item precision φ_i = exp(ψ_i).
  Scores are clipped to [ε, 1 − ε] (ε = 1e-3) so that 0 and 1 have a density.

Item parameters are fitted on the reference models by a joint MAP over
(θ_1..θ_K, a, b[, ψ]) with analytic gradients (L-BFGS-B). Priors:
θ ~ N(0, 1) (fixes location and scale), a ~ N(1, 1), b ~ N(0, 3²),
ψ ~ N(log 10, 2²). The target's ability posterior is computed **exactly by
1-D quadrature** on a fixed grid (401 points on [−8, 8], prior N(0, 1)) instead
of the paper's MCMC: it is faster and updates after every observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, gammaln, log_expit, psi

from activeeval.exceptions import NumericalError

__all__ = [
    "CLIP",
    "ItemParams",
    "ability_grid",
    "fit_2pl",
    "fit_beta_irt",
    "grid_loglik",
    "grid_loglik_all",
    "grid_loglik_terms",
    "item_moments",
    "posterior_R",
    "posterior_R_rows",
]

CLIP = 1e-3  # Beta IRT: scores clipped to [CLIP, 1 − CLIP]
_A_MEAN, _A_SD, _B_SD = 1.0, 1.0, 3.0
_PSI_MEAN, _PSI_SD = float(np.log(10.0)), 2.0
_MU_EPS = 1e-6


@dataclass(frozen=True)
class ItemParams:
    """Fitted item parameters (arrays of shape (n_items,)); ``log_precision`` only for Beta IRT."""

    a: np.ndarray
    b: np.ndarray
    log_precision: np.ndarray | None = None
    abilities: np.ndarray | None = None  # the reference models' MAP abilities, shape (n_models,)

    @property
    def kind(self) -> str:
        return "binary" if self.log_precision is None else "continuous"


def _init(y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    _k, n = y.shape
    model_mean = np.clip(y.mean(axis=1), 0.02, 0.98)
    theta = np.log(model_mean / (1 - model_mean))
    theta = (theta - theta.mean()) / (theta.std() + 1e-9)
    item_mean = np.clip(y.mean(axis=0), 0.02, 0.98)
    return theta, np.ones(n), -np.log(item_mean / (1 - item_mean))


def _neg_log_post_2pl(x: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log joint posterior of the 2-PL and its gradient; y (K, N) in {0, 1}."""
    k, n = y.shape
    theta, a, b = x[:k], x[k : k + n], x[k + n :]
    eta = theta[:, None] * a[None, :] - b[None, :]
    # −log lik = Σ softplus(η) − y η, computed stably
    nll = float(np.sum(np.logaddexp(0.0, eta) - y * eta))
    nll += 0.5 * float(theta @ theta) + 0.5 * float(np.sum(((a - _A_MEAN) / _A_SD) ** 2))
    nll += 0.5 * float(np.sum((b / _B_SD) ** 2))
    g = expit(eta) - y  # ∂(−log lik)/∂η, shape (K, N)
    grad = np.concatenate(
        [g @ a + theta, g.T @ theta + (a - _A_MEAN) / _A_SD**2, -g.sum(axis=0) + b / _B_SD**2]
    )
    return nll, grad


def _beta_terms(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    yc = np.clip(y, CLIP, 1 - CLIP)
    return np.log(yc), np.log1p(-yc)


def _neg_log_post_beta(x: np.ndarray, y: np.ndarray, logs: tuple[np.ndarray, np.ndarray]) -> tuple[float, np.ndarray]:
    """Negative log joint posterior of the Beta IRT and its gradient; y (K, N) in [0, 1]."""
    k, n = y.shape
    theta, a, b, lp = x[:k], x[k : k + n], x[k + n : k + 2 * n], x[k + 2 * n :]
    log_y, log_1y = logs
    eta = theta[:, None] * a[None, :] - b[None, :]
    # keep both Beta shapes positive: μ in [1e-6, 1 − 1e-6], precision in [e^-3, e^10]
    mu = np.clip(expit(eta), _MU_EPS, 1 - _MU_EPS)
    phi = np.exp(np.clip(lp, -3.0, 10.0))[None, :]
    p, q = mu * phi, (1 - mu) * phi
    loglik = gammaln(phi) - gammaln(p) - gammaln(q) + (p - 1) * log_y + (q - 1) * log_1y
    nll = -float(loglik.sum())
    nll += 0.5 * float(theta @ theta) + 0.5 * float(np.sum(((a - _A_MEAN) / _A_SD) ** 2))
    nll += 0.5 * float(np.sum((b / _B_SD) ** 2)) + 0.5 * float(np.sum(((lp - _PSI_MEAN) / _PSI_SD) ** 2))
    dp, dq = psi(p), psi(q)
    d_mu = phi * (-dp + dq + log_y - log_1y)
    d_phi = psi(phi) - mu * dp - (1 - mu) * dq + mu * log_y + (1 - mu) * log_1y
    g = -d_mu * mu * (1 - mu)  # ∂(−log lik)/∂η
    g_lp = -(d_phi * phi).sum(axis=0)
    grad = np.concatenate(
        [
            g @ a + theta,
            g.T @ theta + (a - _A_MEAN) / _A_SD**2,
            -g.sum(axis=0) + b / _B_SD**2,
            g_lp + (lp - _PSI_MEAN) / _PSI_SD**2,
        ]
    )
    return nll, grad


def _run(fun, x0: np.ndarray, args: tuple, max_iter: int, bounds=None) -> np.ndarray:
    res = minimize(fun, x0, args=args, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})
    if not np.all(np.isfinite(res.x)):
        raise NumericalError("IRT item-parameter fit diverged (non-finite parameters); check the reference scores")
    return res.x


def fit_2pl(reference_scores: np.ndarray, max_iter: int = 500) -> ItemParams:
    """Joint MAP fit of the 2-PL on binary reference scores of shape (n_models, n_items)."""
    y = np.asarray(reference_scores, dtype=float)
    k, n = y.shape
    theta, a, b = _init(y)
    x = _run(_neg_log_post_2pl, np.concatenate([theta, a, b]), (y,), max_iter)
    return ItemParams(a=x[k : k + n], b=x[k + n :], abilities=x[:k])


def fit_beta_irt(reference_scores: np.ndarray, max_iter: int = 500) -> ItemParams:
    """Joint MAP fit of the Beta IRT on continuous reference scores in [0, 1], shape (n_models, n_items)."""
    y = np.asarray(reference_scores, dtype=float)
    k, n = y.shape
    theta, a, b = _init(y)
    x0 = np.concatenate([theta, a, b, np.full(n, _PSI_MEAN)])
    bounds = [(None, None)] * (k + 2 * n) + [(-3.0, 10.0)] * n
    x = _run(_neg_log_post_beta, x0, (y, _beta_terms(y)), max_iter, bounds)
    return ItemParams(a=x[k : k + n], b=x[k + n : k + 2 * n], log_precision=x[k + 2 * n :], abilities=x[:k])


def ability_grid(n_points: int = 401, half_width: float = 8.0) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature grid θ_g (n_points,) and the log N(0, 1) prior on it (unnormalised)."""
    grid = np.linspace(-half_width, half_width, n_points)
    return grid, -0.5 * grid**2


def grid_loglik(params: ItemParams, grid: np.ndarray, item: int, score: float) -> np.ndarray:
    """log p(s_item | θ_g) on the grid, shape (n_points,)."""
    eta = params.a[item] * grid - params.b[item]
    if params.log_precision is None:
        return log_expit(eta) if score >= 0.5 else log_expit(-eta)
    mu = np.clip(expit(eta), _MU_EPS, 1 - _MU_EPS)
    phi = float(np.exp(np.clip(params.log_precision[item], -3.0, 10.0)))
    yc = min(max(score, CLIP), 1 - CLIP)
    p, q = mu * phi, (1 - mu) * phi
    return gammaln(phi) - gammaln(p) - gammaln(q) + (p - 1) * np.log(yc) + (q - 1) * np.log1p(-yc)


def grid_loglik_terms(params: ItemParams, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The score-independent parts of :func:`grid_loglik` for every item, each of shape (n_points, n_items).

    2-PL: (log σ(η), log σ(−η), None), the log-likelihoods of a 1 and of a 0.
    Beta IRT: (log Γ(φ) − log Γ(p) − log Γ(q), p − 1, q − 1) with p = μφ, q = (1 − μ)φ.
    Pass them to :func:`grid_loglik_all` to score many targets without recomputing them.
    """
    eta = params.a[None, :] * grid[:, None] - params.b[None, :]
    if params.log_precision is None:
        return log_expit(eta), log_expit(-eta), None
    mu = np.clip(expit(eta), _MU_EPS, 1 - _MU_EPS)
    phi = np.exp(np.clip(params.log_precision, -3.0, 10.0))[None, :]
    p, q = mu * phi, (1 - mu) * phi
    return gammaln(phi) - gammaln(p) - gammaln(q), p - 1, q - 1


def grid_loglik_all(
    params: ItemParams,
    grid: np.ndarray,
    scores: np.ndarray,
    terms: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None,
) -> np.ndarray:
    """log p(s_i | θ_g) for every item at once, shape (n_points, n_items).

    Column i is :func:`grid_loglik` ``(params, grid, i, scores[i])``, computed
    with the same operations element by element. ``terms`` is
    :func:`grid_loglik_terms` ``(params, grid)``, computed here if not given.
    """
    scores = np.asarray(scores, dtype=float)
    first, second, third = terms if terms is not None else grid_loglik_terms(params, grid)
    if third is None:
        return np.where(scores[None, :] >= 0.5, first, second)
    yc = np.clip(scores, CLIP, 1 - CLIP)[None, :]
    return first + second * np.log(yc) + third * np.log1p(-yc)


def item_moments(params: ItemParams, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean μ_i(θ_g) and variance of s_i given θ_g, both of shape (n_points, n_items).

    2-PL: variance μ(1 − μ); Beta IRT: μ(1 − μ)/(φ + 1).
    """
    mu = expit(grid[:, None] * params.a[None, :] - params.b[None, :])
    var = mu * (1 - mu)
    if params.log_precision is not None:
        var = var / (np.exp(params.log_precision)[None, :] + 1.0)
    return mu, var


def posterior_R(
    log_post: np.ndarray, observed_sum: float, unobserved_mean: np.ndarray, unobserved_var: np.ndarray, n_items: int
) -> tuple[float, float]:
    """Posterior mean and variance of R = (1/N)(Σ_C s_i + Σ_U s_i) by quadrature.

    Eq. 5 with w = 1/N and the predicted item means:
    R̂ = (1/N)(Σ_C s_i + E_θ[Σ_U μ_i(θ)]),
    Var_R = (1/N²)(Var_θ[Σ_U μ_i(θ)] + E_θ[Σ_U Var(s_i | θ)]).

    Parameters
    ----------
    log_post : ndarray of shape (n_points,)
        Unnormalised log posterior of the target's ability on the grid.
    observed_sum : float
        Σ_{i∈C} s_i.
    unobserved_mean, unobserved_var : ndarray of shape (n_points,)
        Σ_{i∈U} μ_i(θ_g) and Σ_{i∈U} Var(s_i | θ_g).
    n_items : int
    """
    w = np.exp(log_post - log_post.max())
    w /= w.sum()
    m = float(w @ unobserved_mean)
    var = float(w @ (unobserved_mean - m) ** 2) + float(w @ unobserved_var)
    return (observed_sum + m) / n_items, max(var, 0.0) / n_items**2


def posterior_R_rows(
    log_post: np.ndarray,
    observed_sum: np.ndarray,
    unobserved_mean: np.ndarray,
    unobserved_var: np.ndarray,
    n_items: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`posterior_R` for several states at once (one per row).

    Parameters
    ----------
    log_post, unobserved_mean, unobserved_var : ndarrays of shape (n_states, n_points)
    observed_sum : ndarray of shape (n_states,)
    n_items : int

    Returns
    -------
    mean, var : ndarrays of shape (n_states,)
        Row r equals ``posterior_R(log_post[r], observed_sum[r], unobserved_mean[r],
        unobserved_var[r], n_items)`` up to the order of the sums' round-off.
    """
    w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    m = np.einsum("ij,ij->i", w, unobserved_mean)
    var = np.einsum("ij,ij->i", w, (unobserved_mean - m[:, None]) ** 2) + np.einsum("ij,ij->i", w, unobserved_var)
    return (np.asarray(observed_sum, dtype=float) + m) / n_items, np.maximum(var, 0.0) / n_items**2
