"""Coverage of CAT's full-benchmark score interval (what `rank` and ranking `session status` print).

The backtest protocol (experiments/protocol.py ``make_split``, SPEC §5):
interpolation — ``--targets`` models drawn at random; extrapolation — the
``--targets`` best models, the next 20 % of all models discarded. Each seed
samples 50 % of the pool as the references, fits CAT's calibration on them
once (as the ranker does: one calibration shared by every model), and then

* every target is tested by CAT alone; its 95 % score interval
  (``ContinuousCAT.estimate().ci(0.95)``) is checked against its full-benchmark
  score at each of ``--items`` items;
* the targets are ranked in groups of ``--group`` by the adaptive ranker
  (γ = 0.95, 10 warm-up items, ``--budget-per-model`` items per model: the
  defaults of ``activeeval rank``), and each model's interval at the ranker's
  stop is checked the same way.

Each interval variant (``--intervals``) is read from the same items: ``model``
is CAT's interval before issue 25 (the response model's variance with the
ability's error model), ``honest`` the default since. An interval that is
not shown (the estimate carries a note instead) counts in ``shown`` and not
in the coverage. Per dataset × regime × variant the table gives coverage
(covered / shown), the share shown and the median width at each number of
items and at the stop (with its median items per model).

The ``--targets`` interpolation targets of one split are few, and a run's
error is mostly the target's own (a model the response model fits badly is
off by the same amount whichever references are drawn), so the seeds of one
split are far from independent: judge an interval over several *draws* of
the targets (``--draws``, e.g. ``0-9``: split_seed = the draw), pooled in
the table (``draws``: how many). Extrapolation's split (the best models as
targets) and its references (sampled per seed) do not depend on the draw, so
it is run for one draw only: give it more seeds instead.

Each (dataset, regime, draw, seed) is cached as JSON under ``--out`` and reused.

    OPENBLAS_NUM_THREADS=1 python benchmarks/cat_intervals.py --smoke
    OPENBLAS_NUM_THREADS=1 python benchmarks/cat_intervals.py --datasets mmlu,gsm --draws 0-4 --seeds 2
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import REGIMES, make_split, parse_draws, sample_references
from activeeval.methods.cat import ContinuousCAT, fit_calibration
from activeeval.ranking import AdaptiveRanker

ALL = ("ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
       "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")
INTERVALS = ("model", "calibrated")
LEVEL = 0.95


def n_targets_for(n_models: int, wanted: int) -> int:
    """``wanted`` targets, fewer where the pool would keep fewer than 40 % of the models (small sets: 10)."""
    return wanted if n_models - wanted >= 0.6 * n_models else max(2, min(wanted, n_models // 3))


def record(est) -> list:
    """[mean, low, high] of the 95 % interval, low = high = None when the interval is not shown."""
    if not math.isfinite(est.var):
        return [est.mean, None, None]
    lo, hi = est.ci(LEVEL)
    return [est.mean, lo, hi]


def run_seed(matrix, split, seed: int, items: list[int], group: int, budget: float,
             intervals: tuple[str, ...] = INTERVALS) -> dict:
    refs = sample_references(split.pool, 0.5, seed)
    reference, _ = matrix.select_models(refs).dropna("models")
    t0 = time.perf_counter()
    cal = fit_calibration(reference.scores)
    t_cal = time.perf_counter() - t0
    rows = {t: matrix.model_scores(t) for t in split.targets}
    truth = {t: float(np.mean(rows[t])) for t in split.targets}

    def make(interval: str):
        return lambda model=None: ContinuousCAT(reference, calibration=cal, interval=interval, seed=0)

    # The ranker (its decisions use ability(), not the interval): how many items each model had at its stop.
    order = np.random.default_rng([seed, 0x25C]).permutation(len(split.targets))
    at_stop, asked = {}, {}
    for g in range(0, len(order) - 1, group):
        models = [split.targets[j] for j in order[g:g + group]]
        if len(models) < 2:
            break
        res = AdaptiveRanker(models, make("calibrated"), lambda m, i: float(rows[m][i]), gamma=LEVEL,
                             min_items=10, budget=budget * len(models)).run()
        at_stop.update(res.items_per_model)
        asked.update(res.items)
    # Each model's items in the ranker are its own CAT's choices, so one run per target gives every n.
    out: dict = {"truth": truth, "n_refs": reference.n_models, "t_cal": t_cal, "fixed": {}, "stop": {}}
    runs = {}
    for t in split.targets:
        cat = make("calibrated")()
        for _ in range(min(max([*items, at_stop.get(t, 0)]), reference.n_items)):
            i = cat.select()
            cat.observe(i, float(rows[t][i]))
        if t in asked:
            assert tuple(cat.observed_items[:len(asked[t])]) == tuple(asked[t]), "the ranker's items are CAT's own"
        runs[t] = {"calibrated": cat.trajectory}
        if "model" in intervals:
            model = make("model")()
            model.observe_many(cat.observed_items, cat.observed_scores)
            runs[t]["model"] = model.trajectory
    for interval in intervals:
        out["fixed"][interval] = {t: {n: record(runs[t][interval][n - 1]) for n in items} for t in split.targets}
        out["stop"][interval] = {t: record(runs[t][interval][at_stop[t] - 1]) + [at_stop[t]] for t in at_stop}
    return out


def load_or_run(path: Path, fn) -> dict:
    if path.exists():
        return json.loads(path.read_text())
    res = fn()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(res))
    return res


def summarise(runs: list[dict], items: list[int], interval: str) -> dict:
    cells: dict = {}
    for label in [*items, "stop"]:
        cov, shown, total, widths, used = 0, 0, 0, [], []
        for run in runs:
            truth = run["truth"]
            table = run["stop"][interval] if label == "stop" else {
                t: v[str(label)] if str(label) in v else v[label] for t, v in run["fixed"][interval].items()}
            for t, rec in table.items():
                total += 1
                if label == "stop":
                    used.append(rec[3])
                if rec[1] is None:
                    continue
                shown += 1
                cov += rec[1] <= truth[t] <= rec[2]
                widths.append(rec[2] - rec[1])
        cells[label] = {"covered": cov, "shown": shown, "runs": total,
                        "width": float(np.median(widths)) if widths else float("nan"),
                        "items": float(np.median(used)) if used else None}
    return cells


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default=",".join(ALL))
    ap.add_argument("--regimes", default=",".join(REGIMES))
    ap.add_argument("--targets", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--draws", default="0", help="split draws (which models are targets), e.g. 0-9 or 0,3,7")
    ap.add_argument("--draw", type=int, default=None, help="one draw (the same as --draws N)")
    ap.add_argument("--items", default="10,20,40,80")
    ap.add_argument("--group", type=int, default=4, help="models per ranking run")
    ap.add_argument("--budget-per-model", type=float, default=20.0)
    ap.add_argument("--intervals", default=",".join(INTERVALS), help="model (before issue 25), calibrated")
    ap.add_argument("--out", default="/tmp/cat_intervals")
    ap.add_argument("--smoke", action="store_true", help="one small dataset, 1 seed, 4 targets (a few seconds)")
    args = ap.parse_args()
    if args.smoke:
        args.datasets, args.regimes, args.seeds, args.targets, args.items = "mmlu", "interpolation", 1, 4, "10,20"
    items = [int(x) for x in args.items.split(",")]
    draws = [args.draw] if args.draw is not None else parse_draws(args.draws)
    intervals = tuple(i for i in INTERVALS if i in args.intervals.split(","))
    out = Path(args.out)
    warnings.simplefilter("ignore")
    lines = []
    header = (f"{'dataset':<17} {'regime':<6} {'interval':<7} {'refs':>4} {'draws':>5} {'runs':>5} | "
              + " | ".join(f"n={n:<3} cov  shown width" for n in items) + " | stop: items cov  shown width")
    print(header)
    print("-" * len(header))
    for name in args.datasets.split(","):
        matrix = datasets.load(name)
        n_t = n_targets_for(int((~np.isnan(matrix.scores).any(axis=1)).sum()), args.targets)
        for regime in args.regimes.split(","):
            runs = []
            t0 = time.perf_counter()
            # extrapolation's split does not depend on the draw: its other draws would repeat the same runs
            regime_draws = draws if regime == "interpolation" else draws[:1]
            for draw in regime_draws:
                split = make_split(matrix, regime, n_targets=n_t, split_seed=draw)
                tag = (f"{name}_{regime}_t{n_t}{f'_d{draw}' if draw else ''}_i{'-'.join(map(str, items))}"
                       f"_g{args.group}_b{args.budget_per_model:g}_{'-'.join(intervals)}")
                for s in range(args.first_seed, args.first_seed + args.seeds):
                    runs.append(load_or_run(out / f"{tag}_s{s}.json",
                                            lambda s=s, split=split, matrix=matrix: run_seed(
                                                matrix, split, s, items, args.group, args.budget_per_model, intervals)))
            for interval in intervals:
                cells = summarise(runs, items, interval)
                parts = []
                for label in [*items, "stop"]:
                    c = cells[label]
                    cov = c["covered"] / c["shown"] if c["shown"] else float("nan")
                    pre = f"{c['items']:5.0f} " if label == "stop" else ""
                    parts.append(f"{pre}{cov:5.2f} {c['shown'] / c['runs']:5.2f} {c['width']:6.3f}")
                line = (f"{name:<17} {regime[:6]:<6} {interval:<7} {runs[0]['n_refs']:>4} {len(regime_draws):>5} "
                        f"{cells['stop']['runs']:>5} | " + " | ".join(parts))
                print(line, flush=True)
                lines.append(line)
            print(f"  ({time.perf_counter() - t0:.0f} s; calibration {np.median([r['t_cal'] for r in runs]):.1f} s "
                  "median per seed)", flush=True)


if __name__ == "__main__":
    main()
