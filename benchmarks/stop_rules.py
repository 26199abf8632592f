"""What the stopping rule's stability test (ε1) buys: coverage and items at the stop with it and without it.

Algorithm 1 (the paper's, and every session's) stops at the first n ≥ W where
the 95 % interval is at most ε2 wide *and* the estimate moved at most ε1 over
the last W items (ε1 = 0.005, W = 30). Issue 25 asks how often ε1 is what
binds once ε2 is met, and what that buys in coverage. For every dataset ×
regime the backtest protocol of ``benchmarks/efficiency.py`` (50 % references,
20 targets × 10 seeds, one split draw) is run for each method, and per ε2 the
table gives, for the full rule (``width+stable``) and the width alone
(``width``, ε1 = ∞; the same trajectories, read again):

* ``cov``: coverage of the 95 % interval at the stop;
* ``n/N``: mean items used over N;
* ``bind``: the share of runs that the stability test held past the width's
  stop (the full rule stops later);
* ``cov held``: among those runs, coverage at the width's stop → at the full
  rule's stop (what waiting bought them).

A method's selection does not depend on ε1 or ε2, so one trajectory per run
gives both rules (``experiments.metrics.stop_indices``). Every (dataset,
regime, draw, method) is saved under ``--out`` as JSON and reused.

Usage (repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/stop_rules.py --datasets ifeval,musr,arc_challenge,alpacaeval2
    python benchmarks/stop_rules.py --report-only --datasets ifeval,musr
    python benchmarks/stop_rules.py --smoke
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from efficiency import ALL_DATASETS, run_protocol, shape_of  # the same protocol, datasets and shapes (a sibling script)

from activeeval.experiments.metrics import covered, stop_indices
from activeeval.experiments.runner import check_methods
from activeeval.methods.registry import split_method_list

STOPS = (0.01, 0.03)


def stop_cells(means: np.ndarray, variances: np.ndarray, truth: np.ndarray, epsilon1: float, window: int,
               level: float = 0.95, shifts: np.ndarray | None = None) -> dict:
    """Per ε2 of :data:`STOPS`: each run's stop and whether it covered, under the full rule and the width alone.

    ``means``, ``variances``, ``shifts`` (None: symmetric intervals): (targets, seeds, N) trajectories; ``truth``:
    (targets,).
    """
    out = {}
    for e2 in STOPS:
        cell = {}
        for rule, e1 in (("full", epsilon1), ("width", np.inf)):
            stop = stop_indices(means, variances, e1, e2, window, level)
            idx = stop[..., None] - 1
            est = np.take_along_axis(means, idx, -1)[..., 0]
            var = np.take_along_axis(variances, idx, -1)[..., 0]
            shift = None if shifts is None else np.take_along_axis(shifts, idx, -1)[..., 0]
            cell[rule] = {"n": stop.ravel().astype(int).tolist(),
                          "covered": covered(est, var, truth, level, shift).ravel().astype(int).tolist()}
        out[f"{e2}"] = cell
    return out


def summarise(cell: dict, n_items: int) -> dict:
    """Coverage and mean n/N of both rules; the share of runs the stability test held; their coverage at each."""
    full_n, width_n = np.asarray(cell["full"]["n"]), np.asarray(cell["width"]["n"])
    full_c, width_c = np.asarray(cell["full"]["covered"], float), np.asarray(cell["width"]["covered"], float)
    held = full_n > width_n
    return {
        "cov_full": float(full_c.mean()), "cov_width": float(width_c.mean()),
        "n_full": float(full_n.mean() / n_items), "n_width": float(width_n.mean() / n_items),
        "bind": float(held.mean()), "held": int(held.sum()),
        "held_width": float(width_c[held].mean()) if held.any() else float("nan"),
        "held_full": float(full_c[held].mean()) if held.any() else float("nan"),
        "runs": int(full_n.size),
    }


def cell_path(out: Path, dataset: str, regime: str, draw: int, method: str, targets: int, seeds: int) -> Path:
    """Where a (dataset, regime, draw, method) cell is kept: the method spec made a file name."""
    safe = "".join(c if c.isalnum() or c in "-_=" else "_" for c in method)
    return out / f"{dataset}_{regime}_d{draw}_{targets}x{seeds}_{safe}.json"


def run_cell(dataset: str, regime: str, draw: int, method: str, targets: int, seeds: int, workers: int,
             out: Path) -> dict:
    path = cell_path(out, dataset, regime, draw, method, targets, seeds)
    if path.exists():
        return json.loads(path.read_text())
    start = time.perf_counter()
    result = run_protocol(dataset, regime, draw, method, targets, seeds, workers)
    config = result.config
    record = {
        "dataset": dataset, "regime": regime, "draw": draw, "method": method, "targets": targets, "seeds": seeds,
        "n_items": result.n_items, "epsilon1": config.epsilon1, "window": config.window,
        "wall_s": time.perf_counter() - start,
        "cells": stop_cells(result.means[method], result.vars[method], result.truth, config.epsilon1,
                            config.window, config.level, result.shifts_of(method)),
    }
    out.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record))
    tmp.replace(path)
    return record


def report(records: list[dict]) -> str:
    head = (f"{'dataset':<17} {'regime':>6} {'method':<12} {'eps2':>5}  {'cov width+stable':>16} {'cov width':>9}  "
            f"{'n/N width+stable':>16} {'n/N width':>9}  {'bind':>5} {'cov held: width -> full':>24} {'runs':>5}")
    lines = [head, "-" * len(head)]
    for rec in records:
        for e2, cell in rec["cells"].items():
            s = summarise(cell, rec["n_items"])
            held = (f"{s['held_width']:.3f} -> {s['held_full']:.3f} ({s['held']})" if s["held"] else "-")
            lines.append(f"{rec['dataset']:<17} {rec['regime'][:6]:>6} {rec['method']:<12} {e2:>5}  "
                         f"{s['cov_full']:>16.3f} {s['cov_width']:>9.3f}  {s['n_full']:>16.3f} {s['n_width']:>9.3f}  "
                         f"{s['bind']:>5.2f} {held:>24} {s['runs']:>5}")
    # over every cell of each method: runs held, what it bought, what it cost
    for method in dict.fromkeys(r["method"] for r in records):
        for e2 in STOPS:
            cells = [(r["cells"][f"{e2}"], r["n_items"]) for r in records if r["method"] == method]
            held = sum(summarise(c, n)["held"] for c, n in cells)
            runs = sum(summarise(c, n)["runs"] for c, n in cells)
            gained = sum(int(np.sum(np.asarray(c["full"]["covered"]) > np.asarray(c["width"]["covered"])))
                         for c, _ in cells)
            lost = sum(int(np.sum(np.asarray(c["full"]["covered"]) < np.asarray(c["width"]["covered"])))
                       for c, _ in cells)
            extra = [summarise(c, n)["n_full"] - summarise(c, n)["n_width"] for c, n in cells]
            lines.append(f"# {method}, eps2 = {e2}: the stability test held {held} of {runs} runs past the width's "
                         f"stop; {gained} of them covered only by waiting, {lost} covered only at the width's stop; "
                         f"extra items {np.median(extra) * 100:.1f} % of N (median over {len(cells)} cells)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(ALL_DATASETS))
    parser.add_argument("--regimes", default="interpolation,extrapolation")
    parser.add_argument("--methods", default="rs-mean,bayesame")
    parser.add_argument("--draw", type=int, default=0, help="split and seed draw (split_seed = root_seed)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/stop_rules")
    parser.add_argument("--report-only", action="store_true", help="print the table of what --out holds")
    parser.add_argument("--smoke", action="store_true", help="a few seconds: mmlu, 2 targets, 1 seed, a temp --out")
    args = parser.parse_args(argv)
    if args.smoke:
        args.datasets, args.regimes, args.methods, args.workers = "mmlu", "interpolation", "rs-mean", 1
        args.out = tempfile.mkdtemp(prefix="stop-rules-smoke-")
    methods = list(check_methods(split_method_list(args.methods)))
    out = Path(args.out)
    records = []
    start = time.perf_counter()
    for dataset in [d for d in args.datasets.split(",") if d]:
        targets, seeds = shape_of(dataset, 2, 1) if args.smoke else shape_of(dataset, None, None)
        for regime in [r for r in args.regimes.split(",") if r]:
            for method in methods:
                if args.report_only:
                    path = cell_path(out, dataset, regime, args.draw, method, targets, seeds)
                    if path.exists():
                        records.append(json.loads(path.read_text()))
                    continue
                rec = run_cell(dataset, regime, args.draw, method, targets, seeds, args.workers, out)
                records.append(rec)
                print(f"# {dataset} {regime} {method}: {rec['wall_s']:.0f} s", file=sys.stderr, flush=True)
    print(f"stop rules: 50 % references, draw {args.draw}; wall {time.perf_counter() - start:.0f} s")
    print(report(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
