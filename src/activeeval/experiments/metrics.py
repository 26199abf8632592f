"""Backtest metrics (BayesAME paper §5, SPEC.md §5), as pure functions on arrays.

Shapes: ``means`` and ``vars`` are ndarrays of shape (n_targets, n_seeds,
n_items) — the estimate R̂ and Var_R after n = 1..N observed items (index
n − 1) — for one method; ``truth`` has shape (n_targets,) (R* of each target).
"""

from __future__ import annotations

import functools
import math
import operator
from statistics import NormalDist

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = [
    "chance_flagged",
    "coverage_curve",
    "coverage_tails",
    "covered",
    "ew_irmse",
    "rmse_curve",
    "rmse_gain_db",
    "spearman_across_targets",
    "standardised_errors",
    "stop_indices",
]


def rmse_curve(means: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """RMSE(n): per target over seeds, then averaged over targets; shape (n_items,)."""
    err = means - truth[:, None, None]
    return np.sqrt(np.mean(err**2, axis=1)).mean(axis=0)


def rmse_gain_db(rmse: np.ndarray, rmse_baseline: np.ndarray) -> np.ndarray:
    """RMSE Gain = 20 log10(RMSE_RS-Mean / RMSE_method) in dB; NaN where either RMSE is 0."""
    rmse = np.asarray(rmse, dtype=float)
    base = np.asarray(rmse_baseline, dtype=float)
    out = np.full(np.broadcast(rmse, base).shape, np.nan)
    ok = (rmse > 0) & (base > 0)
    out[ok] = 20.0 * np.log10(np.broadcast_to(base, out.shape)[ok] / np.broadcast_to(rmse, out.shape)[ok])
    return out


def ew_irmse(rmse: np.ndarray) -> float:
    """Evaluation-Weighted Integrated RMSE = 100 ∫₀¹ x · (100 · RMSE(x)) dx.

    x = n/N, trapezoid rule over n = 1..N (``rmse`` of shape (N,), index n − 1).
    """
    n_items = rmse.shape[-1]
    x = np.arange(1, n_items + 1) / n_items
    return float(100.0 * np.trapezoid(x * 100.0 * rmse, x))


def covered(means: np.ndarray, vars_: np.ndarray, truth: np.ndarray, level: float = 0.95,
            shifts: np.ndarray | None = None) -> np.ndarray:
    """Whether R* lies in the ``level`` normal interval R̂ + z·shift ± z·sd (boolean, same shape as ``means``).

    ``shifts`` (:attr:`~activeeval.methods.estimate.Estimate.shift`, same
    shape as ``means``; None: 0, the central interval R̂ ± z·sd) moves an
    interval whose two sides differ in length. Clipping the interval to the
    score range (as :meth:`Estimate.ci` does) cannot change this, since R*
    lies in the range. A zero-width interval covers only an exact estimate
    (a relative tolerance of 1e-12 absorbs the round-off of a running sum).
    """
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    half = z * np.sqrt(np.maximum(vars_, 0.0))
    t = truth.reshape(truth.shape + (1,) * (means.ndim - truth.ndim))
    centre = means if shifts is None else means + z * shifts
    return np.abs(centre - t) <= half + 1e-12 * np.maximum(1.0, np.abs(t))


def coverage_tails(covered: int, runs: int, level: float = 0.95) -> tuple[float, float]:
    """How surely a coverage of ``covered`` in ``runs`` runs is off ``level``: (P(X ≤ covered), P(X ≥ covered)).

    X ~ Binomial(runs, level), the count an exact ``level`` interval covers
    over ``runs`` independent runs; the first tail small says the interval
    covers less than ``level``, the second more (SciPy's binomial CDF, for
    any number of runs). Runs that share a reference draw or a seed are not
    quite independent, so the tails are a lens on a table of cells, not a
    test of one.
    """
    from scipy.special import bdtr, bdtrc  # the binomial CDF and survival function, without scipy.stats' import

    covered, runs = operator.index(covered), operator.index(runs)
    if runs < 1 or not 0 <= covered <= runs:
        raise ValueError(f"covered must lie in [0, runs] and runs be at least 1; got covered={covered}, runs={runs}")
    if not 0.0 < float(level) < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1; got {level}")
    low = float(bdtr(covered, runs, level))
    high = 1.0 if covered == 0 else float(bdtrc(covered - 1, runs, level))
    return low, high


@functools.lru_cache(maxsize=64)  # a table asks it once per cell, with a handful of run counts
def chance_flagged(runs: int, alpha: float, level: float = 0.95) -> tuple[float, float]:
    """(P(a cell is flagged below), P(flagged above)) for an exact ``level`` interval over ``runs`` independent runs,
    where :func:`coverage_tails` flags a cell whose tail is below ``alpha`` (the binomial's discreteness makes each
    at most ``alpha``, often much less)."""
    tails = [coverage_tails(k, runs, level) for k in range(runs + 1)]
    below = max((low for low, _ in tails if low < alpha), default=0.0)
    above = max((high for _, high in tails if high < alpha), default=0.0)
    return below, above


def standardised_errors(means: np.ndarray, vars_: np.ndarray, truth: np.ndarray,
                        shifts: np.ndarray | None = None) -> np.ndarray:
    """|R̂ − R*| over the standard deviation of the interval's side R* is on: sd − shift below R̂, sd + shift
    above it (sd alone when ``shifts`` is None). R* is in the ``level`` interval exactly when this is at most its
    z; a confident miss is one beyond 3. A zero side gives inf (0 where R̂ = R*)."""
    sd = np.sqrt(np.maximum(vars_, 0.0))
    t = truth.reshape(truth.shape + (1,) * (means.ndim - truth.ndim))
    err = means - t
    side = sd if shifts is None else np.where(err > 0, sd - shifts, sd + shifts)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(err == 0, 0.0, np.abs(err) / np.maximum(side, 0.0))


def coverage_curve(means: np.ndarray, vars_: np.ndarray, truth: np.ndarray, level: float = 0.95,
                   shifts: np.ndarray | None = None) -> np.ndarray:
    """Realised coverage at each n, over targets and seeds; shape (n_items,)."""
    return covered(means, vars_, truth, level, shifts).mean(axis=(0, 1))


def stop_indices(
    means: np.ndarray, vars_: np.ndarray, epsilon1: float, epsilon2: float, window: int, level: float = 0.95,
    batch_size: int = 1,
) -> np.ndarray:
    """n at which Algorithm 1 stops, for every run (shape ``means.shape[:-1]``, values in 1..N).

    Stop at the first n ≥ W with max − min of R̂ over the last W steps ≤ ε1 and
    2·z·sd ≤ ε2 (exactly :class:`~activeeval.stopping.WindowCIRule`); N if
    never. Valid because no method's selection depends on ε1 or ε2, so one
    full trajectory gives the stop of every ε2.

    With ``batch_size`` K > 1 (runs played in myopic batches of K) the rule
    is read only at the ends of batches, n = K, 2K, …, N, over a window of
    ⌈W / K⌉ batches (App. C.1: W = 30/|A| when batches are evaluated), so
    the window still spans about W items.
    """
    n_items = means.shape[-1]
    if batch_size > 1:
        ends = np.unique(np.minimum(np.arange(batch_size, n_items + batch_size, batch_size), n_items))
        steps = stop_indices(means[..., ends - 1], vars_[..., ends - 1], epsilon1, epsilon2,
                             max(1, math.ceil(window / batch_size)), level)
        return ends[steps - 1]
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    ok = np.zeros(means.shape, dtype=bool)
    if n_items >= window:
        win = sliding_window_view(means, window, axis=-1)  # (..., N − W + 1, W): steps n = W..N
        rng_ok = (win.max(axis=-1) - win.min(axis=-1)) <= epsilon1
        width_ok = 2.0 * z * np.sqrt(np.maximum(vars_[..., window - 1 :], 0.0)) <= epsilon2
        ok[..., window - 1 :] = rng_ok & width_ok
    ok[..., -1] = True  # every item observed: "exhausted"
    return np.argmax(ok, axis=-1) + 1


def spearman_across_targets(estimates: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Spearman correlation between estimated and true scores across targets.

    Parameters
    ----------
    estimates : ndarray of shape (n_targets, ...)
    truth : ndarray of shape (n_targets,)

    Returns
    -------
    ndarray of shape estimates.shape[1:]; NaN where the estimates are all tied.
    """
    from scipy.stats import rankdata

    r_est = rankdata(estimates, axis=0)
    r_true = rankdata(truth).reshape((-1,) + (1,) * (estimates.ndim - 1))
    a = r_est - r_est.mean(axis=0)
    b = r_true - r_true.mean(axis=0)
    denom = np.sqrt((a**2).sum(axis=0) * (b**2).sum(axis=0))
    num = (a * b).sum(axis=0)
    return np.divide(num, denom, out=np.full(num.shape, np.nan), where=denom > 0)
