"""How far the multi-target backtest's read-off stops are from a live multi-target run (docs/multi-target.md).

The backtest plays a joint method until every target has observed every
item and reads each target's stop off its trajectory; a live run drops each
target from the rotation as soon as the stopping rule stops it. For each
seed this plays both and compares, per target, the stop n and the error of
the estimate at the stop (the trajectory's entry there, as the backtest
reads it).

Usage (repository root):

    OPENBLAS_NUM_THREADS=1 python benchmarks/multi_target_readoff.py --items 150 --targets 5 --seeds 8 --epsilon2 0.1
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from activeeval.datasets import load
from activeeval.experiments.metrics import stop_indices
from activeeval.experiments.multi_target import make_target_split
from activeeval.experiments.protocol import method_seed, sample_references
from activeeval.experiments.simulate import run_multi_to_end, run_multi_until_stop
from activeeval.methods.registry import resolve_factory
from activeeval.stopping import default_rule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="ifeval")
    ap.add_argument("--method", default="bayesame-multi")
    ap.add_argument("--correlation", default="high")
    ap.add_argument("--items", type=int, default=150, help="random items kept (drawn with seed 5); 0: all")
    ap.add_argument("--targets", type=int, default=5)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--epsilon2", type=float, default=0.1)
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        args.items, args.targets, args.seeds = 40, 2, 1
    matrix = load(args.dataset)
    if args.items:
        rng = np.random.default_rng(5)
        matrix = matrix.select_items([matrix.item_ids[i] for i in sorted(rng.choice(matrix.n_items, args.items,
                                                                                      replace=False))])
    split = make_target_split(matrix, args.correlation, args.targets)
    truths = np.stack([matrix.model_scores(t) for t in split.targets])
    truth = truths.mean(axis=1)
    rule = default_rule(epsilon2=args.epsilon2)
    cls = resolve_factory(args.method)
    n_t = len(split.targets)
    read_n, live_n, read_err, live_err = [], [], [], []
    start = time.perf_counter()
    for s in range(args.seeds):
        reference = matrix.select_models(sample_references(split.pool, 0.5, s))
        full = cls(reference, list(split.targets), seed=method_seed(0, s, 0))
        run_multi_to_end(full, truths)
        mu = np.array([[e.mean for e in full.trajectory(t)] for t in range(n_t)])
        var = np.array([[e.var for e in full.trajectory(t)] for t in range(n_t)])
        stops = stop_indices(mu, var, rule.epsilon1, rule.epsilon2, rule.window)
        live = cls(reference, list(split.targets), seed=method_seed(0, s, 0))
        run_multi_until_stop(live, truths, rule)
        read_n.append(stops)
        live_n.append([live.n_observed_of(t) for t in range(n_t)])
        read_err.append(mu[np.arange(n_t), stops - 1] - truth)
        live_err.append([live.trajectory(t)[-1].mean - truth[t] for t in range(n_t)])
    read_n, live_n = np.array(read_n), np.array(live_n)
    read_err, live_err = np.array(read_err), np.array(live_err)
    print(f"{args.dataset}, {matrix.n_items} items, {args.correlation} set of {n_t} (mean r = "
          f"{split.mean_correlation:.2f}), {args.method}, {args.seeds} seeds, epsilon2 = {args.epsilon2}")
    print(f"mean stop n/N: read-off {read_n.mean() / matrix.n_items:.4f}, live {live_n.mean() / matrix.n_items:.4f}; "
          f"same stop for {100 * (read_n == live_n).mean():.1f} % of (seed, target)")
    print(f"RMSE x 100 at the stop: read-off {100 * np.sqrt((read_err**2).mean()):.3f}, "
          f"live {100 * np.sqrt((live_err**2).mean()):.3f}")
    print(f"wall time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
