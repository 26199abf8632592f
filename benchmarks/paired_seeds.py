"""Per-seed EW-IRMSE of backtest runs and each method's paired difference from a baseline method.

The backtest's EW-IRMSE pools the squared errors of every seed; with few seeds
the spread between seeds decides whether one method is "clearly better" than
another, so this prints each seed's EW-IRMSE (on the curve grid that
``runs.parquet`` keeps, which reproduces the pooled figure to about 0.5) and
the paired difference from ``--baseline`` (same seed: same references, same
targets), with its mean and standard deviation over seeds.

    python benchmarks/paired_seeds.py DIR [DIR ...] --baseline bayesame
    python benchmarks/paired_seeds.py DIR --fractions 0.05,0.1,0.2,0.3,0.4,0.5,0.6,0.8

``--fractions`` also prints each method's pooled RMSE × 100 and coverage of
the 95 % interval at the rows of ``curves.csv`` nearest those fractions of N.

Each DIR is a backtest ``--out`` directory (single- or multi-target) of the
same dataset and protocol; a method found in several is taken from the first.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import tempfile

import numpy as np
import pandas as pd


def per_seed(dirs: list[pathlib.Path]) -> pd.DataFrame:
    """EW-IRMSE per (method, seed): 100 ∫ x · 100·RMSE(x) dx over the stored grid, RMSE over the targets."""
    rows: dict[tuple[str, int], float] = {}
    for d in dirs:
        n_items = _n_items(d)
        runs = pd.read_parquet(d / "runs.parquet")
        for (method, seed), g in runs.groupby(["method", "seed"]):
            if (method, seed) in rows:
                continue
            rmse = g.groupby("n")["error"].apply(lambda e: float(np.sqrt(np.mean(np.square(e)))))
            x = rmse.index.to_numpy(dtype=float) / n_items
            rows[(method, int(seed))] = float(100.0 * np.trapezoid(x * 100.0 * rmse.to_numpy(), x))
    return pd.Series(rows).unstack()


def _n_items(d: pathlib.Path) -> int:
    curves = pd.read_csv(d / "curves.csv")
    first = curves.iloc[0]
    return int(round(first["n"] / first["fraction"]))


def along_the_run(dirs: list[pathlib.Path], fractions: list[float]) -> pd.DataFrame:
    """RMSE × 100 and coverage per method at the ``curves.csv`` rows nearest each fraction (first DIR wins)."""
    rows: dict[tuple[str, str], dict[float, float]] = {}
    for d in dirs:
        curves = pd.read_csv(d / "curves.csv")
        for method, g in curves.groupby("method"):
            if ("RMSE", method) in rows:
                continue
            near = [int((g["fraction"] - f).abs().idxmin()) for f in fractions]
            rows[("RMSE", method)] = dict(zip(fractions, 100.0 * g.loc[near, "rmse"].to_numpy(), strict=True))
            rows[("coverage", method)] = dict(zip(fractions, g.loc[near, "coverage"].to_numpy(), strict=True))
    return pd.DataFrame.from_dict(rows, orient="index").sort_index()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=pathlib.Path)
    parser.add_argument("--baseline", default="bayesame")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--fractions", default="", help="comma-separated fractions of N, e.g. 0.05,0.1,0.2")
    parser.add_argument("--smoke", action="store_true",
                        help="a 2-seed backtest of math into a temporary folder, compared with RS-Mean "
                             "(tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        from settings_report import smoke_folder

        with tempfile.TemporaryDirectory() as tmp:
            args.dirs, args.baseline, args.fractions = [smoke_folder(pathlib.Path(tmp))], "rs-mean", "0.1,0.5"
            report(args)
        return
    if not args.dirs:
        parser.error("give at least one backtest --out DIR (or --smoke)")
    report(args)


def report(args: argparse.Namespace) -> None:
    table = per_seed(args.dirs)
    if args.baseline not in table.index:
        raise SystemExit(f"--baseline {args.baseline!r} is not among the runs: {', '.join(table.index)}")
    diff = table.sub(table.loc[args.baseline], axis=1)
    out = pd.DataFrame({"mean": table.mean(axis=1), "diff_mean": diff.mean(axis=1), "diff_sd": diff.std(axis=1),
                        "better_seeds": (diff < 0).sum(axis=1)})
    if args.json:
        print(json.dumps({"per_seed": table.round(4).to_dict(orient="index"),
                          "paired": out.round(4).to_dict(orient="index")}, indent=2))
        return
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print("EW-IRMSE per seed (curve grid)")
        print(table.round(2).to_string())
        print(f"\npaired difference from {args.baseline} (negative: better), over {table.shape[1]} seeds")
        print(out.round(2).to_string())
        if args.fractions:
            fractions = [float(f) for f in args.fractions.split(",")]
            print("\nRMSE x 100 and coverage of the 95 % interval at these fractions of N")
            print(along_the_run(args.dirs, fractions).round(2).to_string())


if __name__ == "__main__":
    main()
