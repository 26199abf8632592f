"""The reference-fitted prior of the Gaussian methods: fitted and calibrated on the reference models alone.

What the default BayesAME (:mod:`activeeval.methods.bayesame`) and the
multi-target default (:mod:`activeeval.methods.bayesame_multi`) believe
before the target's first score, as one value:

* :class:`ReferenceFit` (:func:`fit_hyperparameters`): the kernel's
  hyperparameters, fitted with reference models as pseudo-targets;
* :class:`Calibration` (:func:`calibrate`): how much the model-based interval
  must widen, measured with reference models as pseudo-targets;
* :class:`ReferencePrior`: the two and the bucketing tolerance, a frozen value
  that serialises as plain data (``to_dict`` / ``from_dict``, JSON types, every
  float's bits kept) and that a method takes (``BayesAME(prior=...)``) instead
  of deriving it again;
* :class:`BucketPrior`: a ReferencePrior on its reference (``prior.on(reference)``),
  the bucket abilities' prior mean and covariance (buckets, distances, the
  level term, the kernel's columns and Σ·N), shared read-only by every method
  built on that reference.

Fits, calibrations and the prior state (buckets, Σ·N) are memoised per
reference (:mod:`activeeval._cache`) and kept in the user cache
(:mod:`activeeval.user_cache`) in the layout they always had there
(:data:`STORE_FORMAT`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np

from activeeval._cache import ReferenceCache
from activeeval._threads import numeric
from activeeval.data.matrix import ScoreMatrix
from activeeval.design import Z95
from activeeval.exceptions import ConfigurationError
from activeeval.gaussian import (
    BucketPosterior,
    Buckets,
    LeaveOneOutNLML,
    bucketize,
    buckets_from_assignment,
    sq_dists,
)
from activeeval.gp.kernels import LevelKernel
from activeeval.settings import Flag, Integer, Number, OneOf, Settings, setting

__all__ = [
    "BucketPrior",
    "Calibration",
    "FitSettings",
    "ReferenceFit",
    "ReferencePrior",
    "calibrate",
    "default_tolerance",
    "fit_hyperparameters",
]

#: Smallest noise variance of the fit, relative to range² (App. C.1's σ² of the unique regime).
SIGMA2_MIN = 1e-4
#: BayesAME's default ``warmup`` (its calibration's pseudo-targets start as it does): items drawn at random before
#: the information-gain selection starts. 0: issue 25 measured 10 (with
#: calibrate_by="budget") in benchmarks/efficiency.py — far better in extrapolation, but under-covering on a
#: few-reference continuous set (WMT21 en-zh, 10 references: 0.80 at 10 % of N) — so it is an option, not the default.
WARMUP = 0
#: BayesAME's default ``switch_z`` (:class:`~activeeval.methods.bayesame.BayesAME`): switch once the model-based
#: estimate is this many sd beyond every reference (stop 46; 1.96 before, where the 95 % interval's own test already
#: holds): docs/benchmarks/history.md, "Issue 25 (stop 46)". Its calibration's pseudo-targets switch by the same rule.
SWITCH_Z = 1.0
#: Smallest calibration factor by budget (the interval narrows at most to half the model's own).
CALIBRATION_MIN = 0.5
#: Fewest standardised errors at an n for a factor by budget there (fewer: that n is left out).
CALIBRATION_MIN_Z = 8
#: Largest calibration factor applied (a larger one means the model is unusable here; the scale switch takes over).
CALIBRATION_MAX = 3.0
#: ``calibrate_by`` values whose factor scales the interval alone: the switch tests read the pooled factor.
INTERVAL_ONLY = ("capped", "capped1")


@dataclass(frozen=True)
class FitSettings(Settings):
    """How a Gaussian method builds and reads its reference prior: the fit, the calibration's pseudo-targets,
    the bucketing tolerance and the cache (a method's ``fit`` group; each field is also a flat option,
    ``bayesame[fit_items=200]``). A :class:`ReferencePrior` given as ``prior=`` holds the first six: leave
    them at their defaults then."""

    about: ClassVar[str] = "the reference prior's fit and calibration"

    fit_items: int = setting(300, Integer(2), "items the reference fit uses (a random subset of the columns)")
    fit_seed: int = setting(0, Integer(0), "seed of the reference fit's subset and starts")
    n_pseudo: int = setting(20, Integer(1), "reference models played as pseudo-targets by the calibration")
    level_prior: bool = setting(True, Flag(), "the kernel's level and slope terms (a target above or below all)")
    linear: bool = setting(True, Flag(), "the kernel's linear term (the target as a combination of references)")
    tolerance: float | None = setting(None, Number(0, optional=True, phrase=">= 0 (0 compares scores exactly)"),
                                      "rounding tolerance of continuous scores' buckets (default 1e-3 of the range)")
    calibrate_by: str = setting("pooled", OneOf("budget", "capped", "capped1", "pooled"),
                                "one calibration factor for every n (pooled), the factor at n/N (budget), or the "
                                "factor at n/N never above the pooled one, the switch reading the pooled (capped; "
                                "capped1: nor below 1)")
    fold_fit: str = setting("shared", OneOf("refit", "shared"),
                            "the calibration's fold models: the main fit's kernel (shared) or each one refitted on "
                            "its references (refit, the earlier default)")
    cache_mb: float = setting(256.0, Number(0, phrase="a number of megabytes >= 0"),
                              "memory for the buckets' squared distances (0: none cached)")

    #: the fields a ReferencePrior holds (a prior given must not be contradicted)
    PRIOR_FIELDS: ClassVar[tuple[str, ...]] = ("fit_items", "fit_seed", "n_pseudo", "level_prior", "linear",
                                               "tolerance", "fold_fit")


@dataclass(frozen=True)
class ReferenceFit:
    """The default's kernel, fitted on the reference models (see :func:`fit_hyperparameters`).

    Attributes
    ----------
    alpha, beta, sigma2 : float
        Eq. 1's amplitude and inverse lengthscale, and the per-item noise variance.
    gamma : float
        Variance of the linear (combination-of-references) term; 0 without it.
    tau0, tau1 : float
        Prior variances of the target's level and slope (held fixed: range²).
    n_pseudo, n_items : int
        Pseudo-targets and items the fit used.
    nlml : float
        The leave-one-out NLML at the optimum.
    converged : bool
    seed : int
        Seed of the pseudo-target and item draws.
    """

    alpha: float
    beta: float
    sigma2: float
    tau0: float
    tau1: float
    gamma: float = 0.0
    n_pseudo: int = 0
    n_items: int = 0
    nlml: float = float("nan")
    converged: bool = True
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReferenceFit:
        return cls(**_checked_fields(cls, data, "reference-fit"))


_FITS: ReferenceCache[ReferenceFit] = ReferenceCache("BayesAME reference fits", 16)


def _checked_fields(cls: type, data: Mapping[str, Any], what: str) -> dict[str, Any]:
    """``data`` as keyword arguments of the dataclass ``cls``, refusing unknown keys (stored sessions)."""
    fields = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = sorted(set(data) - fields)
    if unknown:
        raise ConfigurationError(f"unknown {what} field(s) {unknown}; expected {sorted(fields)}")
    return dict(data)


@numeric  # called directly too (public): its L-BFGS-B and Cholesky run under the BLAS limit like a method's
def fit_hyperparameters(
    reference: ScoreMatrix,
    *,
    n_pseudo: int = 20,
    n_items: int = 300,
    seed: int = 0,
    level_prior: bool = True,
    linear: bool = True,
    start: ReferenceFit | None = None,
) -> ReferenceFit:
    """Fit (α, β, σ²) of the default BayesAME on the reference models alone.

    ``n_pseudo`` reference models (all of them if fewer) are pseudo-targets:
    each is predicted from the other references on ``n_items`` random items
    with the target's model, and the sum of their negative log marginal
    likelihoods (:class:`~activeeval.gaussian.LeaveOneOutNLML`) is minimised
    by L-BFGS-B over (log α, log β, log σ²), from the best point of a grid
    over β. The target's scores are never used. Deterministic given ``seed``;
    results are cached per reference matrix.

    Parameters
    ----------
    reference : ScoreMatrix
        Complete reference scores (no NaN), at least 2 models.
    n_pseudo : int
        Pseudo-targets (cost grows linearly).
    n_items : int
        Items of the fit (cost grows as n_items³).
    seed : int
    level_prior : bool
        τ0 = τ1 = (score range)² (True, the default) or 0 (the paper's kernel).
    linear : bool
        Fit the linear term γ (True) or leave it out (γ = 0).
    start : ReferenceFit, optional
        Start the search here instead of at the best point of the β grid.
    """
    scores = np.asarray(reference.scores, dtype=float)
    if np.isnan(scores).any():
        raise ConfigurationError("fit_hyperparameters needs complete reference scores; drop missing ones first")
    settings = (int(n_pseudo), int(n_items), int(seed), bool(level_prior), bool(linear))

    def compute() -> ReferenceFit:
        return _fit_hyperparameters(reference, scores, n_pseudo, n_items, seed, level_prior, linear, start)

    # a calibration's fold fits (``start`` given) are kept in memory only: the calibration is stored whole
    return _FITS.get_or_compute((reference.fingerprint(), *settings, start), compute if start is not None else
                                lambda: _stored("bayesame_fit", ReferenceFit, (reference.fingerprint(), *settings),
                                                compute))


def _fit_hyperparameters(reference: ScoreMatrix, scores: np.ndarray, n_pseudo: int, n_items: int, seed: int,
                         level_prior: bool, linear: bool, start: ReferenceFit | None) -> ReferenceFit:
    k_refs, n_all = scores.shape
    width = _range_width(reference)
    tau = width * width if level_prior else 0.0
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xF17]))
    pseudo = np.sort(rng.choice(k_refs, size=min(int(n_pseudo), k_refs), replace=False))
    sub = np.sort(rng.choice(n_all, size=min(int(n_items), n_all), replace=False))
    x = scores[:, sub].T  # (m, K)
    nlml = LeaveOneOutNLML(x, scores.mean(1), pseudo, tau, tau, linear=linear)
    resid_var = float(np.mean([np.var(x[:, j] - (x.sum(1) - x[:, j]) / (k_refs - 1)) for j in pseudo]))
    resid_var = max(resid_var, 1e-6 * width * width)
    # bounds in log space, relative to the score range: keep Σ positive definite and exp() finite
    lo_var, hi_var = math.log(1e-8 * width * width), math.log(4.0 * width * width)
    # σ² ≥ 1e-4 · range²: the paper's noise in its unique regime, a nugget that keeps Σ + σ²I well conditioned
    bounds = [(lo_var, hi_var), (math.log(1e-3), math.log(1e4)), (math.log(SIGMA2_MIN * width * width), hi_var)]
    var0 = float(np.clip(np.log(0.5 * resid_var), bounds[2][0], bounds[2][1]))
    grid = [np.array([var0, math.log(b), var0]) for b in (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)]
    if linear:
        bounds.append((lo_var, math.log(100.0)))  # γ/K ψᵀψ: γ is a per-model weight variance, up to 100
        grid = [np.append(g, math.log(0.1)) for g in grid]
    if start is not None:
        grid = [np.log([start.alpha, start.beta, start.sigma2] + ([max(start.gamma, 1e-8)] if linear else []))]
        grid = [np.clip(grid[0], [b[0] for b in bounds], [b[1] for b in bounds])]
    seen: dict[bytes, tuple[float, np.ndarray]] = {}

    def objective(y: np.ndarray) -> tuple[float, np.ndarray]:  # value and gradient, once per point
        key = np.asarray(y, dtype=float).tobytes()
        if key not in seen:
            seen[key] = nlml(y)
        return seen[key]

    # the grid's values alone (no inverse: a third of a call); L-BFGS-B's first call, at the best, adds its gradient
    grid_values = [nlml.value(g) for g in grid] if len(grid) > 1 else [objective(grid[0])[0]]
    y0 = grid[int(np.argmin(grid_values))]
    from scipy.optimize import minimize  # imported here: sessions that reuse a stored fit never need it

    result = minimize(objective, y0, jac=True, method="L-BFGS-B", bounds=bounds)
    best = result.x if np.isfinite(result.fun) and result.fun <= min(grid_values) else y0
    values = np.exp(best)
    best_nlml = float(min(result.fun, min(grid_values)) if np.isfinite(result.fun) else min(grid_values))
    alpha, beta, sigma2 = (float(v) for v in values[:3])
    gamma = float(values[3]) if linear else 0.0
    return ReferenceFit(
        alpha=alpha, beta=beta, sigma2=sigma2, tau0=tau, tau1=tau, gamma=gamma, n_pseudo=int(pseudo.size),
        n_items=int(sub.size), nlml=best_nlml, converged=bool(result.success),
        seed=int(seed),
    )


def _range_width(reference: ScoreMatrix) -> float:
    if reference.score_range is not None:
        lo, hi = reference.score_range
        return float(hi - lo)
    spread = float(np.nanmax(reference.scores) - np.nanmin(reference.scores))
    return spread if spread > 0 else 1.0


@dataclass(frozen=True)
class Calibration:
    """How much the default's model-based interval must widen (or may narrow), measured on reference pseudo-targets.

    Attributes
    ----------
    factor : float
        c: the model-based standard deviation is multiplied by c (pooled over
        every n of the calibration; the root mean square of z, bounded to
        [1, 3]). What ``calibrate_by="pooled"`` applies at every n, and the
        multi-target method's factor.
    rms : float
        Root mean square of the pseudo-targets' standardised errors
        z = (R̂ − R) / sd (c before it is bounded to [1, 3]).
    n_pseudo : int
        Pseudo-targets run (every reference model once).
    n_items : int
        Items of the calibration benchmark (a random subset when N is large).
    n_z : int
        Standardised errors collected.
    seed : int
    fractions, factors : tuple of float
        The factor by budget (``calibrate_by="budget"``, an option): at each
        n/N of ``fractions``, the root mean square of the z measured there,
        raised to its one-sided 90 % upper confidence bound when below 1 (so
        the interval narrows only as far as the evidence allows) and bounded
        to [``CALIBRATION_MIN``, ``CALIBRATION_MAX``]; between them
        :meth:`factor_at` interpolates in log n/N. Empty in calibrations made
        before it existed: ``factor`` then applies at every n.
    """

    factor: float
    rms: float = float("nan")
    n_pseudo: int = 0
    n_items: int = 0
    n_z: int = 0
    seed: int = 0
    fractions: tuple[float, ...] = ()
    factors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        # a stored calibration's lists (JSON) become tuples: the dataclass stays hashable (it keys caches)
        object.__setattr__(self, "fractions", tuple(float(f) for f in self.fractions))
        object.__setattr__(self, "factors", tuple(float(f) for f in self.factors))
        if len(self.fractions) != len(self.factors):
            raise ConfigurationError(
                f"calibration: {len(self.fractions)} fractions but {len(self.factors)} factors; they pair up")
        if any(not (np.isfinite(f) and f > 0) for f in self.factors):
            raise ConfigurationError(f"calibration factors must be positive numbers, got {list(self.factors)}")
        if list(self.fractions) != sorted(set(self.fractions)) or any(not 0 < f <= 1 for f in self.fractions):
            raise ConfigurationError(
                f"calibration fractions must increase strictly within (0, 1], got {list(self.fractions)}")

    def factor_at(self, fraction: float, by: str = "budget") -> float:
        """The factor at n/N = ``fraction``: by budget (interpolated in log n/N, held flat beyond the
        ends), the smaller of that and the pooled factor (``by="capped"``; ``"capped1"``: and at least 1),
        or the pooled ``factor`` (``by="pooled"``, or a calibration without factors by budget)."""
        if by == "pooled" or not self.factors:
            return self.factor
        if by == "capped":
            return min(self.factor, self.factor_at(fraction, "budget"))
        if by == "capped1":
            return max(1.0, self.factor_at(fraction, "capped"))
        if fraction <= self.fractions[0]:
            return self.factors[0]
        if fraction >= self.fractions[-1]:
            return self.factors[-1]
        return float(np.interp(math.log(fraction), np.log(self.fractions), self.factors))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["fractions"], out["factors"] = list(self.fractions), list(self.factors)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibration:
        return cls(**_checked_fields(cls, data, "calibration"))


@numeric  # called directly too (public): under the BLAS limit like a method's
def calibrate(
    reference: ScoreMatrix,
    fit: ReferenceFit,
    *,
    folds: int = 5,
    max_items: int = 1000,
    seed: int = 0,
    fit_pseudo: int = 8,
    fit_items: int = 150,
    warmup: int = WARMUP,
    switch_z: float | None = None,
    sampled: tuple[str, float] | None = None,
    fold_fit: str = "shared",
) -> Calibration:
    """Measure the default's interval on reference models used as targets; never sees the real target.

    The references are split at random into ``folds`` groups (one per model
    when there are fewer than 2 × ``folds`` of them). Each group in turn is a
    set of pseudo-targets, and the models of the other groups are their
    references, with the real target's kernel ``fit`` (``fold_fit="shared"``,
    the default: a pseudo-target's model differs from a real target's only in
    its references), or a kernel fitted on those references alone
    (``fold_fit="refit"``: :func:`fit_hyperparameters` with ``fit_pseudo``
    pseudo-targets on ``fit_items`` items, starting from ``fit``: five more,
    smaller and noisier fits than the real target's; what each gives on the
    shared data is in docs/benchmarks/history.md, "Issue 25 and 26 (stop 44)");
    then the default BayesAME plays every pseudo-target of the group at
    once, on the benchmark or on a random ``max_items`` of its items (the
    model-based design does not depend on the scores, so they share it).
    Each records its standardised error z = (R̂ − R) / sd at n = 30 and at 3,
    5, 10, 15, …, 50 % of the items while its estimate is model-based (a
    pseudo-target that would switch to the design-based estimate leaves the
    count there). The pooled factor is the root mean square of all those z,
    at least 1; the factors by budget (:attr:`Calibration.factors`) are
    measured at each of those n and at 1 and 2.5 % of the items, separately.
    The pseudo-targets start with ``warmup`` random items, and switch by the
    method's ``switch_z`` (None: 1.96, no test beyond the 95 % interval's own),
    as the method they calibrate does; ``sampled``: their items are
    drawn as ``selection="hybrid"`` draws them (``sampled`` = (``sample_by``, ``sample_uniform``), not by Eq. 6).
    """
    grid, by_n, n_sub, n_pseudo = _calibration_errors(
        reference, fit, folds=folds, max_items=max_items, seed=seed, fit_pseudo=fit_pseudo, fit_items=fit_items,
        warmup=warmup, switch_z=switch_z, sampled=sampled, fold_fit=fold_fit)
    pooled = _calibration_grid(n_sub)[1]
    # fold by fold, each fold's errors at the pooled n in grid order (the order the mean below always summed them in)
    z = [errors[f] for f in range(len(by_n[0]) if by_n else 0) for n, errors in zip(grid, by_n, strict=True)
         if n in pooled]
    values = np.concatenate(z) if z else np.zeros(0)
    rms = float(np.sqrt(np.mean(values**2))) if values.size else float("nan")
    factor = min(max(1.0, rms), CALIBRATION_MAX) if np.isfinite(rms) else 1.0
    fracs, factors = _factors_by_budget(grid, by_n, n_sub)
    return Calibration(factor=float(factor), rms=rms, n_pseudo=n_pseudo, n_items=int(n_sub), n_z=int(values.size),
                       seed=int(seed), fractions=fracs, factors=factors)


def _calibration_grid(n_items: int) -> tuple[list[int], set[int]]:
    """The calibration's n on a benchmark of ``n_items`` items: (every n, in order; the n its pooled factor uses).

    The pooled factor's n are n = 30 and 3, 5, 10, 15, …, 50 % of the items; the
    factors by budget are measured at those and at 1 and 2.5 %.
    """
    fractions = (0.03, 0.05) + tuple(np.round(np.arange(0.10, 0.501, 0.05), 2))
    pooled = {min(n_items, 30)} | {max(1, int(round(f * n_items))) for f in fractions}
    return sorted(pooled | {max(1, int(round(f * n_items))) for f in (0.01, 0.025)}), pooled


def _calibration_folds(
    reference: ScoreMatrix, fit: ReferenceFit, *, folds: int = 5, max_items: int = 1000, seed: int = 0,
    fit_pseudo: int = 8, fit_items: int = 150, fold_fit: str = "shared",
) -> tuple[ScoreMatrix, Iterator[tuple[int, ScoreMatrix, ReferenceFit, np.ndarray]]]:
    """The folds :func:`calibrate` plays (its arguments): (the reference on the items it plays, all of them or
    ``max_items`` at random; the folds).

    Each fold is (its index, its references on those items, their kernel, its pseudo-targets' scores on those
    items, one row each); the kernel is ``fit`` or, with ``fold_fit="refit"``, fitted on the fold's references
    when the fold is reached.
    """
    k_refs, n_all = reference.n_models, reference.n_items
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCA1]))
    items = np.arange(n_all) if n_all <= max_items else np.sort(rng.choice(n_all, size=max_items, replace=False))
    sub = reference.select_items(items.tolist()) if items.size < n_all else reference
    n_folds = int(folds) if k_refs >= 2 * int(folds) else k_refs
    groups = np.array_split(rng.permutation(k_refs), n_folds)

    def each() -> Iterator[tuple[int, ScoreMatrix, ReferenceFit, np.ndarray]]:
        for g, group in enumerate(groups):
            keep = np.setdiff1d(np.arange(k_refs), group)
            if keep.size < 2 or group.size == 0:
                continue
            ids = [reference.model_ids[i] for i in keep]
            fit_g = fit if fold_fit == "shared" else fit_hyperparameters(
                reference.select_models(ids), n_pseudo=fit_pseudo, n_items=fit_items, seed=seed,
                level_prior=fit.tau0 > 0, linear=fit.gamma > 0, start=fit)
            yield g, sub.select_models(ids), fit_g, sub.scores[group]

    return sub, each()


def _calibration_errors(
    reference: ScoreMatrix, fit: ReferenceFit, *, folds: int = 5, max_items: int = 1000, seed: int = 0,
    fit_pseudo: int = 8, fit_items: int = 150, warmup: int = WARMUP, switch_z: float | None = None,
    sampled: tuple[str, float] | None = None, fold_fit: str = "shared",
) -> tuple[list[int], list[list[np.ndarray]], int, int]:
    """What :func:`calibrate` measures before it makes factors of it (its arguments): (its n; at each n, every
    fold's standardised errors, one array a fold; the items played; the pseudo-targets played)."""
    # the calibration measures the method itself (its selection, its switch) on the pseudo-targets, so it plays
    # it: imported at the call, the one place this module reaches up into the methods (a selector given a
    # posterior, issue 29's gp/acquisition.py, would let it play the maths alone)
    from activeeval.methods.bayesame import _model_based_errors

    sub, fold_iter = _calibration_folds(reference, fit, folds=folds, max_items=max_items, seed=seed,
                                         fit_pseudo=fit_pseudo, fit_items=fit_items, fold_fit=fold_fit)
    n_sub = sub.n_items
    grid = _calibration_grid(n_sub)[0]
    by_n: list[list[np.ndarray]] = [[] for _ in grid]
    n_pseudo = 0
    for g, fold_ref, fit_g, truths in fold_iter:
        errors = _model_based_errors(fold_ref, fit_g, truths, int(seed) + g, grid, warmup, switch_z, sampled)
        for j, e in enumerate(errors):
            by_n[j].append(e)
        n_pseudo += int(truths.shape[0])
    return grid, by_n, n_sub, n_pseudo


def _factors_by_budget(grid: Sequence[int], by_n: Sequence[Sequence[np.ndarray]],
                       n_items: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(n/N, factor) at each grid point with enough standardised errors (see :attr:`Calibration.factors`).

    The factor is the root mean square of the m errors at that n, bounded to
    [CALIBRATION_MIN, CALIBRATION_MAX]; below 1 it is first raised to its
    one-sided 90 % upper confidence bound rms·sqrt(m / χ²_{m, 0.10}), so that
    a handful of pseudo-targets that happened to land near the truth cannot
    narrow the interval (with 10 of them the bound is 1.43·rms; with 200, 1.07·rms).
    """
    from scipy.special import gammaincinv  # chi2.ppf's own function, without importing scipy.stats (1-2 s)

    fracs: list[float] = []
    factors: list[float] = []
    for n, parts in zip(grid, by_n, strict=True):
        e = np.concatenate(parts) if parts else np.zeros(0)
        m = e.size
        frac = n / n_items
        if m < CALIBRATION_MIN_Z or (fracs and frac <= fracs[-1]):
            continue
        rms = float(np.sqrt(np.mean(e**2)))
        if rms < 1.0:
            rms = min(1.0, rms * math.sqrt(m / (2.0 * gammaincinv(m / 2, 0.10))))  # χ²_{m, 0.10}
        fracs.append(frac)
        factors.append(min(max(rms, CALIBRATION_MIN), CALIBRATION_MAX))
    return tuple(fracs), tuple(factors)


_CALIBRATIONS: ReferenceCache[Calibration] = ReferenceCache("BayesAME calibrations", 16)


def _cached_calibration(reference: ScoreMatrix, fit: ReferenceFit, warmup: int = WARMUP,
                        switch_z: float | None = None, sampled: tuple[str, float] | None = None,
                        fold_fit: str = "shared") -> Calibration:
    # the default switch and selection, and refitted folds (the earlier default), keep the key calibrations always had
    # (those already in a user cache stay valid and are never read as the shared kernel's, which is keyed apart)
    extra: tuple = ((() if switch_z is None else (float(switch_z),))
                    + (() if sampled is None else ("sampled", str(sampled[0]), float(sampled[1])))
                    + (() if fold_fit == "refit" else ("fold_fit", str(fold_fit))))
    return _CALIBRATIONS.get_or_compute(
        (reference.fingerprint(), fit, int(warmup), *extra),
        lambda: _stored("bayesame_calibration", Calibration,
                        (reference.fingerprint(), fit.to_dict(), int(warmup), *extra),
                        lambda: calibrate(reference, fit, warmup=warmup, switch_z=switch_z, sampled=sampled,
                                          fold_fit=fold_fit)))


#: Layout of the fits and calibrations kept in the user cache; raise it when a field changes meaning.
STORE_FORMAT = 1
_JSON_TYPES = {"float": (int, float), "int": (int,), "bool": (bool,), "tuple[float, ...]": (list,)}


def _stored(kind: str, cls: type, parts: tuple, compute):
    """``compute()``, kept in the user cache (:func:`activeeval.user_cache.derived`) as the dataclass's JSON.

    Keyed by the reference's content hash (``parts[0]``), every setting that
    changes the value (the rest of ``parts``), :data:`STORE_FORMAT` and the
    code; a stored value reads back exactly (JSON keeps every float's bits),
    and one whose fields are not the numbers they must be is computed anew.
    """
    from activeeval import user_cache

    if user_cache.root() is None:  # no cache (--no-cache, ACTIVEEVAL_CACHE=off, a session with cache=False)
        return compute()
    key = user_cache.key(kind, STORE_FORMAT, user_cache.code_fingerprint(), *parts)
    return user_cache.derived(kind, key, compute, lambda value: (value.to_dict(), ()),
                              lambda entry: _from_stored(cls, entry.meta))


_BUCKETS: ReferenceCache[Buckets] = ReferenceCache("BayesAME buckets", 2)  # (phi: B x K floats each)
_PRIOR_SUMS: ReferenceCache[np.ndarray] = ReferenceCache("BayesAME prior sums", 8)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False  # shared by every method built on the reference: a write would be a bug
    return a


def _read_only_buckets(b: Buckets) -> Buckets:
    for a in (b.of_item, b.counts, b.phi):  # (the members are read-only views already: _buckets_of)
        _read_only(a)
    return b


#: Smallest N²·K (items² × reference models) whose prior state (:func:`_cached_buckets`, :func:`_cached_prior_sums`)
#: goes to the user cache: below it deriving them costs about what reading them does (and a calibration's or a
#: forecast's small sub-references would fill the cache with entries no one reads again).
PRIOR_STATE_MIN_WORK = 1e9


def _keeps_prior_state(ref: ScoreMatrix) -> bool:
    from activeeval import user_cache

    return float(ref.n_items) ** 2 * ref.n_models >= PRIOR_STATE_MIN_WORK and user_cache.root() is not None


def _state_key(kind: str, ref: ScoreMatrix, *parts: Any) -> str:
    """The user-cache key of a prior-state entry: the reference's content, the settings ``parts``, the layout
    (:data:`STORE_FORMAT`), the activeeval code and NumPy's version (its products and ``unique`` compute them)."""
    from activeeval import user_cache

    return user_cache.key(kind, STORE_FORMAT, user_cache.code_fingerprint(), np.__version__, ref.fingerprint(),
                          ref.n_models, ref.n_items, *parts)


def _cached_buckets(ref: ScoreMatrix, tolerance: float) -> Buckets:
    """:func:`~activeeval.gaussian.bucketize` of ``ref``'s items at ``tolerance``, kept in the user cache.

    Stored as each item's bucket alone; read back through
    :func:`~activeeval.gaussian.buckets_from_assignment`, which checks it is
    exactly bucketize's grouping and derives the rest as bucketize does. An
    entry that fails is derived again and stored anew
    (:func:`activeeval.user_cache.derived`).
    """
    from activeeval import user_cache

    phi_items = ref.scores.T

    def decode(entry: user_cache.Entry) -> Buckets:
        (of_item,) = entry.arrays
        if of_item.dtype != np.int64 or entry.meta.get("n_buckets") != int(of_item.max(initial=-1)) + 1:
            raise ValueError("stored buckets: dtype or count")
        return buckets_from_assignment(phi_items, of_item, tolerance)

    key = _state_key("bayesame_buckets", ref, float(tolerance))
    return user_cache.derived("bayesame_buckets", key, lambda: bucketize(phi_items, tolerance),
                              lambda b: ({"n_buckets": b.n_buckets}, [np.asarray(b.of_item, dtype=np.int64)]),
                              decode)


def _cached_prior_sums(ref: ScoreMatrix, tolerance: float, kernel: LevelKernel, dense: bool, counts: np.ndarray,
                       compute: Callable[[], np.ndarray]) -> np.ndarray:
    """Σ·N of the default's prior (``compute()``), kept in the user cache under everything it derives from: the
    reference and ``tolerance`` (its buckets), the kernel's five numbers, and whether the B × B distances were at
    hand (``dense``: a dense product, else :func:`~activeeval.gp.kernels.kernel_sums`' tiles; the same sums to within
    round-off, not to the bit). Checked when read: shape, dtype, finite, and Nᵀ Σ N ≥ 0 (Σ is positive
    semi-definite)."""
    from activeeval import user_cache

    n_b = counts.size

    def decode(entry: user_cache.Entry) -> np.ndarray:
        (sums,) = entry.arrays
        if sums.dtype != np.float64 or sums.shape != (n_b,) or not np.isfinite(sums).all() or counts @ sums < 0:
            raise ValueError("stored prior sums: shape, dtype or values")
        return sums

    params = [float(kernel.alpha), float(kernel.beta), float(kernel.gamma), float(kernel.tau0), float(kernel.tau1)]
    key = _state_key("bayesame_prior_sums", ref, float(tolerance), params, bool(dense))
    return user_cache.derived("bayesame_prior_sums", key, compute, lambda sums: ({}, [sums]), decode)


def _from_stored(cls: Any, data: Mapping[str, Any]):
    """A ReferenceFit or Calibration from its stored dict, refusing any field that is not a number (or flag)."""
    for field in cls.__dataclass_fields__.values():
        value = data[field.name]
        values = value if isinstance(value, list) else [value]
        number = (bool,) if field.type == "bool" else (int, float)
        if not isinstance(value, _JSON_TYPES[field.type]) or any(
                not isinstance(v, number) or (isinstance(v, bool) and field.type != "bool") for v in values):
            raise ValueError(f"stored {cls.__name__}: {field.name} = {value!r}")
    return cls.from_dict(data)


def _resolve_fit(ref: ScoreMatrix, hyperparameters: ReferenceFit | Mapping[str, Any] | None, n_pseudo: int,
                 fit_items: int, fit_seed: int, level_prior: bool, linear: bool) -> ReferenceFit:
    """The given hyperparameters (a ReferenceFit or its dict), or the fit on ``ref``; checked positive."""
    if hyperparameters is None:
        fit = fit_hyperparameters(
            ref, n_pseudo=n_pseudo, n_items=fit_items, seed=fit_seed, level_prior=level_prior, linear=linear
        )
    elif isinstance(hyperparameters, ReferenceFit):
        fit = hyperparameters
    else:
        fit = ReferenceFit.from_dict(hyperparameters)
    _check_fit(fit)
    return fit


def _check_fit(fit: ReferenceFit) -> None:
    for label in ("alpha", "beta", "sigma2"):
        value = getattr(fit, label)
        if not (np.isfinite(value) and value > 0):
            raise ConfigurationError(f"hyperparameters: {label} must be a positive number, got {value}")


def _resolve_calibration(ref: ScoreMatrix, fit: ReferenceFit,
                         calibration: Calibration | Mapping[str, Any] | str | None,
                         warmup: int = WARMUP, switch_z: float | None = None,
                         sampled: tuple[str, float] | None = None, fold_fit: str = "shared") -> Calibration:
    """"auto": measured on ``ref``'s pseudo-targets (cached; they start with ``warmup`` random items, as the method
    does); None: factor 1; else the given one (or its dict)."""
    if isinstance(calibration, str) and calibration == "auto":
        cal = _cached_calibration(ref, fit, warmup, switch_z, sampled, fold_fit)
    elif calibration is None:
        cal = Calibration(factor=1.0)
    elif isinstance(calibration, Calibration):
        cal = calibration
    elif isinstance(calibration, Mapping):
        cal = Calibration.from_dict(calibration)
    else:
        raise ConfigurationError(
            f"calibration must be 'auto', None, a Calibration or its dict, got {calibration!r}"
        )
    _check_calibration(cal)
    return cal


def _check_calibration(cal: Calibration) -> None:
    if not (np.isfinite(cal.factor) and cal.factor > 0):
        raise ConfigurationError(f"calibration factor must be a positive number, got {cal.factor}")



def default_tolerance(reference: ScoreMatrix) -> float:
    """The bucketing tolerance of the default prior: binary scores compared exactly, others to 1e-3 of the range."""
    return 0.0 if reference.kind == "binary" else 1e-3 * _range_width(reference)


_PRIOR_KEYS = ("fit", "calibration", "tolerance", "fingerprint")


@dataclass(frozen=True)
class ReferencePrior:
    """What a Gaussian method believes before the target's first score: a function of the references alone.

    The reference fit (:func:`fit_hyperparameters`), the calibration of the
    model-based interval (:func:`calibrate`) and the bucketing tolerance;
    :meth:`build` derives them from a reference and the settings exactly as
    :class:`~activeeval.methods.bayesame.BayesAME` always has, and
    :meth:`on` gives the bucket abilities' prior on that reference
    (:class:`BucketPrior`). Built once, it can be handed to any number of
    methods (``BayesAME(reference, prior=p)``,
    ``BayesAMEMulti(reference, targets, reference_prior=p)``), which then
    derive nothing from the references again.

    Serialises as plain data: :meth:`to_dict` gives JSON types only (dicts,
    lists, floats, ints, bools, a string) and :meth:`from_dict` reads them
    back to an equal value, every float's bits kept.

    Attributes
    ----------
    fit : ReferenceFit
    calibration : Calibration
    tolerance : float
        Scores within this of each other fall in one bucket (0: compared exactly).
    fingerprint : str or None
        :meth:`~activeeval.data.matrix.ScoreMatrix.fingerprint` of the reference it was built on; a method refuses
        the prior on another reference. None: not checked.
    """

    fit: ReferenceFit
    calibration: Calibration
    tolerance: float
    fingerprint: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.fit, ReferenceFit):
            raise ConfigurationError(f"ReferencePrior: fit must be a ReferenceFit, got {type(self.fit).__name__}")
        if not isinstance(self.calibration, Calibration):
            raise ConfigurationError(
                f"ReferencePrior: calibration must be a Calibration, got {type(self.calibration).__name__}")
        _check_fit(self.fit)
        _check_calibration(self.calibration)
        tolerance = self.tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
                math.isfinite(tolerance) and tolerance >= 0):
            raise ConfigurationError(f"tolerance must be >= 0 (0 compares scores exactly), got {tolerance!r}")
        object.__setattr__(self, "tolerance", float(tolerance))
        if self.fingerprint is not None and not isinstance(self.fingerprint, str):
            raise ConfigurationError(f"ReferencePrior: fingerprint must be a string or None, got {self.fingerprint!r}")

    @classmethod
    def build(
        cls,
        reference: ScoreMatrix,
        *,
        hyperparameters: ReferenceFit | Mapping[str, Any] | None = None,
        calibration: Calibration | Mapping[str, Any] | str | None = "auto",
        n_pseudo: int = 20,
        fit_items: int = 300,
        fit_seed: int = 0,
        level_prior: bool = True,
        linear: bool = True,
        warmup: int = WARMUP,
        tolerance: float | None = None,
        switch_z: float | None = SWITCH_Z,
        sampled: tuple[str, float] | None = None,
        fold_fit: str = "shared",
    ) -> ReferencePrior:
        """The prior of ``reference`` (complete scores) under these settings, as ``BayesAME`` derives it.

        ``hyperparameters``: a ReferenceFit (or its dict) to use, else the fit
        (:func:`fit_hyperparameters` with ``n_pseudo``, ``fit_items``,
        ``fit_seed``, ``level_prior``, ``linear``). ``calibration``: "auto"
        (:func:`calibrate`, its pseudo-targets starting with ``warmup`` random
        items, switching by ``switch_z`` and drawn as ``selection="hybrid"`` draws them if ``sampled`` is given, as the
        method does; ``switch_z`` the method's, by default its default ``SWITCH_Z``, None or at least 1.96 the
        interval's own test alone; ``fold_fit``: its folds' kernels, see :func:`calibrate`), None
        (factor 1), or a Calibration (or its dict).
        ``tolerance``: default :func:`default_tolerance`. Fits and calibrations
        are cached per reference, in memory and in the user cache.
        """
        fit = _resolve_fit(reference, hyperparameters, n_pseudo, fit_items, fit_seed, level_prior, linear)
        if switch_z is not None and switch_z >= Z95:
            switch_z = None  # no test beyond the 95 % interval's own: the calibration keyed as it always was
        cal = _resolve_calibration(reference, fit, calibration, warmup, switch_z, sampled, fold_fit)
        tol = default_tolerance(reference) if tolerance is None else tolerance
        return cls(fit=fit, calibration=cal, tolerance=tol, fingerprint=reference.fingerprint())

    @property
    def kernel(self) -> LevelKernel:
        """The prior covariance's kernel (:class:`~activeeval.gp.kernels.LevelKernel`) of the fit."""
        fit = self.fit
        return LevelKernel(fit.alpha, fit.beta, fit.gamma, fit.tau0, fit.tau1)

    @property
    def sigma2(self) -> float:
        """The per-item noise variance of the fit."""
        return float(self.fit.sigma2)

    def check_reference(self, reference: ScoreMatrix) -> None:
        """Refuse ``reference`` if the prior was built on another one (see ``fingerprint``)."""
        if self.fingerprint is not None and self.fingerprint != reference.fingerprint():
            raise ConfigurationError(
                "the ReferencePrior was built on another reference (fingerprints differ); build one on this "
                "reference (ReferencePrior.build), after the method's handling of missing scores")

    def on(self, reference: ScoreMatrix, *, cache_mb: float = 256.0) -> BucketPrior:
        """The bucket abilities' prior on ``reference`` (checked to be the prior's own): see :class:`BucketPrior`."""
        self.check_reference(reference)
        return BucketPrior(self, reference, cache_mb=cache_mb)

    def to_dict(self) -> dict[str, Any]:
        """Plain data (JSON types only); :meth:`from_dict` reads it back to an equal prior, bit for bit (a NaN
        bookkeeping field, ``nlml`` or ``rms``, as JSON's one NaN)."""
        return {"fit": self.fit.to_dict(), "calibration": self.calibration.to_dict(),
                "tolerance": self.tolerance, "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReferencePrior:
        """The prior from :meth:`to_dict`'s data, refusing unknown or missing keys and fields that are no numbers."""
        if not isinstance(data, Mapping):
            raise ConfigurationError(f"a reference prior is a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - set(_PRIOR_KEYS))
        missing = sorted(set(_PRIOR_KEYS[:3]) - set(data))
        if unknown or missing:
            raise ConfigurationError(f"reference prior: unknown key(s) {unknown}, missing key(s) {missing}; "
                                     f"expected {list(_PRIOR_KEYS)}")
        parts = []
        for name, kind in (("fit", ReferenceFit), ("calibration", Calibration)):
            value = data[name]
            if not isinstance(value, Mapping):
                raise ConfigurationError(f"reference prior: {name} must be a mapping, got {value!r}")
            try:
                parts.append(_from_stored(kind, value))
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigurationError(f"reference prior: {name} is not a stored {kind.__name__}: {exc}") from exc
        return cls(fit=parts[0], calibration=parts[1], tolerance=data["tolerance"],
                   fingerprint=data.get("fingerprint"))


class BucketPrior:
    """A :class:`ReferencePrior` on its reference: the prior of the bucket abilities θ_b, ready for a posterior.

    The buckets (the reference's items grouped by their vectors of reference
    scores, at the prior's tolerance), the prior mean μ_b (the references'
    mean score of the bucket), the level term's centred difficulty m_b, the
    squared distances of the buckets' vectors (kept when they fit in
    ``cache_mb``), and the kernel's columns Σ[:, b]. The buckets and Σ·N are
    derived once per process (and kept in the user cache on large references)
    and shared read-only by every method built on the reference.

    Attributes
    ----------
    prior : ReferencePrior
    buckets : Buckets
    mean : ndarray (B,)
        μ_b, the prior mean of each bucket's score.
    level : ndarray (B,)
        m_b: μ_b centred on the benchmark's mean; the level and slope terms are τ0 + τ1 m_b m_b'.
    distances : ndarray (B, B) or None
        Squared distances of the buckets' reference-score vectors, when they fit in ``cache_mb``.
    kernel : LevelKernel
    sigma2 : float
        The per-item noise variance.
    """

    def __init__(self, prior: ReferencePrior, reference: ScoreMatrix, *, cache_mb: float = 256.0) -> None:
        ref = reference
        self.prior = prior
        self.n_items = ref.n_items
        self.n_refs = ref.n_models
        tolerance = prior.tolerance
        keep = _keeps_prior_state(ref)
        self._keep, self._reference = keep, ref
        self._state_key = (ref.fingerprint(), tolerance)
        self.buckets: Buckets = _BUCKETS.get_or_compute(self._state_key, lambda: _read_only_buckets(
            _cached_buckets(ref, tolerance) if keep else bucketize(ref.scores.T, tolerance)))
        phi = self.buckets.phi
        counts = self.buckets.counts
        self.features = phi
        self.features_sq = (phi**2).sum(1)
        n_buckets = self.buckets.n_buckets
        self.distances: np.ndarray | None = sq_dists(phi, phi) if n_buckets * n_buckets * 8 <= cache_mb * 2**20 \
            else None
        mu = phi.mean(1)
        self.mean = mu
        self.level = mu - float(mu @ counts) / self.n_items
        centre = ref.scores.mean(1)
        self.psi = phi - centre[None, :]  # ψ = φ − c: the linear term's features
        self.phi_c = phi @ centre
        self.cc = float(centre @ centre)
        self.kernel = prior.kernel
        self.sigma2 = prior.sigma2

    @property
    def n_buckets(self) -> int:
        return self.buckets.n_buckets

    def d2_rows(self, bs: np.ndarray) -> np.ndarray:
        """Squared distances of the buckets ``bs`` to every bucket, shape (len(bs), B): read from ``distances``
        when it holds them, else computed (one product; not kept: at large B, n such rows would be a second V)."""
        if self.distances is not None:
            return self.distances[bs]
        feat = self.features
        rows = self.features_sq[bs, None] + self.features_sq[None, :] - 2.0 * (feat[bs] @ feat.T)
        np.maximum(rows, 0.0, out=rows)
        rows[np.arange(len(bs)), bs] = 0.0
        return rows

    def column(self, b: int) -> np.ndarray:
        """Σ[:, b] (B,), the prior covariance of bucket ``b``'s ability with every bucket's."""
        d2 = self.d2_rows(np.array([b]))[0]
        # ψ_i·ψ_b from the distances already at hand (ψ = φ − c): (‖φ_i‖² + ‖φ_b‖² − d²_ib)/2 − φ_i·c − φ_b·c + c·c,
        # instead of a second B x K product per column (it was a third of a step at B = 10 000).
        psi_dot = None
        if self.kernel.gamma:  # linear=False has no such term: skip the four vector operations
            psi_dot = 0.5 * (self.features_sq + self.features_sq[b] - d2) - self.phi_c - self.phi_c[b] + self.cc
        return self.kernel.column(d2, self.psi, self.psi[b], self.level, float(self.level[b]), psi_dot=psi_dot)

    def columns(self, bs: np.ndarray) -> np.ndarray:
        """Σ[:, bs] (B, len(bs)), in one block (batch selection, rebuilds)."""
        bs = np.asarray(bs, dtype=np.intp)
        kern = self.kernel
        m = self.level
        # rows of the symmetric matrices (contiguous reads), transposed at the end
        out = kern.se(self.n_refs)(self.d2_rows(bs)) + kern.tau0 + kern.tau1 * np.outer(m[bs], m)
        if kern.gamma:
            out += (kern.gamma / self.n_refs) * (self.psi[bs] @ self.psi.T)
        return out.T

    def level_column(self, b: int) -> np.ndarray:
        """The level and slope terms' part of Σ[:, b]: τ0 + τ1 m_b m (B,)."""
        kern, m = self.kernel, self.level
        return kern.tau0 + kern.tau1 * float(m[b]) * m

    def diag(self) -> np.ndarray:
        """diag Σ (B,)."""
        return self.kernel.diag(self.psi, self.level)

    def sums(self) -> np.ndarray:
        """Σ·N (B,), N the buckets' sizes: derived once per process (read-only), kept in the user cache on large
        references."""
        kernel, counts, dense = self.kernel, self.buckets.counts, self.distances is not None
        fit = self.prior.fit

        def compute() -> np.ndarray:  # O(B²K) without the distances cached, most of a build at large B
            return kernel.matvec(self.features, self.psi, self.level, counts, self.distances)

        return _PRIOR_SUMS.get_or_compute(
            (*self._state_key, (fit.alpha, fit.beta, fit.gamma, fit.tau0, fit.tau1), dense),
            lambda: _read_only(_cached_prior_sums(self._reference, self.prior.tolerance, kernel, dense, counts,
                                                  compute) if self._keep else compute()))

    def posterior(self) -> BucketPosterior:
        """A fresh posterior (nothing observed) of the bucket abilities under this prior, per-item noise σ²."""
        post = BucketPosterior(self.mean, self.column, self.diag(), self.sums(), self.buckets.counts,
                               np.full(self.n_buckets, self.sigma2))
        post.prior_cols = self.columns  # blocks of columns for batch selection
        return post
