"""Markdown tables from `activeeval reproduce table1 --out DIR` result folders.

Usage: python benchmarks/table1_report.py DIR [DIR ...]
       python benchmarks/table1_report.py --smoke   # `reproduce table1 --seeds 2` of RS-Mean on IFEval, reported

Prints (1) Table 1: our EW-IRMSE ± a bootstrap standard error over seeds next to
the paper's numbers, and (2) the realised coverage of each method's 95 %
interval at 5/10/25/50 % of N and at the automatic stop (ε2 = 0.01 and 0.03).
The standard error resamples seeds (B = 300) on the saved n-grid, so it is an
approximation of the EW-IRMSE's sampling noise, not of the exact value (which
comes from summary.json, computed on every n).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from activeeval.experiments.tables import PAPER_TABLE1

REGIMES = ("interpolation", "extrapolation")


def error_cube(runs: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Errors as an array (n_targets, n_seeds, n_grid) and the grid of n."""
    cube = runs.pivot_table(index=["target", "seed"], columns="n", values="error")
    targets = cube.index.get_level_values(0).unique()
    seeds = cube.index.get_level_values(1).unique()
    return cube.to_numpy().reshape(len(targets), len(seeds), -1), cube.columns.to_numpy()


def grid_ew_irmse(err: np.ndarray, grid: np.ndarray, n_items: int) -> float:
    rmse = np.sqrt((err**2).mean(axis=1)).mean(axis=0)
    x = grid / n_items
    return float(100 * np.trapezoid(x * 100 * rmse, x))


def main(dirs: list[str]) -> None:
    rows: dict[tuple[str, str], dict] = {}
    coverage: list[dict] = []
    seeds_used: dict[str, int] = {}
    for d in map(Path, dirs):
        meta = json.loads((d / "table1.json").read_text())
        for summary_path in sorted(d.glob("*_summary.json")):
            prefix = summary_path.name[: -len("summary.json")]
            dataset, regime = prefix.rstrip("_").rsplit("_", 1)
            summary = json.loads(summary_path.read_text())
            n_items = summary["n_items"]
            runs_path = d / f"{prefix}runs.parquet"
            runs = pd.read_parquet(runs_path) if runs_path.exists() else pd.read_csv(d / f"{prefix}runs.csv")
            curves = pd.read_csv(d / f"{prefix}curves.csv")
            cost = pd.read_csv(d / f"{prefix}cost_accuracy.csv")
            rng = np.random.default_rng(0)
            n_seeds = summary["seeds"]
            for method, s in summary["methods"].items():
                key = f"{dataset}:{regime}:{method}"
                if n_seeds <= seeds_used.get(key, 0):
                    continue  # the same method in two folders: keep the run with more seeds
                seeds_used[key] = n_seeds
                r = runs[runs["method"] == method]
                se = np.nan
                if n_seeds > 1:
                    err, grid = error_cube(r)
                    boots = [grid_ew_irmse(err[:, rng.choice(n_seeds, n_seeds)], grid, n_items) for _ in range(300)]
                    se = float(np.std(boots, ddof=1))
                base = summary["methods"].get("rs-mean", {}).get("ew_irmse")
                ratio = s["ew_irmse"] / base if base else np.nan  # same seeds and item orders as RS-Mean
                rows.setdefault((dataset, method), {})[regime] = (s["ew_irmse"], se, n_seeds, ratio)
                c = curves[curves["method"] == method].set_index("n")["coverage"]
                cov = {f"{p}%": float(c.loc[max(1, round(p / 100 * n_items))]) for p in (5, 10, 25, 50)}
                ca = cost[cost["method"] == method].set_index("epsilon2")
                cov.update({
                    "stop ε2=0.01": float(ca.loc[0.01, "coverage"]), "n/N": float(ca.loc[0.01, "mean_fraction"]),
                    "stop ε2=0.03": float(ca.loc[0.03, "coverage"]), "n/N ": float(ca.loc[0.03, "mean_fraction"]),
                })
                coverage = [x for x in coverage
                            if not (x["dataset"] == dataset and x["regime"] == regime and x["method"] == method)]
                coverage.append({"dataset": dataset, "regime": regime, "method": method, "seeds": n_seeds, **cov})
        print(f"<!-- {d}: {meta['seeds']} seeds, wall time {meta['wall_time_s']:.0f} s -->")
    print("| dataset | method | seeds | ours interp. | paper interp. | ours extrap. | paper extrap. "
          "| ratio to RS-Mean, ours / paper: interp. | extrap. |")
    print("|---|---|---|---|---|---|---|---|---|")
    order = ["bayesame", "bayesame-paper", "bayesame-paper-rs", "rs-mean", "bayes-aipw", "seq-apw", "bayes-rs-learn",
             "proeval", "irt"]
    for (dataset, method), reg in sorted(rows.items(), key=lambda kv: (kv[0][0], order.index(kv[0][1]))):
        paper = PAPER_TABLE1.get(dataset, {}).get(method, (None, None))
        cells = []
        ratios = []
        paper_base = PAPER_TABLE1.get(dataset, {}).get("rs-mean", (None, None))
        for i, regime in enumerate(REGIMES):
            v, se, _, ratio = reg.get(regime, (np.nan, np.nan, 0, np.nan))
            cells.append(f"{v:.2f}" + (f" ± {se:.2f}" if np.isfinite(se) else ""))
            cells.append("—" if paper[i] is None else f"{paper[i]:.2f}")
            paper_ratio = "—" if paper[i] is None or paper_base[i] is None else f"{paper[i] / paper_base[i]:.2f}"
            ratios.append(f"{ratio:.2f} / {paper_ratio}")
        cells += ratios
        seeds = reg.get("interpolation", (0, 0, 0, 0))[2]
        print(f"| {dataset} | {method} | {seeds} | " + " | ".join(cells) + " |")
    print()
    cols = ["5%", "10%", "25%", "50%", "stop ε2=0.01", "n/N", "stop ε2=0.03", "n/N "]
    print("| dataset | regime | method | seeds | " + " | ".join(c.strip() for c in cols) + " |")
    print("|---|---|---|---|" + "---|" * len(cols))
    for x in sorted(coverage, key=lambda x: (x["dataset"], x["regime"], order.index(x["method"]))):
        print(f"| {x['dataset']} | {x['regime']} | {x['method']} | {x['seeds']} | "
              + " | ".join(f"{x[c]:.3f}" for c in cols) + " |")


def smoke() -> None:
    """The smallest folder `reproduce table1 --out` writes (IFEval, RS-Mean, 2 seeds), reported."""
    import tempfile

    from activeeval.cli import app

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "table1"
        app(["reproduce", "table1", "--seeds", "2", "--datasets", "ifeval", "--methods", "rs-mean", "--workers", "1",
             "--no-progress", "--json", "--out", str(out)], standalone_mode=False)
        main([str(out)])


if __name__ == "__main__":
    smoke() if sys.argv[1:] == ["--smoke"] else main(sys.argv[1:])
