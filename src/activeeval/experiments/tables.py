"""Summaries of a backtest: per-method metrics, tidy tables, and the paper's Tables 1 and 2."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from activeeval.experiments.metrics import (
    coverage_curve,
    covered,
    ew_irmse,
    rmse_curve,
    rmse_gain_db,
    spearman_across_targets,
    stop_indices,
)
from activeeval.experiments.protocol import BacktestConfig, sample_references
from activeeval.experiments.runner import BacktestResult, backtest_split
from activeeval.stopping import DEFAULT_EPSILON2

__all__ = [
    "BASELINE",
    "GAIN_FRACTIONS",
    "PAPER_TABLE1",
    "PAPER_TABLE2",
    "PAPER_TABLE2_GAPS",
    "TABLE2_NON_MYOPIC",
    "TABLE2_ROWS",
    "Table2Row",
    "cost_accuracy_frame",
    "curves_frame",
    "n_grid",
    "paper_regimes",
    "runs_frame",
    "stops_frame",
    "summarize",
    "table2_note",
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



class Table2Row(NamedTuple):
    """One row of the paper's Table 2: its ``key``, the paper's ``name``, the method ``label`` we run, and
    ``myopic_batch``: K > 1 if the row is the label played in myopic batches of K (a backtest setting,
    ``BacktestConfig(batch_size=K, myopic=True)``, so the row needs a backtest of its own), else 1."""

    key: str
    name: str
    label: str
    myopic_batch: int = 1

    @property
    def method(self) -> str:
        """What is run, for a table cell: the label, or the paper's method and how its batches are played."""
        if self.myopic_batch > 1:
            return f"bayesame-paper, myopic |A|={self.myopic_batch} (pair)"
        if self.label == TABLE2_NON_MYOPIC:
            return "bayesame-paper, non-myopic |A|=2 (pair)"
        return self.label

    @property
    def selects_as_paper(self) -> bool:
        """Whether the row selects as the paper's BayesAME does: actively in the unique regime, else at random."""
        return self.label.startswith("bayesame-paper") and not self.label.startswith("bayesame-paper-rs")


# The |A| = 2 rows of the paper's Table 2 both use the pair closed form (App. B.1). Myopic play observes the
# whole batch (a backtest setting); non-myopic observes one random member of it (a method option).
TABLE2_NON_MYOPIC = "bayesame-paper[batch_strategy=pair,batch_size=2,myopic=False]"
TABLE2_ROWS: tuple[Table2Row, ...] = (
    Table2Row("bayesame-paper", "BayesAME", "bayesame-paper"),
    Table2Row("bayesame-paper-rs", "BayesAME-RS", "bayesame-paper-rs"),
    Table2Row("myopic-2", "|A|=2 myopic", "bayesame-paper", 2),
    Table2Row("non-myopic-2", "|A|=2 non-myopic", TABLE2_NON_MYOPIC),
    Table2Row("bayes-aipw", "Bayes-AIPW", "bayes-aipw"),
    Table2Row("bayesame", "bayesame (ours)", "bayesame"),
)

# Paper's Table 2 (BayesAME paper, App. B.1 "Batch selection", Table 2: EW-IRMSE, 50 % references, binary
# scores; interpolation / extrapolation): {dataset: {row key: (interpolation, extrapolation)}}. None is the
# paper's "–": its MuSR is in the non-unique regime (random selection), where the batch rows are omitted, and it
# did not run the batch rows in IFEval extrapolation. BayesAME-RS equals BayesAME where selection is random.
PAPER_TABLE2: dict[str, dict[str, tuple[float | None, float | None]]] = {
    "ifeval": {
        "bayesame-paper": (49.53, 58.08),
        "bayesame-paper-rs": (56.14, 58.08),
        "myopic-2": (49.99, None),
        "non-myopic-2": (50.00, None),
        "bayes-aipw": (56.71, 60.52),
    },
    "musr": {
        "bayesame-paper": (47.86, 54.19),
        "bayesame-paper-rs": (47.86, 54.19),
        "myopic-2": (None, None),
        "non-myopic-2": (None, None),
        "bayes-aipw": (49.18, 56.72),
    },
}

#: Why the paper has "–" (None in PAPER_TABLE2) for a dataset's cells: (in full, short for a table cell).
PAPER_TABLE2_GAPS = {
    "ifeval": ("no paper number (the paper did not run it)", "not in the paper"),
    "musr": ("paper –: its MuSR is in the non-unique regime, where selection is random and the batch rows are "
             "omitted", "paper –: non-unique regime"),
}


def table2_note(dataset: str, row: Table2Row, regimes: dict[str, list[str]], short: bool = False) -> str:
    """The note of one row of ``activeeval reproduce table2``: why a paper cell is empty, and where ours select
    at random (``regimes``: {regime: the per-seed regimes of :func:`paper_regimes`}); ``short`` for a table cell.
    """
    paper = PAPER_TABLE2.get(dataset, {}).get(row.key)
    shorts = ("interp.", "extrap.")
    if paper is None:
        parts = ["no paper number" + ("" if short or dataset in PAPER_TABLE2 else " (a set the paper did not use)")]
    else:
        gaps = [name for name, value in zip(shorts, paper, strict=True) if value is None]
        gap = PAPER_TABLE2_GAPS[dataset][int(short)]
        parts = [] if not gaps else [gap if len(gaps) == 2 else f"{gaps[0]}: {gap}"]
    if row.selects_as_paper:
        counts = [(name, regimes[regime].count("non-unique"), len(regimes[regime]))
                  for name, regime in zip(shorts, ("interpolation", "extrapolation"), strict=True)]
        randoms = [f"{name} {k}/{n}" if short else f"{name} on {k}/{n} seeds" for name, k, n in counts if k]
        if randoms:
            parts.append(("ours random: " if short else "ours select at random (non-unique regime): ")
                         + ", ".join(randoms))
    return "; ".join(parts)


def paper_regimes(matrix, config: BacktestConfig) -> list[str]:
    """The regime (``"unique"`` or ``"non-unique"``, paper §3.1: unique ⇔ B ≥ N − N0) of the paper's BayesAME
    on the reference sample of each seed of ``config``: a list of length ``config.n_seeds``.

    In the non-unique regime ``bayesame-paper`` selects uniformly at random, whatever its batch options.
    """
    from activeeval.methods.bayesame_paper import BayesAMEPaper

    pool = backtest_split(matrix, config).pool
    return [
        BayesAMEPaper(matrix.select_models(sample_references(pool, config.ref_fraction, s, config.root_seed)),
                      seed=0).regime
        for s in range(config.n_seeds)
    ]

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


def summarize(result: BacktestResult, epsilon2: float = DEFAULT_EPSILON2) -> dict[str, dict]:
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
        shift = result.shifts_of(name)
        stop, est, v, sh = _at_stop(mu, var, cfg, epsilon2, result.batch_sizes.get(name, 1), shift)
        err = est - result.truth[:, None]
        out[name] = {
            "ew_irmse": ew_irmse(rmse),
            "gain_db": gains,
            "coverage_at_stop": float(covered(est, v, result.truth, cfg.level, sh).mean()),
            "mean_fraction_at_stop": float(stop.mean() / result.n_items),
            "rmse_at_stop": float(100 * np.sqrt((err**2).mean(axis=1)).mean()),
            "spearman_at_stop": _nanmean(spearman_across_targets(est, result.truth)),
            "coverage_mean_over_n": float(coverage_curve(mu, var, result.truth, cfg.level, shift).mean()),
        }
    return out


def curves_frame(result: BacktestResult):
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
                    "coverage": coverage_curve(mu, var, result.truth, result.config.level, result.shifts_of(name)),
                    "spearman": _nanmean(spearman_across_targets(mu, result.truth), axis=0)
                    if len(result.truth) > 1
                    else np.nan,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _at_stop(mu: np.ndarray, var: np.ndarray, cfg, eps2: float, batch_size: int = 1,
             shift: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """Coreset size at the stopping rule's stop, and the estimate, variance and interval shift there.

    ``mu``, ``var``, ``shift``: arrays (..., n) of the trajectory (``shift`` None: symmetric intervals, and None
    returned); returns arrays of shape (...).
    ``batch_size``: K of a run played in myopic batches (stops only at the ends of batches).
    """
    stop = stop_indices(mu, var, cfg.epsilon1, eps2, cfg.window, cfg.level, batch_size=batch_size)
    idx = stop[..., None] - 1

    def at(a: np.ndarray) -> np.ndarray:
        return np.take_along_axis(a, idx, axis=-1)[..., 0]

    return stop, at(mu), at(var), None if shift is None else at(shift)


def stops_frame(result: BacktestResult):
    """One row per method × target × seed × ε2 of the stopping-rule runs (columns as :func:`runs_frame`'s)."""
    import pandas as pd

    cfg = result.config
    rows = []
    t_idx, s_idx = np.meshgrid(np.arange(len(result.truth)), np.arange(cfg.n_seeds), indexing="ij")
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        for eps2 in cfg.epsilon2:
            stop, est, v, sh = _at_stop(mu, var, cfg, eps2, result.batch_sizes.get(name, 1), result.shifts_of(name))
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
                        "shift": (np.zeros_like(v) if sh is None else sh).ravel(),
                        "truth": result.truth[t_idx.ravel()],
                        "covered": covered(est, v, result.truth, cfg.level, sh).ravel(),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def cost_accuracy_frame(result: BacktestResult):
    """Per method × ε2: mean n/N at stop, RMSE Log at stop, coverage and Spearman at stop."""
    import pandas as pd

    cfg = result.config
    rows = []
    for name in result.methods:
        mu, var = result.means[name], result.vars[name]
        for eps2 in cfg.epsilon2:
            stop, est, v, sh = _at_stop(mu, var, cfg, eps2, result.batch_sizes.get(name, 1), result.shifts_of(name))
            err = est - result.truth[:, None]
            rows.append(
                {
                    "method": name,
                    "epsilon2": eps2,
                    "mean_fraction": float(stop.mean() / result.n_items),
                    "rmse_log": float(100 * np.sqrt((err**2).mean(axis=1)).mean()),
                    "coverage": float(covered(est, v, result.truth, cfg.level, sh).mean()),
                    "spearman": _nanmean(spearman_across_targets(est, result.truth)),
                }
            )
    return pd.DataFrame(rows)


def runs_frame(result: BacktestResult, grid: np.ndarray | None = None):
    """Tidy per-run results: one row per method × target × seed × n (n on ``grid``, default :func:`n_grid`).

    ``shift`` is the interval's :attr:`~activeeval.methods.estimate.Estimate.shift` (0: symmetric): the run's
    interval is estimate + z·(shift ± sqrt(var)), clipped to the score range, as ``covered`` reads it."""
    import pandas as pd

    grid = n_grid(result.n_items) if grid is None else np.asarray(grid)
    n_t, n_s = len(result.truth), result.config.n_seeds
    t_idx, s_idx, g_idx = np.meshgrid(np.arange(n_t), np.arange(n_s), np.arange(grid.size), indexing="ij")
    frames = []
    for name in result.methods:
        mu = result.means[name][:, :, grid - 1]
        var = result.vars[name][:, :, grid - 1]
        shift = result.shifts_of(name)
        shift = None if shift is None else shift[:, :, grid - 1]
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
                    "shift": (np.zeros_like(var) if shift is None else shift).ravel(),
                    "truth": truth,
                    "error": mu.ravel() - truth,
                    "covered": covered(mu, var, result.truth, result.config.level, shift).ravel(),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)
