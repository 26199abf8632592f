"""Summaries of a backtest: per-method metrics, tidy tables, and the paper's Table 1."""

from __future__ import annotations

import numpy as np

from activeeval.experiments.metrics import (
    covered,
    coverage_curve,
    ew_irmse,
    rmse_curve,
    rmse_gain_db,
    spearman_across_targets,
    stop_indices,
)
from activeeval.experiments.runner import BacktestResult

__all__ = [
    "BASELINE",
    "GAIN_FRACTIONS",
    "PAPER_TABLE1",
    "summarize",
    "curves_frame",
    "stops_frame",
    "cost_accuracy_frame",
    "runs_frame",
    "n_grid",
]

BASELINE = "rs-mean"
GAIN_FRACTIONS = (5, 10, 25)

# Paper's Table 1 (EW-IRMSE, 50 % references, binary scores), SPEC.md §5:
# {dataset: {method: (interpolation, extrapolation)}}; None where the paper has no number for our data.
# The paper's BayesAME is ``bayesame-paper`` here (``bayesame`` is our default, which the paper has not).
PAPER_TABLE1: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "ifeval": {
        "bayesame-paper": (49.53, 58.08),
        "bayesame-paper-rs": (56.14, 58.08),
        "rs-mean": (72.45, 64.54),
        "bayes-aipw": (56.71, 60.52),
        "seq-apw": (1464.91, 488.54),
        "bayes-rs-learn": (76.22, 466.45),
        "proeval": (78.53, 1017.33),
        "irt": (79.06, 212.27),
    },
    "musr": {
        "bayesame-paper": (47.86, 54.19),
        "rs-mean": (69.27, 71.28),
        "bayes-aipw": (49.18, 56.72),
    },
}


def _nanmean(values: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Mean ignoring NaN; NaN (without a RuntimeWarning) where every value is NaN."""
    values = np.asarray(values, dtype=float)
    ok = ~np.isnan(values)
    count = ok.sum(axis=axis)
    total = np.where(ok, values, 0.0).sum(axis=axis)
    out = np.divide(total, count, out=np.full(np.shape(total), np.nan), where=count > 0)
    return float(out) if np.ndim(out) == 0 else out


def n_grid(n_items: int, max_points: int = 100) -> np.ndarray:
    """Coreset sizes reported in the tidy per-run table: all of 1..N if N ≤ max_points, else a
    log-spaced grid (dense at small n) joined with a linear one, always with the 5/10/25 % points and N."""
    if n_items <= max_points:
        return np.arange(1, n_items + 1)
    log = np.unique(np.round(np.geomspace(1, n_items, max_points // 2)).astype(int))
    lin = np.unique(np.round(np.linspace(1, n_items, max_points // 2)).astype(int))
    marks = [max(1, int(round(p / 100 * n_items))) for p in GAIN_FRACTIONS]
    return np.unique(np.concatenate([log, lin, marks, [n_items]]))


def _gain_index(n_items: int, pct: int) -> int:
    return max(1, int(round(pct / 100 * n_items))) - 1


def summarize(result: BacktestResult, epsilon2: float = 0.03) -> dict[str, dict]:
    """Per method: EW-IRMSE, RMSE Gain at 5/10/25 % of N, and the stopping run at ``epsilon2``.

    ``gain_db`` is None for every method when RS-Mean was not run.
    """
    cfg = result.config
    base = rmse_curve(result.means[BASELINE], result.truth) if BASELINE in result.means else None
    out: dict[str, dict] = {}
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        rmse = rmse_curve(mu, result.truth)
        gains = {}
        for pct in GAIN_FRACTIONS:
            i = _gain_index(result.n_items, pct)
            gains[str(pct)] = None if base is None else float(rmse_gain_db(rmse[i], base[i]))
        stop = stop_indices(mu, var, cfg.epsilon1, epsilon2, cfg.window, cfg.level,
                            batch_size=result.batch_sizes.get(name, 1))
        idx = stop[..., None] - 1
        est = np.take_along_axis(mu, idx, axis=-1)[..., 0]
        v = np.take_along_axis(var, idx, axis=-1)[..., 0]
        err = est - result.truth[:, None]
        out[name] = {
            "ew_irmse": ew_irmse(rmse),
            "gain_db": gains,
            "coverage_at_stop": float(covered(est, v, result.truth, cfg.level).mean()),
            "mean_fraction_at_stop": float(stop.mean() / result.n_items),
            "rmse_at_stop": float(100 * np.sqrt((err**2).mean(axis=1)).mean()),
            "spearman_at_stop": _nanmean(spearman_across_targets(est, result.truth)),
            "coverage_mean_over_n": float(coverage_curve(mu, var, result.truth, cfg.level).mean()),
        }
    return out


def curves_frame(result: BacktestResult):  # noqa: ANN201 - pandas DataFrame
    """One row per method × n (n = 1..N): RMSE, RMSE Log, RMSE Gain, coverage, Spearman."""
    import pandas as pd

    n = np.arange(1, result.n_items + 1)
    base = rmse_curve(result.means[BASELINE], result.truth) if BASELINE in result.means else None
    frames = []
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        rmse = rmse_curve(mu, result.truth)
        frames.append(
            pd.DataFrame(
                {
                    "method": name,
                    "n": n,
                    "fraction": n / result.n_items,
                    "rmse": rmse,
                    "rmse_log": 100 * rmse,
                    "gain_db": rmse_gain_db(rmse, base) if base is not None else np.nan,
                    "coverage": coverage_curve(mu, var, result.truth, result.config.level),
                    "spearman": _nanmean(spearman_across_targets(mu, result.truth), axis=0)
                    if len(result.truth) > 1
                    else np.nan,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _at_stop(mu: np.ndarray, var: np.ndarray, cfg, eps2: float,  # noqa: ANN001
             batch_size: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Coreset size at the stopping rule's stop, and the estimate and variance there.

    ``mu``, ``var``: arrays (..., n) of the trajectory; returns arrays of shape (...).
    ``batch_size``: K of a run played in myopic batches (stops only at the ends of batches).
    """
    stop = stop_indices(mu, var, cfg.epsilon1, eps2, cfg.window, cfg.level, batch_size=batch_size)
    idx = stop[..., None] - 1
    return stop, np.take_along_axis(mu, idx, axis=-1)[..., 0], np.take_along_axis(var, idx, axis=-1)[..., 0]


def stops_frame(result: BacktestResult):  # noqa: ANN201
    """One row per method × target × seed × ε2 of the stopping-rule runs."""
    import pandas as pd

    cfg = result.config
    rows = []
    t_idx, s_idx = np.meshgrid(np.arange(len(result.truth)), np.arange(cfg.n_seeds), indexing="ij")
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        for eps2 in cfg.epsilon2:
            stop, est, v = _at_stop(mu, var, cfg, eps2, result.batch_sizes.get(name, 1))
            rows.append(
                pd.DataFrame(
                    {
                        "method": name,
                        "target": np.asarray(result.split.targets)[t_idx.ravel()],
                        "seed": s_idx.ravel(),
                        "epsilon2": eps2,
                        "n_stop": stop.ravel(),
                        "fraction": stop.ravel() / result.n_items,
                        "estimate": est.ravel(),
                        "var": v.ravel(),
                        "truth": result.truth[t_idx.ravel()],
                        "covered": covered(est, v, result.truth, cfg.level).ravel(),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def cost_accuracy_frame(result: BacktestResult):  # noqa: ANN201
    """Per method × ε2: mean n/N at stop, RMSE Log at stop, coverage and Spearman at stop."""
    import pandas as pd

    cfg = result.config
    rows = []
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        for eps2 in cfg.epsilon2:
            stop, est, v = _at_stop(mu, var, cfg, eps2, result.batch_sizes.get(name, 1))
            err = est - result.truth[:, None]
            rows.append(
                {
                    "method": name,
                    "epsilon2": eps2,
                    "mean_fraction": float(stop.mean() / result.n_items),
                    "rmse_log": float(100 * np.sqrt((err**2).mean(axis=1)).mean()),
                    "coverage": float(covered(est, v, result.truth, cfg.level).mean()),
                    "spearman": _nanmean(spearman_across_targets(est, result.truth)),
                }
            )
    return pd.DataFrame(rows)


def runs_frame(result: BacktestResult, grid: np.ndarray | None = None):  # noqa: ANN201
    """Tidy per-run results: one row per method × target × seed × n (n on ``grid``, default :func:`n_grid`)."""
    import pandas as pd

    grid = n_grid(result.n_items) if grid is None else np.asarray(grid)
    n_t, n_s = len(result.truth), result.config.n_seeds
    t_idx, s_idx, g_idx = np.meshgrid(np.arange(n_t), np.arange(n_s), np.arange(grid.size), indexing="ij")
    frames = []
    for name in result.methods:
        mu = result.means[name][:, :, grid - 1]
        var = result.vars[name][:, :, grid - 1]
        truth = result.truth[t_idx.ravel()]
        frames.append(
            pd.DataFrame(
                {
                    "method": name,
                    "target": np.asarray(result.split.targets)[t_idx.ravel()],
                    "seed": s_idx.ravel(),
                    "n": grid[g_idx.ravel()],
                    "estimate": mu.ravel(),
                    "var": var.ravel(),
                    "truth": truth,
                    "error": mu.ravel() - truth,
                    "covered": covered(mu, var, result.truth, result.config.level).ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
