"""Median time of one continuous-CAT step (select + observe) at N = 1 000, 10 000, 100 000 items.

Usage::

    python benchmarks/bench_cat.py [--steps 300] [--models 20] [--sizes 1000,10000,100000] [--responses 2pl,rasch]
        [--local-error on,off]

Items are synthetic and calibrated on ``--models`` synthetic reference models
drawn from the heteroskedastic normal model (k = 0.2); the target answers from
the same model. A step is the public API: ``method.select()`` (pure, seeded
by (seed, n_observed)) then ``method.observe(item, score)``, which updates the
grid posterior, the references' posteriors of the local error check and the
score-scale estimate; ``ability()`` (what the ranker reads after every item:
the error model and the local error check, O(K·G)) is timed on its own. Setup (calibration, the error
model's pseudo-target runs, the sorted pool and the O(G·N) prediction tables)
is timed separately. Both response models: ``2pl`` (the default: a vectorised
O(N) argmax of each item's information) and ``rasch`` (the paper's: a
bisection in the items sorted by b). For context the table also times a
brute-force O(N) selection: numpy argmax of the Rasch Ĩ over all items.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.irt.continuous import fisher_information
from activeeval.methods.cat import ContinuousCAT


def synthetic(n_models: int, n_items: int, seed: int = 0) -> tuple[ScoreMatrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models + 1)
    b = rng.normal(0, 1.5, n_items)
    mu = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    y = np.clip(mu + rng.standard_normal(mu.shape) * np.sqrt(0.2 * mu * (1 - mu)), 0, 1)
    ref = ScoreMatrix(y[1:], [f"m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)], kind="continuous")
    return ref, y[0]


def bench(n_items: int, n_models: int, steps: int, response: str, local_error: bool = True) -> dict[str, float]:
    ref, truth = synthetic(n_models, n_items)
    t0 = time.perf_counter()
    cat = ContinuousCAT(ref, seed=0, response=response, local_error=local_error)
    setup = time.perf_counter() - t0
    sel, obs, total, abil = [], [], [], []
    for _ in range(steps):
        a = time.perf_counter()
        i = cat.select()
        b = time.perf_counter()
        cat.observe(i, truth[i])
        c = time.perf_counter()
        cat.ability()  # what the ranker asks after every item: the error model and the local error check
        d = time.perf_counter()
        sel.append(b - a)
        obs.append(c - b)
        total.append(c - a)
        abil.append(d - c)
    # Brute-force O(N) selection for comparison (no skipping of used items).
    bf = []
    for _ in range(50):
        a = time.perf_counter()
        int(np.argmax(fisher_information(cat.theta, cat.calibration_.b, cat.noise_factor_)))
        bf.append(time.perf_counter() - a)
    ms = 1e3
    return {
        "N": n_items,
        "response": response,
        "local": "on" if local_error else "off",
        "step_ms": statistics.median(total) * ms,
        "select_ms": statistics.median(sel) * ms,
        "observe_ms": statistics.median(obs) * ms,
        "ability_ms": statistics.median(abil) * ms,
        "brute_select_ms": statistics.median(bf) * ms,
        "setup_s": setup,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--responses", default="2pl,rasch")
    parser.add_argument("--local-error", default="on,off", help="with and/or without the local error check")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.steps, args.models, args.sizes, args.responses, args.local_error = 5, 5, "200", "2pl", "on"
    warnings.simplefilter("ignore")
    rows = [bench(int(n), args.models, args.steps, r, le == "on") for r in args.responses.split(",")
            for le in args.local_error.split(",") for n in args.sizes.split(",")]
    print(f"continuous CAT, median over {args.steps} steps, {args.models} reference models, G = 961 grid points")
    print(f"{'response':>8} | {'local':>5} | {'N items':>9} | {'select+observe ms':>17} | {'select ms':>9} | "
          f"{'observe ms':>10} | {'ability ms':>10} | {'O(N) argmax ms':>14} | {'setup s':>7}")
    print("-" * 116)
    for r in rows:
        print(f"{r['response']:>8} | {r['local']:>5} | {r['N']:>9,} | {r['step_ms']:>17.3f} | {r['select_ms']:>9.3f} | "
              f"{r['observe_ms']:>10.3f} | {r['ability_ms']:>10.3f} | {r['brute_select_ms']:>14.3f} | "
              f"{r['setup_s']:>7.2f}")


if __name__ == "__main__":
    main()
