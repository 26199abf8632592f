"""Robustness of each method on every dataset: accuracy against RS-Mean, honesty of the 95 % interval, cost.

For every dataset × regime (interpolation, extrapolation) and several *draws*
(draw d: interpolation targets drawn with ``split_seed = d``, and every
reference sample and item order from ``root_seed = d``; extrapolation's
targets are always the 10 best models, so there a draw changes the reference
samples and orders only), the backtest protocol (SPEC §5, 50 % references,
10 targets, ``--seeds`` seeds per draw) is run for every method and the
table gives, per dataset × regime × method:

* ``EW/RS med`` and ``worst``: EW-IRMSE divided by RS-Mean's on the same
  draw (same splits, references and item orders), median and largest over draws;
* ``cov 5% … 50%``: realised coverage of the nominal 95 % interval at
  n = 5, 10, 25, 50 % of N, pooled over draws, seeds and targets;
* ``stop .01 / .03``: coverage at the automatic stop (ε1 = 0.005, W = 30,
  ε2 = 0.01 / 0.03), and ``n/RS``: the mean number of items at that stop
  divided by RS-Mean's;
* ``miss``: confident misses, runs whose error exceeds 3 standard deviations,
  counted over the four fixed n and the two stops;
* ``runs``: runs per coverage cell; ``bad``: non-finite estimates or variances.

Each (dataset, regime, draw) is saved as JSON under ``--out`` as soon as it
is done, and reused when the command is run again with the same settings
(so a long run can be stopped and resumed, and new draws added).

Usage (from the repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/robustness.py                       # every dataset, 5 draws x 4 seeds
    OPENBLAS_NUM_THREADS=1 python benchmarks/robustness.py --datasets ifeval,alpacaeval2 --draws 3 --seeds 2 \\
        --methods 'rs-mean,bayesame,bayesame[extrapolation=off]'
    python benchmarks/robustness.py --report-only --out benchmarks/results/robustness   # print the table again
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
import warnings
from pathlib import Path
from statistics import NormalDist

import numpy as np

from activeeval import datasets
from activeeval.experiments.metrics import (
    chance_flagged,
    coverage_tails,
    covered,
    ew_irmse,
    rmse_curve,
    standardised_errors,
    stop_indices,
)
from activeeval.experiments.protocol import BacktestConfig, parse_draws
from activeeval.experiments.runner import run_backtest
from activeeval.methods.registry import split_method_list

ALL_DATASETS = (
    "ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
    "wmt21_en-zh_chrf", "wmt21_zh-en_chrf",
)
FRACTIONS = (0.05, 0.10, 0.25, 0.50)
STOPS = (0.01, 0.03)
#: A cell is "surely" below or above 95 % at this one-sided exact binomial p-value (efficiency.py's).
SURELY = 0.01
Z = NormalDist().inv_cdf(0.975)


def draw_metrics(result, methods: list[str]) -> dict:
    """Per method: the counts this draw contributes to the table."""
    cfg, truth, n_items = result.config, result.truth, result.n_items
    out = {}
    for name in methods:
        mu, var = result.means[name], result.vars[name]
        shift = result.shifts_of(name)  # None: symmetric intervals
        entry: dict = {"ew": ew_irmse(rmse_curve(mu, truth)), "runs": int(mu.shape[0] * mu.shape[1])}
        entry["bad"] = int((~np.isfinite(mu)).sum() + (~np.isfinite(var)).sum() + (var < 0).sum())
        misses = 0
        for f in FRACTIONS:
            i = max(1, round(f * n_items)) - 1
            sh = None if shift is None else shift[..., i]
            cov = covered(mu[..., i], var[..., i], truth, shifts=sh)
            entry[f"cov{f}"] = int(cov.sum())
            z = _z(mu[..., i], var[..., i], truth, sh)
            misses += int((z > 3).sum())
        for e2 in STOPS:
            stop = stop_indices(mu, var, cfg.epsilon1, e2, cfg.window, cfg.level)
            idx = stop[..., None] - 1
            est = np.take_along_axis(mu, idx, -1)[..., 0]
            v = np.take_along_axis(var, idx, -1)[..., 0]
            sh = None if shift is None else np.take_along_axis(shift, idx, -1)[..., 0]
            entry[f"stop{e2}"] = int(covered(est, v, truth, shifts=sh).sum())
            entry[f"n{e2}"] = float(stop.mean())
            z = _z(est, v, truth, sh)
            misses += int((z > 3).sum())
        entry["miss"] = misses
        out[name] = entry
    return out


def _z(est: np.ndarray, var: np.ndarray, truth: np.ndarray, shift: np.ndarray | None) -> np.ndarray:
    """Standardised errors: |R̂ − R*| / sd (as always for symmetric intervals), or over the side's sd."""
    if shift is None:
        return np.abs(est - truth[:, None]) / np.sqrt(np.maximum(var, 1e-300))
    return standardised_errors(est, var, truth, shift)


def key_of(dataset: str, regime: str, draw: int, seeds: int, methods: list[str]) -> str:
    text = json.dumps([dataset, regime, draw, seeds, methods])
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def run_draw(dataset: str, regime: str, draw: int, seeds: int, methods: list[str], workers: int, out: Path) -> dict:
    path = out / f"{dataset}_{regime}_d{draw}_s{seeds}_{key_of(dataset, regime, draw, seeds, methods)}.json"
    if path.exists():
        return json.loads(path.read_text())
    matrix = datasets.load(dataset)
    config = BacktestConfig(
        methods=tuple(methods), regime=regime, n_seeds=seeds, split_seed=draw, root_seed=draw,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the missing-score notes: the documented default policy
        result = run_backtest(matrix, config, workers=workers)
    record = {
        "dataset": dataset, "regime": regime, "draw": draw, "seeds": seeds, "methods": methods,
        "n_items": result.n_items, "wall_s": time.perf_counter() - start,
        "metrics": draw_metrics(result, list(result.methods)),
    }
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return record


def report(records: list[dict], methods: list[str]) -> str:
    lines = []
    head = (f"{'dataset':<17} {'regime':<6} {'method':<28} {'EW/RS med':>9} {'worst':>6} "
            + " ".join(f"{'cov' + str(int(f * 100)) + '%':>7}" for f in FRACTIONS)
            + " " + " ".join(f"{'stop' + str(e):>8} {'n/RS':>5}" for e in STOPS)
            + f" {'miss':>5} {'runs':>5} {'bad':>4} {'draws':>5}")
    lines.append(head)
    lines.append("-" * len(head))
    groups: dict[tuple[str, str], list[dict]] = {}
    for rec in records:
        groups.setdefault((rec["dataset"], rec["regime"]), []).append(rec)
    coverages: dict[str, list[float]] = {name: [] for name in methods}  # every coverage cell, for the summary
    surely: dict[str, list[float]] = {name: [0, 0, 0.0, 0.0] for name in methods}  # surely below / above; by chance
    for (dataset, regime), recs in groups.items():
        for name in methods:
            rows = [r["metrics"][name] for r in recs if name in r["metrics"]]
            if not rows:
                continue
            ratios = [r["metrics"][name]["ew"] / r["metrics"]["rs-mean"]["ew"] for r in recs
                      if name in r["metrics"] and "rs-mean" in r["metrics"]]
            runs = sum(r["runs"] for r in rows)
            covs = [sum(r[f"cov{f}"] for r in rows) / runs for f in FRACTIONS]
            cells = [f"{c:7.3f}" for c in covs]
            stops = []
            for e2 in STOPS:
                cov = sum(r[f"stop{e2}"] for r in rows) / runs
                covs.append(cov)
                rs_rows = [r["metrics"]["rs-mean"] for r in recs if "rs-mean" in r["metrics"]]
                n_me = np.mean([r[f"n{e2}"] for r in rows])
                n_rs = np.mean([r[f"n{e2}"] for r in rs_rows]) if rs_rows else float("nan")
                stops.append(f"{cov:8.3f} {n_me / n_rs:5.2f}")
            med = f"{np.median(ratios):9.3f}" if ratios else f"{'':>9}"
            worst = f"{max(ratios):6.3f}" if ratios else f"{'':>6}"
            lines.append(
                f"{dataset:<17} {regime[:6]:<6} {name:<28} {med} {worst} " + " ".join(cells) + " "
                + " ".join(stops) + f" {sum(r['miss'] for r in rows):5d} {runs:5d} "
                f"{sum(r['bad'] for r in rows):4d} {len(rows):5d}"
            )
            coverages[name].extend(covs)
            chance = chance_flagged(runs, SURELY)
            for c in covs:
                p_low, p_high = coverage_tails(round(c * runs), runs)
                surely[name][0] += p_low < SURELY
                surely[name][1] += p_high < SURELY
                surely[name][2] += chance[0]
                surely[name][3] += chance[1]
    lines.append("")
    lines.append("Coverage cells (the four n and the two stops of every dataset x regime) against the band "
                 "0.93-0.97 and issue 9's floor 0.92:")
    for name, covs in coverages.items():
        if covs:
            c = np.asarray(covs)
            lines.append(f"# {name}: {int(((c >= 0.93) & (c <= 0.97)).sum())} of {c.size} cells inside, "
                         f"{int((c < 0.93).sum())} below ({int((c < 0.92).sum())} below 0.92), "
                         f"{int((c > 0.97).sum())} above; mean coverage {c.mean():.4f}; surely below / above 95 % "
                         f"(exact binomial p < {SURELY:g}): {surely[name][0]:.0f} / {surely[name][1]:.0f} "
                         f"(by chance {surely[name][2]:.1f} / {surely[name][3]:.1f})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(ALL_DATASETS))
    parser.add_argument("--regimes", default="interpolation,extrapolation")
    parser.add_argument("--methods", default="rs-mean,bayesame,bayesame-paper")
    parser.add_argument("--draws", default="0-4", help="draw ids, e.g. 0-4 or 0,3,7")
    parser.add_argument("--seeds", type=int, default=4, help="seeds per draw")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/robustness")
    parser.add_argument("--report-only", action="store_true", help="print the table of what --out holds")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args(argv)
    if args.smoke:  # and its records in a temporary folder, not with the committed ones
        smoke_dir = tempfile.TemporaryDirectory()
        args.datasets, args.regimes, args.methods, args.draws, args.seeds, args.workers, args.out = (
            "math", "interpolation", "rs-mean,bayes-aipw", "0", 1, 1, smoke_dir.name)
    from activeeval.experiments.runner import check_methods

    methods = list(check_methods(split_method_list(args.methods)))  # canonical labels, as the results hold them
    if "rs-mean" not in methods:
        methods.insert(0, "rs-mean")  # every ratio is to RS-Mean on the same draw
    draws = parse_draws(args.draws)
    out = Path(args.out)
    names = [d for d in args.datasets.split(",") if d]
    regimes = [r for r in args.regimes.split(",") if r]
    records = []
    start = time.perf_counter()
    for dataset in names:
        for regime in regimes:
            for draw in draws:
                if args.report_only:
                    key = key_of(dataset, regime, draw, args.seeds, methods)
                    path = out / f"{dataset}_{regime}_d{draw}_s{args.seeds}_{key}.json"
                    if path.exists():
                        records.append(json.loads(path.read_text()))
                    continue
                rec = run_draw(dataset, regime, draw, args.seeds, methods, args.workers, out)
                records.append(rec)
                print(f"# {dataset} {regime} draw {draw}: {rec['wall_s']:.0f} s", flush=True)
    print(f"robustness: {len(draws)} draws x {args.seeds} seeds x 10 targets, 50 % references; "
          f"wall {time.perf_counter() - start:.0f} s")
    print(report(records, methods))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
