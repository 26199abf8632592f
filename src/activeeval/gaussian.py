"""Pure Gaussian maths for BayesAME: buckets, kernels, posteriors, NLML, IG.

Notation follows ../shared/SPEC.md §1. ``phi`` holds reference-score vectors
(one row per item or per bucket, one column per reference model, K columns),
``counts`` the bucket sizes N_b, ``sigma2`` the per-item noise scale σ² (an
item in bucket b has noise variance N_b σ²).

What is here: the bucketing of items (:class:`Buckets`, :func:`bucketize`)
and the NLML objectives the reference fit and the paper's refit minimise
(:class:`BucketNLML`, :class:`LeaveOneOutNLML`). The posterior state
(:class:`BucketPosterior`, :func:`condition_covariance`, :func:`var_r`,
:func:`chol`) lives in :mod:`activeeval.gp.posterior`, Eq. 6
(:func:`information_gain`) in :mod:`activeeval.gp.acquisition`, the kernels
in :mod:`activeeval.gp.kernels`; ``BucketPosterior``, ``chol``,
``condition_covariance``, ``information_gain``, ``var_r``, ``LevelKernel``,
``se_kernel`` and ``kernel_matvec`` stay importable from here for user code. The dense batch
formulas the incremental updates are tested against (Eq. 7, Eq. 8) are in the
tests (``tests/dense_formulas.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from activeeval._lapack import load as lapack_load
from activeeval._lapack import potrf_lower, potri_lower, potrs_lower
from activeeval._threads import serial_blas, worker_threads
from activeeval.gp.acquisition import information_gain
from activeeval.gp.kernels import LevelKernel, SquaredExponential
from activeeval.gp.posterior import BucketPosterior, chol, condition_covariance, var_r

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
    "integer_levels",
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
    # np.split's views, 3x faster
    members = [order[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=True)]
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


def integer_levels(d2: np.ndarray | None, max_levels: int = 1 << 16) -> tuple[np.ndarray, np.ndarray] | None:
    """(the distinct values 0, 1, …, max as floats, each entry's value as an index) where every squared distance of
    ``d2`` is a whole number (and none is −0) and there are fewer than ``max_levels`` of them; else None. A
    function of the distances applied to the values and read off by index (``np.take``) gives each entry the same
    number as applied entry by entry (binary scores: d² counts the reference models that disagree)."""
    if d2 is None or d2.size == 0:
        return None
    top = float(d2.max())
    if not top < max_levels:
        return None
    index = d2.astype(np.intp)
    if not np.array_equal(index, d2) or np.signbit(d2).any():
        return None
    return np.arange(int(top) + 1, dtype=float), index


class BucketNLML:
    """Eq. 11 in bucket form for fixed data, evaluated at many (α, β, σ²): what a refit calls.

    Same value and gradient as :func:`nlml_bucket_form`; the data-only work
    (the scaled distances, or for whole-number distances an index of their
    distinct values, exponentiated once each per call) is done once, and each
    call costs one Cholesky factorisation and one inverse from it (LAPACK
    ``potrf`` + ``potri``, about m³ flops: most of a call) plus a few passes
    over m × m arrays kept between calls. Only the lower triangles are formed;
    the traces use

        tr(K⁻¹ E) = (m − σ² Σ_b (N_b/n_b) (K⁻¹)_bb) / α,   aᵀ E a = (aᵀ r − σ² Σ_b (N_b/n_b) a_b²) / α

    (E = e^{−β d²/K}, K = αE + Δ, a = K⁻¹ r), so only the β-derivative needs
    the off-diagonal part of K⁻¹.

    Where K is not numerically positive definite the value is +inf (gradient
    0), which L-BFGS-B treats as a failed step and backs off from; that is
    the optimiser's protocol, not a result: a refit whose optimum is not
    finite keeps its previous hyperparameters (``BayesAMEPaper._refit``
    checks), and ``failures`` counts such points.
    """

    #: Rows per block of the triangle that a call exponentiates (row block [r0, r1) takes columns [0, r1)).
    ROWS = 128
    #: Most distinct squared distances that a call exponentiates once each and reads off by index.
    MAX_LEVELS = 1 << 16

    def __init__(self, d2: np.ndarray, resid: np.ndarray, noise_scale: np.ndarray, n_refs: int) -> None:
        self.resid = np.asarray(resid, dtype=float)
        self.noise_scale = np.asarray(noise_scale, dtype=float)
        self.m = m = self.resid.size
        lower = np.tril(np.asarray(d2, dtype=float), -1)
        self.failures = 0  # points where K was not positive definite (the value there is +inf)
        # The row blocks that hold the lower triangle (and the upper half of each diagonal block, where d² = 0)
        self._blocks = [(r0, min(r0 + self.ROWS, m)) for r0 in range(0, m, self.ROWS)]
        # Integer squared distances (binary scores: d² counts the reference models that disagree) take at most
        # K + 1 values. Then a call exponentiates each value once and reads E, K and E ⊙ S off by index: the same
        # operations on the same numbers as entry by entry (d²/K of an integer d² is the table's (d²)/K).
        # (the distinct d²/K, each entry's index into them, the transposed index as a row-major array)
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        found = integer_levels(lower, min(self.MAX_LEVELS, m * m)) if m > 1 else None
        if found is not None:
            values, level_of = found
            self._table = (values / n_refs, level_of, np.ascontiguousarray(level_of.T))
        # strictly lower triangle of d²/K (the diagonal is 0; the upper part 0 is never read by LAPACK), where it
        # is exponentiated entry by entry
        self.scaled = lower / n_refs if self._table is None else None
        # Work arrays of every call: E (then E ⊙ S) and K, each written whole from the table or else on the row
        # blocks only and 0 right of them (never written there), and K⁻¹'s lower triangle in row-major order
        # (what the trace of K⁻¹ (E ⊙ S) reads), 0 right of the blocks
        work = np.empty if self._table is not None else np.zeros
        self._e = work((m, m))
        self._gram = work((m, m))
        self._inv_rows = np.zeros((m, m))

    def __call__(self, params: np.ndarray) -> tuple[float, np.ndarray]:
        from scipy.linalg import lapack

        alpha, beta, sigma2 = (float(p) for p in np.asarray(params, dtype=float))
        m, r, scale = self.m, self.resid, self.noise_scale
        if m == 0:
            return 0.0, np.zeros(3)
        gram, table = self._gram, self._table
        if table is not None:
            levels, level_of, level_of_t = table
            e_levels = np.exp(levels * -beta)  # e^{−β d²/K} at each distance (1 at 0: the diagonal, the upper part)
            # K written as its transpose row by row is K column-major: LAPACK's layout, factorised in place (no copy)
            gram = np.take(e_levels * alpha, level_of_t, out=gram, mode="clip").T
        else:
            # e^{−β d²/K} on the row blocks (1 on the diagonal), 0 right of them: only the lower triangle is
            # exponentiated, each entry as np.exp(scaled * −β) of the whole matrix gives it (elementwise)
            e, scaled = self._e, self.scaled
            assert scaled is not None  # made where there is no table
            for r0, r1 in self._blocks:
                block = e[r0:r1, :r1]
                np.multiply(scaled[r0:r1, :r1], -beta, out=block)
                np.exp(block, out=block)
                np.multiply(block, alpha, out=gram[r0:r1, :r1])
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
        # The trace is one dot product of the two matrices in row-major order. E ⊙ S is 0 right of the blocks, so
        # only the blocks of K⁻¹ (column-major from LAPACK) are copied into row-major order; the rest of that
        # array stays 0, and every product there is +0 as it was with K⁻¹'s upper part (finite) in its place.
        inv_rows = self._inv_rows
        if table is not None:  # lower triangle E ⊙ S; zero on and above the diagonal
            es = np.take(e_levels * levels, level_of, out=self._e, mode="clip")
            for r0, r1 in self._blocks:
                inv_rows[r0:r1, :r1] = inv[r0:r1, :r1]
        else:
            es = e
            assert scaled is not None
            for r0, r1 in self._blocks:
                es[r0:r1, :r1] *= scaled[r0:r1, :r1]
                inv_rows[r0:r1, :r1] = inv[r0:r1, :r1]
        tr_es = 2.0 * float(np.dot(inv_rows.ravel(), es.ravel()))
        a_es_a = 2.0 * float(a @ (es @ a))
        grad = np.array(
            [
                0.5 * (tr_e - a_e_a),
                -0.5 * alpha * (tr_es - a_es_a),
                0.5 * (float(scale @ inv_diag) - float(scale @ (a * a))),
            ]
        )
        return value, grad


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
    threads : int, optional
        Pseudo-targets evaluated at once, each on its own thread with one BLAS
        thread and LAPACK without the GIL (:mod:`activeeval._lapack`); default
        :func:`activeeval._threads.worker_threads` (the cores, up to 4, unless
        ``--threads``/``ACTIVEEVAL_THREADS`` set a limit). The value and
        gradient are the same to the last bit for any number.

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
        threads: int | None = None,
    ) -> None:
        x = np.asarray(x, dtype=float)
        col_means = np.asarray(col_means, dtype=float)
        m, k = x.shape
        self.m = m
        self.failures = 0  # points where a pseudo-target's Gram matrix was not positive definite (+inf there)
        self.linear = bool(linear)
        self.threads = threads
        lapack_load()  # SciPy's LAPACK imported here, not first in a worker (its BLAS comes under the limit now)
        self._below = np.tri(m, m, -1, dtype=bool)  # a Gram matrix's strict upper triangle in column-major order
        d2_all = sq_dists(x, x)
        psi = x - col_means[None, :]
        lin_all = psi @ psi.T
        row_sums = x.sum(1)
        total_mean = float(col_means.sum())
        # each pseudo-target's (distances, linear term, residual, level and slope): the distances as d²/(K − 1),
        # or, where they are whole numbers (binary scores: d² counts the other references that disagree), as
        # (the distinct values d²/(K − 1), each entry's index into them) — a call exponentiates each distinct
        # value once and reads E and E ⊙ D off by index: the same operations on the same numbers as entry by
        # entry (the exponential was about a sixth of a call at m = 300; the Cholesky and the inverse are most of it)
        self.items: list[tuple[np.ndarray | tuple[np.ndarray, np.ndarray], np.ndarray, np.ndarray, np.ndarray]] = []
        for j in pseudo:
            xj = x[:, j]
            d2 = np.maximum(d2_all - (xj[:, None] - xj[None, :]) ** 2, 0.0)
            found = integer_levels(d2, min(self.MAX_LEVELS, d2.size))  # never more levels than entries
            dist = d2 / (k - 1) if found is None else (found[0] / (k - 1), found[1])
            lin = (lin_all - np.outer(psi[:, j], psi[:, j])) / (k - 1)
            mu = (row_sums - xj) / (k - 1)
            mm = mu - (total_mean - float(col_means[j])) / (k - 1)
            fixed = tau0 + tau1 * np.outer(mm, mm)
            self.items.append((dist, lin, xj - mu, fixed))

    #: Most distinct squared distances read off by index (``integer_levels``); more are exponentiated entry by entry.
    MAX_LEVELS = 1 << 16

    @property
    def n_params(self) -> int:
        return 4 if self.linear else 3

    def __call__(self, log_params: np.ndarray) -> tuple[float, np.ndarray]:
        return self._evaluate(log_params, gradient=True)

    def value(self, log_params: np.ndarray) -> float:
        """The NLML alone, the same number as ``self(log_params)[0]``, for a third of the cost (no inverse)."""
        return self._evaluate(log_params, gradient=False)[0]

    def _evaluate(self, log_params: np.ndarray, gradient: bool) -> tuple[float, np.ndarray]:
        values = np.exp(np.asarray(log_params, dtype=float))
        alpha, beta, sigma2 = (float(v) for v in values[:3])
        gamma = float(values[3]) if self.linear else 0.0
        total = 0.5 * len(self.items) * self.m * np.log(2 * np.pi)
        grad = np.zeros(self.n_params)

        def one(item: tuple) -> tuple[float, tuple[float, ...]] | None:
            return self._pseudo_target(item, alpha, beta, sigma2, gamma, gradient)

        workers = min(worker_threads() if self.threads is None else int(self.threads), len(self.items))
        # one BLAS thread on any count of workers, one included: BLAS's sums (the gradient's contractions) split
        # over its threads, so their last bits would depend on the limit
        with serial_blas():
            if workers <= 1:
                parts = [one(item) for item in self.items]
            else:  # the pseudo-targets at once, LAPACK without the GIL (activeeval._lapack)
                from concurrent.futures import ThreadPoolExecutor

                with ThreadPoolExecutor(workers) as pool:
                    parts = list(pool.map(one, self.items))
        # summed in the pseudo-targets' order whatever the threads: the same number for any count of them
        for part in parts:
            if part is None:
                self.failures += 1
                return np.inf, np.zeros(self.n_params)
            value, terms = part
            total += value
            for k, term in enumerate(terms):
                grad[k] += term
        return float(total), grad

    def _pseudo_target(self, item: tuple, alpha: float, beta: float, sigma2: float, gamma: float,
                       gradient: bool) -> tuple[float, tuple[float, ...]] | None:
        """One pseudo-target's NLML and (with ``gradient``) its terms of the gradient; None where its Gram matrix
        is not numerically positive definite."""
        dist, lin, y, fixed = item
        m = self.m
        if isinstance(dist, tuple):
            levels, level_of = dist
            e_levels = np.exp(-beta * levels)
            e = np.take(e_levels, level_of)
        else:
            e = np.exp(-beta * dist)
        gram = alpha * e + fixed
        if self.linear:
            gram += gamma * lin
        gram.flat[:: m + 1] += sigma2
        # symmetric: its transpose is the same matrix in LAPACK's column-major order, factorised in place
        factor = gram.T
        if potrf_lower(factor) != 0:
            return None
        a, _ = potrs_lower(factor, y)
        value = 0.5 * float(y @ a) + float(np.log(np.diagonal(factor)).sum())
        if not gradient:
            return value, ()
        if potri_lower(factor) != 0:  # pragma: no cover - factorised, so invertible
            return None
        inv = factor
        np.copyto(gram, 0.0, where=self._below)  # K⁻¹'s lower triangle, 0 above it (column-major)
        # ∂L/∂θ = ½ Σ (K⁻¹ − aaᵀ) ⊙ ∂K/∂θ, each ∂K/∂θ symmetric: Σ K⁻¹ ⊙ M from the lower triangle alone,
        # 2 Σ_{i≥j} − the diagonal (no full inverse, no m × m W): about a tenth of an evaluation saved
        # (in memory order: LAPACK's column-major triangle meets M's rows, the same numbers as M is symmetric)
        inv_diag = np.diagonal(inv)
        inv_flat = inv.ravel(order="K")

        def contract(mat: np.ndarray) -> float:
            return (2.0 * float(np.dot(inv_flat, mat.ravel())) - float(inv_diag @ np.diagonal(mat))
                    - float(a @ (mat @ a)))

        d_alpha = 0.5 * alpha * contract(e)
        if isinstance(dist, tuple):
            e = np.take(e_levels * levels, level_of)  # E ⊙ D
        else:
            e *= dist  # E ⊙ D
        d_beta = -0.5 * alpha * beta * contract(e)
        d_sigma2 = 0.5 * sigma2 * (float(inv_diag.sum()) - float(a @ a))
        if not self.linear:
            return value, (d_alpha, d_beta, d_sigma2)
        return value, (d_alpha, d_beta, d_sigma2, 0.5 * gamma * contract(lin))
