"""The Gaussian posterior of the bucket abilities: :class:`BucketPosterior` and its helpers.

Notation follows ../shared/SPEC.md §1 and docs/MATHS.md: B buckets of items
with identical reference vectors, N_b items in bucket b, u the unobserved
items per bucket, Σ the prior covariance of the bucket abilities θ (a kernel
of :mod:`activeeval.gp.kernels` on the reference vectors, read column by
column) and Σ|C the posterior covariance given the observed items C.

What is here:

* :class:`BucketPosterior` — the exact posterior state both BayesAME methods
  keep, updated one item at a time by :func:`condition_covariance` (a rank-one
  update that does not depend on the score, so observed and pending items take
  one path) and rebuilt from the bucket form (Eq. 8) after a refit;
* its :meth:`~BucketPosterior.fantasy` (``_Fantasy``): Σ|C conditioned also on
  items whose scores are not known yet (pending, or chosen for a batch), which
  hands the batch strategies their problem (:class:`activeeval.batch.BucketCovariance`);
* :func:`var_r` (Eq. 2) and :func:`chol` (a Cholesky factor with an actionable error).

The acquisition side (Eq. 6's information gain, the batch selector) is
:mod:`activeeval.gp.acquisition`; the NLML objectives and the bucketing stay in
:mod:`activeeval.gaussian`, which re-exports every name here for user code.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.linalg import LinAlgError  # (SciPy's is this class)

from activeeval._lazy import lazy_function
from activeeval.exceptions import NumericalError
from activeeval.gp.acquisition import expected_gain

cho_factor = lazy_function("scipy.linalg:cho_factor")  # SciPy's linear algebra only when a Cholesky is needed

__all__ = [
    "BucketPosterior",
    "chol",
    "condition_covariance",
    "var_r",
]


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
        ig = expected_gain(cu + self.noise, np.maximum(dg, 0.0) + self.noise, scaled_var)
        ig[rem <= 0] = -np.inf
        return ig

    def fantasy(self) -> _Fantasy:
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
