"""Covariance kernels as small objects: hyperparameters in log space, bounds, value and gradient.

Modelled on scikit-learn's ``gaussian_process.kernels``: a kernel holds its
hyperparameter *values* and exposes them in log space as :attr:`theta`, with
:attr:`bounds` (log space too) for an optimiser, :meth:`with_theta` to go back,
and ``kernel(d2, eval_gradient=True)`` for the value and its gradient with
respect to ``theta``. Two differences, both for the bucket model of BayesAME:

* kernels take *squared distances* ``d2`` (what the methods cache), not points;
* the values are stored, not their logs, so that evaluating a kernel at given
  (α, β) is the arithmetic of the formula to the last bit
  (``exp(log α)`` need not be α).

:class:`SquaredExponential` is the paper's Eq. 1; :class:`Matern32` the
Matérn-3/2 kernel of its multi-target setting (§3.2), on the same interface.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from activeeval.exceptions import ConfigurationError

__all__ = ["Matern32", "SquaredExponential", "kernel_sums"]

#: Side of the square tiles of :func:`kernel_sums` (a float64 tile is 8 MB: a few stay in a large cache).
BLOCK = 1024
#: Row tiles are dealt to this many groups, each with its own accumulator, summed in a fixed order at the end:
#: the result's bits do not depend on how many threads worked on them.
GROUPS = 8
#: Largest |partial sum| float32 holds exactly (2²⁴): integer points whose products stay below it take the
#: float32 path of :func:`kernel_sums`.
_FLOAT32_EXACT = 2**24


@dataclass(frozen=True)
class SquaredExponential:
    """Eq. 1: k(d²) = α exp(−(β / K) d²) on squared distances d² between K-dimensional reference vectors.

    Parameters
    ----------
    alpha : float
        Amplitude α (the prior variance of one bucket), > 0.
    beta : float
        Inverse squared lengthscale β, per reference model (the distance is
        divided by K, so β keeps its meaning as references are added), > 0.
    n_refs : int
        K, the number of reference models (a constant, not a hyperparameter).
    alpha_bounds, beta_bounds : (float, float)
        Range of α and β an optimiser may search, in value space (``bounds``
        gives their logs). Not enforced at construction: the kernel can be
        evaluated anywhere; :meth:`with_theta` clips into them. The default is
        the paper's lower bound 1e-5 (App. A.4) and our upper bound 1e5.
    """

    alpha: float
    beta: float
    n_refs: int
    alpha_bounds: tuple[float, float] = (1e-5, 1e5)
    beta_bounds: tuple[float, float] = (1e-5, 1e5)

    #: Names of the hyperparameters, in the order of ``theta`` and of the gradient's last axis.
    hyperparameters = ("alpha", "beta")

    def __post_init__(self) -> None:
        for label, value in (("alpha", self.alpha), ("beta", self.beta)):
            if not (math.isfinite(value) and value > 0):
                raise ConfigurationError(f"{label} must be a positive number, got {value}")
        if int(self.n_refs) != self.n_refs or self.n_refs < 1:
            raise ConfigurationError(f"n_refs must be a positive integer, got {self.n_refs}")
        for label, (low, high) in (("alpha_bounds", self.alpha_bounds), ("beta_bounds", self.beta_bounds)):
            if not (0 < low <= high < math.inf):
                raise ConfigurationError(f"{label} must be (low, high) with 0 < low <= high < inf, got {(low, high)}")

    @property
    def n_dims(self) -> int:
        """Number of hyperparameters (the length of ``theta``)."""
        return 2

    @property
    def theta(self) -> np.ndarray:
        """(log α, log β)."""
        return np.log(np.array([self.alpha, self.beta], dtype=float))

    @property
    def bounds(self) -> np.ndarray:
        """Log-space bounds of ``theta``, shape (2, 2): one (low, high) row per hyperparameter."""
        return np.log(np.array([self.alpha_bounds, self.beta_bounds], dtype=float))

    def with_theta(self, theta: np.ndarray) -> SquaredExponential:
        """The same kernel at log-parameters ``theta``, clipped into the bounds.

        The clip is in value space: ``exp`` of a log bound can land an ulp outside it.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (2,):
            raise ConfigurationError(f"theta must have shape (2,), got {theta.shape}")
        low, high = np.array([self.alpha_bounds, self.beta_bounds], dtype=float).T
        alpha, beta = np.clip(np.exp(theta), low, high)
        return SquaredExponential(
            float(alpha), float(beta), self.n_refs, alpha_bounds=self.alpha_bounds, beta_bounds=self.beta_bounds
        )

    def __call__(self, d2: np.ndarray, eval_gradient: bool = False):
        """k(d²) elementwise; with ``eval_gradient`` also ∂k/∂θ, shape ``d2.shape + (2,)``.

        ∂k/∂log α = k and ∂k/∂log β = −(β/K) d² k.
        """
        value = self.alpha * np.exp(-(self.beta / self.n_refs) * d2)
        if not eval_gradient:
            return value
        grad = np.stack([value, -(self.beta / self.n_refs) * np.asarray(d2, dtype=float) * value], axis=-1)
        return value, grad

    def diag(self, n: int) -> np.ndarray:
        """k(0) = α for each of ``n`` points."""
        return np.full(int(n), self.alpha)

    def matvec(
        self, phi: np.ndarray, vec: np.ndarray, d2: np.ndarray | None = None, block: int = BLOCK,
        threads: int | None = None,
    ) -> np.ndarray:
        """Σ @ vec over all rows of ``phi`` (the points, shape (B, K)), shape (B,) (or (B, m) for ``vec`` (B, m)).

        Uses the cached squared distances ``d2`` when given, otherwise
        :func:`kernel_sums`: exact, tile by tile (memory O(block²)), each pair
        of points once.
        """
        if d2 is not None:
            return self(d2) @ vec
        return self.alpha * kernel_sums(phi, vec, -self.beta / self.n_refs, block, threads)


@dataclass(frozen=True)
class Matern32:
    """The multi-target setting's Matérn-3/2 kernel (§3.2): k(d) = α (1 + √3 β d) exp(−√3 β d), d = ‖φ_b − φ_b'‖.

    Takes squared distances like :class:`SquaredExponential` (d = √d²). As in
    the paper, the distance is not divided by the number of references: β is
    an inverse lengthscale in the units of the score vectors. It is rougher
    than Eq. 1 (once differentiable), the complementary inductive bias the
    paper mixes in.

    Parameters
    ----------
    alpha, beta : float
        Amplitude and inverse lengthscale, > 0.
    alpha_bounds, beta_bounds : (float, float)
        As for :class:`SquaredExponential`.
    """

    alpha: float
    beta: float
    alpha_bounds: tuple[float, float] = (1e-5, 1e5)
    beta_bounds: tuple[float, float] = (1e-5, 1e5)

    hyperparameters = ("alpha", "beta")

    def __post_init__(self) -> None:
        for label, value in (("alpha", self.alpha), ("beta", self.beta)):
            if not (math.isfinite(value) and value > 0):
                raise ConfigurationError(f"{label} must be a positive number, got {value}")
        for label, (low, high) in (("alpha_bounds", self.alpha_bounds), ("beta_bounds", self.beta_bounds)):
            if not (0 < low <= high < math.inf):
                raise ConfigurationError(f"{label} must be (low, high) with 0 < low <= high < inf, got {(low, high)}")

    @property
    def n_dims(self) -> int:
        return 2

    @property
    def theta(self) -> np.ndarray:
        """(log α, log β)."""
        return np.log(np.array([self.alpha, self.beta], dtype=float))

    @property
    def bounds(self) -> np.ndarray:
        return np.log(np.array([self.alpha_bounds, self.beta_bounds], dtype=float))

    def with_theta(self, theta: np.ndarray) -> Matern32:
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (2,):
            raise ConfigurationError(f"theta must have shape (2,), got {theta.shape}")
        low, high = np.array([self.alpha_bounds, self.beta_bounds], dtype=float).T
        alpha, beta = np.clip(np.exp(theta), low, high)
        return Matern32(float(alpha), float(beta), alpha_bounds=self.alpha_bounds, beta_bounds=self.beta_bounds)

    def __call__(self, d2: np.ndarray, eval_gradient: bool = False):
        """k elementwise on squared distances; with ``eval_gradient`` also ∂k/∂θ, shape ``d2.shape + (2,)``.

        With r = √3 β d: ∂k/∂log α = k and ∂k/∂log β = −α r² exp(−r).
        """
        r = (math.sqrt(3.0) * self.beta) * np.sqrt(np.maximum(np.asarray(d2, dtype=float), 0.0))
        e = np.exp(-r)
        value = self.alpha * (1.0 + r) * e
        if not eval_gradient:
            return value
        return value, np.stack([value, -self.alpha * r * r * e], axis=-1)

    def diag(self, n: int) -> np.ndarray:
        """k(0) = α for each of ``n`` points."""
        return np.full(int(n), self.alpha)


# ----------------------------------------------------------------------------
# Σ @ vec without the B × B matrix: what building BayesAME's posterior costs
# ----------------------------------------------------------------------------

def _integer_points(points: np.ndarray) -> int | None:
    """The largest squared distance when every coordinate is an integer and float32 computes the distances
    exactly (binary reference scores: d² is a Hamming distance), else None."""
    if points.size == 0 or not np.array_equal(points, np.rint(points)):
        return None
    big = float(np.abs(points).max())
    n_dims = points.shape[1]
    if 4.0 * n_dims * big * big + 2.0 >= _FLOAT32_EXACT:  # every partial sum of ‖a‖² + ‖b‖² − 2 a·b, any order
        return None
    return int(n_dims * float(points.max() - points.min()) ** 2)


def kernel_sums(
    points: np.ndarray, vec: np.ndarray, scale: float, block: int = BLOCK, threads: int | None = None,
) -> np.ndarray:
    """Σ_j exp(scale · d²_ij) vec_j for every row i of ``points`` (B, K): the Eq. 1 matvec without α.

    Exact and O(B² K) like the dense product, in square tiles of side
    ``block`` over the upper triangle: a tile's kernel values are formed once
    (its squared distances are one matrix product, ‖a‖² + ‖b‖² − 2 a·b as
    [a, ‖a‖², 1] · [−2b, 1, ‖b‖²]) and serve both the tile and its mirror
    image, so each pair of points costs one exponential, and memory is a few
    tiles (O(block²)) whatever B. When every coordinate is an integer (binary
    reference scores) the distances are computed in float32, exactly (the
    partial sums stay below 2²⁴), and the kernel is read from a table of its
    values at the K·span² + 1 possible distances instead of exponentiated
    (the same values to the last bit; a float64 exponential is a libm call
    per element on CPUs without AVX-512). docs/BENCHMARKS.md, "BayesAME at
    100 000 buckets", has the times. ``threads``
    (default: activeeval's BLAS thread limit, :mod:`activeeval._threads`)
    work on the tiles at once; the sum is the same to the last bit for any
    number of them.
    """
    from activeeval._threads import active_limit, serial_blas

    points = np.asarray(points, dtype=float)
    vec = np.asarray(vec, dtype=float)
    n = points.shape[0]
    block = max(int(block), 1)
    max_d2 = _integer_points(points)
    dtype = np.float32 if max_d2 is not None else np.float64
    sq = (points * points).sum(1)[:, None]
    ones = np.ones_like(sq)
    left = np.hstack([points, sq, ones]).astype(dtype)
    right = np.hstack([-2.0 * points, ones, sq]).astype(dtype)
    table = None if max_d2 is None else np.exp(np.arange(max_d2 + 1, dtype=float) * scale)
    starts = list(range(0, n, block))

    def group(g: int) -> np.ndarray:
        acc = np.zeros(vec.shape)
        for bi in range(g, len(starts), GROUPS):
            i0 = starts[bi]
            i1 = min(i0 + block, n)
            for j0 in starts[bi:]:
                j1 = min(j0 + block, n)
                tile = left[i0:i1] @ right[j0:j1].T  # squared distances (up to rounding: clipped at 0)
                if table is None:
                    np.maximum(tile, 0.0, out=tile)
                    tile *= scale
                    np.exp(tile, out=tile)
                else:  # exact integers in float32; 'clip' skips the bounds check (they are within the table)
                    tile = np.take(table, tile.astype(np.intp), mode="clip")
                acc[i0:i1] += tile @ vec[j0:j1]
                if j0 != i0:
                    acc[j0:j1] += tile.T @ vec[i0:i1]
        return acc

    workers = min(active_limit() if threads is None else int(threads), GROUPS, len(starts))
    if workers <= 1:
        parts = [group(g) for g in range(GROUPS)]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with serial_blas(), ThreadPoolExecutor(workers) as pool:  # one BLAS thread per worker
            parts = list(pool.map(group, range(GROUPS)))
    out = np.zeros(vec.shape)
    for part in parts:
        out += part
    return out
