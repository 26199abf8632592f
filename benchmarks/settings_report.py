"""One backtest `--out` folder as Markdown: accuracy and honesty of every method spec it holds.

Usage: python benchmarks/settings_report.py DIR [DIR ...]
       python benchmarks/settings_report.py --smoke   # a 2-seed backtest of math into a temporary folder, reported

For each method (spec) of the folder's ``summary.json``: EW-IRMSE ± a bootstrap
standard error over seeds, its ratio to RS-Mean on the same seeds and item
orders, the realised coverage of the 95 % interval at 5/10/25/50 % of N and
averaged over every n, and at the automatic stop (ε2 = 0.01 and 0.03, with
the mean n/N there). The standard error resamples seeds (B = 300) on the
saved n-grid (see table1_report.py).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from table1_report import error_cube, grid_ew_irmse


def report(folder: Path) -> None:
    summary = json.loads((folder / "summary.json").read_text())
    n_items, n_seeds = summary["n_items"], summary["seeds"]
    runs_path = folder / "runs.parquet"
    runs = pd.read_parquet(runs_path) if runs_path.exists() else pd.read_csv(folder / "runs.csv")
    curves = pd.read_csv(folder / "curves.csv")
    cost = pd.read_csv(folder / "cost_accuracy.csv").set_index(["method", "epsilon2"])
    base = summary["methods"].get("rs-mean", {}).get("ew_irmse")
    rng = np.random.default_rng(0)
    print(f"<!-- {folder}: {summary['dataset']}, {summary['regime']}, {n_seeds} seeds, "
          f"targets {', '.join(summary['targets'])}; wall time {summary['wall_time_s']:.0f} s -->")
    print("| method | EW-IRMSE | ratio to RS-Mean | cov. 5% | 10% | 25% | 50% | mean over n "
          "| at stop ε2=0.01 (n/N) | at stop ε2=0.03 (n/N) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for method, s in summary["methods"].items():
        se = np.nan
        if n_seeds > 1:
            err, grid = error_cube(runs[runs["method"] == method])
            boots = [grid_ew_irmse(err[:, rng.choice(n_seeds, n_seeds)], grid, n_items) for _ in range(300)]
            se = float(np.std(boots, ddof=1))
        c = curves[curves["method"] == method].set_index("n")["coverage"]
        at = [float(c.loc[max(1, round(p / 100 * n_items))]) for p in (5, 10, 25, 50)]
        stops = [f"{cost.loc[(method, e), 'coverage']:.3f} ({cost.loc[(method, e), 'mean_fraction']:.2f})"
                 for e in (0.01, 0.03)]
        ratio = f"{s['ew_irmse'] / base:.3f}" if base else "—"
        print(f"| {method} | {s['ew_irmse']:.2f} ± {se:.2f} | {ratio} | " + " | ".join(f"{v:.3f}" for v in at)
              + f" | {float(c.mean()):.3f} | " + " | ".join(stops) + " |")
    print()


def smoke_folder(folder: Path) -> Path:
    """The smallest backtest ``--out`` folder these reports read: math, RS-Mean and Bayes-AIPW, 2 targets x 2 seeds."""
    from activeeval.cli import app

    out = folder / "backtest"
    app(["backtest", "--dataset", "math", "--methods", "rs-mean,bayes-aipw", "--targets", "2", "--seeds", "2",
         "--workers", "1", "--no-plots", "--no-progress", "--json", "--out", str(out)], standalone_mode=False)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--smoke"]:
        with tempfile.TemporaryDirectory() as tmp:
            report(smoke_folder(Path(tmp)))
    else:
        for d in sys.argv[1:]:
            report(Path(d))
