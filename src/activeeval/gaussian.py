"""Pure Gaussian maths for BayesAME: buckets, kernels, posteriors, NLML, IG.

Notation follows ../shared/SPEC.md §1. ``phi`` holds reference-score vectors
(one row per item or per bucket, one column per reference model, K columns),
``counts`` the bucket sizes N_b, ``sigma2`` the per-item noise scale σ² (an
item in bucket b has noise variance N_b σ²).

The batch formulas here (:func:`posterior_item_form`,
:func:`posterior_bucket_form`) are the reference the incremental updates of
:class:`activeeval.methods.bayesame.BayesAME` are tested against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from activeeval.exceptions import NumericalError

__all__ = [
    "Buckets",
    "bucketize",
    "sq_dists",
    "se_kernel",
    "kernel_matvec",
    "posterior_item_form",
    "posterior_bucket_form",
    "var_r",
    "information_gain",
    "nlml_bucket_form",
    "BucketNLML",
    "chol",
]


@dataclass(frozen=True)
class Buckets:
    """Items grouped by identical (rounded) reference-score vectors.

    Attributes
    ----------
    of_item : ndarray of shape (n_items,)
        Bucket index of each item.
    counts : ndarray of shape (n_buckets,)
        N_b, the number of items in each bucket.
    phi : ndarray of shape (n_buckets, n_refs)
        φ_b, the mean raw reference vector of the bucket's items.
    members : list of ndarray
        Item indices of each bucket, ascending.
    """

    of_item: np.ndarray
    counts: np.ndarray
    phi: np.ndarray
    members: list[np.ndarray]

    @property
    def n_buckets(self) -> int:
        return int(self.counts.size)


def bucketize(phi_items: np.ndarray, tolerance: float | None = None) -> Buckets:
    """Group items whose reference vectors agree (after rounding to ``tolerance``).

    Parameters
    ----------
    phi_items : ndarray of shape (n_items, n_refs)
        Reference scores of each item.
    tolerance : float or None
        Round scores to multiples of ``tolerance`` before comparing; None or 0
        compares exactly (right for binary scores).
    """
    phi_items = np.asarray(phi_items, dtype=float)
    keys = phi_items if not tolerance else np.round(phi_items / tolerance)
    _, of_item, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
    of_item = of_item.ravel()
    n_buckets = counts.size
    sums = np.zeros((n_buckets, phi_items.shape[1]))
    np.add.at(sums, of_item, phi_items)
    phi = sums / counts[:, None]
    order = np.argsort(of_item, kind="stable")
    members = np.split(order, np.cumsum(counts)[:-1])
    return Buckets(of_item=of_item, counts=counts.astype(float), phi=phi, members=members)


def sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``a`` (m, K) and ``b`` (n, K): shape (m, n)."""
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d2, 0.0)


def se_kernel(d2: np.ndarray, alpha: float, beta: float, n_refs: int) -> np.ndarray:
    """Eq. 1: Σ = α · exp(−(β / K) d²), elementwise on squared distances ``d2``."""
    return alpha * np.exp(-(beta / n_refs) * d2)


def kernel_matvec(
    phi: np.ndarray, vec: np.ndarray, alpha: float, beta: float, d2: np.ndarray | None = None, block: int = 1024
) -> np.ndarray:
    """Σ @ vec for the Eq. 1 kernel over all buckets, shape (n_buckets,).

    Uses the cached squared distances ``d2`` when given, otherwise computes
    the kernel block by block so memory stays O(block · n_buckets).
    """
    n_refs = phi.shape[1]
    if d2 is not None:
        return se_kernel(d2, alpha, beta, n_refs) @ vec
    out = np.empty(phi.shape[0])
    for start in range(0, phi.shape[0], block):
        stop = min(start + block, phi.shape[0])
        out[start:stop] = se_kernel(sq_dists(phi[start:stop], phi), alpha, beta, n_refs) @ vec
    return out


def chol(a: np.ndarray, what: str = "covariance") -> tuple[np.ndarray, bool]:
    """Cholesky factor (scipy ``cho_factor`` form), with an actionable error."""
    try:
        return cho_factor(a, lower=True, check_finite=False)
    except LinAlgError as exc:
        raise NumericalError(
            f"the {what} matrix is not positive definite ({exc}); increase the noise sigma2 "
            "or check the reference scores for NaN/constant columns"
        ) from exc


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


def var_r(remaining: np.ndarray, counts: np.ndarray, cov_u: np.ndarray, sigma2: float, n_items: int) -> float:
    """Eq. 2 (corrected): Var(R | s_C) = (Σ_b u_b N_b σ² + uᵀ Σ|C u) / N².

    ``remaining`` is u (unevaluated items per bucket), ``cov_u`` is Σ|C u.
    """
    total = sigma2 * float(remaining @ counts) + float(remaining @ cov_u)
    return max(total, 0.0) / (n_items * n_items)


def information_gain(
    cov_u: np.ndarray, post_diag: np.ndarray, counts: np.ndarray, sigma2: float, scaled_var: float
) -> np.ndarray:
    """Eq. 6: expected information gain about R of evaluating one item of each bucket.

    Parameters
    ----------
    cov_u : ndarray (B,)
        Σ|C u.
    post_diag : ndarray (B,)
        diag(Σ|C).
    counts : ndarray (B,)
        N_b.
    sigma2 : float
        σ².
    scaled_var : float
        N² Var(R | s_C).

    Returns
    -------
    ndarray (B,)
        IG_b = −½ log(1 − c_b² / (N² Var(R) v_b)) ≥ 0, with
        c_b = (Σ|C u)_b + σ² N_b and v_b = Σ|C_bb + σ² N_b.
    """
    noise = sigma2 * counts
    c = cov_u + noise
    v = np.maximum(post_diag, 0.0) + noise
    if scaled_var <= 0.0:
        return np.zeros_like(c)
    rho2 = np.clip(c * c / (scaled_var * v), 0.0, 1.0 - 1e-15)
    return -0.5 * np.log1p(-rho2)


def nlml_bucket_form(
    params: np.ndarray,
    d2: np.ndarray,
    resid: np.ndarray,
    noise_scale: np.ndarray,
    n_refs: int,
) -> tuple[float, np.ndarray]:
    """Eq. 11 (bucket form over observed buckets) and its gradient in (α, β, σ²).

    L = ½ rᵀ K⁻¹ r + ½ log|K| + (m/2) log 2π with K = Σ_OO + σ² diag(N_b / n_b)
    and r = s̄_O − μ_O. It differs from the item form only by a constant that
    does not depend on (α, β), so both have the same minimiser in (α, β).

    Parameters
    ----------
    params : ndarray (3,)
        (α, β, σ²).
    d2 : ndarray (m, m)
        Squared distances between the observed buckets' reference vectors.
    resid : ndarray (m,)
        r.
    noise_scale : ndarray (m,)
        N_b / n_b, so that Δ = σ² diag(noise_scale).
    n_refs : int
        K, the number of reference models.

    Returns
    -------
    value : float
    grad : ndarray (3,)
        ∂L/∂(α, β, σ²); ``inf`` and zeros where K is not positive definite.
    """
    return BucketNLML(d2, resid, noise_scale, n_refs)(params)


class BucketNLML:
    """Eq. 11 in bucket form for fixed data, evaluated at many (α, β, σ²): what a refit calls.

    Same value and gradient as :func:`nlml_bucket_form`; the data-only work
    (the scaled distances) is done once, and each call costs one Cholesky
    factorisation and one inverse from it (LAPACK ``potrf`` + ``potri``,
    about m³ flops) plus a few passes over m × m arrays. Only the lower
    triangles are formed; the traces use

        tr(K⁻¹ E) = (m − σ² Σ_b (N_b/n_b) (K⁻¹)_bb) / α,   aᵀ E a = (aᵀ r − σ² Σ_b (N_b/n_b) a_b²) / α

    (E = e^{−β d²/K}, K = αE + Δ, a = K⁻¹ r), so only the β-derivative needs
    the off-diagonal part of K⁻¹.
    """

    def __init__(self, d2: np.ndarray, resid: np.ndarray, noise_scale: np.ndarray, n_refs: int) -> None:
        self.resid = np.asarray(resid, dtype=float)
        self.noise_scale = np.asarray(noise_scale, dtype=float)
        self.m = self.resid.size
        # strictly lower triangle of d²/K (the diagonal is 0; the upper part 0 is never read by LAPACK)
        self.scaled = np.tril(np.asarray(d2, dtype=float) / n_refs, -1)

    def __call__(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        from scipy.linalg import lapack

        alpha, beta, sigma2 = (float(p) for p in np.asarray(params, dtype=float))
        m, r, scale = self.m, self.resid, self.noise_scale
        if m == 0:
            return 0.0, np.zeros(3)
        e = np.exp(self.scaled * -beta)  # lower triangle e^{−β d²/K}; diagonal and upper part are 1
        gram = e * alpha
        noise = sigma2 * scale
        gram.flat[:: m + 1] = alpha + noise
        factor, info = lapack.dpotrf(gram, lower=1, clean=0, overwrite_a=1)
        if info != 0:
            return np.inf, np.zeros(3)
        a, info = lapack.dpotrs(factor, r, lower=1)
        if info != 0:  # pragma: no cover - dpotrs fails only on invalid arguments
            return np.inf, np.zeros(3)
        log_det_half = float(np.log(np.diagonal(factor)).sum())
        value = 0.5 * float(r @ a) + log_det_half + 0.5 * m * np.log(2 * np.pi)
        inv, info = lapack.dpotri(factor, lower=1, overwrite_c=1)  # lower triangle of K⁻¹
        if info != 0:  # pragma: no cover - K was factorised, so it is invertible
            return np.inf, np.zeros(3)
        inv_diag = np.diagonal(inv).copy()
        a_r = float(a @ r)
        tr_e = (m - float(noise @ inv_diag)) / alpha
        a_e_a = (a_r - float(noise @ (a * a))) / alpha
        # ∂K/∂β = −α E ⊙ S with S = d²/K symmetric and zero on the diagonal:
        # tr(K⁻¹ (E⊙S)) = 2 Σ_{i>j} (K⁻¹)_ij E_ij S_ij, aᵀ(E⊙S)a = 2 Σ_{i>j} a_i E_ij S_ij a_j
        es = e
        es *= self.scaled  # lower triangle E ⊙ S; zero on and above the diagonal
        tr_es = 2.0 * float(np.dot(inv.ravel(), es.ravel()))
        a_es_a = 2.0 * float(a @ (es @ a))
        grad = np.array(
            [
                0.5 * (tr_e - a_e_a),
                -0.5 * alpha * (tr_es - a_es_a),
                0.5 * (float(scale @ inv_diag) - float(scale @ (a * a))),
            ]
        )
        return value, grad
