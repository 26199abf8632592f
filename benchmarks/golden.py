"""Golden backtest: a small fixed configuration per method, its numbers to the last bit.

A refactoring that must not change behaviour (issue 12) is checked against
this: every number the library produces along its main paths — the backtest
engine (fast replays and sequential runs), a method driven one item at a time
through ``select``/``observe`` with its stopping rule, the adaptive ranker,
and a crash-safe session — is written as the SHA-256 of its float64 bytes
plus a few values in ``repr`` (exact), so any change, however small, shows.

Usage (repository root, package installed):

    OPENBLAS_NUM_THREADS=1 python benchmarks/golden.py --write   # record benchmarks/results/golden.json
    OPENBLAS_NUM_THREADS=1 python benchmarks/golden.py           # check against it: a table, exit 1 on any change

Bit-identical holds on one machine and one set of library versions (BLAS
builds differ in the last bits); record and check on the same machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import tempfile
import time
import warnings

import numpy as np

from activeeval.datasets import load
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.ranking_eval import complete_models, simulate_ranking
from activeeval.experiments.runner import run_backtest
from activeeval.methods.registry import METHODS, is_multi_target, make_method
from activeeval.stopping import default_rule

GOLDEN = pathlib.Path(__file__).parent / "results" / "golden.json"
# the single-target methods (the golden file predates the multi-target ones, which have their own protocol)
SINGLE = tuple(m for m in METHODS if not is_multi_target(m))


def digest(values: object) -> str:
    arr = np.ascontiguousarray(np.asarray(values, dtype=np.float64))
    return hashlib.sha256(arr.tobytes()).hexdigest()[:16]


def backtests() -> dict[str, object]:
    """The backtest engine: every method, both regimes on IFEval (binary), AlpacaEval 2 (continuous)."""
    out: dict[str, object] = {}
    runs = [
        ("ifeval", "interpolation", SINGLE),
        ("ifeval", "extrapolation", ("bayesame", "bayesame-paper", "rs-mean", "bayes-aipw", "cat")),
        ("alpacaeval2", "interpolation", ("bayesame", "bayesame-rs", "bayesame-paper", "rs-mean", "seq-apw",
                                          "bayes-aipw", "irt", "cat")),
    ]
    for dataset, regime, methods in runs:
        matrix = load(dataset)
        config = BacktestConfig(methods=methods, regime=regime, n_targets=2, n_seeds=2, ref_fraction=0.5)
        res = run_backtest(matrix, config, workers=1)
        for m in methods:
            mu, var = res.means[m], res.vars[m]
            out[f"backtest/{dataset}/{regime}/{m}"] = {
                "means": digest(mu), "vars": digest(var),
                "mean@20": repr(float(mu[0, 0, 19])), "var@20": repr(float(var[0, 0, 19])),
            }
    return out


def sequential() -> dict[str, object]:
    """Each method one item at a time on a real target, stopped by Algorithm 1 or a budget of 25 items."""
    out: dict[str, object] = {}
    for dataset in ("ifeval", "alpacaeval2"):
        matrix = load(dataset)
        models = list(matrix.model_ids)
        target, refs = models[3], [m for k, m in enumerate(models) if k % 2 == 0 and k != 3]
        reference = matrix.select_models(refs)
        truth = matrix.model_scores(target)
        rule = default_rule(max_items=25)  # the driver's rule: Algorithm 1 or 25 items
        for name in SINGLE:
            method = make_method(name, reference, seed=7)
            items, means, vars_ = [], [], []
            while (stop := rule.check(method.trajectory)) is None:
                i = method.select()
                method.observe(i, float(truth[i]))
                est = method.estimate()
                items.append(i)
                means.append(est.mean)
                vars_.append(est.var)
            out[f"sequential/{dataset}/{name}"] = {
                "items": digest(items), "means": digest(means), "vars": digest(vars_),
                "stop": stop, "n": len(items), "last": repr(float(means[-1])),
            }
    return out


def rankers() -> dict[str, object]:
    """The adaptive ranker (CAT and BayesAME) on one held-out set of four."""
    out: dict[str, object] = {}
    matrix = load("alpacaeval2")
    holdout = complete_models(matrix)[5:45:10]
    for method in ("cat", "bayesame"):
        rec = simulate_ranking(matrix, holdout, method=method, seed=3, n_boot=200)
        res = rec.adaptive
        out[f"rank/alpacaeval2/{method}"] = {
            "ranking": list(res.ranking), "ties": [list(t) for t in res.ties],
            "means": digest([res.means[m] for m in holdout]),
            "variances": digest([res.variances[m] for m in holdout]),
            "items": digest([i for m in holdout for i in res.items.get(m, ())]),
            "tau": repr(rec.adaptive_tau), "static_tau": repr(rec.static_tau), "random_tau": repr(rec.random_tau),
            "expected_wrong": repr(rec.expected_wrong), "stop": res.stop_reason,
        }
    return out


def sessions(methods: tuple[str, ...] = ("bayesame", "cat", "rs-mean")) -> dict[str, object]:
    """A session driven by ask/tell, closed and reopened half-way (the journal replay)."""
    from activeeval.session.session import Session

    out: dict[str, object] = {}
    matrix = load("ifeval")
    truth = matrix.model_scores(matrix.model_ids[0])
    index = {iid: k for k, iid in enumerate(matrix.item_ids)}
    for method in methods:
        with tempfile.TemporaryDirectory() as tmp:
            path = pathlib.Path(tmp) / "s.aeval"
            session = Session.create(path, "ifeval", method=method, seed=11)
            items = []
            for step in range(24):
                if step == 12:
                    session.close()
                    session = Session.open(path)
                (asked,) = session.ask()
                items.append(asked.item_id)
                session.tell(asked.item_id, float(truth[index[asked.item_id]]))
            est = session.estimate()
            out[f"session/ifeval/{method}"] = {
                "items": hashlib.sha256("\n".join(items).encode()).hexdigest()[:16],
                "mean": repr(est.mean), "var": repr(est.var), "stop": session.status().stop_reason,
            }
            session.close()
    return out


def collect(parts: tuple = (backtests, sequential, rankers, sessions)) -> dict[str, object]:
    golden: dict[str, object] = {}
    for part in parts:
        start = time.perf_counter()
        golden.update(part())
        print(f"{part.__name__}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return golden


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"record {GOLDEN} instead of checking against it")
    parser.add_argument("--smoke", action="store_true",
                        help="only the RS-Mean session entry, compared but not enforced (the bits are this machine's; "
                             "tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.smoke and args.write:
        parser.error("--smoke checks one entry; --write records them all: give one of them")
    now = collect((lambda: sessions(("rs-mean",)),) if args.smoke else (backtests, sequential, rankers, sessions))
    if args.write:
        GOLDEN.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(now)} entries to {GOLDEN}")
        return 0
    before = json.loads(GOLDEN.read_text())
    keys = sorted(set(now) if args.smoke else set(before) | set(now))
    changed = [k for k in keys if before.get(k) != now.get(k)]
    print(f"{'entry':<50} {'status':>9}")
    print("-" * 60)
    for k in keys:
        status = "missing" if k not in now else "new" if k not in before else "CHANGED" if k in changed else "same"
        print(f"{k:<50} {status:>9}")
        if k in changed and k in before and k in now:
            for field in sorted(set(before[k]) | set(now[k])):
                if before[k].get(field) != now[k].get(field):
                    print(f"    {field}: {before[k].get(field)!r} -> {now[k].get(field)!r}")
    print(f"{len(keys) - len(changed)} of {len(keys)} entries bit-identical")
    return 1 if changed and not args.smoke else 0


if __name__ == "__main__":
    sys.exit(main())
