"""Covariance kernels as objects: one base, declared hyperparameters, sums and products.

Modelled on scikit-learn's ``gaussian_process.kernels``. A kernel holds its
hyperparameter *values* and exposes them in log space as :attr:`~Hyperparameterised.theta`,
with :attr:`~Hyperparameterised.bounds` (log space too) for an optimiser,
:meth:`~Hyperparameterised.with_theta` to go back, and ``kernel(d2, eval_gradient=True)``
for the value and its gradient with respect to ``theta``. Two differences, both
for the bucket model of BayesAME:

* kernels take *squared distances* ``d2`` (what the methods cache), not points;
* the values are stored, not their logs, so that evaluating a kernel at given
  (α, β) is the arithmetic of the formula to the last bit
  (``exp(log α)`` need not be α).

The base does the bookkeeping once. A kernel is a frozen dataclass deriving
from :class:`Kernel` that declares its hyperparameters by name in
``hyperparameters`` (each with a value field ``name`` and a bounds field
``name_bounds``, value space) and writes its formula: :meth:`Kernel.value` and
:meth:`Kernel.gradient` (in log space). ``theta``, ``bounds``, ``with_theta``,
the checks, ``diag``, ``k1 + k2`` (:class:`Sum`) and ``k1 * k2``
(:class:`Product`, both with ``theta`` the concatenation and the gradient by
the sum and product rules) come from the base. :class:`SquaredExponential`
is the paper's Eq. 1; :class:`Matern32` the Matérn-3/2 kernel of its
multi-target setting (§3.2); :class:`Given` a kernel whose values the caller
supplies, scaled by α (the multi-target default's latents on the single-target
kernel, :mod:`activeeval.gp.lmc`).

**The level kernel is not a sum of kernels here.** :class:`LevelKernel`,
the default BayesAME's prior, is mathematically Eq. 1 + a linear kernel on
the centred reference vectors ψ + a constant + a rank-one slope kernel on the
centred bucket means m. It keeps its own evaluation (``column``, ``diag``,
``matvec``) for two reasons: (1) three of its four terms are not functions of
the squared distance d² — they read ψ and m, per bucket — while a
:class:`Kernel` is a function of d²; (2) its column and its matvec add the
terms in different orders (((SE + τ0) + slope) + linear per column,
SE + (τ0 Σv + slope) + linear for Σ·v), orders the golden numbers fix to the
last bit, which one generic sum evaluated left to right would change for one
of them. It shares the base's hyperparameter interface instead
(:class:`Hyperparameterised`: ``theta``, ``bounds``, ``with_theta`` over α and
β, its Eq. 1 part a :class:`SquaredExponential`); γ, τ0 and τ1 are constants
of the kernel there (they may be 0, which has no logarithm).
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from activeeval.exceptions import ConfigurationError

__all__ = [
    "Given",
    "Hyperparameterised",
    "Kernel",
    "LevelKernel",
    "Matern32",
    "Product",
    "SquaredExponential",
    "Sum",
    "kernel_sums",
]

#: Side of the square tiles of :func:`kernel_sums` (a float64 tile is 8 MB: a few stay in a large cache).
BLOCK = 1024
#: Row tiles are dealt to this many groups, each with its own accumulator, summed in a fixed order at the end:
#: the result's bits do not depend on how many threads worked on them.
GROUPS = 8
#: Largest |partial sum| float32 holds exactly (2²⁴): integer points whose products stay below it take the
#: float32 path of :func:`kernel_sums`.
_FLOAT32_EXACT = 2**24
#: The default search range of every hyperparameter, value space: the paper's lower bound 1e-5 (App. A.4), ours 1e5.
DEFAULT_BOUNDS = (1e-5, 1e5)


class Hyperparameterised:
    """Declared hyperparameters → ``theta``, ``bounds``, ``with_theta`` and their checks, once for every kernel.

    A subclass is a frozen dataclass that names its hyperparameters in the
    class attribute ``hyperparameters``; each name ``x`` is a positive float
    field ``x`` and a field ``x_bounds``, (low, high) in value space with
    0 < low ≤ high < ∞. The bounds are not enforced at construction (a
    kernel can be evaluated anywhere); :meth:`with_theta` clips into them.
    Other fields are constants of the kernel (the reference count of
    :class:`SquaredExponential`), checked by :meth:`_check_constants`.
    """

    #: Names of the hyperparameters, in the order of ``theta`` and of the gradient's last axis.
    hyperparameters: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for name in self.hyperparameters:
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigurationError(f"{name} must be a positive number, got {value}")
        self._check_constants()
        for name in self.hyperparameters:
            low, high = getattr(self, f"{name}_bounds")
            if not (0 < low <= high < math.inf):
                raise ConfigurationError(
                    f"{name}_bounds must be (low, high) with 0 < low <= high < inf, got {(low, high)}")

    def _check_constants(self) -> None:
        """Check the fields that are not hyperparameters (none by default)."""

    # ------------------------------------------------------------ the three a composite overrides
    @property
    def names(self) -> tuple[str, ...]:
        """Names of the entries of ``theta`` (a composite prefixes its parts': ``left.alpha``)."""
        return self.hyperparameters

    @property
    def values(self) -> np.ndarray:
        """The hyperparameters in value space, in the order of ``theta``."""
        return np.array([getattr(self, name) for name in self.hyperparameters], dtype=float)

    @property
    def value_bounds(self) -> np.ndarray:
        """Bounds in value space, shape (n_dims, 2)."""
        return np.array([getattr(self, f"{name}_bounds") for name in self.hyperparameters], dtype=float)

    def with_values(self, values: np.ndarray) -> Any:
        """The same kernel with the hyperparameters ``values`` (value space, not clipped)."""
        named = {name: float(v) for name, v in zip(self.hyperparameters, values, strict=True)}
        return dataclasses.replace(self, **named)  # type: ignore[type-var]

    # ------------------------------------------------------------ derived once
    @property
    def n_dims(self) -> int:
        """Number of hyperparameters (the length of ``theta``)."""
        return len(self.names)

    @property
    def theta(self) -> np.ndarray:
        """The logs of the hyperparameters."""
        return np.log(self.values)

    @property
    def bounds(self) -> np.ndarray:
        """Log-space bounds of ``theta``, shape (n_dims, 2): one (low, high) row per hyperparameter."""
        return np.log(self.value_bounds)

    def with_theta(self, theta: np.ndarray) -> Any:
        """The same kernel at log-parameters ``theta``, clipped into the bounds.

        The clip is in value space: ``exp`` of a log bound can land an ulp outside it.
        """
        theta = np.asarray(theta, dtype=float)
        if theta.shape != (self.n_dims,):
            raise ConfigurationError(f"theta must have shape ({self.n_dims},), got {theta.shape}")
        low, high = self.value_bounds.T
        return self.with_values(np.clip(np.exp(theta), low, high))


class Kernel(Hyperparameterised, ABC):
    """A covariance kernel on squared distances: declare the hyperparameters, write the formula.

    A subclass implements :meth:`value` and :meth:`gradient`; the rest is
    the base's. Example (a toy exponential kernel, the kind a test declares)::

        @dataclass(frozen=True)
        class Exponential(Kernel):
            alpha: float
            beta: float
            alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS
            beta_bounds: tuple[float, float] = DEFAULT_BOUNDS
            hyperparameters = ("alpha", "beta")

            def value(self, d2):
                return self.alpha * np.exp(-self.beta * np.sqrt(d2))

            def gradient(self, d2, value):
                return np.stack([value, -self.beta * np.sqrt(d2) * value], axis=-1)
    """

    #: Whether the multi-target LMC (:mod:`activeeval.gp.lmc`) gives this kernel the squared distance per
    #: reference model (d² / K; the kernel is then built with ``n_refs=1``) rather than d² itself.
    per_reference: ClassVar[bool] = False

    @abstractmethod
    def value(self, d2: np.ndarray) -> np.ndarray:
        """k elementwise on squared distances ``d2``."""

    @abstractmethod
    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        """∂k/∂θ (log space) at ``d2``, shape ``d2.shape + (n_dims,)``; ``value`` is ``self.value(d2)``."""

    def __call__(self, d2: np.ndarray, eval_gradient: bool = False) -> Any:
        """k(d²) elementwise; with ``eval_gradient`` also ∂k/∂θ, shape ``d2.shape + (n_dims,)``."""
        value = self.value(d2)
        if not eval_gradient:
            return value
        return value, self.gradient(d2, value)

    def value_gradient(self, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """k and ∂k/∂(hyperparameter values) — value space, what the LMC's AdamW steps on.

        By the chain rule from :meth:`gradient` (∂k/∂x = ∂k/∂log x / x); a kernel may write it directly.
        """
        value, grad = self(d2, eval_gradient=True)
        return value, grad / self.values

    def diag(self, n: int) -> np.ndarray:
        """k(0) for each of ``n`` points."""
        return np.full(int(n), float(self.value(np.zeros(1))[0]))

    def __add__(self, other: object) -> Sum:
        if not isinstance(other, Kernel):
            return NotImplemented
        return Sum(self, other)

    def __mul__(self, other: object) -> Product:
        if not isinstance(other, Kernel):
            return NotImplemented
        return Product(self, other)


@dataclass(frozen=True)
class SquaredExponential(Kernel):
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
        gives their logs). The default is the paper's lower bound 1e-5
        (App. A.4) and our upper bound 1e5.
    """

    alpha: float
    beta: float
    n_refs: int
    alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS
    beta_bounds: tuple[float, float] = DEFAULT_BOUNDS

    hyperparameters = ("alpha", "beta")
    per_reference = True

    def _check_constants(self) -> None:
        if int(self.n_refs) != self.n_refs or self.n_refs < 1:
            raise ConfigurationError(f"n_refs must be a positive integer, got {self.n_refs}")

    def value(self, d2: np.ndarray) -> np.ndarray:
        return self.alpha * np.exp(-(self.beta / self.n_refs) * d2)

    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        """∂k/∂log α = k and ∂k/∂log β = −(β/K) d² k."""
        return np.stack([value, -(self.beta / self.n_refs) * np.asarray(d2, dtype=float) * value], axis=-1)

    def value_gradient(self, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """∂k/∂α = k / α and ∂k/∂β = −(d²/K) k."""
        value = self.value(d2)
        return value, np.stack([value / self.alpha, -(d2 / self.n_refs) * value], axis=-1)

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
class Matern32(Kernel):
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
    alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS
    beta_bounds: tuple[float, float] = DEFAULT_BOUNDS

    hyperparameters = ("alpha", "beta")

    def _parts(self, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(r, exp(−r)) with r = √3 β d."""
        r = (math.sqrt(3.0) * self.beta) * np.sqrt(np.maximum(np.asarray(d2, dtype=float), 0.0))
        return r, np.exp(-r)

    def value(self, d2: np.ndarray) -> np.ndarray:
        r, e = self._parts(d2)
        return self.alpha * (1.0 + r) * e

    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        """With r = √3 β d: ∂k/∂log α = k and ∂k/∂log β = −α r² exp(−r)."""
        r, e = self._parts(d2)
        return np.stack([value, -self.alpha * r * r * e], axis=-1)

    def value_gradient(self, d2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """∂k/∂α = (1 + r) e^{−r} and ∂k/∂β = −3 α β d² e^{−r}."""
        r, e = self._parts(d2)
        value = self.alpha * (1.0 + r) * e
        return value, np.stack([(1.0 + r) * e, -(3.0 * self.alpha * self.beta) * np.maximum(d2, 0.0) * e], axis=-1)

    def diag(self, n: int) -> np.ndarray:
        """k(0) = α for each of ``n`` points."""
        return np.full(int(n), self.alpha)


@dataclass(frozen=True)
class Given(Kernel):
    """α times a kernel whose values the caller supplies: k = α K_source, with no other hyperparameter.

    Its input is not squared distances but the caller's kernel values at the
    same pairs (``kernel(values)`` is ``alpha * values``). ``source`` names
    which of the caller's kernels it stands for: in the multi-target LMC
    (:mod:`activeeval.gp.lmc`), "fixed" is the single-target default's
    reference-fitted kernel and "level" its level and slope terms, and every
    latent with the same source shares the caller's kernel rows.
    """

    source: str
    alpha: float = 1.0
    alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS

    hyperparameters = ("alpha",)

    def _check_constants(self) -> None:
        if not (isinstance(self.source, str) and self.source):
            raise ConfigurationError(f"a given kernel needs the name of its source, got {self.source!r}")

    def value(self, d2: np.ndarray) -> np.ndarray:
        return self.alpha * d2

    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        """∂k/∂log α = k."""
        return np.asarray(value, dtype=float)[..., None]

    def diag(self, n: int) -> np.ndarray:
        raise ConfigurationError("a given kernel's diagonal is the caller's: evaluate it on the caller's values")


@dataclass(frozen=True)
class _Composite(Kernel):
    """Two kernels, ``theta`` the concatenation of theirs (left first)."""

    left: Kernel
    right: Kernel

    def __post_init__(self) -> None:
        if not (isinstance(self.left, Kernel) and isinstance(self.right, Kernel)):
            raise ConfigurationError("kernels combine only with kernels")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f"left.{n}" for n in self.left.names) + tuple(f"right.{n}" for n in self.right.names)

    @property
    def values(self) -> np.ndarray:
        return np.concatenate([self.left.values, self.right.values])

    @property
    def value_bounds(self) -> np.ndarray:
        return np.vstack([self.left.value_bounds, self.right.value_bounds])

    def with_values(self, values: np.ndarray) -> Any:
        values = np.asarray(values, dtype=float)
        n = self.left.n_dims
        return dataclasses.replace(self, left=self.left.with_values(values[:n]),
                                   right=self.right.with_values(values[n:]))


@dataclass(frozen=True)
class Sum(_Composite):
    """k1 + k2 (``k1 + k2``): the gradient is each part's, side by side."""

    def value(self, d2: np.ndarray) -> np.ndarray:
        return self.left.value(d2) + self.right.value(d2)

    def __call__(self, d2: np.ndarray, eval_gradient: bool = False) -> Any:
        if not eval_gradient:
            return self.value(d2)
        v1, g1 = self.left(d2, eval_gradient=True)
        v2, g2 = self.right(d2, eval_gradient=True)
        return v1 + v2, np.concatenate([g1, g2], axis=-1)

    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        return self(d2, eval_gradient=True)[1]


@dataclass(frozen=True)
class Product(_Composite):
    """k1 · k2 (``k1 * k2``): the gradient by the product rule, [∂k1 · k2, k1 · ∂k2]."""

    def value(self, d2: np.ndarray) -> np.ndarray:
        return self.left.value(d2) * self.right.value(d2)

    def __call__(self, d2: np.ndarray, eval_gradient: bool = False) -> Any:
        if not eval_gradient:
            return self.value(d2)
        v1, g1 = self.left(d2, eval_gradient=True)
        v2, g2 = self.right(d2, eval_gradient=True)
        return v1 * v2, np.concatenate([g1 * v2[..., None], v1[..., None] * g2], axis=-1)

    def gradient(self, d2: np.ndarray, value: np.ndarray) -> np.ndarray:
        return self(d2, eval_gradient=True)[1]


# ----------------------------------------------------------------------------
# The kernel of the default BayesAME (see docs/MATHS.md)
# ----------------------------------------------------------------------------


@dataclass(frozen=True)
class LevelKernel(Hyperparameterised):
    """Eq. 1 plus terms for how a new model relates to the references (not in the paper).

    Σ_bb' = α exp(−(β/K) d²_bb') + (γ/K) ψ_bᵀψ_b' + τ0 + τ1 m_b m_b'

    with d² the squared distance of the reference vectors φ, ψ_b = φ_b − φ̄
    the reference vectors centred on each reference model's mean score over
    the benchmark's items, m_b = μ_b − μ̄ the references' mean score on bucket b
    centred on its mean over the items.

    * γ: the target's scores may follow a *combination of reference models*
      (Bayes-AIPW's linear model, as a prior): errors it shares with the
      references it resembles, across all items.
    * τ0, τ1: the target may sit at any level, and follow item difficulty
      more or less steeply than the average reference; with them wide
      (τ ≈ range²), a model much better or worse than every reference moves
      every unobserved item, not only the items near the ones scored.

    ``gamma = tau0 = tau1 = 0`` is the paper's Eq. 1. Why this is not a
    :class:`Sum` of kernels: the module's docstring. ``theta`` is (log α, log β);
    γ, τ0, τ1 are non-negative constants here.
    """

    alpha: float
    beta: float
    gamma: float = 0.0
    tau0: float = 0.0
    tau1: float = 0.0
    alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS
    beta_bounds: tuple[float, float] = DEFAULT_BOUNDS

    hyperparameters = ("alpha", "beta")

    def _check_constants(self) -> None:
        for name in ("gamma", "tau0", "tau1"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigurationError(f"{name} must be a non-negative number, got {value}")

    def se(self, n_refs: int) -> SquaredExponential:
        """The Eq. 1 part α exp(−(β/K) d²) over K = ``n_refs`` reference models."""
        return SquaredExponential(self.alpha, self.beta, n_refs)

    def column(
        self, d2_row: np.ndarray, psi: np.ndarray, psi_b: np.ndarray, m: np.ndarray, m_b: float,
        psi_dot: np.ndarray | None = None,
    ) -> np.ndarray:
        """Σ[:, b] from the squared distances ``d2_row`` (B,) of bucket b to every bucket.

        ``psi`` (B, K) and ``m`` (B,) as above; ``psi_b``, ``m_b`` those of bucket b;
        ``psi_dot`` = ``psi @ psi_b`` when the caller has it already (it is then not recomputed).
        """
        n_refs = psi.shape[1]
        col = self.se(n_refs)(d2_row) + self.tau0 + self.tau1 * m_b * m
        if self.gamma:
            col += (self.gamma / n_refs) * (psi @ psi_b if psi_dot is None else psi_dot)
        return col

    def diag(self, psi: np.ndarray, m: np.ndarray) -> np.ndarray:
        """diag(Σ) (B,): α + τ0 + τ1 m_b² (+ (γ/K) ‖ψ_b‖²)."""
        n_refs = psi.shape[1]
        out = self.alpha + self.tau0 + self.tau1 * m * m
        if self.gamma:
            out = out + (self.gamma / n_refs) * (psi * psi).sum(1)
        return out

    def matvec(
        self, feat: np.ndarray, psi: np.ndarray, m: np.ndarray, vec: np.ndarray, d2: np.ndarray | None = None
    ) -> np.ndarray:
        """Σ @ vec over all buckets (block by block unless the distances ``d2`` are cached)."""
        n_refs = psi.shape[1]
        out = self.se(feat.shape[1]).matvec(feat, vec, d2)
        out += self.tau0 * float(vec.sum()) + self.tau1 * m * float(m @ vec)
        if self.gamma:
            out += (self.gamma / n_refs) * (psi @ (psi.T @ vec))
        return out


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
    per element on CPUs without AVX-512). docs/benchmarks/history.md, "BayesAME at
    100 000 buckets", has the times. ``threads``
    (default :func:`activeeval._threads.worker_threads`: the cores, up to 4,
    unless a thread limit was set) work on the tiles at once, one BLAS thread
    each; the sum is the same to the last bit for any number of them.
    """
    from activeeval._threads import serial_blas, worker_threads

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

    workers = min(worker_threads() if threads is None else int(threads), GROUPS, len(starts))
    with serial_blas():  # one BLAS thread per worker, one worker included: the tiles' products the same bits
        if workers <= 1:
            parts = [group(g) for g in range(GROUPS)]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(workers) as pool:
                parts = list(pool.map(group, range(GROUPS)))
    out = np.zeros(vec.shape)
    for part in parts:
        out += part
    return out
