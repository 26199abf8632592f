"""Time of one BayesAME select+observe step, and peak memory: the default and the paper's algorithm.

Usage::

    python benchmarks/bench_step.py                  # B = 500, 2 000, 10 000 and IFEval; bayesame and bayesame-paper
    python benchmarks/bench_step.py --sizes 500 --steps 200 --methods bayesame

For each benchmark size the script builds a synthetic continuous reference
matrix whose items all have distinct reference vectors (so B = N and
BayesAME is in the unique, active regime), then runs ``--steps`` steps of
select + observe against a synthetic target and prints, per size:

* the median and 90th-percentile time of a step (refit steps included in
  the sample; the median is the typical step),
* the mean time per step, which includes the amortised cost of the paper's
  hyperparameter refit + posterior rebuild every F = 50 steps (the default
  has no refits),
* the median time of a step that refits (paper only),
* ``init s``: building the method (for the default: its reference fit and
  calibration, done once per reference matrix),
* the peak traced memory of the run (tracemalloc, in a second identical run
  so that tracing does not slow the timed one; numpy reports its buffers).

The real-data row uses the bundled IFEval matrix (one model held out as the
target, the rest as references).
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

from activeeval import ScoreMatrix, datasets
from activeeval.experiments.simulate import hold_out
from activeeval.methods.base import BaseMethod
from activeeval.methods.registry import make_method, parse_method_spec, split_method_list


def synthetic(n_items: int, n_refs: int, seed: int) -> tuple[ScoreMatrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(n_refs + 1, 1))
    difficulty = rng.normal(size=(1, n_items))
    logits = ability - difficulty + 0.7 * rng.normal(size=(n_refs + 1, n_items))
    scores = 1.0 / (1.0 + np.exp(-logits))
    return ScoreMatrix(scores[1:], kind="continuous"), scores[0]


def _build(spec: str, reference: ScoreMatrix, **kwargs: object) -> BaseMethod:
    name, options = parse_method_spec(spec)
    return make_method(name, reference, seed=0, **options, **kwargs)


def _steps(spec: str, reference: ScoreMatrix, truth: np.ndarray, steps: int) -> tuple[BaseMethod, np.ndarray, float]:
    method = _build(spec, reference)  # a fixed number of steps: no stopping rule is asked
    times = np.empty(steps)
    for j in range(steps):
        t0 = time.perf_counter()
        item = method.select()
        method.observe(item, float(truth[item]))
        times[j] = time.perf_counter() - t0
    return method, times, 0.0


def run(spec: str, reference: ScoreMatrix, truth: np.ndarray, steps: int, label: str) -> dict[str, object]:
    t_init = time.perf_counter()
    _build(spec, reference)  # the default's fit and calibration are cached: the timed runs reuse them
    init_s = time.perf_counter() - t_init
    method, times, _ = _steps(spec, reference, truth, steps)
    every = getattr(method, "refit_every", 0)
    refit_steps = np.arange(1, steps + 1) % every == 0 if every else np.zeros(steps, dtype=bool)
    # Peak memory in a second, identical run: tracemalloc slows every
    # allocation, so it must not be on while steps are timed.
    tracemalloc.start()
    _steps(spec, reference, truth, steps)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "method": spec,
        "label": label,
        "N": method.n_items,
        "B": method.n_buckets,
        "K": reference.n_models,
        "regime": method.regime,
        "steps": steps,
        "init_s": init_s,
        "median_ms": 1e3 * float(np.median(times)),
        "p90_ms": 1e3 * float(np.quantile(times, 0.9)),
        "mean_ms": 1e3 * float(times.mean()),
        "refit_ms": 1e3 * float(np.median(times[refit_steps])) if refit_steps.any() else float("nan"),
        "peak_mb": peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[500, 2000, 10000], help="numbers of buckets B")
    parser.add_argument("--refs", type=int, default=100, help="reference models for the synthetic rows")
    parser.add_argument("--steps", type=int, default=500, help="select+observe steps per row (n <= steps)")
    parser.add_argument("--no-ifeval", action="store_true", help="skip the real-data row")
    parser.add_argument("--methods", default="bayesame,bayesame-paper", help="comma-separated method specs")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.refs, args.steps, args.no_ifeval, args.methods = [100], 10, 5, True, "bayesame"

    rows = []
    for spec in split_method_list(args.methods):
        for size in args.sizes:
            reference, truth = synthetic(size, args.refs, seed=size)
            rows.append(run(spec, reference, truth, min(args.steps, size), f"synthetic B={size}"))
        if not args.no_ifeval:
            split = hold_out(datasets.load("ifeval"), seed=0)
            rows.append(run(spec, split.reference, split.truth, min(args.steps, split.reference.n_items), "ifeval"))

    header = (
        f"{'method':<15} {'data':<20} {'N':>6} {'B':>6} {'K':>4} {'regime':>12} {'steps':>5} {'init s':>7} "
        f"{'median ms':>9} {'p90 ms':>7} {'mean ms':>8} {'refit ms':>8} {'peak MB':>8}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['method']:<15} {r['label']:<20} {r['N']:>6} {r['B']:>6} {r['K']:>4} {r['regime']:>12} {r['steps']:>5} "
            f"{r['init_s']:>7.2f} {r['median_ms']:>9.3f} {r['p90_ms']:>7.3f} {r['mean_ms']:>8.3f} "
            f"{r['refit_ms']:>8.1f} {r['peak_mb']:>8.1f}"
        )


if __name__ == "__main__":
    main()
