"""How many items a run will cost, before it starts: the references playing the target.

tinyBenchmarks evaluates a fixed 100 items; BayesAME stops when its interval
is narrow and its estimate steady, so its cost depends on the model. The
forecast plays reference models as the target, the way the default's
calibration does (:func:`activeeval.gp.prior.calibrate`): the
references are split into folds (a tenth of them each, or a fifth beyond 100
models), each fold's models are pseudo-targets and the other folds' models
their references (folds are played until 30 pseudo-targets have run), and
the default BayesAME plays every pseudo-target of the fold at once with the
run's own kernel (its four hyperparameters, fitted on all the references),
calibration (its factor at each n/N), random start, options and stopping rule. While its estimate is
model-based the method chooses items without looking at the scores, so the
pseudo-targets share the design and the posterior covariance and one pass
costs about one run. Each pseudo-target stops where a run on it would
(window, stability, width, budget, or every item); the forecast is the median
and the 10 % and 90 % quantiles of those stops. (The calibration refits the
kernel per fold; the forecast does not: the run uses the full fit, and the
forecast is the run's method exactly.)

Two approximations, both checked against real runs by
``benchmarks/forecast_check.py`` (docs/benchmarks/history.md, "Cost forecast"):

* a pseudo-target found outside the references (the design-based switch)
  leaves the shared pass; it is counted as running to the end (every item,
  or the budget), which is where such runs mostly go;
* on a large benchmark a pass would cost B·n²/2 (B buckets, n items): it is
  cut at :data:`WORK` and each pseudo-target's interval width is extrapolated
  from there by a power law in n (the stability condition is then assumed
  met; ``Forecast.extrapolated_from`` says so).

Only the BayesAME methods (``bayesame``, ``bayesame-rs`` and their options)
are forecast; :func:`supported` says whether a method is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from activeeval.exceptions import ConfigurationError
from activeeval.stopping import DEFAULT_EPSILON1, DEFAULT_EPSILON2, DEFAULT_WINDOW

__all__ = [
    "AUTO_WORK",
    "MIN_PSEUDO",
    "WORK",
    "Forecast",
    "break_even",
    "forecast_items",
    "forecast_session",
    "session_method",
    "supported",
]

#: Pseudo-targets wanted: folds are played until this many (or every reference model) have run.
MIN_PSEUDO = 30
#: Largest B·n²/2 (buckets × items² / 2, the flops of one pass up to n) a pass may cost before it extrapolates.
WORK = 2.0e9
#: The work the commands spend on a forecast unless asked for more (``--forecast``): about a few seconds. Counted
#: in the same units: B²·K to build each fold's method, B·n for each item of a pass; deterministic, not timed.
AUTO_WORK = 3.0e9
#: Folds of the references: with fewer than ``MANY`` models a tenth of them are held out at a time, so the pseudo-
#: targets' references differ from the run's by 10 %, not 20 % (docs/benchmarks/history.md, "Cost forecast": it
#: matters on HELM's 83 models).
FOLDS, FOLDS_FEW, MANY = 5, 10, 100
QUANTILES = (10, 50, 90)


@dataclass(frozen=True)
class Forecast:
    """Items a run will take, from reference models playing the target.

    Attributes
    ----------
    n_items : int
        N, the benchmark's items.
    median, low, high : int
        Median and the 10 % and 90 % quantiles of the items at the stop (the 80 % range: the values at ranks
        0.1 (n + 1) and 0.9 (n + 1) of the n pseudo-targets' stops, so a new run falls inside with probability 80 %).
    n_pseudo : int
        Pseudo-targets played.
    stops : tuple of int
        Each pseudo-target's items at the stop.
    reasons : dict
        How many stopped by "precision", "budget", "exhausted" (every item), or were found outside the
        references ("outside": counted as running to the end).
    max_items : int or None
        The budget the forecast was made for.
    width_at_budget : (float, float, float) or None
        With a budget, the 95 % interval width at ``max_items`` items: median, 10 % and 90 % quantiles (over
        the pseudo-targets still model-based there).
    extrapolated_from : int or None
        The pass stopped at this n (:data:`WORK`); later stops are extrapolated from the interval width.
    work : float
        The work the forecast counted, as :data:`AUTO_WORK` counts it (the commands make it by default up to that).
    """

    n_items: int
    median: int
    low: int
    high: int
    n_pseudo: int
    stops: tuple[int, ...]
    reasons: dict[str, int]
    max_items: int | None = None
    width_at_budget: tuple[float, float, float] | None = None
    extrapolated_from: int | None = None
    work: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["stops"] = list(self.stops)
        out["width_at_budget"] = None if self.width_at_budget is None else list(self.width_at_budget)
        return out


def supported(method: Any) -> bool:
    """Whether :func:`forecast_items` can forecast ``method`` (a BayesAME method; not ``selection="sampled"``,
    whose estimate is never the model's that the forecast plays)."""
    from activeeval.methods.bayesame import BayesAME

    return isinstance(method, BayesAME) and method.selection != "sampled"


def break_even(n_models: int, n_items: int, adaptive: float) -> int | None:
    """Models to evaluate before a reference of ``n_models`` × ``n_items`` pays for itself (None: never).

    The reference cost ``n_models · n_items`` item evaluations once; each model evaluated adaptively saves
    ``n_items − adaptive`` of them (continuous-CAT paper, App. C).
    """
    saved = n_items - adaptive
    return None if saved <= 0 else math.ceil(n_models * n_items / saved)


def session_method(session: Any) -> Any:
    """The method a session's forecast plays (each target's, in a session of several run independently), or None
    when it is not one :func:`supported`."""
    from activeeval.methods.multi import Independent

    method = session.method
    if isinstance(method, Independent) and method.methods_:  # each target runs the same method and rule
        method = method.methods_[0]
    return method if supported(method) else None


def forecast_session(session: Any, progress: Callable[[int, int], None] | None = None,
                     max_work: float | None = None) -> Forecast | None:
    """:func:`forecast_items` for a session's method and the stopping rule in force (None if not supported, or if
    it would cost more than ``max_work``)."""
    method = session_method(session)
    if method is None:
        return None
    return forecast_items(method, **session.stopping_settings, progress=progress, max_work=max_work)


def forecast_items(
    method: Any, epsilon1: float = DEFAULT_EPSILON1, epsilon2: float = DEFAULT_EPSILON2, window: int = DEFAULT_WINDOW,
    max_items: int | None = None,
    *, progress: Callable[[int, int], None] | None = None, max_work: float | None = None,
) -> Forecast | None:
    """Forecast the items a run of ``method`` (a BayesAME, not yet observed) takes under this stopping rule.

    Deterministic given the method's seed. ``progress(pass, passes)`` is told as each pass starts. With
    ``max_work`` (units of :data:`AUTO_WORK`), None once the forecast would cost more: checked before the
    folds' methods are built, and item by item during the passes. See the module docstring for how.
    A complete forecast is kept in the user cache (:mod:`activeeval.user_cache`; JSON, checked when read), keyed by
    everything it is computed from, the seed among them: a second session with the same seed and rule on the same
    reference reads it (``progress`` is then not told anything).
    """
    if not supported(method):
        raise ConfigurationError(f"no cost forecast for method {getattr(method, 'name', method)!r}; forecasts are "
                                 "made for bayesame (and bayesame-rs), except with selection='sampled'")
    from activeeval import user_cache

    rule = (float(epsilon1), float(epsilon2), int(window), None if max_items is None else int(max_items))
    key = _stored_key(method, rule) if user_cache.root() is not None else None
    if key is not None:
        entry = user_cache.load("forecast", key)
        stored = _from_stored(entry.meta, method.reference.n_items, rule[3]) if entry is not None else None
        if stored is not None:  # a complete forecast: None where it cost more than this call may spend
            return stored if max_work is None or stored.work <= max_work else None
    f = _forecast_items(method, *rule, progress=progress, max_work=max_work)
    if f is not None and key is not None:
        user_cache.store("forecast", key, f.to_dict())
    return f


#: Layout of the forecasts kept in the user cache; raise it when a field changes meaning.
STORE_FORMAT = 1


def _stored_key(method: Any, rule: tuple) -> str:
    """The user-cache key of a forecast: everything :func:`_forecast_items` reads. The reference's content, the
    method's fit, calibration, options and seed (the folds and every pass's items follow it: the forecast is the
    reference's and the settings' only for one seed), the stopping rule, the layout, the code and NumPy's version.
    """
    from activeeval import user_cache

    ref = method.reference
    options = {"fit": method.fit_.to_dict(), "calibration": method.calibration_.to_dict(),
               **_played_options(method), "tolerance_": method.tolerance_, "seed": int(method.seed_),
               "class": type(method).__name__}
    return user_cache.key("forecast", STORE_FORMAT, user_cache.code_fingerprint(), np.__version__, ref.fingerprint(),
                          ref.n_models, ref.n_items, options, list(rule))


def _played_options(method: Any) -> dict[str, Any]:
    """The options of ``method`` that the forecast's fold methods are built with (besides its seed, fit and
    calibration): one list, so the stored forecast's key (:func:`_stored_key`) holds every one of them."""
    return {"calibrate_by": method.calibrate_by, "selection": method.selection,
            "extrapolation": method.extrapolation, "switch_until": method.switch_until,
            "scale_prior": method.scale_prior, "controls": method.controls, "warmup": method.warmup,
            "tolerance": method.tolerance, "switch_z": method.switch_z,
            "sample_by": method.design.sample_by, "sample_uniform": method.design.sample_uniform}


def _from_stored(meta: dict[str, Any], n_items: int, max_items: int | None) -> Forecast | None:
    """The stored forecast, or None when any field is not what a forecast of this reference holds (derived anew)."""
    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    try:
        stops, reasons, width = meta["stops"], meta["reasons"], meta["width_at_budget"]
        ok = (set(meta) == set(Forecast.__dataclass_fields__) and meta["n_items"] == n_items
              and meta["max_items"] == max_items
              and all(whole(meta[k]) and 0 <= meta[k] <= n_items for k in ("median", "low", "high"))
              and isinstance(stops, list) and all(whole(v) and 0 <= v <= n_items for v in stops)
              and whole(meta["n_pseudo"]) and meta["n_pseudo"] == len(stops) > 0
              and isinstance(reasons, dict) and all(isinstance(k, str) and whole(v) for k, v in reasons.items())
              and sum(reasons.values()) == len(stops)
              and (width is None or (isinstance(width, list) and len(width) == 3 and all(map(number, width))))
              and (meta["extrapolated_from"] is None or whole(meta["extrapolated_from"]))
              and number(meta["work"]) and meta["work"] >= 0)
    except (KeyError, TypeError):
        ok = False
    if not ok:
        return None
    return Forecast(**{**meta, "stops": tuple(stops), "reasons": dict(reasons),
                       "width_at_budget": None if width is None else tuple(float(w) for w in width),
                       "work": float(meta["work"])})


def _forecast_items(
    method: Any, epsilon1: float, epsilon2: float, window: int, max_items: int | None,
    *, progress: Callable[[int, int], None] | None, max_work: float | None,
) -> Forecast | None:
    """:func:`forecast_items`, computed."""
    ref = method.reference
    k_refs = ref.n_models
    groups = [g for g in _folds(k_refs, method.seed_) if g.size and k_refs - g.size >= 2]
    sizes = np.cumsum([g.size for g in groups])
    groups = groups[: int(np.searchsorted(sizes, MIN_PSEUDO)) + 1]  # enough folds for MIN_PSEUDO pseudo-targets
    work = _Work(max_work)
    if not work.spend(sum(float(method.n_buckets) ** 2 * (k_refs - g.size) for g in groups)):
        return None  # building the folds' methods alone would cost more
    stops: list[int] = []
    reasons: dict[str, int] = {}
    widths: list[np.ndarray] = []
    extrapolated: int | None = None
    for i, group in enumerate(groups):
        if progress is not None:
            progress(i + 1, len(groups))
        keep = np.setdiff1d(np.arange(k_refs), group)
        ref_g = ref.select_models([ref.model_ids[j] for j in keep])
        played = _play(method, ref_g, ref.scores[group], epsilon1, epsilon2, int(window), max_items, work)
        if played is None:
            return None
        stops.extend(played.stops)
        for r in played.reasons:
            reasons[r] = reasons.get(r, 0) + 1
        if played.width_at_budget is not None:
            widths.append(played.width_at_budget)
        if played.cut is not None:
            extrapolated = played.cut
    if not stops:
        raise ConfigurationError(f"a cost forecast needs at least 3 reference models; the reference has {k_refs}")
    # Ranks p(n + 1) ("weibull"): a new run falls in [10 %, 90 %] of n exchangeable pseudo-runs with probability
    # 80 % exactly; the plain sample quantiles' range holds a new run less often (about 76 % for n = 35).
    lo, mid, hi = (int(round(q)) for q in np.percentile(stops, QUANTILES, method="weibull"))
    width = None
    if widths:
        w = np.concatenate(widths)
        w = w[np.isfinite(w)]
        if w.size:
            width = tuple(float(x) for x in np.percentile(w, (50, 10, 90)))
    return Forecast(n_items=int(ref.n_items), median=mid, low=lo, high=hi, n_pseudo=len(stops), stops=tuple(stops),
                    reasons=reasons, max_items=max_items, width_at_budget=width,  # type: ignore[arg-type]
                    extrapolated_from=extrapolated, work=work.spent)


class _Work:
    """Work spent so far against a limit (None: none)."""

    def __init__(self, limit: float | None) -> None:
        self.limit, self.spent = limit, 0.0

    def spend(self, units: float) -> bool:
        """Count ``units``; False once the total is over the limit."""
        self.spent += units
        return self.limit is None or self.spent <= self.limit


def _folds(k_refs: int, seed: int) -> list[np.ndarray]:
    """The reference models in folds, at random (a tenth each below ``MANY`` models, else a fifth)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0xF0C]))
    return np.array_split(rng.permutation(k_refs), min(FOLDS if k_refs >= MANY else FOLDS_FEW, k_refs))


@dataclass
class _Played:
    stops: list[int]
    reasons: list[str]
    width_at_budget: np.ndarray | None
    cut: int | None


def _play(method: Any, ref: Any, truths: np.ndarray, epsilon1: float, epsilon2: float, window: int,
          max_items: int | None, work: _Work) -> _Played | None:
    """Play ``truths`` (T pseudo-targets × N) at once with ``method``'s kernel and settings on reference ``ref``
    (None once ``work`` is over its limit)."""
    from activeeval.gaussian import BucketPosterior
    from activeeval.methods.bayesame import (
        SCALE_SKIP,
        SCALE_SWITCH,
        Z95,
        BayesAME,
        beyond_every_reference,
        estimate_beyond,
    )

    m = BayesAME(ref, seed=method.seed_, hyperparameters=method.fit_, calibration=method.calibration_,
                 **_played_options(method))
    one = m.posterior
    n_t = truths.shape[0]
    post = BucketPosterior(one.prior_mean, one.prior_col, one.prior_diag, one.prior_cov_counts, one.counts,
                           one.noise, n_targets=n_t)
    post.prior_cols = one.prior_cols
    m.posterior = post  # the shared covariance drives the selection, as in the calibration
    n_all = m.n_items
    budget = n_all if max_items is None else min(int(max_items), n_all)
    cap = int(math.sqrt(2.0 * WORK / max(m.n_buckets, 1)))
    end = min(budget, max(cap, window + 2))
    switching = m.extrapolation != "off" and m.selection != "active"
    lo_r, hi_r = m.reference_range
    low, high = m.reference.score_range if m.reference.score_range is not None else (-np.inf, np.inf)
    z2, total, total_sq = np.zeros(n_t), np.zeros(n_t), np.zeros(n_t)
    ref_scores = ref.scores
    ref_sum, ref_sq = np.zeros(ref_scores.shape[0]), np.zeros(ref_scores.shape[0])
    cross = np.zeros((n_t, ref_scores.shape[0]))
    running = np.ones(n_t, dtype=bool)  # model-based and not stopped
    stop = np.full(n_t, -1)
    reason = np.array([""] * n_t, dtype=object)
    means = np.empty((window, n_t))
    width_hist = np.empty((end, n_t))
    width_at_budget = None
    n = 0
    for n in range(1, end + 1):
        if not work.spend(float(m.n_buckets) * n):  # the rank-one update and the selection, O(B·n)
            return None
        rng = np.random.default_rng([m.seed_, n - 1])
        (item,) = m._draw(rng, 1, ())[0] if m._randomised_draw else m._select(rng, 1, ())  # no draw registered
        b = int(m.buckets.of_item[item])
        innovation, d = post.observe(b, truths[:, item])
        if n - 1 >= SCALE_SKIP:
            z2 += innovation**2 / d
        scores = truths[:, item]
        total += scores
        total_sq += scores * scores
        col = ref_scores[:, item]
        ref_sum += col
        ref_sq += col * col
        cross += np.outer(scores, col)
        m._observed[item] = True
        m._items.append(item)  # the method's count: its random start, and its calibration factor at n/N
        scale = (m.scale_prior + z2) / (m.scale_prior + max(n - SCALE_SKIP, 0))
        root = np.sqrt(scale * post.var_r_scaled())
        sd = m.calibration_factor * root / n_all
        mean = (total + post.remaining @ post.mean) / n_all
        if switching and n < n_all and n <= m.switch_until_:
            sd_switch = m.switch_factor * root / n_all  # what the switch tests read (the pooled factor under "capped")
            outside = (mean - Z95 * sd_switch > hi_r) | (mean + Z95 * sd_switch < lo_r)
            if n >= 2 * SCALE_SKIP:
                outside |= beyond_every_reference(n, total[:, None], total_sq[:, None], ref_sum, ref_sq, cross)
                outside |= scale > SCALE_SWITCH
            outside |= estimate_beyond(n, mean, sd_switch, lo_r, hi_r, m.switch_z)
            left = running & outside
            stop[left], reason[left] = budget, "outside"  # design-based from here: counted as running to the end
            running &= ~outside
        mean = np.clip(mean, (total + low * (n_all - n)) / n_all, (total + high * (n_all - n)) / n_all)
        means[(n - 1) % window] = mean
        width = 2.0 * Z95 * sd
        width_hist[n - 1] = width
        if n >= window:
            steady = means.max(axis=0) - means.min(axis=0) <= epsilon1
            done = running & steady & (width <= epsilon2)
            stop[done], reason[done] = n, "precision"
            running &= ~done
        if n == budget:
            if max_items is not None:
                width_at_budget = np.where(reason != "outside", width, np.nan)
            last = "exhausted" if budget == n_all else "budget"
            stop[running], reason[running] = n, last
            running[:] = False
        if not running.any() and (max_items is None or n == budget):
            break
    cut = None
    if n < budget and (running.any() or max_items is not None):
        # the pass was cut (WORK): extrapolate each target's interval width by a power law in n
        cut = n
        half = np.arange(max(n // 2, 1), n + 1)
        model_based = reason != "outside"
        slope, icpt = np.polyfit(np.log(half), np.log(width_hist[half - 1][:, model_based]), 1)
        fits = dict(zip(np.flatnonzero(model_based), zip(slope, icpt, strict=True), strict=True))
        if max_items is not None:
            width_at_budget = np.full(n_t, np.nan)
            for t, (b1, b0) in fits.items():
                width_at_budget[t] = math.exp(b0 + b1 * math.log(budget))
        for t in np.flatnonzero(running):
            b1, b0 = fits[t]
            at = math.exp((math.log(epsilon2) - b0) / b1) if b1 < 0 else math.inf
            stop[t] = int(min(max(math.ceil(at), n + 1), budget))
            reason[t] = "precision" if at <= budget else ("exhausted" if budget == n_all else "budget")
    return _Played([int(s) for s in stop], [str(r) for r in reason], width_at_budget, cut)
