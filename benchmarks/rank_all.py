"""The adaptive ranker on every shared dataset: τ against the baselines, ties, false ties, honest confidence.

For every dataset and ranker configuration (``--configs``: a method, and for
CAT its calibration; optionally the pair-aware item choice) the paper's
protocol is run (``activeeval rank-backtest``: ``--seeds`` seeds × 5 folds of
4 held-out models, 20 items per model, γ = 0.95, 10 warm-up items) and the
table gives, per dataset × configuration:

* ``τ adapt`` / ``τ static`` / ``τ random``: Kendall τ-b against the full
  ranking (mean over held-out sets) of the adaptive ranker, the static
  most-discriminating subset and random sampling at the adaptive ranker's spend;
* ``ties``: pairs reported as ties; ``false ties``: ground-truth-distinct
  pairs (paired bootstrap) reported as ties;
* ``conf``: confident pairs (of ``pairs``) and ``wrong`` among them;
  ``exp``: the wrong calls the ranker itself expects, Σ (1 − P) over its
  confident pairs ("-" in results saved before it was reported);
  ``acc``: pooled accuracy over all confident pairs (the honest number: a
  per-run mean that scores an empty run as 1 hides errors);
* ``s``: seconds for the configuration on this dataset.

Each (dataset, configuration) is saved as JSON under ``--out`` when done and
reused when the command is run again with the same settings.

Configurations: ``cat`` (consistent calibration, 2PL items and the local
error check, the default), ``cat-rasch`` (one-slope items), ``cat-paper``
(the paper's calibration and model), ``cat-partner`` / ``bayesame-partner``
(pair-aware item choice), ``bayesame``, ``bayesame-paper``; ``-nolocal``
turns CAT's local error check off.

Usage (from the repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/rank_all.py --seeds 5 --out benchmarks/results/rank_all
    python benchmarks/rank_all.py --report-only --out benchmarks/results/rank_all
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import tempfile
import time
import warnings
from pathlib import Path

from activeeval import datasets
from activeeval.experiments.ranking_eval import run_rank_backtest, summarize_rank_backtest

ALL_DATASETS = (
    "ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
    "wmt21_en-zh_chrf", "wmt21_zh-en_chrf",
)
CONFIGS = {
    "cat": {"method": "cat"},
    "cat-nolocal": {"method": "cat", "local_error": False},
    "cat-paper": {"method": "cat", "calibration": "paper"},
    "cat-rasch": {"method": "cat", "response": "rasch"},
    "cat-rasch-nolocal": {"method": "cat", "response": "rasch", "local_error": False},
    "cat-partner": {"method": "cat", "pairing": "partner"},
    "cat-partner-nolocal": {"method": "cat", "pairing": "partner", "local_error": False},
    "bayesame": {"method": "bayesame"},
    "bayesame-partner": {"method": "bayesame", "pairing": "partner"},
    "bayesame-paper": {"method": "bayesame-paper"},
}
KEYS = ("adaptive_tau", "static_tau", "random_tau", "fixed_tau", "ties_reported", "false_tie_rate",
        "n_confident", "n_wrong_confident", "expected_wrong_confident", "n_pairs", "pooled_confident_accuracy",
        "items_adaptive")


def run_one(name: str, config: str, seeds: int, folds: int, holdout: int, budget: float, max_items: int = 0) -> dict:
    matrix = datasets.load(name)
    if max_items:
        matrix = matrix.select_items(list(matrix.item_ids[:max_items]))
    opts = dict(CONFIGS[config])
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # incomplete reference models dropped: expected, said in the docs
        records = run_rank_backtest(matrix, folds=folds, holdout=holdout, seeds=seeds, budget_per_model=budget, **opts)
    s = summarize_rank_backtest(records)
    out = {k: s[k] for k in KEYS}
    out["seconds"] = time.perf_counter() - start
    return out


def fmt(x: float, d: int = 3) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(ALL_DATASETS))
    ap.add_argument("--configs", default="cat,cat-paper,bayesame")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--holdout", type=int, default=4)
    ap.add_argument("--budget-per-model", type=float, default=20.0)
    ap.add_argument("--out", default="benchmarks/results/rank_all")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:  # and its records in a temporary folder, not with the committed ones
        smoke_dir = tempfile.TemporaryDirectory()
        args.datasets, args.configs, args.seeds, args.folds, args.holdout, args.budget_per_model, args.out = (
            "math", "cat", 1, 1, 2, 11.0, smoke_dir.name)
        args.max_items = 60
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        raise SystemExit(f"unknown --configs {unknown}; known: {', '.join(CONFIGS)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    key = f"s{args.seeds}-f{args.folds}-h{args.holdout}-b{args.budget_per_model:g}"
    key += f"-i{args.max_items}" if args.max_items else ""  # the names saved before it
    rows = []
    for name in names:
        for config in configs:
            tag = hashlib.sha1(json.dumps(CONFIGS[config], sort_keys=True).encode()).hexdigest()[:8]
            path = out / f"{name}__{config}__{key}__{tag}.json"
            if path.exists():
                res = json.loads(path.read_text())
            elif args.report_only:
                continue
            else:
                res = run_one(name, config, args.seeds, args.folds, args.holdout, args.budget_per_model, args.max_items)
                path.write_text(json.dumps(res, indent=1))
                print(f"done {name} {config} in {res['seconds']:.0f} s", flush=True)
            rows.append((name, config, res))
    print(f"\nrank-backtest protocol: {args.seeds} seeds x {args.folds} folds of {args.holdout} held-out models, "
          f"{args.budget_per_model:g} items per model, gamma 0.95, 10 warm-up items")
    head = (f"{'dataset':<17} {'config':<19} {'τ adapt':>7} {'τ static':>8} {'τ random':>8} {'ties':>5} "
            f"{'false ties':>10} {'conf':>5} {'wrong':>5} {'exp':>5} {'pairs':>5} {'acc':>6} {'s':>6}")
    print(head)
    print("-" * len(head))
    for name, config, r in rows:
        exp = fmt(r["expected_wrong_confident"], 1) if "expected_wrong_confident" in r else "-"
        print(f"{name:<17} {config:<19} {fmt(r['adaptive_tau']):>7} {fmt(r['static_tau']):>8} "
              f"{fmt(r['random_tau']):>8} {fmt(r['ties_reported'], 2):>5} {fmt(r['false_tie_rate'], 2):>10} "
              f"{r['n_confident']:>5} {r['n_wrong_confident']:>5} {exp:>5} {r['n_pairs']:>5} "
              f"{fmt(r['pooled_confident_accuracy']):>6} {r['seconds']:>6.0f}")


if __name__ == "__main__":
    main()
