"""Efficiency of each method on every dataset: honest coverage, effective sample size, accuracy, items at the stop.

The issue-25 table. For every dataset × regime (interpolation, extrapolation)
the backtest protocol (SPEC §5: 50 % references, ``--targets`` targets ×
``--seeds`` seeds, one split draw; ``--ref-fraction 1``: every other model a
reference, as a session on a leaderboard has) is run for each method, and the table gives,
per dataset × regime × method and budget n/N = 2.5, 5, 10, 25 % and at the
automatic stops (ε1 = 0.005, W = 30, ε2 = 0.01 / 0.03):

* ``cov``: realised coverage of the nominal 95 % interval (the share of runs
  whose interval holds the target's full-benchmark score);
* ``ESS``: median over runs of the **effective sample size ratio** — the
  variance of the mean of n items drawn uniformly at random without
  replacement from *this* target's scores, S²(1 − n/N)/n with S² its item
  variance, divided by the variance the method *reports* (for an interval
  with two sides of different lengths, ``Estimate.shift``, that of the
  symmetric interval of its width). ESS 2: the interval
  is as narrow as twice the items sampled at random would give. It counts
  only where coverage holds (an interval that is narrow because it is wrong
  has a large ESS and a low ``cov``);
* ``<1``: the share of runs with ESS below 1 (an interval wider than random
  sampling's);
* ``MAE``: mean absolute error × 100;
* at the stops, ``n/N`` (mean items used over N) and ``/RS``: that divided by
  RS-Mean's on the same runs (its item orders are the other methods' random
  orders).

Every (dataset, regime, draw, method) is saved under ``--out`` as JSON as soon
as it is done and reused when the command runs again with the same settings,
so methods can be added to a table without replaying the others.

Usage (from the repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/efficiency.py                  # every dataset, both regimes
    OPENBLAS_NUM_THREADS=1 python benchmarks/efficiency.py --datasets ifeval,musr --regimes extrapolation \\
        --methods 'rs-mean,bayesame,aipw-ridge'
    python benchmarks/efficiency.py --report-only                             # the table of what --out holds
    OPENBLAS_NUM_THREADS=1 python benchmarks/efficiency.py --ref-fraction 1 --seeds 1 --draw 0-9 \\
        --regimes interpolation --datasets ifeval,musr --methods 'rs-mean,bayesame'   # every other model a reference
    python benchmarks/efficiency.py --smoke                                   # seconds: CI keeps it running
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import warnings
from pathlib import Path
from statistics import NormalDist

import numpy as np

from activeeval import datasets
from activeeval.experiments.metrics import chance_flagged, coverage_tails, covered, stop_indices
from activeeval.experiments.protocol import BacktestConfig, parse_draws
from activeeval.experiments.runner import check_methods, run_backtest
from activeeval.methods.registry import split_method_list

ALL_DATASETS = (
    "ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
    "wmt21_en-zh_chrf", "wmt21_zh-en_chrf",
)
BUDGETS = (0.025, 0.05, 0.10, 0.25)
#: Fixed numbers of items of the peer accuracy table (item 4 of issue 25).
AT_N = (25, 50, 100, 200)
STOPS = (0.01, 0.03)
Z = NormalDist().inv_cdf(0.975)
DEFAULT_METHODS = "rs-mean,bayesame,aipw-ridge,rs-learn"
#: Datasets with few models: fewer targets, more seeds (the same 200 runs per cell).
FEW_MODELS = {"mmlu_pro": (10, 20), "wmt21_en-zh_chrf": (10, 20), "wmt21_zh-en_chrf": (8, 25)}


def run_records(result, method: str, budgets: tuple[float, ...] = BUDGETS) -> dict:
    """Per run (target × seed): estimate, reported variance and the random-sampling variance at each cell."""
    cfg, truth, n_items = result.config, result.truth, result.n_items
    mu, var = result.means[method], result.vars[method]
    shift = result.shifts_of(method)  # None: symmetric intervals
    matrix_scores = result.target_scores  # (T, N)
    s2 = matrix_scores.var(axis=1, ddof=1)  # the target's own item variance
    cells: dict[str, dict] = {}

    def at(i: int) -> np.ndarray | None:
        return None if shift is None else shift[..., i]

    for b in budgets:
        n = max(2, round(b * n_items))
        i = n - 1
        cells[f"{b}"] = _cell(mu[..., i], var[..., i], truth, s2, np.full(mu.shape[:2], n), n_items, at(i))
    for n in AT_N:
        if n < n_items:
            cells[f"n{n}"] = _cell(mu[..., n - 1], var[..., n - 1], truth, s2, np.full(mu.shape[:2], n), n_items,
                                   at(n - 1))
    for e2 in STOPS:
        stop = stop_indices(mu, var, cfg.epsilon1, e2, cfg.window, cfg.level)
        idx = stop[..., None] - 1
        est = np.take_along_axis(mu, idx, -1)[..., 0]
        v = np.take_along_axis(var, idx, -1)[..., 0]
        sh = None if shift is None else np.take_along_axis(shift, idx, -1)[..., 0]
        cells[f"stop{e2}"] = _cell(est, v, truth, s2, stop, n_items, sh)
    return cells


def _cell(est: np.ndarray, var: np.ndarray, truth: np.ndarray, s2: np.ndarray, n: np.ndarray, n_items: int,
          shift: np.ndarray | None = None) -> dict:
    # an interval with two sides of different lengths reports the variance of the symmetric interval of its
    # width (Estimate.shift): its ESS counts its width
    rs_var = s2[:, None] * (1.0 - n / n_items) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        ess = np.where(var > 0, rs_var / np.maximum(var, 1e-300), np.where(rs_var > 0, np.inf, 1.0))
    return {
        "covered": covered(est, var, truth, shifts=shift).ravel().astype(int).tolist(),
        "ess": [float(x) if np.isfinite(x) else 1e300 for x in ess.ravel()],
        "abs_err": np.abs(est - truth[:, None]).ravel().tolist(),
        "n": np.asarray(n, dtype=float).ravel().tolist(),
    }


def key_of(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:10]


def shape_of(dataset: str, targets: int | None, seeds: int | None) -> tuple[int, int]:
    t, s = FEW_MODELS.get(dataset, (20, 10))
    return targets or t, seeds or s


def code_fingerprint() -> str:
    """The installed activeeval's source hash (the user cache's): a cached cell records the code that computed it."""
    from activeeval.user_cache import code_fingerprint as package_hash

    return package_hash()[:12]


def run_protocol(dataset: str, regime: str, draw: int, method: str, targets: int, seeds: int, workers: int,
                 ref_fraction: float = 0.5):
    """The backtest of one (dataset, regime, draw, method) on this table's protocol (``ref_fraction`` of the pool
    as references, 50 % by default; split_seed = root_seed = the draw), with the targets' item scores
    (``target_scores``, targets × N) attached."""
    matrix = datasets.load(dataset)
    config = BacktestConfig(methods=(method,), regime=regime, n_targets=targets, n_seeds=seeds, split_seed=draw,
                            root_seed=draw, ref_fraction=ref_fraction)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the missing-score notes: the documented default policy
        result = run_backtest(matrix, config, workers=workers)
    result.target_scores = np.stack([matrix.model_scores(t) for t in result.split.targets]).astype(float)
    return result


def cell_path(out: Path, dataset: str, regime: str, draw: int, targets: int, seeds: int, method: str,
              ref_fraction: float = 0.5) -> Path:
    """Where a cell is kept: the table's protocol (50 % references) under the names it always had, another
    reference fraction with ``_r<fraction>`` after the draw."""
    refs = "" if ref_fraction == 0.5 else f"_r{ref_fraction:g}"
    return out / f"{dataset}_{regime}_d{draw}{refs}_{targets}x{seeds}_{key_of(method)}.json"


def run_cell(dataset: str, regime: str, draw: int, method: str, targets: int, seeds: int, workers: int,
             out: Path, recompute: bool = False, ref_fraction: float = 0.5) -> dict:
    path = cell_path(out, dataset, regime, draw, targets, seeds, method, ref_fraction)
    if path.exists() and not recompute:
        record = json.loads(path.read_text())
        if record.get("code") != code_fingerprint():
            # the key is the method's spec alone, so a cell computed before a code change is found too: say so
            print(f"efficiency: {path.name} was computed by other activeeval code (code "
                  f"{record.get('code', 'not recorded')}); shown as cached — pass --recompute to run it again",
                  file=sys.stderr)
        return record
    start = time.perf_counter()
    result = run_protocol(dataset, regime, draw, method, targets, seeds, workers, ref_fraction)
    record = {
        "dataset": dataset, "regime": regime, "draw": draw, "method": method, "targets": targets, "seeds": seeds,
        "ref_fraction": ref_fraction,
        "n_items": result.n_items, "n_refs": int(np.median(result.reference_sizes)) if result.reference_sizes else 0,
        "wall_s": time.perf_counter() - start, "cells": run_records(result, method), "code": code_fingerprint(),
    }
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return record


def summarise(cell: dict) -> dict:
    cov = np.asarray(cell["covered"], float)
    ess = np.asarray(cell["ess"], float)
    ess[ess >= 1e300] = np.inf  # stored as 1e300 (JSON has no infinity): a reported variance of 0
    return {"cov": float(cov.mean()), "ess": float(np.median(ess)), "below1": float((ess < 1).mean()),
            "mae": float(np.mean(cell["abs_err"]) * 100), "n": float(np.mean(cell["n"])), "runs": int(cov.size)}


def pooled(records: list[dict]) -> list[dict]:
    """One record per (dataset, regime, method): the runs of several draws side by side (each cell's lists
    concatenated in the order given, so paired differences stay paired), ``n_refs`` their median."""
    merged: dict[tuple[str, str, str], dict] = {}
    for rec in records:
        key = (rec["dataset"], rec["regime"], rec["method"])
        if key not in merged:
            cells = {c: {k: list(v) for k, v in cell.items()} for c, cell in rec["cells"].items()}
            merged[key] = {**rec, "cells": cells, "_refs": [rec["n_refs"]]}
            continue
        into = merged[key]
        into["_refs"].append(rec["n_refs"])
        for c, cell in rec["cells"].items():
            for k, v in cell.items():
                into["cells"][c][k].extend(v)
    out = []
    for rec in merged.values():
        refs = rec.pop("_refs")
        out.append({**rec, "n_refs": int(np.median(refs))})
    return out


def report(records: list[dict], methods: list[str]) -> str:
    budget_cols = [f"{b}" for b in BUDGETS]
    head = (f"{'dataset':<17} {'regime':<6} {'refs':>4} {'method':<22} "
            + " ".join(f"{'cov/ESS/<1/MAE @' + f'{100 * b:g}%':>26}" for b in BUDGETS)
            + " " + " ".join(f"{'stop' + f'{e}' + ' cov/ESS/n/N//RS':>30}" for e in STOPS) + f" {'runs':>5}")
    lines = [head, "-" * len(head)]
    by_cell: dict[tuple[str, str], dict[str, dict]] = {}
    for rec in pooled(records):
        by_cell.setdefault((rec["dataset"], rec["regime"]), {})[rec["method"]] = rec
    for (dataset, regime), recs in by_cell.items():
        rs = recs.get("rs-mean")
        for name in methods:
            rec = recs.get(name)
            if rec is None:
                continue
            parts = []
            for c in budget_cols:
                s = summarise(rec["cells"][c])
                parts.append(f"{s['cov']:6.3f}/{s['ess']:5.2f}/{s['below1']:4.2f}/{s['mae']:6.2f}".rjust(26))
            for e2 in STOPS:
                s = summarise(rec["cells"][f"stop{e2}"])
                n_rs = summarise(rs["cells"][f"stop{e2}"])["n"] if rs else float("nan")
                parts.append(f"{s['cov']:6.3f}/{s['ess']:5.2f}/{s['n'] / rec['n_items']:5.3f}/{s['n'] / n_rs:5.2f}"
                             .rjust(30))
            runs = summarise(rec["cells"][budget_cols[0]])["runs"]
            lines.append(f"{dataset:<17} {regime[:6]:<6} {rec['n_refs']:>4} {name:<22} " + " ".join(parts)
                         + f" {runs:>5}")
    lines += ["", mae_table(by_cell, methods)]
    # the headline: items at the ε2 = 0.03 stop against RS-Mean's, median over the dataset × regime cells
    for name in methods:
        ratios = [summarise(r[name]["cells"]["stop0.03"])["n"] / summarise(r["rs-mean"]["cells"]["stop0.03"])["n"]
                  for r in by_cell.values() if name in r and "rs-mean" in r]
        if ratios and name != "rs-mean":
            lines.append(f"# {name}: items at the eps2 = 0.03 stop / RS-Mean's, median over {len(ratios)} "
                         f"dataset x regime cells: {np.median(ratios):.3f}")
    for name in methods:
        if name != "rs-mean":
            lines += _mae_against_random(by_cell, name)
    lines += ["", targets_table(by_cell, methods)]
    return "\n".join(lines)


def _mae_against_random(by_cell: dict[tuple[str, str], dict[str, dict]], name: str) -> list[str]:
    """Per regime, in how many (dataset, n) cells of the MAE table ``name``'s MAE is below RS-Mean's (the README's
    headline)."""
    out = []
    for regime in ("interpolation", "extrapolation"):
        below = cells = 0
        for (_, reg), recs in by_cell.items():
            if reg != regime or name not in recs or "rs-mean" not in recs:
                continue
            for n in AT_N:
                mine, rs = recs[name]["cells"].get(f"n{n}"), recs["rs-mean"]["cells"].get(f"n{n}")
                if mine is None or rs is None:
                    continue
                cells += 1
                below += float(np.mean(mine["abs_err"])) < float(np.mean(rs["abs_err"]))
        if cells:
            out.append(f"# {name}: MAE below RS-Mean's in {below} of {cells} {regime} cells (n = "
                       f"{', '.join(map(str, AT_N))})")
    return out


#: Issue 25's coverage band: below it the interval is a risk, above it a waste of items.
COVERAGE_BAND = (0.93, 0.97)


def _outside_by_chance(runs: int, lo: float, hi: float, level: float = 0.95) -> float:
    """P(the coverage of ``runs`` independent runs of an exact ``level`` interval lies outside [lo, hi])."""
    inside = [k for k in range(runs + 1) if lo <= k / runs <= hi]
    if not inside:
        return 1.0
    below = coverage_tails(inside[0] - 1, runs, level)[0] if inside[0] > 0 else 0.0
    above = coverage_tails(inside[-1] + 1, runs, level)[1] if inside[-1] < runs else 0.0
    return below + above


#: A cell is "surely" below or above 95 % at this one-sided exact binomial p-value (at most 1 cell in 100 by chance).
SURELY = 0.01


def targets_table(by_cell: dict[tuple[str, str], dict[str, dict]], methods: list[str]) -> str:
    """Per method, issue 25's targets over every (dataset, regime) and budget/stop cell: how many cells cover
    inside 93–97 %, which lie below or above, and which have a median ESS below 1; and of each other method's cells
    above, those where the last RS-Mean listed (random items with its floor) is above too (and how many of them
    that RS-Mean was not run on)."""
    lo, hi = COVERAGE_BAND
    cols = [f"{b}" for b in BUDGETS] + [f"stop{e}" for e in STOPS]
    names = {f"{b}": f"{100 * b:g}%" for b in BUDGETS} | {f"stop{e}": f"stop{e}" for e in STOPS}
    runs = [summarise(rec["cells"][cols[0]])["runs"] for recs in by_cell.values() for rec in recs.values()]
    n = int(np.median(runs)) if runs else 0
    chance = _outside_by_chance(n, lo, hi) if n else float("nan")
    lines = [f"Cells against the coverage band {lo:.2f}-{hi:.2f} and ESS 1 ({len(cols)} cells per dataset x regime; "
             f"with {n} runs a cell, intervals covering exactly 95 % fall outside the band in {100 * chance:.0f} % "
             "of cells by chance):"]
    # random items with the same floor over-cover there too: the floor binds (issue 25, item 1 lets such cells
    # over-cover, listed); the last RS-Mean listed is the one compared against (plain RS-Mean comes first, a variant
    # given, e.g. with the default's two-sided floor, `rs-mean[interval=sides]`, after it)
    random_spec = next((m for m in reversed(methods) if m.split("[")[0] == "rs-mean"), None)

    def where_of(dataset: str, regime: str, c: str) -> str:
        return f"{dataset}/{regime[:6]}@{names[c]}"

    random_cells: set[str] = set()  # the cells RS-Mean was run on
    random_above: set[str] = set()
    for (dataset, regime), recs in by_cell.items():
        rec = recs.get(random_spec) if random_spec is not None else None
        for c in cols if rec is not None else ():
            where = where_of(dataset, regime, c)
            random_cells.add(where)
            if summarise(rec["cells"][c])["cov"] > hi:
                random_above.add(where)
    for name in methods:
        below, above, low_ess, where_above, total = [], [], [], [], 0
        surely_below, surely_above, by_chance = [], [], [0.0, 0.0]
        for (dataset, regime), recs in by_cell.items():
            rec = recs.get(name)
            if rec is None:
                continue
            for c in cols:
                s = summarise(rec["cells"][c])
                total += 1
                where = where_of(dataset, regime, c)
                if s["cov"] < lo:
                    below.append(f"{where} {s['cov']:.3f}")
                elif s["cov"] > hi:
                    above.append(f"{where} {s['cov']:.3f}")
                    where_above.append(where)
                if s["ess"] < 1 and name != "rs-mean":
                    low_ess.append(f"{where} {s['ess']:.2f}")
                p_low, p_high = coverage_tails(round(s["cov"] * s["runs"]), s["runs"])
                chance = chance_flagged(s["runs"], SURELY)
                by_chance = [by_chance[0] + chance[0], by_chance[1] + chance[1]]
                if p_low < SURELY:
                    surely_below.append(where)
                elif p_high < SURELY:
                    surely_above.append(where)
        if not total:
            continue
        inside = total - len(below) - len(above)
        lines.append(f"# {name}: {inside} of {total} cells inside, {len(below)} below, {len(above)} above"
                     + ("" if name == "rs-mean" else f"; median ESS < 1 in {len(low_ess)}"))
        for label, cells in (("below", below), ("above", above), ("ESS<1", low_ess)):
            if cells and not (name == "rs-mean" and label == "ESS<1"):
                lines.append(f"    {label}: " + ", ".join(cells))
        listed = [f"{len(cells)} {label}" + (f" ({', '.join(cells)})" if cells else "")
                  for label, cells in (("below", surely_below), ("above", surely_above))]
        lines.append(f"    surely off 95 % (one-sided exact binomial p < {SURELY:g}; of an exact 95 % interval over "
                     f"independent runs, {by_chance[0]:.1f} below and {by_chance[1]:.1f} above by chance): "
                     + ", ".join(listed))
        if random_spec is not None and name.split("[")[0] != "rs-mean" and where_above:
            both = [w for w in where_above if w in random_above]
            unseen = sum(w not in random_cells for w in where_above)
            lines.append(f"    above where {random_spec} (random items, its floor) is above too: {len(both)} of "
                         f"{len(above)}" + (f" ({unseen} of them not run with {random_spec})" if unseen else "")
                         + (": " + ", ".join(both) if both else ""))
    return "\n".join(lines)


def mae_table(by_cell: dict[tuple[str, str], dict[str, dict]], methods: list[str]) -> str:
    """MAE × 100 at n = 25, 50, 100, 200 items, with the paired standard error of each method's difference
    from the first BayesAME method listed (``*``: that method is worse by more than one paired standard error)."""
    base = next((m for m in methods if m.startswith("bayesame")), None)
    head = f"{'MAE x100 at n':<24} {'method':<30} " + " ".join(f"{'n=' + str(n):>16}" for n in AT_N)
    lines = [head, "-" * len(head)]
    for (dataset, regime), recs in by_cell.items():
        for name in methods:
            rec = recs.get(name)
            if rec is None:
                continue
            parts = []
            for n in AT_N:
                cell = rec["cells"].get(f"n{n}")
                if cell is None:
                    parts.append(f"{'-':>16}")
                    continue
                err = np.asarray(cell["abs_err"]) * 100
                text = f"{err.mean():6.2f}"
                if base and name != base and base in recs and f"n{n}" in recs[base]["cells"]:
                    diff = np.asarray(recs[base]["cells"][f"n{n}"]["abs_err"]) * 100 - err
                    se = diff.std(ddof=1) / np.sqrt(diff.size)
                    text += f" ({diff.mean():+5.2f}{'*' if diff.mean() > se else ' '})"
                parts.append(f"{text:>16}")
            lines.append(f"{dataset + ' ' + regime[:6]:<24} {name:<30} " + " ".join(parts))
    if base:
        lines.append(f"(in brackets: {base}'s MAE minus the method's, paired over runs; * = {base} worse by more "
                     "than one paired standard error)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(ALL_DATASETS))
    parser.add_argument("--regimes", default="interpolation,extrapolation")
    parser.add_argument("--methods", default=DEFAULT_METHODS)
    parser.add_argument("--draw", default="0",
                        help="split and seed draw (split_seed = root_seed); several (0-9, 0,3) are pooled per cell")
    parser.add_argument("--targets", type=int, default=None, help="targets (default 20; fewer on small sets)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds (default 10; 200 runs per cell in all)")
    parser.add_argument("--ref-fraction", type=float, default=0.5,
                        help="share of the non-target models each seed takes as references (default 0.5; 1: every "
                             "other model, as a session on a leaderboard has; then the seeds share one reference set "
                             "and BayesAME's runs repeat, so take --seeds 1 and several draws, --draw 0-9)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/efficiency")
    parser.add_argument("--report-only", action="store_true", help="print the table of what --out holds")
    parser.add_argument("--recompute", action="store_true",
                        help="run the cells again even where --out holds them (after a code change)")
    parser.add_argument("--smoke", action="store_true", help="a few seconds: mmlu, 2 targets, 1 seed, a temp --out")
    args = parser.parse_args(argv)
    if args.smoke:
        args.datasets, args.regimes, args.methods = "mmlu", "interpolation", "rs-mean,aipw-ridge"
        args.targets, args.seeds, args.workers = 2, 1, 1
        args.out = tempfile.mkdtemp(prefix="efficiency-smoke-")
    methods = list(check_methods(split_method_list(args.methods)))
    if "rs-mean" not in methods:
        methods.insert(0, "rs-mean")  # the stops are compared with RS-Mean's
    out = Path(args.out)
    draws = parse_draws(str(args.draw))
    records = []
    start = time.perf_counter()
    for dataset in [d for d in args.datasets.split(",") if d]:
        targets, seeds = shape_of(dataset, args.targets, args.seeds)
        for regime in [r for r in args.regimes.split(",") if r]:
            for method in methods:
                for draw in draws:
                    if args.report_only:
                        path = cell_path(out, dataset, regime, draw, targets, seeds, method, args.ref_fraction)
                        if path.exists():
                            records.append(json.loads(path.read_text()))
                        continue
                    rec = run_cell(dataset, regime, draw, method, targets, seeds, args.workers, out, args.recompute,
                                   args.ref_fraction)
                    records.append(rec)
                    print(f"# {dataset} {regime} {method} draw {draw}: {rec['wall_s']:.0f} s", file=sys.stderr,
                          flush=True)
    print(f"efficiency: {100 * args.ref_fraction:g} % references, draw {args.draw}; "
          f"wall {time.perf_counter() - start:.0f} s")
    print(report(records, methods))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
