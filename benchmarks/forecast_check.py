"""Is the cost forecast honest? Its 80 % range against the items real runs take, on every shared dataset (issue 27).

For every dataset and split seed, the backtest's interpolation split
(:func:`~activeeval.experiments.protocol.make_split`: ``--targets`` models
drawn at random) holds out the targets; the reference is the rest of the
models (``--refs`` of them, sampled as the backtest samples them; 1 = all, as
a session on that reference would have). With the backtest's shared method
seed of the split, the default BayesAME:

* forecasts the items to the stopping rule (:func:`activeeval.forecast.forecast_items`,
  what ``session new`` prints) from the reference alone;
* is run live on each target to the same rule
  (:func:`~activeeval.experiments.simulate.run_until_stop`, as the backtest's
  stopping-rule runs), and its items at the stop are compared with the forecast.

Per dataset the table gives the runs (targets × splits), how many stopped
inside the forecast's 80 % range [p10, p90] (≈ 80 % is honest), below and
above it, the median forecast and the median realised items (N: the
benchmark's items), the runs that switched to the design-based estimate, and
the seconds per forecast and per run (same process, same machine), and the
work the forecast counted (the commands make it by default up to
``activeeval.forecast.AUTO_WORK``).

    OPENBLAS_NUM_THREADS=1 python benchmarks/forecast_check.py                 # every shared dataset
    OPENBLAS_NUM_THREADS=1 python benchmarks/forecast_check.py --datasets mmlu --splits 1 --targets 4
    OPENBLAS_NUM_THREADS=1 python benchmarks/forecast_check.py --smoke         # seconds: one tiny case
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.experiments.simulate import run_until_stop
from activeeval.forecast import AUTO_WORK, forecast_items
from activeeval.methods.bayesame import BayesAME
from activeeval.stopping import default_rule

DATASETS = ("ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
            "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")


def check(name: str, splits: int, n_targets: int, refs: float, epsilon2: float, max_items: int | None) -> dict:
    matrix, _ = datasets.resolve(name).dropna("models")
    rows = []
    forecast_s, run_s, work = [], [], []
    for s in range(splits):
        split = make_split(matrix, "interpolation", n_targets, split_seed=s)
        pool = split.pool if refs >= 1 else sample_references(split.pool, refs, s)
        ref = matrix.select_models(list(pool))
        seed = method_seed(0, s, 0)  # the backtest's shared order: one method seed for the targets of a split
        method = BayesAME(ref, seed=seed)  # fits the kernel and calibrates (cached for the runs below)
        start = time.perf_counter()
        f = forecast_items(method, epsilon2=epsilon2, max_items=max_items)
        forecast_s.append(time.perf_counter() - start)
        work.append(f.work)
        rule = default_rule(epsilon2=epsilon2, max_items=max_items)
        for target in split.targets:
            m = BayesAME(ref, seed=seed)
            start = time.perf_counter()
            run_until_stop(m, np.asarray(matrix.model_scores(target), dtype=float), rule)
            run_s.append(time.perf_counter() - start)
            n = m.n_observed
            rows.append({"split": s, "target": target, "n": n, "low": f.low, "median": f.median, "high": f.high,
                         "switched": m.mode == "design", "extrapolated_from": f.extrapolated_from,
                         "forecast_reasons": f.reasons, "forecast_stops": list(f.stops)})
    n = np.array([r["n"] for r in rows])
    low, high = np.array([r["low"] for r in rows]), np.array([r["high"] for r in rows])
    return {"dataset": name, "N": matrix.n_items, "runs": len(rows), "inside": int(((n >= low) & (n <= high)).sum()),
            "below": int((n < low).sum()), "above": int((n > high).sum()),
            "forecast_median": float(np.median([r["median"] for r in rows])),
            "forecast_low": float(np.median(low)), "forecast_high": float(np.median(high)),
            "realised_median": float(np.median(n)), "switched": sum(r["switched"] for r in rows),
            "extrapolated": any(r["extrapolated_from"] for r in rows),
            "forecast_seconds": float(np.median(forecast_s)), "run_seconds": float(np.median(run_s)),
            "work": float(np.median(work)), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--splits", type=int, default=3, help="split seeds per dataset")
    ap.add_argument("--targets", type=int, default=10, help="held-out targets per split")
    ap.add_argument("--refs", type=float, default=1.0, help="fraction of the other models used as references")
    ap.add_argument("--epsilon2", type=float, default=0.03)
    ap.add_argument("--max-items", type=int, default=None)
    ap.add_argument("--out", type=Path, help="also write every run as JSON here")
    ap.add_argument("--smoke", action="store_true", help="one small case in seconds (CI: the script still runs)")
    a = ap.parse_args()
    if a.smoke:
        a.datasets, a.splits, a.targets, a.epsilon2 = "math", 1, 2, 0.2
    names = [d.strip() for d in a.datasets.split(",") if d.strip()]
    print(f"cost forecast vs real runs: interpolation splits {a.splits} x {a.targets} targets, refs {a.refs:g}, "
          f"epsilon2 {a.epsilon2:g}" + (f", max-items {a.max_items}" if a.max_items else ""))
    head = (f"{'dataset':<18} {'N':>6} {'runs':>5} {'inside':>7} {'below':>6} {'above':>6} {'forecast (80 %)':>19} "
            f"{'realised':>9} {'switched':>8} {'fc s':>6} {'run s':>6} {'work':>8}")
    print(head)
    print("-" * len(head))
    out = []
    for name in names:
        r = check(name, a.splits, a.targets, a.refs, a.epsilon2, a.max_items)
        out.append(r)
        rng = f"{r['forecast_median']:.0f} [{r['forecast_low']:.0f}, {r['forecast_high']:.0f}]"
        flag = "*" if r["extrapolated"] else ""
        print(f"{name:<18} {r['N']:>6} {r['runs']:>5} {r['inside'] / r['runs']:>7.0%} {r['below']:>6} "
              f"{r['above']:>6} {rng + flag:>19} {r['realised_median']:>9.0f} {r['switched']:>8} "
              f"{r['forecast_seconds']:>6.1f} {r['run_seconds']:>6.1f} {r['work']:>8.1e}", flush=True)
    runs = sum(r["runs"] for r in out)
    print(f"all: {sum(r['inside'] for r in out)} of {runs} runs inside the forecast's 80 % range "
          f"({sum(r['inside'] for r in out) / runs:.0%}); * the pass was cut and the rest extrapolated; work: the "
          f"forecast's count (the commands make it by default up to activeeval.forecast.AUTO_WORK = {AUTO_WORK:.0e})")
    if a.out is not None:
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
