"""Continuous computerised adaptive testing for one model (continuous-CAT paper §4, §5).

A thin :class:`~activeeval.methods.base.BaseMethod` over :mod:`activeeval.irt.continuous`:

* calibration (b, k, the negative-discrimination filter, min–max scaling) is
  fitted once on the reference models, or passed in (the ranker shares one);
* the posterior of θ is kept exactly on a fixed grid (prior N(θ0, σ0²) times
  the per-item likelihoods, see :func:`activeeval.irt.continuous.log_likelihood`), so an
  update costs O(G) for G grid points, independent of N;
* selection maximises Fisher information at θ̂ over the unused pool items.
  Ĩ = μ(1−μ)/k peaks at the item whose b is closest to θ̂, so the pool is
  kept sorted by b and the choice is a bisection plus a skip over used items
  (union–find with path compression): O(log N) per step instead of O(N).
  The full information I = ½ + u(a² − 2) (u = μ(1−μ), App. E) orders items
  the same way when a > √2 and the opposite way (farthest b first) when
  a < √2, so the same structure serves both;
* the estimate is reported on the full-benchmark score scale (Estimate.mean /
  .var: observed scores plus the posterior-predictive mean of the unobserved
  ones, with both the θ uncertainty and the per-item noise in the variance,
  scaled by what the references playing the target have been off by —
  :func:`learn_reference_errors`, docs/ranking.md) and on the θ scale
  (:meth:`ContinuousCAT.ability`).

Missing reference scores: reference models with any missing score are
dropped (``missing="models"``, the BaseMethod default) so the item set — what
the benchmark score averages over — stays whole; pass ``missing="items"`` to
drop incomplete items instead. Either way a MissingScoresWarning says what went.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from scipy.special import log_expit

from activeeval._cache import ReferenceCache
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.irt.continuous import (
    CALIBRATION_METHODS,
    DEFAULT_CLIP,
    RESPONSES,
    Calibration,
    ScoreIntervalCalibration,
    calibrate,
    default_grid,
    fisher_information,
    full_minus_tilde_slope,
    information_2pl,
    interval_factor,
    log_likelihood,
)
from activeeval.methods.base import BaseMethod, SeedLike
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.settings import Flag, Integer, Number, OneOf, Settings, setting, takes_settings

__all__ = [
    "AbilityPosterior",
    "ContinuousCAT",
    "ErrorSettings",
    "IRTSettings",
    "PriorSettings",
    "default_prior",
    "fit_calibration",
    "fit_error_model",
    "learn_error_model",
    "learn_reference_errors",
    "pseudo_target_errors",
    "score_moments",
]

#: The full-benchmark score intervals :meth:`ContinuousCAT.estimate` can give (its ``interval=``).
INTERVALS = ("calibrated", "model")

#: Floor of the default prior sd (the sd of the reference abilities): a reference
#: population with nearly equal abilities must not pin θ before any data.
PRIOR_SD_FLOOR = 0.5


# ------------------------------------------------------------------ settings
@dataclass(frozen=True)
class _Given:
    """``check`` for a value given; None (the default: resolved from the references) passes. The message is
    ``check``'s own ("prior_sd must be a positive number"): None is the default, not a choice to list."""

    check: Callable[[str, Any], Any]

    def __call__(self, name: str, value: Any) -> Any:
        return None if value is None else self.check(name, value)


def _true_false_none(name: str, value: Any) -> bool | None:
    """True, False (a NumPy bool is read as one) or None (the default, decided by the calibration)."""
    if value is None:
        return None
    if not isinstance(value, (bool, np.bool_)):
        raise ConfigurationError(f"{name} must be True, False or None, got {value!r}")
    return bool(value)


@dataclass(frozen=True)
class IRTSettings(Settings):
    """The response model CAT fits on the references and reads a target with (a CAT's ``irt`` group; each
    field is also a flat option, ``cat[response=rasch]``). :class:`ContinuousCAT`'s docstring says what each
    does. :func:`fit_calibration`, :func:`learn_reference_errors` and :func:`pseudo_target_errors` take the
    same object, so the reference pseudo-targets run exactly the model the target gets."""

    about: ClassVar[str] = "the item response model: its fit on the references and its selection and update"

    response: str | None = setting(None, _Given(OneOf(*RESPONSES)),
                                   "the response model (default: 2pl with the consistent calibration, else rasch)")
    scale: str = setting("auto", OneOf("auto", "minmax", "none"), "min-max scaling of scores outside [0, 1]")
    clip: float = setting(DEFAULT_CLIP, Number(0, 0.5, low_open=True, high_open=True,
                                               phrase="in (0, 0.5) (a proportion bound before the logit)"),
                          "proportion clip before the logits")
    filter_negative: bool = setting(True, Flag(), "drop negatively discriminating items from the adaptive pool")
    information: str = setting("tilde", OneOf("tilde", "full"), "the Rasch selection criterion")
    likelihood: str = setting("quasi", OneOf("quasi", "normal"), "the Rasch posterior update")


@dataclass(frozen=True)
class ErrorSettings(Settings):
    """How far off CAT's ability estimate is taken to be: the error model Var(θ̂ − θ*) = error_scale·SE² +
    error_floor·(N − n)/N, learned or given, and the references' local error check (a CAT's ``errors``
    group; each field is also a flat option, ``cat[local_error=false]``)."""

    about: ClassVar[str] = "the ability's error model and the local error check"

    error_model: bool | None = setting(None, _true_false_none,
                                       "learn the error model (default: with the consistent calibration only)")
    error_scale: float | None = setting(None, _Given(Number(0, low_open=True, phrase="a positive number")),
                                        "the error model's c, given instead of learned (a session stores it)")
    error_floor: float | None = setting(None, _Given(Number(0, phrase="a non-negative number")),
                                        "the error model's τ², given instead of learned (a session stores it)")
    local_error: bool | None = setting(None, _true_false_none,
                                       "raise the variance to the references' error on the items taken "
                                       "(default: with the consistent calibration only)")


@dataclass(frozen=True)
class PriorSettings(Settings):
    """The ability prior N(θ0, σ0²) and the grid it (and the posterior) lives on (a CAT's ``prior`` group; each
    field is also a flat option, ``cat[prior_sd=1]``)."""

    about: ClassVar[str] = "the ability prior and its grid"

    prior_mean: float | None = setting(None, _Given(Number(phrase="a finite number")),
                                       "θ0 (default: the mean of the reference abilities)")
    prior_sd: float | None = setting(None, _Given(Number(0, low_open=True, phrase="a positive number")),
                                     "σ0 (default: the sd of the reference abilities, floored)")
    grid_points: int = setting(961, Integer(3), "points of the θ grid on [−12, 12]")


class _SortedPool:
    """Pool items sorted by difficulty, with O(α(N)) skipping of used items.

    ``right[p]`` / ``left[p]`` point towards the nearest unused position at or
    right / left of p (path-compressed); sentinels are n and −1.
    """

    def __init__(self, items: np.ndarray, b: np.ndarray) -> None:
        order = np.argsort(b[items], kind="stable")
        self.items = items[order]
        self.b = b[self.items]
        self.b_list = self.b.tolist()  # bisect on a list is faster than np.searchsorted for scalars
        n = self.items.size
        self.n = n
        self.pos_of = {int(item): p for p, item in enumerate(self.items)}
        self.right = list(range(n + 1))
        self.left = list(range(n + 1))
        self.n_free = n

    def find_right(self, p: int) -> int:
        r = self.right
        root = p
        while r[root] != root:
            root = r[root]
        while r[p] != root:
            r[p], p = root, r[p]
        return root

    def find_left(self, p: int) -> int:
        ll = self.left  # indexed by q = p + 1, so q = 0 (position −1) is the sentinel root
        q = p + 1
        root = q
        while ll[root] != root:
            root = ll[root]
        while ll[q] != root:
            ll[q], q = root, ll[q]
        return root - 1

    def remove(self, item: int) -> None:
        p = self.pos_of.get(int(item))
        if p is None:
            return
        self.right[p] = p + 1
        self.left[p + 1] = p
        self.n_free -= 1

    def nearest(self, theta: float, k: int, skip: set[int], farthest: bool = False) -> list[int]:
        """Up to ``k`` unused items closest to (or farthest from) θ, in that order, none in ``skip``."""
        out: list[int] = []
        if farthest:
            lo, hi = self.find_right(0), self.find_left(self.n - 1)
            while len(out) < k and lo <= hi and lo < self.n and hi >= 0:
                take_lo = abs(self.b_list[lo] - theta) >= abs(self.b_list[hi] - theta)
                p = lo if take_lo else hi
                if take_lo:
                    lo = self.find_right(lo + 1)
                else:
                    hi = self.find_left(hi - 1)
                item = int(self.items[p])
                if item not in skip:
                    out.append(item)
            return out
        pos = bisect.bisect_left(self.b_list, theta)
        hi = self.find_right(pos) if pos < self.n else self.n
        lo = self.find_left(pos - 1) if pos > 0 else -1
        while len(out) < k and (lo >= 0 or hi < self.n):
            if hi >= self.n:
                take_lo = True
            elif lo < 0:
                take_lo = False
            else:
                # Ties in |b − θ| go to the easier item (lower b): deterministic.
                take_lo = theta - self.b_list[lo] <= self.b_list[hi] - theta
            if take_lo:
                p = lo
                lo = self.find_left(lo - 1) if lo > 0 else -1
            else:
                p = hi
                hi = self.find_right(hi + 1)
            item = int(self.items[p])
            if item not in skip:
                out.append(item)
        return out


class AbilityPosterior:
    """The θ posterior on a grid and the max-information choice over an item pool (one CAT's core).

    Shared by :class:`ContinuousCAT` and the reference pseudo-target runs of
    :func:`pseudo_target_errors`, so both make exactly the same choices and updates.
    """

    def __init__(self, calibration: Calibration, prior_mean: float, prior_sd: float, *, information: str = "tilde",
                 likelihood: str = "quasi", grid_points: int = 961) -> None:
        self.calibration = calibration
        self.k = float(calibration.k)
        self.likelihood = likelihood
        self.grid = default_grid(n_points=grid_points)
        self._logpost = -0.5 * ((self.grid - prior_mean) / prior_sd) ** 2
        self._normalise()
        self.two_pl = calibration.slopes is not None
        if self.two_pl:
            # Items with their own slope and noise: the most informative item depends on a, b and s², so the
            # choice is a vectorised argmax of (a·μ(1−μ))²/s² over the free pool items, O(N) per step.
            self.free = np.asarray(calibration.pool, dtype=bool).copy()
        else:
            # Nearest b to θ̂ when the criterion increases in u = μ(1−μ), farthest otherwise (App. E).
            self.farthest = information == "full" and full_minus_tilde_slope(self.k) < 0
            self.pool = _SortedPool(np.flatnonzero(calibration.pool), calibration.b)

    def _normalise(self) -> None:
        p = np.exp(self._logpost - self._logpost.max())
        self.post = p / p.sum()
        self.mean = float(self.post @ self.grid)
        self.var = float(self.post @ (self.grid - self.mean) ** 2)

    def update(self, item: int, y: float) -> None:
        """Condition on the scaled score ``y`` ∈ [0, 1] of ``item``."""
        cal = self.calibration
        if self.two_pl:
            assert cal.noise is not None  # a 2PL calibration has its items' noise
            mu = cal.item_mean(self.grid, item)
            self._logpost += -0.5 * (y - mu) ** 2 / float(cal.noise[item])
            self.free[item] = False
        else:
            self._logpost += log_likelihood(self.grid, float(cal.b[item]), y, self.k, self.likelihood)
            self.pool.remove(item)
        self._normalise()

    def information(self, theta: float) -> np.ndarray:
        """Every item's Fisher information about θ at ``theta`` (2PL items)."""
        cal = self.calibration
        assert cal.slopes is not None and cal.noise is not None  # 2PL items only
        return information_2pl(theta, cal.slopes, cal.b, cal.noise)

    def nearest(self, k: int, skip: set[int]) -> list[int]:
        """Up to ``k`` unused pool items of largest information at θ̂, none in ``skip``."""
        if not self.two_pl:
            return self.pool.nearest(self.mean, k, skip, farthest=self.farthest)
        info = self.information(self.mean)
        info[~self.free] = -np.inf
        if skip:
            info[list(skip)] = -np.inf
        n_ok = int(np.isfinite(info).sum())
        if n_ok == 0:
            return []
        if k == 1:
            return [int(np.argmax(info))]  # the first of equally informative items: deterministic
        take = min(k, n_ok)
        top = np.argpartition(-info, take - 1)[:take] if take < info.size else np.arange(info.size)
        top = top[np.isfinite(info[top])]
        # best first; equal information goes to the lower index (deterministic)
        return [int(i) for i in sorted(top.tolist(), key=lambda i: (-info[i], i))][:take]


#: Pseudo-observations of the model's own variance in :class:`LocalError` (a handful of similar
#: references cannot on their own claim the error is larger than the model says).
LOCAL_ERROR_SHRINK = 10.0


class LocalError:
    """The references' error on the target's own items: how far off an estimate like this one has been.

    Every reference model is run through the same posterior as the target on
    the items the target has taken (the same prior, likelihood and item
    parameters, its own scores), giving θ̂_j(S). Among the references whose
    θ̂_j(S) lies near the target's θ̂ (Gaussian weights, bandwidth the
    model's own error sd), the mean squared error of those estimates against
    their full-benchmark abilities θ*_j,

        v_S = Σ_j w_j (θ*_j − θ̂_j(S))² / Σ_j w_j,   w_j = exp(−(θ̂_j(S) − θ̂)² / 2v),

    says how wrong an estimate from *these* items has been for models that
    answered them like the target — bias included. It is shrunk to the
    model's variance v with :data:`LOCAL_ERROR_SHRINK` pseudo-observations
    (by the effective number of references, (Σw)²/Σw²), and only ever raises v.

    This catches what a pooled error model cannot: item sets that are not
    representative of the benchmark for a model of this kind. On MuSR a
    near-chance model gets its first items from one sub-task (where guessing
    looks like a low ability) and the references that answer those items the
    same way were off by nearly twice what its posterior says (sd 0.53
    against 0.30 after 20 items; docs/ranking.md).
    Costs O(K·G) per item and per variance (K references, G grid points).
    """

    def __init__(self, calibration: Calibration, scores: np.ndarray, grid: np.ndarray, prior_mean: float,
                 prior_sd: float, likelihood: str = "quasi") -> None:
        self.calibration = calibration
        self.scores = np.asarray(scores, dtype=float)
        self.grid = grid
        self.likelihood = likelihood
        if calibration.method == "consistent" and calibration.theta_ref.shape[0] == self.scores.shape[0]:
            self.truth = np.asarray(calibration.theta_ref, dtype=float)
        else:
            self.truth = np.ravel(calibration.true_ability(calibration.scale(self.scores)))
        # log posterior of reference j on the grid = common(θ) + own[j](θ) + a constant of j: both the
        # 2PL normal and the Rasch quasi-likelihood are linear in the score, so an item adds one vector to
        # every reference (the part that does not depend on the score) plus a rank-one term.
        self.common = -0.5 * ((grid - prior_mean) / prior_sd) ** 2
        self.own = np.zeros((self.scores.shape[0], grid.size))
        # the rank-one terms (a column per reference, a row on the grid) of the items not yet added to `own`:
        # added in one matrix product when the estimates are read (a run reads them far less often than it
        # takes items: one np.outer per item was most of a ranking calibration's time)
        self._cols: list[np.ndarray] = []
        self._rows: list[np.ndarray] = []

    def update(self, item: int) -> None:
        """Condition every reference on its own score of ``item``."""
        cal = self.calibration
        y = np.asarray(cal.scale(self.scores[:, item], item), dtype=float)
        if cal.slopes is not None:
            # −(y − μ)²/2s² = (y/s²)·μ − μ²/2s² − y²/2s² (the last is constant in θ)
            assert cal.noise is not None  # set with the slopes
            mu = cal.item_mean(self.grid, item)
            s2 = float(cal.noise[item])
            self.common -= 0.5 * mu * mu / s2
            self._cols.append(y / s2)
            self._rows.append(mu)
        elif self.likelihood == "quasi":
            # (log σ(z) − (1 − y)·z)/k = (log σ(z) − z)/k + y·z/k
            z = self.grid - float(cal.b[item])
            k = float(cal.k)
            self.common += (log_expit(z) - z) / k
            self._cols.append(y / k)
            self._rows.append(z)
        else:
            self.own += log_likelihood(self.grid, float(cal.b[item]), y[:, None], float(cal.k), self.likelihood)

    def _flush(self) -> None:
        """Add the pending rank-one terms to ``own`` (Σ_i col_i row_iᵀ as one product)."""
        if self._cols:
            self.own += np.column_stack(self._cols) @ np.vstack(self._rows)
            self._cols.clear()
            self._rows.clear()

    def estimates(self) -> np.ndarray:
        """θ̂_j(S), every reference's posterior mean on the items seen so far."""
        self._flush()
        lp = self.own + self.common
        lp -= lp.max(axis=1, keepdims=True)
        # weights below e⁻⁶⁰ of the mode change nothing; clipping them keeps exp off the slow subnormal path
        np.maximum(lp, -60.0, out=lp)
        np.exp(lp, out=lp)
        return (lp @ self.grid) / lp.sum(axis=1)

    def variance(self, theta_hat: float, model_var: float) -> float:
        """max(model_var, the shrunk local mean squared error v_S) for an estimate ``theta_hat``."""
        if not (model_var > 0):
            return model_var
        return local_variance(self.estimates(), self.truth, theta_hat, model_var)


def local_variance(est: np.ndarray, truth: np.ndarray, theta_hat: float, model_var: float) -> float:
    """:meth:`LocalError.variance` from the references' estimates θ̂_j(S) and truths θ*_j (``model_var`` > 0)."""
    w = np.exp(-0.5 * (est - theta_hat) ** 2 / model_var)
    total = float(w.sum())
    if not (total > 0):
        return model_var
    v_local = float(w @ (truth - est) ** 2) / total
    w = w / w.max()  # (Σw)²/Σw² is scale-free; unscaled, Σw² underflows for a target far from every reference
    ess = float(w.sum()) ** 2 / float(w @ w)
    shrunk = (ess * v_local + LOCAL_ERROR_SHRINK * model_var) / (ess + LOCAL_ERROR_SHRINK)
    return max(model_var, shrunk)


def default_prior(calibration: Calibration, prior_mean: float | None = None,
                  prior_sd: float | None = None) -> tuple[float, float]:
    """The prior N(θ0, σ0²) of a new model's ability: the reference population's, unless given.

    θ0 = mean of the reference abilities; σ0 = their sd, floored at
    :data:`PRIOR_SD_FLOOR` (paper calibration) or at ½√k (consistent
    calibration, whose scale can be far narrower than 0.5: WMT21 models have
    sd 0.09 there), so a population of nearly equal references never pins θ.
    """
    theta_ref = calibration.theta_ref
    mean = float(np.mean(theta_ref)) if prior_mean is None else float(prior_mean)
    if prior_sd is None:
        floor = PRIOR_SD_FLOOR if calibration.method == "paper" else 0.5 * float(np.sqrt(calibration.k_fit))
        sd = max(float(np.std(theta_ref)), floor)
    else:
        sd = prior_sd
    if not (np.isfinite(sd) and sd > 0):
        raise ConfigurationError(f"prior_sd must be a positive number, got {prior_sd}")
    if not np.isfinite(mean):
        raise ConfigurationError(f"prior_mean must be a finite number, got {prior_mean}")
    return mean, float(sd)


#: Items at which the pseudo-target runs of :func:`learn_error_model` compare θ̂ with the truth.
ERROR_CHECKPOINTS = (10, 15, 20, 30, 40, 60)
#: Items at which they check the full-benchmark score interval (:func:`learn_reference_errors`).
INTERVAL_CHECKPOINTS = (5, 10, 15, 20, 30, 40, 60, 80)
#: The learned error scale c is kept in [1, ERROR_SCALE_MAX]: the pseudo-targets may say the model's
#: SEs are honest or too small, never that they are too large (few references make that claim fragile).
ERROR_SCALE_MAX = 25.0
#: The "above" ("below") pseudo-targets: the best (worst) EDGE_HELD of the references, calibrated on the
#: references beyond a gap of EDGE_GAP of them (the extrapolation protocol's 20 % gap, halved).
EDGE_HELD, EDGE_GAP = 0.2, 0.1
#: Pseudo-targets needed to measure the interval factor inside the references (``within``: with the 6–8
#: references of mmlu_pro extrapolation and wmt21 zh-en the interval covered 44–83 %) and beyond them
#: (``above``, ``below``: fewer than 5 held out, i.e. fewer than about 23 references, left the extrapolation
#: intervals of mmlu_pro and wmt21 below 80 %; docs/BENCHMARKS.md). Fewer: that case's interval is not shown.
INTERVAL_MIN_RUNS = 10
EDGE_MIN_RUNS = 5
#: Runs classed within the references needed to measure the ``within`` factor on them alone; with fewer, every
#: fold run measures it (as before the factors were class-conditioned). Below about 50 the 95 % quantile rests on
#: the two or three largest errors of a few dozen runs: on the sets with 32 references (29-35 runs classed within)
#: it fell to 0.45-0.85 and covered 0.91-0.94, where every fold run's factor covers 0.93-0.98.
WITHIN_CLASSED_MIN = 50


def _score_sums(cal: Calibration, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ_i width_i μ_i(θ), Σ_i width_i² Var_i(θ)) over every item at each grid θ (chunked: bounded memory)."""
    t1, t2 = np.zeros_like(grid), np.zeros_like(grid)
    chunk = max(1, 2**22 // grid.size)
    for start in range(0, cal.n_items, chunk):
        items = slice(start, start + chunk)
        mu = cal.item_mean(grid[:, None], items)
        w = cal.width[items]
        t1 += mu @ w
        t2 += cal.item_var(mu, items) @ (w**2)
    return t1, t2


def score_moments(post: np.ndarray, grid: np.ndarray, r: np.ndarray, t2: np.ndarray, n_items: int
                  ) -> tuple[float, float, float, float]:
    """(R̂, Var_post r(θ), slope², noise part) of the full-benchmark score from a θ posterior on a grid.

    ``r`` is the predicted score at each grid θ (observed scores plus the
    unobserved items' means), ``t2`` the unobserved items' summed score
    variance there. slope² is Var_post r / Var_post θ — the squared slope
    of the prediction that turns an ability variance into a score variance —
    or, once the posterior sits within one grid step (Var_post θ < h²),
    the squared derivative of r at θ̂ (the ratio is then 0/0).
    """
    mean = float(post @ r)
    var_r = float(post @ (r - mean) ** 2)
    theta = float(post @ grid)
    var_t = float(post @ (grid - theta) ** 2)
    h = float(grid[1] - grid[0])
    if var_t >= h * h:
        slope2 = var_r / var_t
    else:
        slope2 = float(np.interp(theta, grid, np.gradient(r, grid))) ** 2
    return mean, var_r, slope2, float(post @ np.maximum(t2, 0.0)) / (n_items * n_items)


def _fold_groups(n_models: int, folds: int) -> list[np.ndarray]:
    """The held-out groups of the pseudo-target folds (a fixed, seeded split; leave-one-out below 2·folds)."""
    n_folds = int(folds) if n_models >= 2 * folds else n_models
    perm = np.random.default_rng(20240).permutation(n_models)
    return [perm[f::n_folds] for f in range(n_folds)]


def _edge_groups(means: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"above": (held, train), "below": ...}: the best (worst) references held out, calibrated beyond a gap."""
    k = means.size
    order = np.argsort(-means, kind="stable")  # best first
    n_held = max(2, int(round(EDGE_HELD * k)))
    n_gap = int(round(EDGE_GAP * k))
    out = {}
    for case, o in (("above", order), ("below", order[::-1])):
        held, train = o[:n_held], o[n_held + n_gap:]
        if train.size >= 3:
            out[case] = (np.sort(held), np.sort(train))
    return out


def outside_margin(mean: float, obs_sum: float, seen: np.ndarray, n: int, low: float, high: float
                   ) -> tuple[float, float]:
    """(above, below): how far the target lies beyond the best (worst) reference, from what has been observed.

    above = max((obs_sum − max_j seen_j)/n, mean − high), the larger of its mean score's lead over the best
    reference on the items it took and its score estimate's over the best reference's full-benchmark score
    (``below`` the same towards the worst); 0 when not beyond. On the raw score scale.
    """
    above = max(mean - high, (obs_sum - float(seen.max())) / n if seen.size and n else 0.0, 0.0)
    below = max(low - mean, (float(seen.min()) - obs_sum) / n if seen.size and n else 0.0, 0.0)
    return float(above), float(below)


def outside_case(mean: float, obs_sum: float, seen: np.ndarray, n: int, low: float, high: float) -> str:
    """"above" ("below") when the score estimate ``mean`` is above (below) every reference's score [low, high],
    or the score sum on the ``n`` items taken, ``obs_sum``, above (below) every reference's on them (``seen``);
    else "within". :meth:`ContinuousCAT._outside`, which picks the interval factor a target gets; the reference
    runs of :func:`_pseudo_runs` are classed by the same test, so each factor is measured on the runs it is
    applied to (:func:`learn_reference_errors`)."""
    if mean > high or (n and seen.size and obs_sum > seen.max()):
        return "above"
    if mean < low or (n and seen.size and obs_sum < seen.min()):
        return "below"
    return "within"


def _calibrate(scores: np.ndarray, method: str, irt: IRTSettings) -> Calibration:
    """:func:`irt.calibrate` of ``scores`` by ``method`` with the response model and fit of ``irt`` (the response
    model resolved: :func:`default_response`)."""
    return calibrate(scores, method=method, response=default_response(method, irt.response), scale=irt.scale,
                     clip=irt.clip, filter_negative=irt.filter_negative)


def _pseudo_runs(y_raw: np.ndarray, groups: Sequence[tuple[np.ndarray, np.ndarray]], checkpoints: Sequence[int],
                 *, score: bool, method: str, irt: IRTSettings, local_error: bool = False,
                 class_against_all: bool = False) -> dict[int, dict[str, list]]:
    """CAT runs of held-out references: per checkpoint n, their θ errors and posterior variances and (``score``)
    their full-benchmark score errors R̂ − R* with the parts of the model's score variance (:func:`score_moments`)
    and (``local_error``) the (θ̂, θ̂_j(S), θ*_j) their :class:`LocalError` check needs (:func:`local_variance`);
    with ``score`` also how far beyond the fold's references each lay (``margin``: :func:`outside_margin`, as
    :class:`ContinuousCAT` measures a target against all of them) and how :meth:`ContinuousCAT._outside` classes
    it (``case``: :func:`outside_case`, "within", "above" or "below"): against the fold's references, or with
    ``class_against_all`` against every reference but the run's own model, as a real target is classed among all
    the references (the fold runs: a fold's narrower range would class more of them outside than real targets).
    """
    checks = sorted({int(c) for c in checkpoints if 1 <= c < y_raw.shape[1]})
    scored = ("score_error", "var_r", "slope2", "noise", "margin", "case")
    keys = ("theta_error", "se2") + (scored if score else ()) + (("local",) if local_error else ())
    out: dict[int, dict[str, list[Any]]] = {n: {key: [] for key in keys} for n in checks}
    if not checks:
        return out
    n_items = y_raw.shape[1]
    for held, train in groups:
        if train.size < 2:
            continue
        cal = _calibrate(y_raw[train], method, irt)
        y_held = cal.scale(y_raw[held])
        truth = cal.true_ability(y_held, irt.clip)
        mean0, sd0 = default_prior(cal)
        if score:
            grid = default_grid()
            t1_all, t2_all = _score_sums(cal, grid)
            sum_low = float(cal.low.sum())
            train_means = y_raw[train].mean(axis=1)
            ref_range = (float(train_means.min()), float(train_means.max()))
            all_means = y_raw.mean(axis=1)
        for j, (row, true_theta) in enumerate(zip(y_held, truth, strict=True)):
            post = AbilityPosterior(cal, mean0, sd0, information=irt.information, likelihood=irt.likelihood)
            local = (LocalError(cal, y_raw[train], post.grid, mean0, sd0, irt.likelihood) if local_error else None)
            raw = y_raw[held[j]]
            if score:
                t1, t2, obs = t1_all.copy(), t2_all.copy(), 0.0
                seen, obs_raw = np.zeros(train.size), 0.0
                if class_against_all:  # classed as a real target among every other reference would be
                    seen_all = np.zeros(y_raw.shape[0])
                    others = np.delete(np.arange(y_raw.shape[0]), held[j])
                    class_range = (float(all_means[others].min()), float(all_means[others].max()))
            used: set[int] = set()
            for n in range(1, checks[-1] + 1):
                nxt = post.nearest(1, used)
                if not nxt:
                    break
                item = nxt[0]
                used.add(item)
                post.update(item, float(row[item]))
                if local is not None:
                    local.update(item)
                if score:
                    mu = cal.item_mean(grid, item)
                    w = float(cal.width[item])
                    t1 -= w * mu
                    t2 -= w * w * cal.item_var(mu, item)
                    obs += float(raw[item]) - float(cal.low[item])
                    obs_raw += float(raw[item])
                    seen += y_raw[train, item]
                    if class_against_all:
                        seen_all += y_raw[:, item]
                if n in out:
                    rec = out[n]
                    rec["theta_error"].append(post.mean - float(true_theta))
                    rec["se2"].append(post.var)
                    if score:
                        r = (obs + sum_low + t1) / n_items
                        mean, var_r, slope2, noise = score_moments(post.post, grid, r, t2, n_items)
                        rec["score_error"].append(mean - float(np.mean(raw)))
                        rec["var_r"].append(var_r)
                        rec["slope2"].append(slope2)
                        rec["noise"].append(noise)
                        rec["margin"].append(outside_margin(mean, obs_raw, seen, n, *ref_range))
                        rec["case"].append(outside_case(mean, obs_raw, seen_all[others], n, *class_range)
                                           if class_against_all else outside_case(mean, obs_raw, seen, n, *ref_range))
                    if local is not None:
                        rec["local"].append((post.mean, local.estimates(), local.truth))
    return out


@takes_settings
def pseudo_target_errors(
    scores: np.ndarray,
    *,
    method: str = "consistent",
    irt: IRTSettings = IRTSettings(),
    folds: int = 5,
    checkpoints: Sequence[int] = ERROR_CHECKPOINTS,
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """CAT runs on the references as pseudo-targets: {n: (errors θ̂_n − θ*, posterior variances SE_n²)}.

    The references are cut into ``folds`` groups (a fixed, seeded split;
    leave-one-out when there are fewer than 2·folds references). Each group
    in turn plays the new models: the other references are calibrated
    exactly as for a real run, every held-out reference is tested by CAT
    (prior, selection and likelihood as configured: ``irt``, or its fields as
    flat keywords, ``response="rasch"``), and after n items its
    error against θ* — its ability on all items, on the fold's scale
    (:meth:`irt.Calibration.true_ability`) — and its posterior variance are recorded.
    No target's scores are involved.
    """
    y_raw = np.asarray(scores, dtype=float)
    if not any(1 <= int(c) < y_raw.shape[1] for c in checkpoints):
        raise ConfigurationError(f"no checkpoint below the {y_raw.shape[1]} items; give smaller checkpoints")
    every = np.arange(y_raw.shape[0])
    groups = [(held, np.setdiff1d(every, held)) for held in _fold_groups(y_raw.shape[0], folds)]
    runs = _pseudo_runs(y_raw, groups, checkpoints, score=False, method=method, irt=irt)
    return {n: (np.asarray(r["theta_error"]), np.asarray(r["se2"])) for n, r in runs.items() if r["theta_error"]}


def fit_error_model(errors: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[float, float]:
    """(c, τ²) of Var(θ̂ − θ*) ≈ c·SE² + τ², by least squares over the checkpoints' mean squares.

    c ≥ 1 scales the posterior variance (the response model's per-item noise
    is too optimistic when items differ in more than difficulty); τ² ≥ 0 is
    an error that more items of the same kind do not remove (a model can be
    better on the items near its level than on the benchmark as a whole).
    c is the least-squares slope clipped to [1, :data:`ERROR_SCALE_MAX`];
    τ² is then the smallest floor under which no checkpoint's mean squared
    error exceeds its modelled variance — conservative on purpose: on MuSR
    the error of adaptive runs *grows* with n (items near θ̂ come from one
    sub-task) while the posterior contracts, and a mean fit would leave the
    longer runs over-confident.
    """
    rows = sorted(errors)
    if not rows:
        return 1.0, 0.0
    w = np.array([errors[n][0].size for n in rows], dtype=float)
    mse = np.array([float(np.mean(errors[n][0] ** 2)) for n in rows])
    mv = np.array([float(np.mean(errors[n][1])) for n in rows])
    from scipy.optimize import nnls

    sw = np.sqrt(w)
    coef, _ = nnls(np.column_stack([mv, np.ones_like(mv)]) * sw[:, None], mse * sw)
    c = float(np.clip(coef[0], 1.0, ERROR_SCALE_MAX))
    tau2 = max(float(np.max(mse - c * mv)), 0.0)
    return c, tau2


def learn_error_model(scores: np.ndarray, **options) -> tuple[float, float, dict]:
    """(c, τ², diagnostics): :func:`fit_error_model` of :func:`pseudo_target_errors` on the references."""
    errors = pseudo_target_errors(scores, **options)
    c, tau2 = fit_error_model(errors)
    diag = {
        "checkpoints": sorted(errors),
        "rms_error": [float(np.sqrt(np.mean(errors[n][0] ** 2))) for n in sorted(errors)],
        "mean_z2_raw": [float(np.mean(errors[n][0] ** 2 / np.maximum(errors[n][1], 1e-300))) for n in sorted(errors)],
        "mean_z2_calibrated": [float(np.mean(errors[n][0] ** 2 / (c * np.maximum(errors[n][1], 1e-300) + tau2)))
                               for n in sorted(errors)],
        "n_runs": int(errors[min(errors)][0].size) if errors else 0,
    }
    return c, tau2, diag


def _reference_runs(y_raw: np.ndarray, *, error: tuple[float, float] | None, method: str, irt: IRTSettings,
                    local_error: bool, folds: int) -> tuple[float, float, dict[str, dict[int, dict[str, list]]]]:
    """(c, τ², {"within": fold runs, "above": ..., "below": edge runs}) of :func:`learn_reference_errors`."""
    n_models = y_raw.shape[0]
    options: dict[str, Any] = dict(method=method, irt=irt, local_error=local_error)
    every = np.arange(n_models)
    folds_ = [(held, np.setdiff1d(every, held)) for held in _fold_groups(n_models, folds)]
    within = _pseudo_runs(y_raw, folds_, sorted(set(ERROR_CHECKPOINTS) | set(INTERVAL_CHECKPOINTS)), score=True,
                          class_against_all=True, **options)
    if error is None:
        c, tau2 = fit_error_model({n: (np.asarray(within[n]["theta_error"]), np.asarray(within[n]["se2"]))
                                   for n in ERROR_CHECKPOINTS if n in within and within[n]["theta_error"]})
    else:
        c, tau2 = float(error[0]), float(error[1])
    edges = _edge_groups(y_raw.mean(axis=1))
    runs = {"within": within, **{case: _pseudo_runs(y_raw, [g], INTERVAL_CHECKPOINTS, score=True, **options)
                                 for case, g in edges.items()}}
    return c, tau2, runs


def _standardised(rec: dict[str, list], n: int, n_items: int, c: float, tau2: float, local_error: bool
                  ) -> np.ndarray:
    """The runs' score errors after ``n`` items over the model's score sd (the sd :meth:`ContinuousCAT.estimate`
    scales): z of :func:`interval_factor`."""
    ability = c * np.asarray(rec["se2"]) + tau2 * (n_items - n) / n_items
    if local_error:
        ability = np.array([local_variance(est, truth, theta, v) if v > 0 else v
                            for v, (theta, est, truth) in zip(ability, rec["local"], strict=True)])
    var = ability * np.asarray(rec["slope2"]) + np.asarray(rec["noise"])
    return np.asarray(rec["score_error"]) / np.sqrt(np.maximum(var, 1e-300))


#: Layout of the CAT state kept in the user cache (:func:`_kept`); raise it when a field changes meaning.
STORE_FORMAT = 1
_FITS: ReferenceCache[Calibration] = ReferenceCache("CAT item calibrations", 8)
_ERRORS: ReferenceCache[tuple[float, float, ScoreIntervalCalibration]] = ReferenceCache("CAT reference errors", 8)


def _scores_digest(scores: np.ndarray) -> str:
    """SHA-256 of a score array's shape and float64 values (what a CAT calibration is derived from)."""
    x = np.ascontiguousarray(scores, dtype=np.float64)
    h = hashlib.sha256(repr(x.shape).encode())
    h.update(x.data)
    return h.hexdigest()


def _kept(memo: ReferenceCache, kind: str, parts: tuple, compute: Callable[[], Any],
          encode: Callable[[Any], tuple[Mapping[str, Any], Sequence[np.ndarray]]],
          decode: Callable[[Any], Any]) -> Any:
    """``compute()``, derived once per process (``memo``) and kept in the user cache
    (:func:`activeeval.user_cache.derived`, unless it is off) under the JSON ``parts`` (the scores' digest and
    every setting the value depends on), :data:`STORE_FORMAT`, the activeeval code and NumPy's version. A
    stored value reads back exactly (arrays by their bytes, numbers as JSON, which keeps every float's bits);
    one that does not decode is derived again."""
    from activeeval import user_cache

    def stored() -> Any:
        if user_cache.root() is None:
            return compute()
        key = user_cache.key(kind, STORE_FORMAT, user_cache.code_fingerprint(), np.__version__, *parts)
        return user_cache.derived(kind, key, compute, encode, decode)

    return memo.get_or_compute(json.dumps(parts, sort_keys=True), stored)


def _read_only_calibration(cal: Calibration) -> Calibration:
    for a in cal.to_arrays()[1]:  # (the arrays themselves, not copies)
        a.flags.writeable = False  # shared by every CAT built on the reference: a write would be a bug
    return cal


def _reference_calibration(scores: np.ndarray, method: str, irt: IRTSettings) -> Calibration:
    """:func:`_calibrate` of a reference's complete scores, derived once (:func:`_kept`)."""
    return _kept(_FITS, "cat_calibration", (_scores_digest(scores), method, irt.to_dict()),
                 lambda: _read_only_calibration(_calibrate(scores, method, irt)),
                 lambda cal: cal.to_arrays(),
                 lambda entry: _read_only_calibration(Calibration.from_arrays(entry.meta, entry.arrays)))


def _decode_errors(meta: Mapping[str, Any]) -> tuple[float, float, ScoreIntervalCalibration]:
    c, tau2 = meta["c"], meta["tau2"]
    if not (isinstance(c, float) and isinstance(tau2, float) and np.isfinite(c) and c > 0
            and np.isfinite(tau2) and tau2 >= 0):
        raise ValueError("stored CAT reference errors: numbers")
    return c, tau2, ScoreIntervalCalibration.from_dict(meta["interval"])


@takes_settings
def learn_reference_errors(
    scores: np.ndarray,
    *,
    error: tuple[float, float] | None = None,
    method: str = "consistent",
    irt: IRTSettings = IRTSettings(),
    local_error: bool | None = None,
    folds: int = 5,
) -> tuple[float, float, ScoreIntervalCalibration]:
    """(c, τ², the score interval's calibration), all measured on the references playing the target.

    The fold runs of :func:`pseudo_target_errors` (run on to the last of
    :data:`INTERVAL_CHECKPOINTS`) give the error model (c, τ²)
    (:func:`fit_error_model`, unless ``error`` gives it); the best and the
    worst :data:`EDGE_HELD` of the references, calibrated on the references
    beyond a gap of :data:`EDGE_GAP`, play models ``above`` and ``below``
    the rest. Each run is classed as :meth:`ContinuousCAT._outside` would
    class it (:func:`outside_case`; a fold run against every other reference,
    as a real target is classed among all of them), and each factor is
    measured on the runs it is applied to: ``within`` on the runs classed
    within (fold and edge runs alike; with fewer than
    :data:`WITHIN_CLASSED_MIN` of them, on every fold run), ``above``
    (``below``) on that case's edge runs plus the fold runs classed above
    (below). At each checkpoint the factor is
    :func:`~activeeval.irt.continuous.interval_factor` of the runs' score
    errors over the model's score sd (the error model's ability variance —
    raised by the :class:`LocalError` check when ``local_error``, by default
    with the consistent calibration, as in :class:`ContinuousCAT` — times
    slope², plus the unseen items' noise, as in :meth:`ContinuousCAT.estimate`).
    The runs use the response model of ``irt`` (or its fields as flat keywords).
    No target's scores are involved. Derived once per process and kept in the user cache (the result is a
    few numbers; the runs cost about 15 s on IFEval's 426 references): a second ranking or session on the same
    references reads it back.
    """
    local_error = method == "consistent" if local_error is None else bool(local_error)
    given = None if error is None else [float(error[0]), float(error[1])]
    return _kept(_ERRORS, "cat_reference_errors",
                 (_scores_digest(scores), given, method, irt.to_dict(), local_error, int(folds)),
                 lambda: _learn_reference_errors(scores, error, method, irt, local_error, folds),
                 lambda out: ({"c": float(out[0]), "tau2": float(out[1]), "interval": out[2].to_dict()}, ()),
                 lambda entry: _decode_errors(entry.meta))


def _learn_reference_errors(scores: np.ndarray, error: tuple[float, float] | None, method: str, irt: IRTSettings,
                            local_error: bool, folds: int) -> tuple[float, float, ScoreIntervalCalibration]:
    y_raw = np.asarray(scores, dtype=float)
    n_items = y_raw.shape[1]
    c, tau2, runs = _reference_runs(y_raw, error=error, method=method, irt=irt, local_error=local_error, folds=folds)
    checks = tuple(n for n in INTERVAL_CHECKPOINTS if n < n_items)
    # Each factor is measured on the runs it is applied to. A real CAT scales its sd by the within factor while
    # ContinuousCAT._outside classes it "within", by max(within, edge factor) when "above" ("below"). So the within
    # factor comes from the runs the same test classes "within", fold and edge runs alike, and the above (below)
    # factor from the edge runs of that case plus the fold runs classed above (below). Pooling every fold run into
    # the within factor let the fold runs classed outside -- a quarter to a third of them on MuSR, with large errors
    # -- widen every in-range interval (MuSR and ARC-Challenge interpolation covered 0.97-0.99). A fold run is
    # classed against every other reference (_pseudo_runs' class_against_all), as a real target is: against its
    # fold's narrower range more of them were classed outside than real targets are, and the within factor
    # measured on the rest was too small for the targets near the edge (IFEval interpolation at 80 items 0.92).
    # An edge case's factor (and its reach: the furthest its edge runs lay beyond their references) is measured
    # only when at least EDGE_MIN_RUNS edge runs played it, as before; the within factor needs INTERVAL_MIN_RUNS
    # runs, and WITHIN_CLASSED_MIN runs classed within to be measured on them alone.
    factors: dict[str, list[float | None]] = {case: [] for case in ScoreIntervalCalibration.CASES}
    reaches: dict[str, list[float | None]] = {"above": [], "below": []}
    # runs: how many references played each case (the fold runs; the above and the below edge runs), as before
    counts = [len(runs[case][checks[0]]["score_error"]) if checks and checks[0] in runs.get(case, {}) else 0
              for case in ScoreIntervalCalibration.CASES]
    for n in checks:
        pools: dict[str, list[np.ndarray]] = {case: [] for case in ScoreIntervalCalibration.CASES}
        every_fold_run: list[np.ndarray] = []
        for source, got in runs.items():
            rec = got.get(n)
            if rec is None or not rec["score_error"]:
                continue
            z = _standardised(rec, n, n_items, c, tau2, local_error)
            case_of = np.asarray(rec["case"])
            pools["within"].append(z[case_of == "within"])
            if source == "within":
                every_fold_run.append(z)
            for case in reaches:
                if source == case:  # that case's edge runs
                    pools[case].append(z)
                elif source == "within":  # the fold runs classed so
                    pools[case].append(z[case_of == case])
        for case in ScoreIntervalCalibration.CASES:
            if case == "within":
                if sum(p.size for p in pools[case]) < WITHIN_CLASSED_MIN:  # too few classed within: every fold run
                    pools[case] = every_fold_run
                enough = sum(p.size for p in pools[case]) >= INTERVAL_MIN_RUNS
            else:
                edge = runs.get(case, {}).get(n)
                enough = edge is not None and len(edge["score_error"]) >= EDGE_MIN_RUNS
                # the furthest any edge run of this case lay beyond its references: how far out its factor was measured
                side = 0 if case == "above" else 1
                reaches[case].append(float(max(m[side] for m in edge["margin"])) if edge is not None and enough
                                     else None)
            if not enough:
                factors[case].append(None)
                continue
            f = interval_factor(np.concatenate(pools[case]))
            factors[case].append(f if np.isfinite(f) and f > 0 else None)
    interval = ScoreIntervalCalibration(checks, tuple(factors["within"]), tuple(factors["above"]),
                                        tuple(factors["below"]), tuple(counts), local_error,
                                        tuple(reaches["above"]), tuple(reaches["below"]))
    return c, tau2, interval


def default_response(method: str, response: str | None) -> str:
    """The response model: as given, else "2pl" with the consistent calibration and "rasch" with the paper's."""
    if response is None:
        return "2pl" if method == "consistent" else "rasch"
    if response not in RESPONSES:
        raise ConfigurationError(f"response must be 'rasch' or '2pl', got {response!r}")
    return response


@takes_settings
def fit_calibration(
    scores: np.ndarray,
    *,
    method: str = "consistent",
    irt: IRTSettings = IRTSettings(),
    error_model: bool | None = None,
    interval: bool = True,
    local_error: bool | None = None,
) -> Calibration:
    """CAT's calibration on complete reference scores: :func:`irt.calibrate`, the error model and the score interval's.

    ``error_model``: None (default) learns (c, τ²) (:func:`fit_error_model`)
    for the consistent calibration and keeps (1, 0) for the paper's, so
    ``method="paper"`` reproduces the paper; True / False force it on / off.
    ``irt`` (:class:`IRTSettings`, or its fields as flat keywords): the
    response model, its fit and its selection and update; its ``response``
    None (default) is "2pl" for the consistent calibration and
    "rasch" (the paper's one-slope model) for the paper's. ``interval``:
    learn the full-benchmark score interval's calibration (both calibrations;
    it changes no ability, item or ranking decision), for a CAT with
    ``local_error`` as given (None: ContinuousCAT's default). Both come from
    one set of pseudo-target runs (:func:`learn_reference_errors`).
    """
    if method not in CALIBRATION_METHODS:
        raise ConfigurationError(f"calibration must be 'consistent', 'paper' or an irt.Calibration, got {method!r}")
    cal = _reference_calibration(scores, method, irt)
    learn = bool(error_model or (error_model is None and method == "consistent"))
    if learn or interval:
        c, tau2, scores_ = learn_reference_errors(
            scores, error=None if learn else (cal.error_scale, cal.error_floor), method=method, irt=irt,
            local_error=local_error)
        cal = cal.with_error_model(c, tau2).with_interval(scores_ if interval else None)
    return cal


def _ranking_calibration(scores: np.ndarray, options: Mapping[str, Any], *, calibration: str = "consistent",
                         response: str | None = None, local_error: bool | None = None) -> Calibration:
    """The calibration a ranking fits once on the references and shares across its models' CATs
    (:attr:`~activeeval.methods.capabilities.Capabilities.shared_calibration`)."""
    return fit_calibration(scores, method=calibration, irt=IRTSettings(response=response), local_error=local_error,
                           interval=options.get("interval", "calibrated") == "calibrated")


class ContinuousCAT(BaseMethod):
    """Continuous CAT: heteroskedastic normal IRT, max-information selection, Bayesian update.

    The options come in three groups, each a frozen settings object (:mod:`activeeval.settings`) whose
    fields check their values when it is made: ``irt`` (:class:`IRTSettings`: the response model, its fit and
    its selection and update), ``errors`` (:class:`ErrorSettings`: how far off the ability estimate is taken
    to be) and ``prior`` (:class:`PriorSettings`: the ability prior and its grid). Every field is also a flat
    keyword, routed to its group: ``ContinuousCAT(ref, response="rasch", local_error=False)`` is
    ``ContinuousCAT(ref, irt=IRTSettings(response="rasch"), errors=ErrorSettings(local_error=False))``, and
    ``cat[response=rasch,local_error=false]`` and a session's stored options keep working; a flat keyword
    replaces that field of a group given as an object.

    Parameters
    ----------
    reference : ScoreMatrix
        Reference (calibration) models' scores, models x items.
    calibration : {"consistent", "paper"} or irt.Calibration
        ``"consistent"`` (default): abilities, difficulties, prior and noise on
        one scale (:func:`irt.joint_fit`) and an error model learned on
        reference pseudo-targets (:func:`learn_error_model`). ``"paper"``: the
        paper's §5 formulas, unchanged. Or precomputed item parameters for
        exactly these items (:func:`fit_calibration`; the ranker fits one and
        shares it across models).
    irt : IRTSettings
        The response model; its fields (also flat keywords):

        response : {"2pl", "rasch"}, optional
            The response model (with a string ``calibration``): ``"2pl"`` (the
            default with the consistent calibration) gives every item its own
            slope and noise on the consistent ability scale; ``"rasch"`` (the
            paper's, and the default with ``calibration="paper"``) one slope and
            the global noise k.
        scale : {"auto", "minmax", "none"}
            Min–max scaling of metrics that are not in [0, 1] (irt.calibrate).
        clip : float
            Proportion clip before logits (items all references score 0 or 1).
        filter_negative : bool
            Remove negatively discriminating items from the adaptive pool.
        information : {"tilde", "full"}
            Rasch selection criterion: Ĩ = μ(1−μ)/k (paper default) or the full
            Fisher information μ(1−μ)/k + (1−2μ)²/2. (2PL items: (a·μ(1−μ))²/s².)
        likelihood : {"quasi", "normal"}
            Rasch posterior update: the quasi-likelihood matching Ĩ (default; for
            0/1 scores it is the 1PL likelihood tempered by 1/k) or the full normal
            density (matching the full information; degenerate at 0/1 scores).
            (2PL items: the normal density with the item's noise s².)
    errors : ErrorSettings
        The ability's error model; its fields (also flat keywords):

        error_model : bool, optional
            Learn the error model (default: with the consistent calibration only).
        error_scale, error_floor : float, optional
            Set the error model Var(θ̂ − θ*) = error_scale·SE² + error_floor·(N − n)/N
            instead of learning it (a session stores the learned values).
        local_error : bool, optional
            Raise the error model's variance to the references' own error on the
            items this model has taken, where that is larger (:class:`LocalError`).
            Default: on with the consistent calibration, off with the paper's.
    prior : PriorSettings
        The ability prior and its grid; its fields (also flat keywords):

        prior_mean, prior_sd : float, optional
            Prior θ ~ N(θ0, σ0²). Defaults: mean and sd of the reference
            abilities — the population they come from (:func:`default_prior`).
        grid_points : int
            Points of the θ grid on [−12, 12].
    interval : {"calibrated", "model"}
        The full-benchmark score interval of :meth:`estimate`:
        ``"calibrated"`` (default) widens or narrows the model's score sd by
        what the references playing the target have been off by
        (:class:`~activeeval.irt.continuous.ScoreIntervalCalibration`, learned
        by :func:`learn_reference_errors`: each factor on the reference runs
        classed as the target is, :func:`outside_case`), with the factor of
        the best (worst) references when the estimate is above (below) every
        reference, and shows no interval (infinite variance and a note)
        where that could not be measured; an estimate further beyond the
        references than any of them lay when it played the target has that
        factor raised in proportion to its distance over theirs (no interval
        when none of them lay beyond the others at all); ``"model"`` is the
        response model's own interval (before issue 25; it missed the truth).
    interval_calibration : dict, optional
        The learned score interval calibration
        (:meth:`ScoreIntervalCalibration.to_dict`; a session stores it).
    seed, missing
        See :class:`~activeeval.methods.base.BaseMethod`.

    The groups as given are the attributes ``irt``, ``errors`` and ``prior``; ``information``, ``likelihood``,
    ``local_error``, ``prior_mean`` and ``prior_sd`` stay attributes of their own.
    """

    name = "cat"
    capabilities = Capabilities(ranks=True, ranking_scale="theta", rank_seeds="shared",
                                shared_calibration=_ranking_calibration)

    @takes_settings
    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        calibration: Calibration | str = "consistent",
        irt: IRTSettings = IRTSettings(),
        errors: ErrorSettings = ErrorSettings(),
        prior: PriorSettings = PriorSettings(),
        interval: str = "calibrated",
        interval_calibration: dict | ScoreIntervalCalibration | None = None,
        seed: SeedLike = None,
        missing: str = "models",
    ) -> None:
        super().__init__(reference, seed=seed, missing=missing)
        interval = OneOf(*INTERVALS)("interval", interval)
        #: the settings groups as given (the fields read elsewhere are also this object's attributes)
        self.irt, self.errors, self.prior = irt, errors, prior
        self.interval, self.interval_calibration = interval, interval_calibration
        learn_interval = interval == "calibrated" and interval_calibration is None
        # settings as given; fitted or resolved values carry a trailing underscore (calibration_, noise_factor_:
        # the paper's k, prior_mean_, prior_sd_, local_error_)
        self.calibration, self.prior_mean, self.prior_sd, self.local_error = (calibration, prior.prior_mean,
                                                                              prior.prior_sd, errors.local_error)
        error_scale, error_floor, local_error = errors.error_scale, errors.error_floor, errors.local_error
        if isinstance(calibration, str):
            given = error_scale is not None and error_floor is not None
            calibration = fit_calibration(self.reference.scores, method=calibration, irt=irt,
                                          error_model=False if given else errors.error_model,
                                          interval=learn_interval and not given, local_error=local_error)
        elif not isinstance(calibration, Calibration) or calibration.n_items != self.n_items:
            got = calibration.n_items if isinstance(calibration, Calibration) else type(calibration).__name__
            raise ConfigurationError(
                f"calibration must be 'consistent', 'paper' or an irt.Calibration for the reference's "
                f"{self.n_items} items, got {got}; fit it with methods.cat.fit_calibration(reference.scores) "
                "on the same (complete) matrix"
            )
        elif irt.response is not None and irt.response != calibration.response:
            raise ConfigurationError(
                f"response={irt.response!r} but the given calibration is {calibration.response!r}; drop response "
                "or fit the calibration with it"
            )
        if calibration.response == "2pl" and (irt.information != "tilde" or irt.likelihood != "quasi"):
            raise ConfigurationError(
                "information= and likelihood= choose between the Rasch model's criteria; 2PL items have one "
                "(the normal likelihood with each item's noise): use response='rasch' for them"
            )
        if error_scale is not None or error_floor is not None:
            calibration = calibration.with_error_model(
                calibration.error_scale if error_scale is None else error_scale,
                calibration.error_floor if error_floor is None else error_floor)
        self.local_error_ = calibration.method == "consistent" if local_error is None else local_error
        if interval_calibration is not None:
            calibration = calibration.with_interval(interval_calibration)
        if interval == "calibrated" and (calibration.interval is None
                                         or calibration.interval.local_error != self.local_error_):
            # the error model given (a session's, or a calibration fitted without the interval or for the other
            # local_error setting): learn the interval's calibration for this method
            calibration = calibration.with_interval(learn_reference_errors(
                self.reference.scores, error=(calibration.error_scale, calibration.error_floor),
                method=calibration.method, irt=irt.replace(response=calibration.response),
                local_error=self.local_error_)[2])
        self.calibration_ = calibration
        self.noise_factor_ = float(calibration.k)
        self.information = irt.information
        self.likelihood = irt.likelihood
        self.prior_mean_, self.prior_sd_ = default_prior(calibration, prior.prior_mean, prior.prior_sd)
        self._ability = AbilityPosterior(calibration, self.prior_mean_, self.prior_sd_, information=irt.information,
                                         likelihood=irt.likelihood, grid_points=prior.grid_points)
        self.grid = self._ability.grid
        self._local = (LocalError(calibration, self.reference.scores, self.grid, self.prior_mean_, self.prior_sd_,
                                  irt.likelihood) if self.local_error_ else None)
        self._var_cache: tuple[int, float] | None = None

        # Score-scale prediction: raw s_i = low_i + width_i·y_i; sums over all items at each grid θ.
        self._sum_low = float(calibration.low.sum())
        self._t1, self._t2 = _score_sums(calibration, self.grid)  # Σ_i width_i μ_i(θ); Σ_i width_i² Var_i(θ)
        self._obs_low = 0.0
        self._obs_sum_raw = 0.0
        means = self.reference.scores.mean(axis=1)
        self._reference_range = (float(means.min()), float(means.max()))
        self._reference_seen = np.zeros(self.reference.n_models)  # each reference's score sum on the items seen

    # ---------------------------------------------------------------- maths
    def _update(self, item: int, score: float) -> None:
        cal = self.calibration_
        self._ability.update(item, float(cal.scale(score, item)))
        if self._local is not None:
            self._local.update(item)
        self._var_cache = None
        mu = cal.item_mean(self.grid, item)
        w = float(cal.width[item])
        self._t1 -= w * mu
        self._t2 -= w * w * cal.item_var(mu, item)
        self._obs_low += float(cal.low[item])
        self._obs_sum_raw += float(score)
        self._reference_seen += self.reference.scores[:, item]

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        skip = set(int(i) for i in exclude)
        chosen = self._ability.nearest(k, skip)
        if len(chosen) < k:
            # Pool exhausted (or all excluded): fall back to random unobserved items outside it.
            rest = np.ones(self.n_items, dtype=bool)
            rest[self._observed] = False
            rest[list(skip | set(chosen))] = False
            extra = rng.choice(np.flatnonzero(rest), size=k - len(chosen), replace=False)
            chosen.extend(int(i) for i in extra)
        return chosen

    def _current_estimate(self) -> Estimate:
        n = self.n_items
        bounds = self._bounds()
        if self.n_observed >= n:
            return Estimate(mean=self._obs_sum_raw / n, var=0.0, n_observed=n, n_items=n, bounds=bounds)
        # Predicted benchmark score at each grid θ: observed raw scores + predicted unobserved ones.
        r = (self._obs_sum_raw + (self._sum_low - self._obs_low) + self._t1) / n
        p = self._ability.post
        if self.interval == "model":
            mean = float(p @ r)
            # The θ part of the variance follows the ability's error model (×1 for the paper's calibration).
            inflate = self._ability_var() / self._ability.var if self._ability.var > 0 else 1.0
            var = inflate * float(p @ (r - mean) ** 2) + float(p @ np.maximum(self._t2, 0.0)) / (n * n)
            return Estimate(mean=mean, var=var, n_observed=self.n_observed, n_items=n, bounds=bounds)
        mean, _, slope2, noise = score_moments(p, self.grid, r, self._t2, n)
        factor, notes = self._interval_factor(mean)
        var = math.inf if factor is None else factor * factor * (self._ability_var() * slope2 + noise)
        return Estimate(mean=mean, var=var, n_observed=self.n_observed, n_items=n, bounds=bounds, notes=notes)

    def _outside(self, mean: float) -> str:
        """"above" ("below") when the estimate is above (below) every reference's score, or the target scored
        above (below) every reference on the items it took; else "within".

        The second test catches what the first cannot: an estimate pulled into the references' range by the
        prior and the response model for a model far above them (mmlu_pro extrapolation, 6 references: the
        interval covered 36-57 % of the best models without it, docs/BENCHMARKS.md).
        """
        return outside_case(mean, self._obs_sum_raw, self._reference_seen, self.n_observed,
                            *self._reference_range)

    def _margin(self, mean: float) -> tuple[float, float]:
        """(above, below): how far the target lies beyond the best (worst) reference (:func:`outside_margin`)."""
        return outside_margin(mean, self._obs_sum_raw, self._reference_seen, self.n_observed, *self._reference_range)

    def _interval_factor(self, mean: float) -> tuple[float | None, tuple[str, ...]]:
        """The score sd's factor for an estimate ``mean`` after the items so far (None: no interval), and notes."""
        cal = self.calibration_.interval
        case = self._outside(mean)
        factor = cal.factor(self.n_observed, "within") if cal is not None else None
        if factor is not None and cal is not None and case != "within":  # (factor is None without cal)
            # never narrower than inside the references: the edge runs are few and nearer than a real outlier
            edge = cal.factor(self.n_observed, case)
            factor = None if edge is None else max(factor, edge)
        further: tuple[str, ...] = ()
        measured = factor
        if factor is not None and cal is not None and case != "within":
            reach = cal.reach(self.n_observed, case)
            margin = self._margin(mean)[0 if case == "above" else 1]
            if reach is not None and margin > reach:
                # Further out than any reference lay when it played the target: its factor was never measured
                # there. On IFEval extrapolation the best models lie a median 1.4-1.6 times as far beyond the
                # references as the edge runs reach, and their errors at 40-80 items were 1.5 times what the edge
                # factor allows (coverage 0.79-0.81); the error is taken to grow in proportion to the distance:
                # f · margin / reach.
                where = "best" if case == "above" else "worst"
                lead = (f"the target lies {margin:.3g} beyond the {where} reference's score (its estimate, or its mean "
                        f"score on the items it took), further than any reference lay beyond the others when it "
                        f"played the target ({reach:.3g} after as many items)")
                if reach > 0:
                    factor *= margin / reach
                    further = (f"{lead}: the interval is widened in proportion, x{margin / reach:.2f}, to "
                               f"x{factor:.2f} the model's sd",)
                else:
                    return None, (f"no interval: {lead}, so how far off such an estimate can be was never measured; "
                                  "the estimate rests on the response model alone",)
        if factor is None:
            if case == "within":
                why = "too few references to measure how far off CAT's estimates are"
            else:
                why = (f"the target is {case} every reference (its estimate, or its score on the items it took) and "
                       f"too few references were {case} the others to measure how far off such an estimate can be")
            return None, (f"no interval: {why}; the estimate rests on the response model alone",)
        if case == "within":
            return factor, ()
        return factor, (
            f"the target is {case} every reference (its estimate, or its score on the items it took): the interval "
            f"is as wide as the {'best' if case == 'above' else 'worst'} references' own errors were when they played "
            f"a model {case} the rest, never narrower than inside them (x{measured:.2f} the model's sd)", *further)

    def frozen_options(self) -> dict:
        """The learned error model and interval calibration, so that a session reopens without the pseudo-target
        runs."""
        cal = self.calibration_
        out: dict[str, Any] = {"error_scale": cal.error_scale, "error_floor": cal.error_floor}
        if cal.interval is not None:
            out["interval_calibration"] = cal.interval.to_dict()
        return out

    # -------------------------------------------------------------- public
    @property
    def theta(self) -> float:
        """θ̂, the posterior mean of the ability."""
        return self._ability.mean

    @property
    def se(self) -> float:
        """SE(θ̂), the posterior sd of the ability."""
        return float(np.sqrt(self._ability.var))

    def _ability_var(self) -> float:
        """c·SE² + τ²·(N − n)/N (the error model, whose floor vanishes as every item gets seen), raised
        to the references' local error on these items with ``local_error`` (:class:`LocalError`)."""
        if self._var_cache is not None and self._var_cache[0] == self.n_observed:
            return self._var_cache[1]
        cal = self.calibration_
        var = cal.error_scale * self._ability.var + cal.error_floor * (self.n_items - self.n_observed) / self.n_items
        if self._local is not None and self.n_observed > 0:
            var = self._local.variance(self._ability.mean, var)
        self._var_cache = (self.n_observed, var)
        return var

    def ability(self) -> Estimate:
        """θ̂ and the variance of its error, as an :class:`Estimate` (unbounded; what the ranker uses).

        The variance is the posterior's SE² under the paper's calibration and
        the learned error model c·SE² + τ²·(N − n)/N under the consistent one
        (:func:`learn_error_model`); :attr:`se` stays the posterior sd.
        """
        return Estimate(mean=self._ability.mean, var=self._ability_var(), n_observed=self.n_observed,
                        n_items=self.n_items)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(grid, probabilities) of the θ posterior."""
        return self.grid.copy(), self._ability.post.copy()

    def fisher_se(self) -> float:
        """Paper §3 SE = 1/√(1/σ0² + Σ_i I_i(θ̂)) over the observed items (information as configured)."""
        items = np.asarray(self._items, dtype=int)
        info = self.item_information()[items]
        return float(1.0 / np.sqrt(1.0 / self.prior_sd_**2 + float(np.sum(info))))

    def item_information(self, theta: float | None = None) -> np.ndarray:
        """Information of every item at θ (default θ̂), ndarray of shape (n_items,)."""
        t = self._ability.mean if theta is None else theta
        if self._ability.two_pl:
            return self._ability.information(t)
        return fisher_information(t, self.calibration_.b, self.noise_factor_, self.information == "full")

