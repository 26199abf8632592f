"""Honesty of the multi-target default on every shared dataset: live runs to the automatic stop (issue 13).

For every dataset, target set (``--sets``: the backtest's ``high`` and
``low`` sets, of ``--targets`` models) and seed, the references are half of
the other models (``--refs``, sampled as the backtest samples them) and two
runs are played **live**, as a user would run them:

* the joint method (``--method``, default ``bayesame-multi``) on all the
  targets, each target dropped from the rotation once the stopping rule
  (ε1 = 0.005, W = 30, ``--epsilon2``) stops it
  (:func:`~activeeval.experiments.simulate.run_multi_until_stop`);
* single-target ``--single`` (default ``bayesame``) on each target, to the
  same rule, with the same method seed.

Per dataset × set × method the table gives, pooled over seeds and targets:

* ``cov stop``: realised coverage of the nominal 95 % interval at the stop;
* ``cov 5/10/25 %``: coverage after 5, 10 and 25 % of the items (targets
  that stopped before a mark are not counted at it, so ``runs`` there can be
  fewer);
* ``miss``: confident misses, errors beyond 3 standard deviations, over the
  stop and the three marks;
* ``rmse``: RMSE × 100 of R̂ at the stop, and ``n/N``: mean fraction of the
  items at the stop;
* ``runs``: target runs per cell (targets × seeds).

Each (dataset, set, seed) is saved as JSON under ``--out`` once done and
reused by a later call with the same settings, so a long run can be stopped
and resumed.

    OPENBLAS_NUM_THREADS=1 python benchmarks/multi_target_coverage.py --seeds 2 --workers 2
    OPENBLAS_NUM_THREADS=1 python benchmarks/multi_target_coverage.py --datasets musr,gsm --seeds 1
    python benchmarks/multi_target_coverage.py --report-only
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from activeeval import datasets
from activeeval.experiments.multi_target import make_target_split
from activeeval.experiments.protocol import method_seed, sample_references
from activeeval.experiments.simulate import run_multi_until_stop, run_until_stop
from activeeval.methods.registry import parse_method_spec, resolve_factory
from activeeval.stopping import default_rule

# mmlu_pro (12 032 items) is left out by default: a joint run to the stop there is hours per seed on 2 cores
DATASETS = ("ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2",
            "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")
MARKS = (0.05, 0.10, 0.25)
Z95 = 1.959963984540054


def _record(traj, stop_n: int, truth: float, n_items: int) -> dict:
    """Mean and sd at the stop and at each mark reached before it."""
    out = {"truth": truth, "n": stop_n, "mean": traj[stop_n - 1].mean, "sd": traj[stop_n - 1].std, "marks": {}}
    for f in MARKS:
        k = max(1, int(round(f * n_items)))
        if k <= stop_n:
            out["marks"][str(f)] = [traj[k - 1].mean, traj[k - 1].std]
    return out


def run_cell(dataset: str, set_name: str, seed: int, n_targets: int, refs: float, eps2: float,
             method: str, single: str, max_items: int = 0) -> dict:
    with threadpool_limits(1):
        matrix = datasets.load(dataset)
        if max_items:
            matrix = matrix.select_items(list(matrix.item_ids[:max_items]))
        split = make_target_split(matrix, set_name, n_targets, split_seed=0)
        reference = matrix.select_models(sample_references(split.pool, refs, seed, 0))
        targets = list(split.targets)
        truths = np.stack([np.asarray(matrix.model_scores(t), dtype=float) for t in targets])
        truth_means = truths.mean(axis=1)
        n_items = matrix.n_items
        method_seed_ = method_seed(0, seed, 0)  # one method seed for every target, as the backtest's shared orders
        rule = default_rule(epsilon2=eps2)
        t0 = time.perf_counter()
        name, options = parse_method_spec(method)
        joint = resolve_factory(name)(reference, targets, seed=method_seed_, **options)
        run_multi_until_stop(joint, truths, rule)
        joint_rows = [_record(joint.trajectory(t), joint.n_observed_of(t), float(truth_means[t]), n_items)
                      for t in range(len(targets))]
        t_joint = time.perf_counter() - t0
        t0 = time.perf_counter()
        name, options = parse_method_spec(single)
        single_rows = []
        for t in range(len(targets)):
            m = resolve_factory(name)(reference, seed=method_seed_, **options)
            run_until_stop(m, truths[t], rule)
            single_rows.append(_record(m.trajectory, m.n_observed, float(truth_means[t]), n_items))
        t_single = time.perf_counter() - t0
    return {"dataset": dataset, "set": set_name, "seed": seed, "targets": targets, "n_items": n_items,
            "mean_correlation": split.mean_correlation,
            "rows": {method: joint_rows, single: single_rows}, "seconds": {method: t_joint, single: t_single}}


def _key(args: argparse.Namespace, dataset: str, set_name: str, seed: int) -> str:
    settings = [dataset, set_name, seed, args.targets, args.refs, args.epsilon2, args.method, args.single]
    text = json.dumps(settings + [args.max_items] if args.max_items else settings)  # the keys saved before it
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _cell_stats(rows: list[dict]) -> dict:
    def cov(pairs: list[tuple[float, float, float]]) -> float:
        return float(np.mean([abs(m - t) <= Z95 * s for m, s, t in pairs])) if pairs else float("nan")

    stop = [(r["mean"], r["sd"], r["truth"]) for r in rows]
    out = {"runs": len(rows), "cov stop": cov(stop)}
    every = list(stop)
    for f in MARKS:
        at = [(r["marks"][str(f)][0], r["marks"][str(f)][1], r["truth"]) for r in rows if str(f) in r["marks"]]
        out[f"cov {int(100 * f)}%"] = cov(at)
        out[f"runs {int(100 * f)}%"] = len(at)
        every += at
    out["miss"] = int(sum(abs(m - t) > 3 * s for m, s, t in every))
    out["rmse"] = 100 * float(np.sqrt(np.mean([(m - t) ** 2 for m, _, t in stop])))
    out["n/N"] = float(np.mean([r["n"] / r["n_items"] for r in rows]))
    return out


def report(records: list[dict], methods: list[str]) -> str:
    lines = [f"{'dataset':<17} {'set':<4} {'r':>5} {'method':<16} {'cov stop':>8} {'cov 5%':>6} {'cov 10%':>7} "
             f"{'cov 25%':>7} {'miss':>4} {'rmse':>6} {'n/N':>6} {'runs':>4} {'sec/seed':>8}"]
    order = list(DATASETS) + sorted({r["dataset"] for r in records} - set(DATASETS))
    keys = sorted({(r["dataset"], r["set"]) for r in records}, key=lambda k: (order.index(k[0]), k[1] != "high"))
    pooled: dict[str, list[dict]] = {m: [] for m in methods}
    for dataset, set_name in keys:
        recs = [r for r in records if r["dataset"] == dataset and r["set"] == set_name]
        r_mean = float(np.mean([r["mean_correlation"] for r in recs]))
        for m in methods:
            rows = [dict(row, n_items=r["n_items"]) for r in recs for row in r["rows"][m]]
            pooled[m] += rows
            s = _cell_stats(rows)
            secs = float(np.median([r["seconds"][m] for r in recs]))
            lines.append(
                f"{dataset:<17} {set_name:<4} {r_mean:5.2f} {m:<16} {s['cov stop']:8.3f} {s['cov 5%']:6.3f} "
                f"{s['cov 10%']:7.3f} {s['cov 25%']:7.3f} {s['miss']:>4} {s['rmse']:6.2f} {s['n/N']:6.3f} "
                f"{s['runs']:>4} {secs:8.1f}")
    for m in methods:
        if rows := pooled[m]:
            s = _cell_stats(rows)
            lines.append(f"{'all':<17} {'':<4} {'':>5} {m:<16} {s['cov stop']:8.3f} {s['cov 5%']:6.3f} "
                         f"{s['cov 10%']:7.3f} {s['cov 25%']:7.3f} {s['miss']:>4} {'':>6} {s['n/N']:6.3f} "
                         f"{s['runs']:>4}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--sets", default="high,low")
    parser.add_argument("--targets", type=int, default=10, help="targets per set (the paper's 10)")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--refs", type=float, default=0.5)
    parser.add_argument("--epsilon2", type=float, default=0.03)
    parser.add_argument("--method", default="bayesame-multi")
    parser.add_argument("--single", default="bayesame")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/multi_target_coverage"))
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args(argv)
    if args.smoke:  # and its records in a temporary folder, not with the committed ones
        smoke_dir = tempfile.TemporaryDirectory()
        args.datasets, args.sets, args.targets, args.seeds, args.max_items, args.out = (
            "math", "high", 2, 1, 60, Path(smoke_dir.name))
    args.out.mkdir(parents=True, exist_ok=True)
    cells = [(d, s, k) for d in args.datasets.split(",") for s in args.sets.split(",") for k in range(args.seeds)]
    records, todo = [], []
    for d, s, k in cells:
        path = args.out / f"{d}_{s}_{k}_{_key(args, d, s, k)}.json"
        if path.exists():
            records.append(json.loads(path.read_text()))
        elif not args.report_only:
            todo.append((d, s, k, path))
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {pool.submit(run_cell, d, s, k, args.targets, args.refs, args.epsilon2, args.method,
                               args.single, args.max_items): path for d, s, k, path in todo}
        for future, path in futures.items():
            rec = future.result()
            path.write_text(json.dumps(rec))
            records.append(rec)
            print(f"done {rec['dataset']} {rec['set']} seed {rec['seed']}: "
                  + ", ".join(f"{m} {t:.0f} s" for m, t in rec["seconds"].items()), flush=True)
    if records:
        print(report(records, [args.method, args.single]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
