"""BayesAME, the default: the paper's Gaussian model, made robust (docs/MATHS.md, "What the default changes").

The paper's algorithm (``bayesame-paper``, :mod:`activeeval.methods.bayesame_paper`)
refits its kernel on the target's first scores. On continuous scores and on
targets unlike the references that fit is fragile: the lengthscale collapses,
the fixed noise is far too small, and the interval misses the truth while
claiming precision. The default keeps the paper's bucket model, its exact
posterior, Var(R) (Eq. 2) and information-gain selection (Eq. 6), and changes
what made it fragile:

1. **The kernel is fitted on the references, not on the target**
   (:func:`fit_hyperparameters`): reference models act as pseudo-targets, each
   predicted from the others (:class:`~activeeval.gaussian.LeaveOneOutNLML`),
   once, before the first item. No collapse, and a noise level learned from data.
2. **Terms for how a new model differs from the references**
   (:class:`~activeeval.gp.kernels.LevelKernel`): a level and a slope (it may sit
   above or below every reference, and follow item difficulty more or less
   steeply) and a linear term (it may follow a combination of references).
3. **Noise per item, not per bucket**: a large bucket of identical reference
   vectors no longer widens the interval N_b times.
4. **The interval's scale is the target's own and calibrated**: Var(R) is
   multiplied by the maximum-likelihood scale of the target's innovations and
   by a factor measured on the references as pseudo-targets (:func:`calibrate`).
5. **Targets the references cannot vouch for get a design-based estimate**:
   when the target is found outside the references' range, or its scores vary
   far more than the model expects, items are drawn at random from then on and
   R̂ is the prequential difference estimator (:class:`~activeeval.design.Prequential`):
   unbiased whatever the model, never much worse than the plain mean.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from activeeval._cache import ReferenceCache
from activeeval._threads import numeric
from activeeval.data.matrix import ScoreMatrix
from activeeval.design import Prequential, RidgeControl, sampling_var_floor
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
from activeeval.methods._batch import BatchSelection
from activeeval.methods.base import BaseMethod, SeedLike, random_order
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate

__all__ = ["BayesAME", "BayesAMERS", "Calibration", "ReferenceFit", "calibrate", "fit_hyperparameters"]

Z95 = 1.959963984540054
#: Pseudo-count of the target's scale: the interval scale is (ν0 + Σ z²) / (ν0 + n).
SCALE_PRIOR = 10.0
#: Smallest noise variance of the fit, relative to range² (App. C.1's σ² of the unique regime).
SIGMA2_MIN = 1e-4
#: Innovations left out of the scale: the first ones mostly measure the wide level and slope prior.
SCALE_SKIP = 5
#: Items drawn at random before the information-gain selection starts. 0: issue 25 measured 10 (with
#: calibrate_by="budget") in benchmarks/efficiency.py — far better in extrapolation, but under-covering on a
#: few-reference continuous set (WMT21 en-zh, 10 references: 0.80 at 10 % of N) — so it is an option, not the default.
WARMUP = 0
#: Above this interval scale (the target's scores vary that much more than the model expects) the
#: model is taken not to describe the target: switch to the design-based estimate (see ``extrapolation``).
SCALE_SWITCH = 4.0
#: Share of the uniform draw in ``selection="sampled"``'s probabilities (the rest follows the predictive sd):
#: no item's weight 1/(N q) exceeds U/(N λ), however confident the model.
SAMPLED_UNIFORM = 0.5
#: Largest variance reduction by which ``floor="effective"`` lowers the design-based interval's floor.
FLOOR_GAIN_MAX = 4.0


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

    def objective(y: np.ndarray) -> tuple[float, np.ndarray]:  # L-BFGS-B starts at a grid point already evaluated
        key = np.asarray(y, dtype=float).tobytes()
        if key not in seen:
            seen[key] = nlml(y)
        return seen[key]

    grid_values = [objective(g)[0] for g in grid]
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


class BayesAME(BatchSelection, BaseMethod):
    """Bayesian active model evaluation for one target model (the default, robust version).

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' per-item scores (models x items).
    seed, missing
        See :class:`~activeeval.methods.base.BaseMethod`.
    selection : {"auto", "active", "random", "sampled"}
        "auto": information gain (Eq. 6) while the model describes the target,
        uniform random once the target is found outside the references' range
        (see ``extrapolation``). "active": information gain always (no
        design-based switch). "random": uniform random throughout
        (``bayesame-rs``); every item then enters the design-based estimate
        should the target be found outside the range. "sampled" (validity by
        design, issue 25): every item drawn at random with a known probability
        that follows the model's predictive sd of its score (half of it
        uniform, ``SAMPLED_UNIFORM``), and the estimate is always the
        design-based one with inverse-probability weights around the controls'
        prediction — unbiased whatever the model, with the martingale CLT's
        interval; no calibration and no switch. One item at a time: it refuses
        to hand out an item while another is pending.
    extrapolation : {"auto", "off"}
        "auto": switch to random items and the design-based estimate when the
        references do not describe the target, at any n up to ``switch_until``:
        its 95 % interval lies wholly outside the range of the reference
        models' full-benchmark scores, or (from n = 10 on) it scores
        significantly above (or below) every reference model on the items
        scored so far — pseudo-targets drawn from the references cannot vouch
        for the model there — or (from n = 10 on) its interval scale exceeds
        4, i.e. its scores vary twice as much as the model expects.
        "off": never.
    switch_until : int, optional
        Last n at which the switch can happen (default max(50, N / 10)); a
        later switch would rest the estimate on too few random items.
    hyperparameters : ReferenceFit or mapping, optional
        Use these instead of fitting them (a session stores its fit).
    calibration : "auto", Calibration, mapping or None
        "auto": measure the model-based interval on reference pseudo-targets
        (:func:`calibrate`, once per reference matrix) and scale it by the
        factor found; a Calibration (or its dict) to reuse one (a session
        stores it); None: no calibration (factor 1).
    calibrate_by : {"pooled", "budget"}
        "pooled" (default): one factor for every n, never below 1. "budget":
        the factor measured at the current n/N, which may narrow the interval
        where the pseudo-targets show it too wide (:attr:`Calibration.factors`;
        docs/MATHS.md and docs/BENCHMARKS.md, "Issue 25", for what it does).
    n_pseudo, fit_items, fit_seed : int
        The reference fit (:func:`fit_hyperparameters`).
    level_prior : bool
        Include the target's level and slope terms in the kernel.
    linear : bool
        Include the linear term (the target as a combination of references).
    scale_prior : float
        ν0, the pseudo-count that shrinks the target's interval scale towards 1.
    controls : str
        Control variates of the design-based estimate, joined by "+":
        "model" (the posterior mean of each item, clipped to the score range)
        "near" (each item's mean score over the 10 % of references whose
        full score is nearest the current estimate) and "ridge" (AIPW's ridge
        regression of the target's scores on the references' scores of the same
        items, fitted on every item scored so far, those chosen before a switch
        included; :class:`~activeeval.design.RidgeControl`); "none" (or None) for the plain mean.
        With "ridge", each control taken as it is is also a candidate coefficient
        (:class:`~activeeval.design.Prequential`'s ``b_prior``).
    warmup : int
        Draw the first ``warmup`` items at random (default 0): they enter the
        design-based estimate if the target is found outside the references
        (most such targets are found within 10 items, and their first items
        then count instead of being set aside); docs/MATHS.md.
    floor : {"wilson", "effective"}
        The design-based interval's floor: "wilson" (default) that of the plain
        mean of the random items (:func:`~activeeval.design.sampling_var_floor`);
        "effective" that floor divided by the variance reduction the control
        variates achieved on the random items, out of sample
        (:attr:`~activeeval.design.Prequential.variance_reduction`, at most
        ``FLOOR_GAIN_MAX``): a floor a plain mean needs does not cap what the
        controls buy.
    design_variance : {"residuals", "increments"}
        How the design-based estimate's residual variance is estimated
        (:meth:`~activeeval.design.Prequential.estimate`): "residuals"
        (default), the mean squared prediction error; "increments", the spread
        of the prequential steps (the martingale CLT's), which leaves out the
        early predictions' bias that the estimate itself cancels.
    tolerance : float, optional
        Rounding tolerance for bucketing continuous scores (default 1e-3 of the range).
    cache_mb : float
        Memory allowed for caching the B×B squared distances.
    batch_strategy : {"greedy", "pair", "lars", "dpp", "kmeans"}
        How ``select_batch(k)`` picks k > 1 items while the selection is
        model-based (App. B.1; :mod:`activeeval.methods._batch`): "greedy"
        (the default) conditions on each chosen item and takes the next argmax of Eq. 6.
    batch_size : int
        |A| of the non-myopic selection (``myopic=False``): ``select()`` is a
        random member of the best batch of this many items. 1: single-item Eq. 6.
    myopic : bool
        True (default): ``select()`` is Eq. 6's argmax. False: non-myopic (see ``batch_size``).
    """

    name = "bayesame"
    capabilities = Capabilities(ranks=True, batch=True)

    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        seed: SeedLike = None,
        missing: str = "models",
        selection: Literal["auto", "active", "random", "sampled"] = "auto",
        extrapolation: Literal["auto", "off"] = "auto",
        switch_until: int | None = None,
        hyperparameters: ReferenceFit | Mapping[str, Any] | None = None,
        calibration: Calibration | Mapping[str, Any] | Literal["auto"] | None = "auto",
        calibrate_by: Literal["budget", "pooled"] = "pooled",
        n_pseudo: int = 20,
        fit_items: int = 300,
        fit_seed: int = 0,
        level_prior: bool = True,
        linear: bool = True,
        scale_prior: float = SCALE_PRIOR,
        controls: str | None = "model+near",
        warmup: int = WARMUP,
        floor: Literal["wilson", "effective"] = "wilson",
        design_variance: Literal["residuals", "increments"] = "residuals",
        tolerance: float | None = None,
        cache_mb: float = 256.0,
        batch_strategy: str = "greedy",
        batch_size: int = 1,
        myopic: bool = True,
    ) -> None:
        super().__init__(reference, seed=seed, missing=missing)
        self._init_batch(batch_strategy, batch_size, myopic)
        # settings as given; resolved or learned values carry a trailing underscore
        self.switch_until, self.tolerance, self.controls = switch_until, tolerance, controls
        _check_options(selection, extrapolation, n_pseudo, fit_items, fit_seed, warmup, switch_until, scale_prior,
                       tolerance)
        if floor not in ("wilson", "effective"):
            raise ConfigurationError(f"floor must be 'wilson' or 'effective', got {floor!r}")
        if design_variance not in ("residuals", "increments"):
            raise ConfigurationError(f"design_variance must be 'residuals' or 'increments', got {design_variance!r}")
        self.warmup = int(warmup)
        ref = self.reference
        width = _range_width(ref)
        fit = _resolve_fit(ref, hyperparameters, n_pseudo, fit_items, fit_seed, level_prior, linear)
        self.fit_ = fit
        self.calibration_ = _resolve_calibration(ref, fit, calibration, self.warmup)
        if calibrate_by not in ("budget", "pooled"):
            raise ConfigurationError(f"calibrate_by must be 'budget' or 'pooled', got {calibrate_by!r}")
        self.calibrate_by = calibrate_by
        self.selection = selection
        self.extrapolation = extrapolation
        self.switch_until_ = int(switch_until) if switch_until is not None else max(50, self.n_items // 10)
        self.scale_prior = float(scale_prior)
        self.floor, self.design_variance = floor, design_variance
        if tolerance is None:
            tolerance = 0.0 if ref.kind == "binary" else 1e-3 * width
        self.tolerance_ = float(tolerance)
        # the reference-only prior state (buckets, then Σ·N): once per process (methods built on one reference,
        # e.g. rank's, one per model, share it, read-only), and in the user cache on large references
        keep = _keeps_prior_state(ref)
        state_key = (ref.fingerprint(), self.tolerance_)
        self.buckets = _BUCKETS.get_or_compute(state_key, lambda: _read_only_buckets(
            _cached_buckets(ref, self.tolerance_) if keep else bucketize(ref.scores.T, self.tolerance_)))
        phi = self.buckets.phi
        counts = self.buckets.counts
        self._n_refs = ref.n_models
        self._feat = phi
        self._feat_sq = (phi**2).sum(1)
        n_buckets = self.buckets.n_buckets
        self._d2_full = sq_dists(phi, phi) if n_buckets * n_buckets * 8 <= cache_mb * 2**20 else None
        mu = phi.mean(1)
        self._m = mu - float(mu @ counts) / self.n_items
        centre = ref.scores.mean(1)
        self._psi = phi - centre[None, :]
        self._phi_c = phi @ centre
        self._cc = float(centre @ centre)
        self.kernel = LevelKernel(fit.alpha, fit.beta, fit.gamma, fit.tau0, fit.tau1)
        self.sigma2_ = float(fit.sigma2)

        def prior_sums() -> np.ndarray:  # Σ·N: O(B²K) without the distances cached, most of a build at large B
            return self.kernel.matvec(phi, self._psi, self._m, counts, self._d2_full)

        self.posterior = BucketPosterior(
            mu,
            self._prior_col,
            self.kernel.diag(self._psi, self._m),
            _PRIOR_SUMS.get_or_compute(
                (*state_key, (fit.alpha, fit.beta, fit.gamma, fit.tau0, fit.tau1), self._d2_full is not None),
                lambda: _read_only(_cached_prior_sums(ref, self.tolerance_, self.kernel, self._d2_full is not None,
                                                      counts, prior_sums) if keep else prior_sums())),
            counts,
            np.full(n_buckets, self.sigma2_),
        )
        self.posterior.prior_cols = self._prior_cols  # blocks of columns for batch selection
        full = ref.mean_scores()
        self.reference_range = (float(full.min()), float(full.max()))
        self.mode = "model"
        self.switched_at: int | None = None
        self.switch_reason: str | None = None
        if selection == "sampled":  # design-based from the first item
            self.mode, self.switched_at, self.switch_reason = "design", 0, "sampled"
        self.controls_ = _parse_controls(controls)
        # with the ridge (issue 25), each control taken as it is (AIPW's b = 1) is a candidate from the first
        # random item on; without it, the plain mean and the least-squares fit only, as before
        b_prior = np.eye(len(self.controls_)) if "ridge" in self.controls_ else None
        self._design = Prequential(self.n_items, n_controls=len(self.controls_), b_prior=b_prior)
        self._ridge: RidgeControl | None = None
        self._order: np.ndarray | None = None
        self._ref_full = full
        self._n_near = max(3, int(round(0.1 * ref.n_models)))
        self._z2 = 0.0
        self._sum_obs = 0.0
        self._sum_sq = 0.0
        # per reference model: Σ s_j and Σ s·s_j, Σ s_j² over the observed items (the paired comparison)
        self._ref_sum = np.zeros(ref.n_models)
        self._ref_cross = np.zeros(ref.n_models)
        self._ref_sq = np.zeros(ref.n_models)
        self._worst_var = (width / 2.0) ** 2

    # ------------------------------------------------------------ kernel rows
    def _d2_rows_of(self, bs: np.ndarray) -> np.ndarray:
        """Squared distances of the buckets ``bs`` to every bucket, shape (len(bs), B): read from the cache
        when it holds them, else computed (one product; not kept: at large B, n such rows would be a second V)."""
        if self._d2_full is not None:
            return self._d2_full[bs]
        feat = self._feat
        rows = self._feat_sq[bs, None] + self._feat_sq[None, :] - 2.0 * (feat[bs] @ feat.T)
        np.maximum(rows, 0.0, out=rows)
        rows[np.arange(len(bs)), bs] = 0.0
        return rows

    def _prior_col(self, b: int) -> np.ndarray:
        d2 = self._d2_rows_of(np.array([b]))[0]
        # ψ_i·ψ_b from the distances already at hand (ψ = φ − c): (‖φ_i‖² + ‖φ_b‖² − d²_ib)/2 − φ_i·c − φ_b·c + c·c,
        # instead of a second B x K product per column (it was a third of a step at B = 10 000).
        psi_dot = None
        if self.kernel.gamma:  # linear=False has no such term: skip the four vector operations
            psi_dot = 0.5 * (self._feat_sq + self._feat_sq[b] - d2) - self._phi_c - self._phi_c[b] + self._cc
        return self.kernel.column(d2, self._psi, self._psi[b], self._m, float(self._m[b]), psi_dot=psi_dot)

    def _prior_cols(self, bs: np.ndarray) -> np.ndarray:
        """Σ[:, bs] (B, len(bs)) of the :class:`LevelKernel`, in one block (batch selection, rebuilds)."""
        bs = np.asarray(bs, dtype=np.intp)
        kern = self.kernel
        # rows of the symmetric matrices (contiguous reads), transposed at the end
        out = kern.se(self._n_refs)(self._d2_rows_of(bs)) + kern.tau0 + kern.tau1 * np.outer(self._m[bs], self._m)
        if kern.gamma:
            out += (kern.gamma / self._n_refs) * (self._psi[bs] @ self._psi.T)
        return out.T

    def _batch_posterior(self) -> BucketPosterior:
        return self.posterior

    # ------------------------------------------------------------ properties
    @property
    def n_buckets(self) -> int:
        return self.buckets.n_buckets

    @property
    def regime(self) -> str:
        """"model-based" (the estimate is the model's posterior) or "design-based" (switched: random items)."""
        return "design-based" if self.mode == "design" else "model-based"

    @property
    def scale(self) -> float:
        """The target's interval scale: (ν0 + Σ z²) / (ν0 + m) over its m standardised innovations z.

        The first ``SCALE_SKIP`` innovations are left out: their variance is
        mostly the wide prior of the target's level and slope, so they would
        pull the scale below 1 whatever the model's fit (the diffuse start of a
        Kalman filter, whose first innovations are not used for the scale either).
        """
        used = max(self.n_observed - SCALE_SKIP, 0)
        return (self.scale_prior + self._z2) / (self.scale_prior + used)

    @property
    def random_items(self) -> bool:
        """Whether the next item is drawn uniformly at random."""
        return self.mode == "design" or self.selection == "random" or self.n_observed < self.warmup

    def frozen_options(self) -> dict:
        """The reference fit and the calibration, to rebuild this method without computing them again; and the
        options whose defaults have changed (a stored session replays with the ones it was made with)."""
        return {"hyperparameters": self.fit_.to_dict(), "calibration": self.calibration_.to_dict(),
                "calibrate_by": self.calibrate_by, "warmup": self.warmup}

    def information_gains(self) -> np.ndarray:
        """Eq. 6 for one unobserved item of each bucket, shape (B,) (0 where none is left)."""
        ig = self.posterior.information_gain()
        ig[~np.isfinite(ig)] = 0.0
        return ig

    # ------------------------------------------------------------ selection
    def _random_items(self, k: int, exclude: Sequence[int]) -> list[int]:
        """The first ``k`` unobserved items not in ``exclude`` of the method's random order.

        The order is :func:`~activeeval.methods.base.random_order` of the seed,
        the order RS-Mean plays, so that a backtest compares the two on the same
        items. It is drawn independently of everything the method has observed,
        so its first unobserved item is a uniform draw from the unobserved items.
        """
        if self._order is None:
            self._order = random_order(int(self.seed_), self.n_items)
        skip = self._observed.copy()
        skip[list(exclude)] = True
        free = self._order[~skip[self._order]]
        return [int(i) for i in free[:k]]

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        if self.selection == "sampled":
            pending = sum(1 for i in exclude if not self._observed[i])
            if k > 1 or pending:
                raise ConfigurationError(
                    f"selection='sampled' draws one item at a time with a probability it must know when the score "
                    f"comes back; {pending} item(s) are pending and {k} were asked for: record the pending score "
                    "first and ask for one item, or use selection='auto'"
                )
            return [int(rng.choice(self.n_items, p=self._sampling_probabilities()))]
        if self.random_items:
            return self._random_items(k, exclude)
        return self._batch_select(rng, k, exclude, self._greedy)

    def _sampling_probabilities(self) -> np.ndarray:
        """Each item's probability of being drawn next (N,): 0 if observed, else
        λ/U + (1 − λ) sd_i / Σ_U sd, sd_i the model's predictive sd of item i's score, λ = ``SAMPLED_UNIFORM``.

        A function of the observed items alone (the posterior's covariance does
        not depend on the scores), so the probability of an item is known again
        when its score is recorded, and when a session replays its journal.
        """
        post = self.posterior
        sd = np.sqrt(np.maximum(post.diag, 0.0) + post.noise)[self.buckets.of_item]
        free = ~self._observed
        sd[~free] = 0.0
        n_free = int(free.sum())
        total = float(sd.sum())
        q = np.where(free, SAMPLED_UNIFORM / n_free, 0.0)
        if total > 0.0:
            q += (1.0 - SAMPLED_UNIFORM) * sd / total
        else:
            q = np.where(free, 1.0 / n_free, 0.0)
        return q / q.sum()

    def _greedy(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> list[int]:
        """k items greedily: condition on each chosen (and pending) item, take the next argmax of Eq. 6."""
        available = ~self._observed
        available[list(exclude)] = False
        fantasy: Any  # the posterior itself (read only: one item, so never conditioned) or its fantasy()
        if k == 1 and not len(exclude):  # one item, nothing pending: the posterior as it is (read, not copied)
            fantasy, avail_per_bucket = self.posterior, self.posterior.remaining
        else:
            fantasy = self.posterior.fantasy()
            for item in exclude:
                if not self._observed[item]:
                    fantasy.condition(int(self.buckets.of_item[item]))
            avail_per_bucket = np.bincount(self.buckets.of_item[available], minlength=self.n_buckets).astype(float)
        chosen: list[int] = []
        for _ in range(k):
            ig = fantasy.information_gain()
            ig[avail_per_bucket <= 0] = -np.inf
            best = float(ig.max())
            if not np.isfinite(best) or best <= 0.0:
                item = int(rng.choice(np.flatnonzero(available)))  # nothing left to learn: random
            else:
                ties = np.flatnonzero(ig >= best - 1e-12 * abs(best))
                b = int(ties[rng.integers(ties.size)]) if ties.size > 1 else int(ties[0])
                members = self.buckets.members[b]
                free = members[available[members]]
                item = int(free[rng.integers(free.size)]) if free.size > 1 else int(free[0])
            chosen.append(item)
            available[item] = False
            if len(chosen) < k:
                b_item = int(self.buckets.of_item[item])
                avail_per_bucket[b_item] -= 1.0
                fantasy.condition(b_item)
        return chosen

    # ------------------------------------------------------------ updates
    def _update(self, item: int, score: float) -> None:
        b = int(self.buckets.of_item[item])
        post = self.posterior
        if self.random_items or self.selection == "sampled":  # a random draw: it enters the design-based estimate
            prob = float(self._sampling_probabilities()[item]) if self.selection == "sampled" else None
            n = self.n_observed
            ybar = self._sum_obs / n if n else float(self._ref_full.mean())
            preds = self._control_predictions()
            unobserved = ~self._observed
            self._design.add(
                score, self._sum_obs, self.n_items - n, ybar,
                np.array([p[item] for p in preds]), np.array([float(p[unobserved].sum()) for p in preds]), prob,
            )
        if self._ridge is not None:
            self._ridge.add(item, score)
        col = self.reference.scores[:, item]
        self._ref_sum += col
        self._ref_cross += score * col
        self._ref_sq += col * col
        self._sum_sq += score * score
        innovation, d = post.observe(b, score)
        if self.n_observed >= SCALE_SKIP:  # n_observed still counts the items before this one
            self._z2 += innovation * innovation / d
        self._sum_obs += score

    def _control_predictions(self) -> list[np.ndarray]:
        """Each control variate's prediction for every item (N,), fixed before the next draw."""
        out = []
        for name in self.controls_:
            if name == "model":
                pred = self.posterior.mean[self.buckets.of_item]
                if self.reference.score_range is not None:
                    pred = np.clip(pred, *self.reference.score_range)
                out.append(pred)
            elif name == "ridge":
                out.append(self._ridge_control().predict())
            else:
                out.append(self._near_reference_mean())
        return out

    def _ridge_control(self) -> RidgeControl:
        """The AIPW ridge control, made when first needed from every item scored so far (chosen or random)."""
        if self._ridge is None:
            self._ridge = RidgeControl(self.reference.scores.T, score_range=self.reference.score_range)
            for item, score in zip(self.observed_items, self.observed_scores):
                self._ridge.add(item, score)
        return self._ridge

    def _near_reference_mean(self) -> np.ndarray:
        """Per item, the mean score of the references whose full score is nearest the current estimate (N,).

        A second control variate of the design-based estimate: a target found
        above every reference is best predicted by the strongest ones.
        """
        level = self.estimate().mean
        nearest = np.argsort(np.abs(self._ref_full - level), kind="stable")[: self._n_near]
        return self.reference.scores[nearest].mean(0)

    def _after_observe(self) -> None:
        if self.mode != "model" or self.extrapolation == "off" or self.selection in ("active", "sampled"):
            return
        if self.n_observed > self.switch_until_ or self.n_observed >= self.n_items:
            return
        mean, var = self._model_estimate()
        lo, hi = self.reference_range
        half = Z95 * math.sqrt(var)
        if mean - half > hi or mean + half < lo or self._beyond_every_reference():
            self.switch_reason = "outside"
        elif self.n_observed >= 2 * SCALE_SKIP and self.scale > SCALE_SWITCH:
            self.switch_reason = "misfit"
        else:
            return
        self.mode = "design"
        self.switched_at = self.n_observed

    def _beyond_every_reference(self) -> bool:
        """Whether, on the items scored so far, the target is significantly above (or below) every reference.

        A paired comparison, free of the model: for each reference j the mean
        difference d̄_j of the target's and j's scores on the same items, with
        its standard error; "above every reference" when every d̄_j − 1.96 se_j
        is positive (from n = 10 on). A target better than every reference
        model on the items so far is outside the range the references span,
        even while the model's estimate, pulled towards the references, is not.
        """
        n = self.n_observed
        if n < 2 * SCALE_SKIP:
            return False
        return bool(
            beyond_every_reference(n, self._sum_obs, self._sum_sq, self._ref_sum, self._ref_sq, self._ref_cross)
        )

    # ------------------------------------------------------------ estimate
    def _model_estimate(self) -> tuple[float, float]:
        post = self.posterior
        mean = (self._sum_obs + float(post.remaining @ post.mean)) / self.n_items
        var = self.calibration_factor**2 * self.scale * post.var_r_scaled() / self.n_items**2
        return mean, var

    @property
    def calibration_factor(self) -> float:
        """The calibration factor applied to the model-based standard deviation at the current n."""
        return self.calibration_.factor_at(max(self.n_observed, 1) / self.n_items, self.calibrate_by)

    def _current_estimate(self) -> Estimate:
        n_items = self.n_items
        notes: list[str] = []
        floored = False
        if self.mode == "design" and self._design.count > 0:
            u_frac = (n_items - self.n_observed) / n_items
            variance = "increments" if self.selection == "sampled" else self.design_variance  # unequal weights
            mean, var = self._design.estimate(fallback_var=self._worst_var, variance=variance)
            floor = float(
                sampling_var_floor(
                    self._design.mean_score, self._design.low_seen, self._design.high_seen, self._design.count,
                    n_items, self.reference.score_range, self.reference.kind == "binary",
                )
            ) * u_frac * u_frac
            if self.floor == "effective":
                floor /= min(max(self._design.variance_reduction, 1.0), FLOOR_GAIN_MAX)
            floored = floor > var
            var = max(var, floor)
        elif self.mode == "design":
            mean, var = self._model_estimate()
            u_frac = (n_items - self.n_observed) / n_items
            var = max(var, self._worst_var * u_frac * u_frac)  # no random item yet
        else:
            mean, var = self._model_estimate()
        if self.switch_reason == "sampled":
            notes.append(
                f"design-based by design: items are drawn at random with known probabilities (following the "
                f"model's predictive spread), and the interval rests on those {self._design.count} item(s), "
                "weighted by the inverse of their probabilities, not on the references' calibration"
            )
        elif self.mode == "design":
            lo, hi = self.reference_range
            why = (
                f"the target is outside the references' score range [{lo:.3g}, {hi:.3g}]"
                if self.switch_reason == "outside"
                else "the references predict the target poorly (its scores vary "
                f"{math.sqrt(SCALE_SWITCH):.0f}x more than the model expects)"
            )
            notes.append(
                f"design-based: {why}, found at n = {self.switched_at}; since then items are drawn at random and "
                f"the interval rests on those {self._design.count} random item(s), not on the references"
            )
        if self.mode == "design" and self._design.count > 0 and floored:
            notes.append(
                "the interval is as wide as Wilson's for the random items' 0/1 scores (few failures or successes)"
                if self.reference.kind == "binary"
                else "the interval is widened for the part of the score range no random item has reached yet"
            )
        cal, factor = self.calibration_, self.calibration_factor
        if self.mode == "model" and factor >= CALIBRATION_NOTE:
            measured = cal.rms if self.calibrate_by == "pooled" or not cal.factors else factor
            capped = np.isfinite(measured) and measured >= CALIBRATION_MAX
            notes.append(
                f"calibrated on the references: with reference models playing the target, the model's errors were "
                f"{measured:.1f}x its own standard deviation, so its interval is widened {factor:.1f}x"
                + (f" (capped at {CALIBRATION_MAX:.0f}x: the references predict each other poorly here)"
                   if capped else "")
            )
        if self.mode == "model" and self.n_observed >= 2 * SCALE_SKIP and self.scale > 2.0:
            notes.append(
                f"the references predict this target less well than each other: its scores vary "
                f"{math.sqrt(self.scale):.1f}x more than the model expects, and the interval is widened by that factor"
            )
        bounds = self._bounds()
        if bounds is not None:
            mean = min(max(mean, bounds[0]), bounds[1])  # nearer the truth, wherever it is in the range
        return Estimate(
            mean=mean, var=var, n_observed=self.n_observed, n_items=n_items, bounds=bounds, notes=tuple(notes),
        )

    def _bounds(self) -> tuple[float, float] | None:
        """The range R can still take: the scores seen, and the score range for the items not seen.

        The model's posterior mean can leave it (a wide level prior after one
        or two scores: 1.1 on a 0/1 benchmark); the estimate is projected back
        into it, which can only bring it nearer the truth.
        """
        score_range = self.reference.score_range
        if score_range is None:
            return None
        lo, hi = score_range
        unseen = self.n_items - self.n_observed
        return (self._sum_obs + lo * unseen) / self.n_items, (self._sum_obs + hi * unseen) / self.n_items


def _check_options(selection: str, extrapolation: str, n_pseudo: int, fit_items: int, fit_seed: int, warmup: int,
                   switch_until: int | None, scale_prior: float, tolerance: float | None) -> None:
    """BayesAME's option values, each refused with what it must be."""
    if selection not in ("auto", "active", "random", "sampled"):
        raise ConfigurationError(f"selection must be 'auto', 'active', 'random' or 'sampled', got {selection!r}")
    if extrapolation not in ("auto", "off"):
        raise ConfigurationError(f"extrapolation must be 'auto' or 'off', got {extrapolation!r}")
    for label, value, low in (("n_pseudo", n_pseudo, 1), ("fit_items", fit_items, 2), ("fit_seed", fit_seed, 0)):
        if int(value) != value or value < low:
            raise ConfigurationError(f"{label} must be an integer >= {low}, got {value}")
    if int(warmup) != warmup or warmup < 0:
        raise ConfigurationError(f"warmup must be a non-negative integer, got {warmup}")
    if switch_until is not None and (int(switch_until) != switch_until or switch_until < 0):
        raise ConfigurationError(f"switch_until must be a non-negative integer, got {switch_until}")
    if not (np.isfinite(scale_prior) and scale_prior > 0):
        raise ConfigurationError(f"scale_prior must be a positive number, got {scale_prior}")
    if tolerance is not None and not (np.isfinite(tolerance) and tolerance >= 0):
        raise ConfigurationError(f"tolerance must be >= 0 (0 compares scores exactly), got {tolerance}")


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
    for label in ("alpha", "beta", "sigma2"):
        value = getattr(fit, label)
        if not (np.isfinite(value) and value > 0):
            raise ConfigurationError(f"hyperparameters: {label} must be a positive number, got {value}")
    return fit


def _resolve_calibration(ref: ScoreMatrix, fit: ReferenceFit,
                         calibration: Calibration | Mapping[str, Any] | str | None,
                         warmup: int = WARMUP) -> Calibration:
    """"auto": measured on ``ref``'s pseudo-targets (cached; they start with ``warmup`` random items, as the method
    does); None: factor 1; else the given one (or its dict)."""
    if isinstance(calibration, str) and calibration == "auto":
        cal = _cached_calibration(ref, fit, warmup)
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
    if not (np.isfinite(cal.factor) and cal.factor > 0):
        raise ConfigurationError(f"calibration factor must be a positive number, got {cal.factor}")
    return cal


def _parse_controls(controls: str | None) -> tuple[str, ...]:
    """``"model+near"`` → ("model", "near"); "none" or None → ()."""
    known = ("model", "near", "ridge")
    parts = ["none"] if controls is None else [c.strip() for c in str(controls).split("+")]
    out = () if parts == ["none"] else tuple(parts)
    if any(c not in known for c in out) or len(set(out)) != len(out):
        raise ConfigurationError(
            f"controls must be 'none' or some of {', '.join(known)} joined by '+', e.g. 'model+near'; "
            f"got {controls!r}"
        )
    return out


class BayesAMERS(BayesAME):
    """BayesAME-RS with the default's model: uniformly random items throughout (paper §5.1's baseline)."""

    name = "bayesame-rs"
    capabilities = Capabilities(batch=True)  # random items: not a ranker

    def __init__(self, reference: ScoreMatrix, **kwargs: object) -> None:
        if kwargs.get("selection", "random") != "random":
            raise ConfigurationError("BayesAME-RS selects items at random; do not pass selection=")
        kwargs["selection"] = "random"
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]


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
        ends), or the pooled ``factor`` (``by="pooled"``, or a calibration without factors by budget)."""
        if by == "pooled" or not self.factors:
            return self.factor
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
) -> Calibration:
    """Measure the default's interval on reference models used as targets; never sees the real target.

    The references are split at random into ``folds`` groups (one per model
    when there are fewer than 2 × ``folds`` of them). Each group in turn is a
    set of pseudo-targets, and the models of the other groups are their
    references: a kernel is fitted on those alone (:func:`fit_hyperparameters`
    with ``fit_pseudo`` pseudo-targets on ``fit_items`` items, starting from
    ``fit``), so each pseudo-target is as new to its model as a real target
    is; then the default BayesAME plays every pseudo-target of the group at
    once, on the benchmark or on a random ``max_items`` of its items (the
    model-based design does not depend on the scores, so they share it).
    Each records its standardised error z = (R̂ − R) / sd at n = 30 and at 3,
    5, 10, 15, …, 50 % of the items while its estimate is model-based (a
    pseudo-target that would switch to the design-based estimate leaves the
    count there). The pooled factor is the root mean square of all those z,
    at least 1; the factors by budget (:attr:`Calibration.factors`) are
    measured at each of those n and at 1 and 2.5 % of the items, separately.
    The pseudo-targets start with ``warmup`` random items, as the method they
    calibrate does.
    """
    scores = np.asarray(reference.scores, dtype=float)
    k_refs, n_all = scores.shape
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xCA1]))
    items = np.arange(n_all) if n_all <= max_items else np.sort(rng.choice(n_all, size=max_items, replace=False))
    sub = reference.select_items(items.tolist()) if items.size < n_all else reference
    n_folds = int(folds) if k_refs >= 2 * int(folds) else k_refs
    groups = np.array_split(rng.permutation(k_refs), n_folds)
    n_sub = sub.n_items
    fractions = (0.03, 0.05) + tuple(np.round(np.arange(0.10, 0.501, 0.05), 2))
    pooled = {min(n_sub, 30)} | {max(1, int(round(f * n_sub))) for f in fractions}  # the pooled factor's n
    grid = sorted(pooled | {max(1, int(round(f * n_sub))) for f in (0.01, 0.025)})
    z: list[np.ndarray] = []
    by_n: list[list[np.ndarray]] = [[] for _ in grid]
    n_pseudo = 0
    for g, group in enumerate(groups):
        keep = np.setdiff1d(np.arange(k_refs), group)
        if keep.size < 2 or group.size == 0:
            continue
        ids = [reference.model_ids[i] for i in keep]
        fit_g = fit_hyperparameters(reference.select_models(ids), n_pseudo=fit_pseudo, n_items=fit_items, seed=seed,
                                    level_prior=fit.tau0 > 0, linear=fit.gamma > 0, start=fit)
        truths = sub.scores[group]
        errors = _model_based_errors(sub.select_models(ids), fit_g, truths, int(seed) + g, grid, warmup)
        z.extend(e for n, e in zip(grid, errors) if n in pooled)
        for j, e in enumerate(errors):
            by_n[j].append(e)
        n_pseudo += int(group.size)
    values = np.concatenate(z) if z else np.zeros(0)
    rms = float(np.sqrt(np.mean(values**2))) if values.size else float("nan")
    factor = min(max(1.0, rms), CALIBRATION_MAX) if np.isfinite(rms) else 1.0
    fracs, factors = _factors_by_budget(grid, by_n, n_sub)
    return Calibration(factor=float(factor), rms=rms, n_pseudo=n_pseudo, n_items=int(n_sub), n_z=int(values.size),
                       seed=int(seed), fractions=fracs, factors=factors)


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
    for n, parts in zip(grid, by_n):
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


def _model_based_errors(
    reference: ScoreMatrix, fit: ReferenceFit, truths: np.ndarray, seed: int, grid: Sequence[int],
    warmup: int = WARMUP,
) -> list[np.ndarray]:
    """Standardised errors (R̂ − R) / sd of the model-based estimate of several targets at n in ``grid``.

    Exactly what :class:`BayesAME` (``calibration=None``) reports for each
    target played alone with ``seed``, computed for all targets at once: while
    the estimate is model-based, selection does not depend on the scores, so
    the targets share the items and the posterior covariance
    (tests/test_bayesame_default.py checks the equality). A target stops
    contributing once it would switch to the design-based estimate.
    """
    method = BayesAME(reference, hyperparameters=fit, calibration=None, seed=seed, warmup=warmup)
    one = method.posterior
    n_targets = truths.shape[0]
    post = BucketPosterior(one.prior_mean, one.prior_col, one.prior_diag, one.prior_cov_counts, one.counts,
                           one.noise, n_targets=n_targets)
    method.posterior = post  # the shared covariance drives the information-gain selection
    n_items = method.n_items
    true_scores = truths.mean(1)
    lo, hi = method.reference_range
    z2 = np.zeros(n_targets)
    total = np.zeros(n_targets)
    total_sq = np.zeros(n_targets)
    ref_scores = reference.scores
    ref_sum = np.zeros(ref_scores.shape[0])
    ref_sq = np.zeros(ref_scores.shape[0])
    cross = np.zeros((n_targets, ref_scores.shape[0]))
    active = np.ones(n_targets, dtype=bool)
    out: list[np.ndarray] = []
    for n in range(1, max(grid) + 1):
        # as a single run selects: its random start, then Eq. 6 (the shared pass observes nothing through the
        # method, whose own count, and so its `random_items`, stays at 0)
        rng = np.random.default_rng([method.seed_, n - 1])
        (item,) = (method._random_items(1, ()) if n <= method.warmup
                   else method._batch_select(rng, 1, (), method._greedy))
        b = int(method.buckets.of_item[item])
        innovation, d = post.observe(b, truths[:, item])
        if n - 1 >= SCALE_SKIP:
            z2 += innovation**2 / d
        total += truths[:, item]
        total_sq += truths[:, item] ** 2
        col = ref_scores[:, item]
        ref_sum += col
        ref_sq += col * col
        cross += np.outer(truths[:, item], col)
        method._observed[item] = True
        scale = (method.scale_prior + z2) / (method.scale_prior + max(n - SCALE_SKIP, 0))
        mean = (total + post.remaining @ post.mean) / n_items
        sd = np.sqrt(scale * post.var_r_scaled() / n_items**2)
        if n < n_items and n <= method.switch_until_:
            outside = (mean - Z95 * sd > hi) | (mean + Z95 * sd < lo)
            misfit = (n >= 2 * SCALE_SKIP) & (scale > SCALE_SWITCH)
            if n >= 2 * SCALE_SKIP:  # the paired comparison with every reference, as a run makes it
                outside |= beyond_every_reference(n, total[:, None], total_sq[:, None], ref_sum, ref_sq, cross)
            active &= ~(outside | misfit)
        if n in grid:
            ok = active & (sd > 0)
            out.append((mean[ok] - true_scores[ok]) / sd[ok])
    return out


_CALIBRATIONS: ReferenceCache[Calibration] = ReferenceCache("BayesAME calibrations", 16)


def _cached_calibration(reference: ScoreMatrix, fit: ReferenceFit, warmup: int = WARMUP) -> Calibration:
    return _CALIBRATIONS.get_or_compute(
        (reference.fingerprint(), fit, int(warmup)),
        lambda: _stored("bayesame_calibration", Calibration, (reference.fingerprint(), fit.to_dict(), int(warmup)),
                        lambda: calibrate(reference, fit, warmup=warmup)))


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


def beyond_every_reference(
    n: int, total, total_sq, ref_sum: np.ndarray, ref_sq: np.ndarray, cross: np.ndarray,
):
    """Whether a target scores significantly above (or below) every reference on the n items scored so far.

    A paired comparison, free of the model: with the target's sum and sum of
    squares ``total``, ``total_sq``, each reference's ``ref_sum``, ``ref_sq``
    (shape (K,)) and the cross sums ``cross`` = Σ s·s_j, the mean difference
    d̄_j and its standard error; True where every d̄_j − 1.96 se_j > 0 (or every
    d̄_j + 1.96 se_j < 0). Targets broadcast along a leading axis: ``total`` of
    shape (T, 1) with ``cross`` (T, K) gives one answer per target (shape (T,)).
    """
    diff_mean = (total - ref_sum) / n
    diff_sq = (total_sq - 2.0 * cross + ref_sq) / n
    se = np.sqrt(np.maximum(diff_sq - diff_mean**2, 0.0) / (n - 1))
    return np.all(diff_mean - Z95 * se > 0, axis=-1) | np.all(diff_mean + Z95 * se < 0, axis=-1)


#: Calibration factors from this one on are said in ``Estimate.notes``.
CALIBRATION_NOTE = 1.5
#: Smallest calibration factor by budget (the interval narrows at most to half the model's own).
CALIBRATION_MIN = 0.5
#: Fewest standardised errors at an n for a factor by budget there (fewer: that n is left out).
CALIBRATION_MIN_Z = 8
#: Largest calibration factor applied (a larger one means the model is unusable here; the scale switch takes over).
CALIBRATION_MAX = 3.0
