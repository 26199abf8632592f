"""Pure Gaussian maths for BayesAME: buckets, kernels, posteriors, NLML, IG.

Notation follows ../shared/SPEC.md §1. ``phi`` holds reference-score vectors
(one row per item or per bucket, one column per reference model, K columns),
``counts`` the bucket sizes N_b, ``sigma2`` the per-item noise scale σ² (an
item in bucket b has noise variance N_b σ²).

What the methods run: the posterior state :class:`BucketPosterior` (one
rank-one update, :func:`condition_covariance`, for observed and pending
items alike) and the NLML objectives. The kernels live in
:mod:`activeeval.gp.kernels` (``LevelKernel``, ``se_kernel`` and
``kernel_matvec`` stay importable from here for user code). The dense batch
formulas the incremental updates are tested against (Eq. 7, Eq. 8) are in the
tests (``tests/dense_formulas.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.linalg import LinAlgError  # (SciPy's is this class)

from activeeval._lazy import lazy_function
from activeeval.exceptions import NumericalError
from activeeval.gp.kernels import LevelKernel, SquaredExponential

cho_factor = lazy_function("scipy.linalg:cho_factor")  # SciPy's linear algebra only when a Cholesky is needed

__all__ = [
    "BucketNLML",
    "BucketPosterior",
    "Buckets",
    "LevelKernel",
    "bucketize",
    "buckets_from_assignment",
    "chol",
    "condition_covariance",
    "information_gain",
    "kernel_matvec",
    "nlml_bucket_form",
    "se_kernel",
    "sq_dists",
    "var_r",
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
    _, of_item, counts = np.unique(_bucket_keys(phi_items, tolerance), axis=0, return_inverse=True,
                                   return_counts=True)
    return _buckets_of(phi_items, of_item.ravel(), counts)


def buckets_from_assignment(phi_items: np.ndarray, of_item: np.ndarray, tolerance: float | None = None) -> Buckets:
    """:func:`bucketize`'s result from its ``of_item`` alone (a stored one), checked to be exactly that.

    Raises ValueError unless ``of_item`` is what :func:`bucketize` gives: each
    bucket non-empty, its items' (rounded) vectors equal, and the buckets in
    increasing lexicographic order of those vectors (``numpy.unique``'s). The
    rest (counts, φ, members) is computed as :func:`bucketize` computes it, so
    the result is the same to the last bit. About half of :func:`bucketize`'s
    time (no sort of the N × K keys).
    """
    phi_items = np.asarray(phi_items, dtype=float)
    of_item = np.asarray(of_item)
    n_items = phi_items.shape[0]
    if of_item.shape != (n_items,) or of_item.dtype.kind not in "iu" or n_items == 0 or int(of_item.min()) < 0:
        raise ValueError("bucket assignment: one non-negative integer per item expected")
    counts = np.bincount(of_item)
    if not counts.all():
        raise ValueError("bucket assignment: an empty bucket")
    keys = _bucket_keys(phi_items, tolerance)
    order = np.argsort(of_item, kind="stable")
    first = keys[order[np.cumsum(counts) - counts]]  # each bucket's first item's key
    if not (keys == first[of_item]).all():
        raise ValueError("bucket assignment: items of one bucket differ")
    step = np.diff(first, axis=0)
    nonzero = step != 0
    lead = step[np.arange(step.shape[0]), nonzero.argmax(1)]
    if not (nonzero.any(1) & (lead > 0)).all():
        raise ValueError("bucket assignment: buckets out of order, or two buckets with one vector")
    return _buckets_of(phi_items, of_item, counts, order)


def _bucket_keys(phi_items: np.ndarray, tolerance: float | None) -> np.ndarray:
    return phi_items if not tolerance else np.round(phi_items / tolerance)


def _buckets_of(phi_items: np.ndarray, of_item: np.ndarray, counts: np.ndarray,
                order: np.ndarray | None = None) -> Buckets:
    n_buckets = counts.size
    sums = np.zeros((n_buckets, phi_items.shape[1]))
    np.add.at(sums, of_item, phi_items)
    phi = sums / counts[:, None]
    if order is None:
        order = np.argsort(of_item, kind="stable")
    order.flags.writeable = False  # every bucket's members are views of it, read-only (methods may share them)
    ends = np.cumsum(counts).tolist()
    members = [order[start:end] for start, end in zip([0, *ends[:-1]], ends)]  # np.split's views, 3x faster
    return Buckets(of_item=of_item, counts=counts.astype(float), phi=phi, members=members)


def sq_dists(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of ``a`` (m, K) and ``b`` (n, K): shape (m, n)."""
    d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2.0 * (a @ b.T)
    return np.maximum(d2, 0.0)


def se_kernel(d2: np.ndarray, alpha: float, beta: float, n_refs: int) -> np.ndarray:
    """Eq. 1: Σ = α · exp(−(β / K) d²), elementwise on squared distances ``d2``.

    Kept for user code; the kernel lives in :class:`activeeval.gp.kernels.SquaredExponential`.
    """
    return SquaredExponential(alpha, beta, n_refs)(d2)


def kernel_matvec(
    phi: np.ndarray, vec: np.ndarray, alpha: float, beta: float, d2: np.ndarray | None = None, block: int = 512
) -> np.ndarray:
    """Σ @ vec for the Eq. 1 kernel over all buckets, shape (n_buckets,).

    Kept for user code; the kernel lives in :meth:`activeeval.gp.kernels.SquaredExponential.matvec`.
    Uses the cached squared distances ``d2`` when given, otherwise computes
    the kernel block by block so memory stays O(block · n_buckets).
    """
    return SquaredExponential(alpha, beta, phi.shape[1]).matvec(phi, vec, d2, block)


def chol(a: np.ndarray, what: str = "covariance") -> tuple[np.ndarray, bool]:
    """Cholesky factor (scipy ``cho_factor`` form), with an actionable error."""
    try:
        return cho_factor(a, lower=True, check_finite=False)
    except LinAlgError as exc:
        raise NumericalError(
            f"the {what} matrix is not positive definite ({exc}); increase the noise sigma2 "
            "or check the reference scores for NaN/constant columns"
        ) from exc


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

    Where K is not numerically positive definite the value is +inf (gradient
    0), which L-BFGS-B treats as a failed step and backs off from; that is
    the optimiser's protocol, not a result: a refit whose optimum is not
    finite keeps its previous hyperparameters (``BayesAMEPaper._refit``
    checks), and ``failures`` counts such points.
    """

    def __init__(self, d2: np.ndarray, resid: np.ndarray, noise_scale: np.ndarray, n_refs: int) -> None:
        self.resid = np.asarray(resid, dtype=float)
        self.noise_scale = np.asarray(noise_scale, dtype=float)
        self.m = self.resid.size
        # strictly lower triangle of d²/K (the diagonal is 0; the upper part 0 is never read by LAPACK)
        self.scaled = np.tril(np.asarray(d2, dtype=float) / n_refs, -1)
        self.failures = 0  # points where K was not positive definite (the value there is +inf)

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
            self.failures += 1
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


# ----------------------------------------------------------------------------
# The posterior state of the default BayesAME (see docs/MATHS.md; its kernel: activeeval.gp.kernels.LevelKernel)
# ----------------------------------------------------------------------------


def condition_covariance(
    col: np.ndarray, noise_b: float, b: int, remaining: np.ndarray, diag: np.ndarray, cov_u: np.ndarray
) -> tuple[float, np.ndarray]:
    """The covariance part of conditioning on one more item of bucket b, in place: the rank-one update.

    Σ|C' = Σ|C − k kᵀ / d with k = Σ|C[:, b] (``col``) and d = k_b + noise_b,
    the item's predictive variance. It does not depend on the item's score,
    so an observed item (:meth:`BucketPosterior.observe`) and one whose score
    is not known yet (a pending or chosen item, :meth:`BucketPosterior.fantasy`)
    take this one path. Updates in place ``diag`` = diag(Σ|C), ``remaining`` =
    u (one item fewer in b) and ``cov_u`` = Σ|C u, as
    Σ|C' u' = Σ|C u − k − k (kᵀu') / d for u' = u − e_b.

    Returns
    -------
    d : float
        k_b + noise_b.
    row : ndarray (B,)
        k / √d, the new row of V (Σ|C' = Σ − VᵀV).
    """
    d = float(col[b] + noise_b)
    diag -= col * col / d
    remaining[b] -= 1.0
    cov_u -= col
    cov_u -= col * (float(col @ remaining) / d)
    return d, col / np.sqrt(d)


class BucketPosterior:
    """Exact Gaussian posterior of bucket abilities θ ∈ R^B, updated one observed item at a time.

    Prior θ ~ N(μ0, Σ); an item of bucket b scores s = θ_b + ε, ε ~ N(0, noise_b).
    The state is what selection and estimation need — μ|C, diag(Σ|C) and
    Σ|C u (u = unobserved items per bucket) — and Σ|C = Σ − VᵀV with one row
    of V per observation since the last :meth:`rebuild`. An observation is a
    rank-one (Kalman) update (:func:`condition_covariance`), O(r·B) for r rows;
    Σ is read column by column through ``prior_col``, so no B×B matrix is formed.
    Both BayesAME methods keep their posterior in one.

    Parameters
    ----------
    prior_mean : ndarray of shape (B,)
    prior_col : callable
        ``prior_col(b)`` → Σ[:, b], shape (B,).
    prior_diag : ndarray of shape (B,)
    prior_cov_counts : ndarray of shape (B,)
        Σ @ counts.
    counts : ndarray of shape (B,)
        N_b, items per bucket.
    noise : ndarray of shape (B,)
        Noise variance of one item of each bucket.
    capacity : int
        Rows of V allocated up front, and kept free after each :meth:`rebuild`
        (V grows by doubling beyond them).
    n_targets : int, optional
        Track the posterior means of this many targets at once (scores are
        then arrays of shape (n_targets,) and ``mean`` has shape (B, n_targets)):
        the covariance does not depend on the scores, so targets observed on
        the same items share it.
    auto_compress : bool
        Rebuild in :meth:`observe` when V has become :attr:`crowded` (True);
        False leaves it to the caller.
    """

    def __init__(
        self,
        prior_mean: np.ndarray,
        prior_col,
        prior_diag: np.ndarray,
        prior_cov_counts: np.ndarray,
        counts: np.ndarray,
        noise: np.ndarray,
        capacity: int = 64,
        n_targets: int | None = None,
        auto_compress: bool = True,
    ) -> None:
        self.prior_mean = np.asarray(prior_mean, dtype=float)
        self.prior_col = prior_col
        self.prior_diag = np.asarray(prior_diag, dtype=float)
        self.prior_cov_counts = np.asarray(prior_cov_counts, dtype=float)
        self.counts = np.asarray(counts, dtype=float)
        self.noise = np.asarray(noise, dtype=float)
        n_b = self.counts.size
        self.remaining = self.counts.copy()
        self.n_targets = n_targets
        self._shape = (n_b,) if n_targets is None else (n_b, int(n_targets))
        self.n_obs = np.zeros(n_b)
        self.sum_obs = np.zeros(self._shape)
        self.mean = self._prior_means()
        self.diag = self.prior_diag.copy()
        self.cov_u = self.prior_cov_counts.copy()
        self.capacity = max(int(capacity), 1)
        self.auto_compress = bool(auto_compress)
        self._v = np.empty((self.capacity, n_b))
        self._rows = 0
        #: Optional ``prior_cols(bs)`` → Σ[:, bs] (B, len(bs)), a block of prior columns at once (batch selection).
        self.prior_cols: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def n_buckets(self) -> int:
        return int(self.counts.size)

    def _prior_means(self) -> np.ndarray:
        if self.n_targets is None:
            return self.prior_mean.copy()
        return np.repeat(self.prior_mean[:, None], self.n_targets, axis=1)

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def v(self) -> np.ndarray:
        """V, shape (rows, B): Σ|C = Σ − VᵀV (a view; do not modify)."""
        return self._v[: self._rows]

    @property
    def crowded(self) -> bool:
        """Whether V has many more rows than observed buckets (repeated buckets add rows), so a rebuild pays."""
        return self._rows > 2 * int((self.n_obs > 0).sum()) + 64

    def cov_col(self, b: int, extra: np.ndarray | None = None) -> np.ndarray:
        """Column b of Σ|C (optionally also conditioned on the fantasy rows ``extra``)."""
        v = self._v[: self._rows]
        col = self.prior_col(b) - v.T @ v[:, b]
        if extra is not None and extra.shape[0]:
            col -= extra.T @ extra[:, b]
        return col

    def cov_cols(self, bs: np.ndarray, extra: np.ndarray | None = None) -> np.ndarray:
        """Columns ``bs`` of Σ|C, shape (B, len(bs)) (optionally also conditioned on the fantasy rows ``extra``).

        The prior's columns come from ``prior_cols(bs)`` when the owner sets
        that attribute (a block at once), else from ``prior_col`` one by one.
        """
        bs = np.asarray(bs, dtype=np.intp)
        if self.prior_cols is not None:
            prior = self.prior_cols(bs)
        elif bs.size:
            prior = np.column_stack([self.prior_col(int(b)) for b in bs])
        else:
            prior = np.zeros((self.n_buckets, 0))
        v = self._v[: self._rows]
        out = prior - v.T @ v[:, bs]
        if extra is not None and extra.shape[0]:
            out -= extra.T @ extra[:, bs]
        return out

    def predictive(self, b: int) -> tuple[float, float]:
        """Mean and variance of the score of one unobserved item of bucket b."""
        return float(self.mean[b]), float(max(self.diag[b], 0.0) + self.noise[b])

    def observe(self, b: int, score):
        """Condition on one item of bucket b scoring ``score``; returns (innovation, its variance) before it."""
        k = self.cov_col(b)
        d, row = condition_covariance(k, self.noise[b], b, self.remaining, self.diag, self.cov_u)
        if self.n_targets is None:
            innovation = float(score - self.mean[b])
            self.mean += k * (innovation / d)
        else:
            innovation = np.asarray(score, dtype=float) - self.mean[b]
            self.mean += np.outer(k, innovation / d)
        if self._rows == self._v.shape[0]:
            self._grow()
        self._v[self._rows] = row
        self._rows += 1
        self.n_obs[b] += 1.0
        self.sum_obs[b] += score
        if self.auto_compress and self.crowded:
            self.rebuild()  # repeated buckets add rows: back to one per observed bucket
        return innovation, d

    def _grow(self) -> None:
        """Double V's room: one contiguous array (a step reads it whole), and the new rows' memory is taken
        only as they are written (``np.empty``; stacking would write them all at once)."""
        grown = np.empty((2 * self._v.shape[0], self.n_buckets))
        grown[: self._rows] = self._v[: self._rows]
        self._v = grown

    def rebuild(
        self,
        prior_diag: np.ndarray | None = None,
        prior_cov_counts: np.ndarray | None = None,
        noise: np.ndarray | None = None,
        prior_rows: np.ndarray | None = None,
    ) -> None:
        """Rebuild the state from the bucket form (Eq. 8): one row of V per observed bucket.

        After a change of hyperparameters, pass the prior's new ``prior_diag``,
        ``prior_cov_counts`` and ``noise`` (``prior_col`` must already give the
        new columns); the observations are kept. ``prior_rows``, if given, is
        Σ_{O,·} (observed buckets in increasing order × B) made in one block,
        in place of one ``prior_col`` call per observed bucket.
        """
        if prior_diag is not None:
            self.prior_diag = np.asarray(prior_diag, dtype=float)
        if prior_cov_counts is not None:
            self.prior_cov_counts = np.asarray(prior_cov_counts, dtype=float)
        if noise is not None:
            self.noise = np.asarray(noise, dtype=float)
        obs = np.flatnonzero(self.n_obs > 0)
        n_b = self.n_buckets
        self._v = np.empty((obs.size + self.capacity, n_b))
        self._rows = obs.size
        if obs.size == 0:
            self.mean = self._prior_means()
            self.diag = self.prior_diag.copy()
            self.cov_u = self.prior_cov_counts.copy()
            return
        s_ob = prior_rows if prior_rows is not None else np.vstack([self.prior_col(b) for b in obs])  # Σ_{O,·}
        gram = s_ob[:, obs] + np.diag(self.noise[obs] / self.n_obs[obs])
        factor, _ = chol(gram, "posterior Gram")
        from scipy.linalg import solve_triangular

        v = solve_triangular(factor, s_ob, lower=True, check_finite=False)
        sbar = self.sum_obs[obs] / (self.n_obs[obs] if self.n_targets is None else self.n_obs[obs, None])
        prior = self.prior_mean[obs] if self.n_targets is None else self.prior_mean[obs, None]
        z = solve_triangular(factor, sbar - prior, lower=True)
        self._v[: obs.size] = v
        self.mean = (self.prior_mean if self.n_targets is None else self.prior_mean[:, None]) + v.T @ z
        self.diag = self.prior_diag - (v * v).sum(0)
        sigma_u = self.prior_cov_counts - s_ob.T @ self.n_obs[obs]  # Σu = ΣN − Σ_{·O} n_O
        self.cov_u = sigma_u - v.T @ (v @ self.remaining)

    def var_r_scaled(self, remaining: np.ndarray | None = None, cov_u: np.ndarray | None = None) -> float:
        """N² Var(R | s_C) = uᵀ Σ|C u + Σ_b u_b noise_b (Eq. 2 with per-bucket noise)."""
        rem = self.remaining if remaining is None else remaining
        cu = self.cov_u if cov_u is None else cov_u
        return max(float(rem @ cu) + float(rem @ self.noise), 0.0)

    def information_gain(
        self, remaining: np.ndarray | None = None, cov_u: np.ndarray | None = None, diag: np.ndarray | None = None
    ) -> np.ndarray:
        """Eq. 6 for one unobserved item of each bucket (B,), −inf where none is left."""
        rem = self.remaining if remaining is None else remaining
        cu = self.cov_u if cov_u is None else cov_u
        dg = self.diag if diag is None else diag
        scaled_var = self.var_r_scaled(rem, cu)
        c = cu + self.noise
        v = np.maximum(dg, 0.0) + self.noise
        if scaled_var <= 0.0:
            ig = np.zeros_like(c)
        else:
            rho2 = np.clip(c * c / (scaled_var * v), 0.0, 1.0 - 1e-15)
            ig = -0.5 * np.log1p(-rho2)
        ig[rem <= 0] = -np.inf
        return ig

    def fantasy(self):
        """A scratch copy that conditions on items whose scores are not known yet (pending or chosen)."""
        return _Fantasy(self)


class _Fantasy:
    """Σ|C after also conditioning on unscored items: the covariance does not depend on the scores."""

    def __init__(self, post: BucketPosterior) -> None:
        self.post = post
        self.remaining = post.remaining.copy()
        self.cov_u = post.cov_u.copy()
        self.diag = post.diag.copy()
        self._rows: list[np.ndarray] = []

    def condition(self, b: int) -> None:
        """Condition on one more item of bucket b, score unknown (pending, or chosen for the batch)."""
        extra = np.array(self._rows) if self._rows else None
        col = self.post.cov_col(b, extra)
        _, row = condition_covariance(col, self.post.noise[b], b, self.remaining, self.diag, self.cov_u)
        self._rows.append(row)

    def information_gain(self) -> np.ndarray:
        return self.post.information_gain(self.remaining, self.cov_u, self.diag)

    @property
    def extra_rows(self) -> np.ndarray | None:
        """The fantasy rows E (one per conditioned item, shape (r, B)): Σ|C' = Σ|C − EᵀE; None if none."""
        return np.array(self._rows) if self._rows else None

    def cov_cols(self, bs: np.ndarray) -> np.ndarray:
        """Columns ``bs`` of Σ|C conditioned also on the fantasy items, shape (B, len(bs))."""
        return self.post.cov_cols(bs, np.array(self._rows) if self._rows else None)

    def batch_covariance(self, available: np.ndarray):
        """The batch-selection problem from here (:class:`activeeval.batch.BucketCovariance`).

        ``available`` (B,): candidate items per bucket (unobserved, not pending).
        """
        from activeeval.batch import BucketCovariance

        return BucketCovariance(self.cov_cols, self.diag.copy(), self.cov_u.copy(), self.post.noise,
                                self.remaining.copy(), np.asarray(available, dtype=float).copy())


class LeaveOneOutNLML:
    """NLML of reference models as pseudo-targets, each predicted from the others (fits the default's kernel).

    For each pseudo-target j (a reference model) and a subsample of items,
    its scores are modelled as the default BayesAME models a target:
    s^j = μ^{−j} + f + ε, f ~ N(0, Σ^{−j}) with the :class:`LevelKernel` on the
    *other* references' vectors (distances d²_{−j} = d² − (x_j − x_jᵀ)² and
    products ψψᵀ − ψ_j ψ_jᵀ, over K − 1 models) and ε ~ N(0, σ²). The
    objective is the sum over pseudo-targets of
    ½ yᵀK⁻¹y + ½ log|K| + (m/2) log 2π with y = s^j − μ^{−j}, and its gradient
    is in (log α, log β, log σ²[, log γ]); τ0 and τ1 are held fixed, and γ is
    fitted only when ``linear`` is true (else 0).

    Parameters
    ----------
    x : ndarray of shape (m, K)
        Reference scores on the subsample of items.
    col_means : ndarray of shape (K,)
        Each reference model's mean score over *all* items (centres ψ and μ̄^{−j}).
    pseudo : sequence of int
        Columns of ``x`` used as pseudo-targets.
    tau0, tau1 : float
        The fixed level and slope variances.
    linear : bool
        Include the γ term.

    Where a Gram matrix is not numerically positive definite the value is +inf
    (L-BFGS-B backs off; ``fit_hyperparameters`` keeps the best grid point when
    the optimum is not finite); ``failures`` counts such points.
    """

    def __init__(
        self,
        x: np.ndarray,
        col_means: np.ndarray,
        pseudo,
        tau0: float,
        tau1: float,
        linear: bool = True,
    ) -> None:
        x = np.asarray(x, dtype=float)
        col_means = np.asarray(col_means, dtype=float)
        m, k = x.shape
        self.m = m
        self.failures = 0  # points where a pseudo-target's Gram matrix was not positive definite (+inf there)
        self.linear = bool(linear)
        d2_all = sq_dists(x, x)
        psi = x - col_means[None, :]
        lin_all = psi @ psi.T
        row_sums = x.sum(1)
        total_mean = float(col_means.sum())
        self.items = []
        for j in pseudo:
            xj = x[:, j]
            d2 = np.maximum(d2_all - (xj[:, None] - xj[None, :]) ** 2, 0.0) / (k - 1)
            lin = (lin_all - np.outer(psi[:, j], psi[:, j])) / (k - 1)
            mu = (row_sums - xj) / (k - 1)
            mm = mu - (total_mean - float(col_means[j])) / (k - 1)
            fixed = tau0 + tau1 * np.outer(mm, mm)
            self.items.append((d2, lin, xj - mu, fixed))

    @property
    def n_params(self) -> int:
        return 4 if self.linear else 3

    def __call__(self, log_params: np.ndarray) -> tuple[float, np.ndarray]:
        from scipy.linalg import lapack

        values = np.exp(np.asarray(log_params, dtype=float))
        alpha, beta, sigma2 = values[:3]
        gamma = values[3] if self.linear else 0.0
        m = self.m
        total = 0.5 * len(self.items) * m * np.log(2 * np.pi)
        grad = np.zeros(self.n_params)
        for d2, lin, y, fixed in self.items:
            e = np.exp(-beta * d2)
            gram = alpha * e + fixed
            if self.linear:
                gram += gamma * lin
            gram.flat[:: m + 1] += sigma2
            factor, info = lapack.dpotrf(gram, lower=1, clean=1, overwrite_a=1)
            if info != 0:
                self.failures += 1
                return np.inf, np.zeros(self.n_params)
            a, _ = lapack.dpotrs(factor, y, lower=1)
            total += 0.5 * float(y @ a) + float(np.log(np.diagonal(factor)).sum())
            inv, info = lapack.dpotri(factor, lower=1, overwrite_c=1)  # K⁻¹'s lower triangle (clean: 0 above it)
            if info != 0:  # pragma: no cover - factorised, so invertible
                return np.inf, np.zeros(self.n_params)
            # ∂L/∂θ = ½ Σ (K⁻¹ − aaᵀ) ⊙ ∂K/∂θ, each ∂K/∂θ symmetric: Σ K⁻¹ ⊙ M from the lower triangle alone,
            # 2 Σ_{i≥j} − the diagonal (no full inverse, no m × m W): about a tenth of an evaluation saved
            # (in memory order: LAPACK's column-major triangle meets M's rows, the same numbers as M is symmetric)
            inv_diag = np.diagonal(inv)
            inv_flat = inv.ravel(order="K")

            def contract(mat: np.ndarray) -> float:
                return (2.0 * float(np.dot(inv_flat, mat.ravel())) - float(inv_diag @ np.diagonal(mat))  # noqa: B023 - called within this iteration
                        - float(a @ (mat @ a)))  # noqa: B023 - called within this iteration

            grad[0] += 0.5 * alpha * contract(e)
            e *= d2  # E ⊙ D
            grad[1] += -0.5 * alpha * beta * contract(e)
            grad[2] += 0.5 * sigma2 * (float(inv_diag.sum()) - float(a @ a))
            if self.linear:
                grad[3] += 0.5 * gamma * contract(lin)
        return float(total), grad
