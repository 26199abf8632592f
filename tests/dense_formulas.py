"""Dense reference formulas: the paper's batch equations, straight from their definitions, for tests.

The methods never call these. They form B × B (or n × n) matrices and solve
them outright, O(B³), which is what makes them good references: the
incremental (rank-one) posterior of :class:`activeeval.gaussian.BucketPosterior`
and the optimised NLML of :class:`activeeval.gaussian.BucketNLML` are tested
against them (tests/test_bayesame_maths.py, tests/test_gaussian.py). Keeping
them out of :mod:`activeeval.gaussian` keeps that module to what runs.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cho_solve

from activeeval.gaussian import chol
from activeeval.gp.kernels import SquaredExponential

__all__ = ["batch_beta_dense", "item_covariance", "nlml_dense", "posterior_bucket_form", "posterior_item_form"]


def posterior_item_form(
    mu: np.ndarray, sigma: np.ndarray, buckets_obs: np.ndarray, scores: np.ndarray, noise_var: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 7 (batch, item form): posterior mean and covariance of θ.

    Parameters
    ----------
    mu : ndarray (B,), sigma : ndarray (B, B)
        Prior mean and covariance.
    buckets_obs : ndarray of int (n,)
        Bucket of each observed item (the rows of H_C).
    scores : ndarray (n,)
        Observed scores s_C.
    noise_var : ndarray (n,)
        D_C, each observation's noise variance N_b σ².
    """
    h_sigma = sigma[buckets_obs]  # H_C Σ, (n, B)
    gram = h_sigma[:, buckets_obs] + np.diag(noise_var)
    factor = chol(gram, "item-form Gram")
    mean = mu + h_sigma.T @ cho_solve(factor, scores - mu[buckets_obs])
    cov = sigma - h_sigma.T @ cho_solve(factor, h_sigma)
    return mean, cov


def posterior_bucket_form(
    mu: np.ndarray, sigma: np.ndarray, sbar: np.ndarray, n_obs: np.ndarray, counts: np.ndarray, sigma2: float
) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 8 (batch, bucket form), restricted to buckets with n_b > 0.

    μ|C = μ + Σ_{·O} (Σ_OO + Δ)⁻¹ (s̄_O − μ_O), Δ_bb = σ² N_b / n_b.
    """
    obs = np.flatnonzero(n_obs > 0)
    if obs.size == 0:
        return mu.copy(), sigma.copy()
    s_ob = sigma[:, obs]
    gram = sigma[np.ix_(obs, obs)] + np.diag(sigma2 * counts[obs] / n_obs[obs])
    factor = chol(gram, "bucket-form Gram")
    mean = mu + s_ob @ cho_solve(factor, sbar[obs] - mu[obs])
    cov = sigma - s_ob @ cho_solve(factor, s_ob.T)
    return mean, cov


def nlml_dense(
    log_params: np.ndarray, d2: np.ndarray, resid: np.ndarray, noise_scale: np.ndarray, n_refs: int
) -> tuple[float, np.ndarray]:
    """Eq. 11 (bucket form) and its gradient in (log α, log β, log σ²), from dense matrices.

    L = ½ rᵀ K⁻¹ r + ½ log|K| + (m/2) log 2π, K = α e^{−β d²/K} + σ² diag(noise_scale),
    and ∂L/∂θ = ½ tr((K⁻¹ − aaᵀ) ∂K/∂θ) with a = K⁻¹ r, the kernel's part of
    ∂K/∂θ from :class:`~activeeval.gp.kernels.SquaredExponential`. The same
    quantity as :class:`~activeeval.gaussian.BucketNLML` (whose gradient is in
    the raw parameters), without its shortcuts.
    """
    alpha, beta, sigma2 = np.exp(np.asarray(log_params, dtype=float))
    kernel = SquaredExponential(float(alpha), float(beta), n_refs)
    sigma, dsigma = kernel(np.asarray(d2, dtype=float), eval_gradient=True)
    gram = sigma + np.diag(sigma2 * np.asarray(noise_scale, dtype=float))
    resid = np.asarray(resid, dtype=float)
    sign, logdet = np.linalg.slogdet(gram)
    if sign <= 0:
        return np.inf, np.zeros(3)
    inv = np.linalg.inv(gram)
    a = inv @ resid
    value = 0.5 * float(resid @ a) + 0.5 * logdet + 0.5 * resid.size * np.log(2 * np.pi)
    w = inv - np.outer(a, a)
    grad = 0.5 * np.array(
        [
            float((w * dsigma[..., 0]).sum()),
            float((w * dsigma[..., 1]).sum()),
            float(np.diagonal(w) @ (sigma2 * np.asarray(noise_scale, dtype=float))),
        ]
    )
    return value, grad


def item_covariance(post_cov: np.ndarray, of_item: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Σ|C of ITEM scores (App. B.1): H Σθ|C Hᵀ + D, shape (N, N).

    ``post_cov`` (B, B) is Σθ|C, ``of_item`` (N,) each item's bucket, ``noise``
    (B,) the noise variance of one item of each bucket (σ² N_b in the paper).
    """
    of_item = np.asarray(of_item, dtype=np.intp)
    return post_cov[np.ix_(of_item, of_item)] + np.diag(np.asarray(noise, dtype=float)[of_item])


def batch_beta_dense(item_cov: np.ndarray, unevaluated: np.ndarray, batch) -> float:
    """β(A) = (Σ_{A,U} 1)ᵀ Σ_AA⁻¹ (Σ_{A,U} 1) straight from the dense item covariance (Eq. 12 times N²).

    ``unevaluated`` (N,) bool marks U; ``batch`` the item indices of A. A
    plain linear solve: a reference for the tests, never on a user path.
    """
    a = np.asarray(batch, dtype=np.intp)
    v = item_cov[np.ix_(a, np.flatnonzero(unevaluated))].sum(1)
    return float(v @ np.linalg.solve(item_cov[np.ix_(a, a)], v))
