"""What a GPU backend would batch, and what it could gain: the backtest's operations counted (issue 26, item 6).

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/gpu_estimate.py          # ifeval, musr; both regimes; the two BayesAMEs
    OPENBLAS_NUM_THREADS=1 python benchmarks/gpu_estimate.py --device consumer --datasets musr
    python benchmarks/gpu_estimate.py --smoke                         # AlpacaEval 2, 120 items, one regime

No GPU is available here, so nothing runs on one: this is the arithmetic behind
docs/gpu.md. The user cache is off in this process (every task fits its
references, as a first backtest does). One backtest task per (dataset, regime,
method) — seed 0, every target of the split, n = 1..N, exactly what a worker
of ``activeeval reproduce table1`` runs — is played on the CPU with each numeric phase wrapped: the
reference fit's leave-one-out likelihood (:class:`~activeeval.gaussian.LeaveOneOutNLML`,
the default's fit and its calibration's fold fits), the paper's refits
(:class:`~activeeval.gaussian.BucketNLML`), the Σ·N sums
(:meth:`~activeeval.gp.kernels.SquaredExponential.matvec`), the paper's
rebuilds, the posterior's steps (:meth:`~activeeval.gp.posterior.BucketPosterior.observe`),
rebuilds and Eq. 6 (its ``information_gain``, and the paper's). Each call records its
sizes, from which its floating-point operations, the bytes it must move and the
GPU kernels it would launch are counted (formulas in ``COSTS``: a Cholesky
factor and inverse of an m × m matrix m³, each m × m pass 8 m² bytes, …), and its
CPU time (exclusive of the wrapped calls inside it). What no phase covers is
``other``: Python's bookkeeping (L-BFGS-B, the method's state, the runner).

The GPU time of a phase is modelled as a roofline plus launch latency,
max(flops / (peak × efficiency), bytes / bandwidth) + launches × latency, per
device profile (``--device``: assumptions, printed, not measurements), in two
ways of running:

* ``as run``: one run at a time, as the CPU runs it (every pseudo-target of a
  fit, every step of every target its own kernels); ``other`` stays on the CPU.
* ``batched``: the R = targets × seeds runs of a backtest advance in lockstep
  (``--batch``, default 10 targets × 200 seeds), and a fit's pseudo-targets in
  one call, so each kernel serves all of them: launches and ``other`` are paid
  once per lockstep step, divided by R here; flops and bytes are not.

Printed: per task and phase, the counts, the CPU seconds and GFLOP/s achieved
here, and both GPU estimates; then the sums and the projection for 200 seeds
(CPU: on ``--workers`` cores; GPU: one device), and the device memory a batch
needs (V, rows × B per run, the largest state).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# every task pays its reference fit, as a first backtest on these references does (no user cache read or written)
os.environ["ACTIVEEVAL_CACHE"] = "off"

from activeeval import datasets, gaussian  # after the cache is switched off
from activeeval.experiments.protocol import BacktestConfig, make_split
from activeeval.experiments.runner import run_task
from activeeval.gp import kernels, posterior

# Device profiles: FP64 peak (FLOP/s), memory bandwidth (B/s), one kernel launch and its sync (s), and the share of
# the FP64 peak reached by a batched dense factorisation of the fit's sizes (m = 150-700) and by the tiled kernel
# sums. Datasheet peaks; the efficiencies and the latency are assumptions (cuSOLVER's batched potrf at these sizes
# reaches a quarter of peak or less; a launch through a Python driver costs 5-10 us).
DEVICES = {
    "a100": dict(name="A100-class datacentre GPU (FP64 9.7 TFLOP/s, 1.55 TB/s)", peak=9.7e12, bw=1.555e12,
                 latency=5e-6, eff_dense=0.25, eff_sums=0.5),
    "consumer": dict(name="consumer GPU (FP64 1/64 rate: 1.3 TFLOP/s, 1.0 TB/s)", peak=1.3e12, bw=1.0e12,
                     latency=5e-6, eff_dense=0.25, eff_sums=0.5),
}


@dataclass
class Row:
    calls: int = 0
    flops: float = 0.0
    bytes: float = 0.0
    launches: float = 0.0  # as run: one run, one pseudo-target at a time
    launches_merged: float = 0.0  # the kernels of one call with its pseudo-targets merged (what R runs then share)
    cpu: float = 0.0
    dense: bool = True  # a factorisation (eff_dense) or tiled sums (eff_sums)
    peak_state: float = 0.0  # bytes of V (rows x B) per run, the largest seen
    per_seed: bool = False  # done once per seed for all its targets (the default's fit): batched over seeds only


class Recorder:
    """Wraps callables; each call adds its counted cost and exclusive CPU time to its phase's row."""

    def __init__(self) -> None:
        self.rows: dict[str, Row] = defaultdict(Row)
        self._stack: list[float] = []
        self._undo: list[tuple[object, str, object]] = []
        self.n_refs = 1

    def wrap(self, owner: object, attr: str, phase: str, cost: Callable, dense: bool = True,
             per_seed: bool = False) -> None:
        orig = getattr(owner, attr)
        rec = self

        @functools.wraps(orig)
        def wrapper(*args, **kwargs):
            sizes = cost(*args, **kwargs)  # sizes before the call (a posterior's rows grow in it)
            start = time.process_time()
            rec._stack.append(0.0)
            try:
                return orig(*args, **kwargs)
            finally:
                inner = rec._stack.pop()
                spent = time.process_time() - start
                if rec._stack:
                    rec._stack[-1] += spent
                row = rec.rows[phase]
                flops, nbytes, launches, merged, state = sizes
                row.calls += 1
                row.flops += flops
                row.bytes += nbytes
                row.launches += launches
                row.launches_merged += merged
                row.cpu += spent - inner
                row.dense = dense
                row.per_seed = per_seed
                row.peak_state = max(row.peak_state, state)

        self._undo.append((owner, attr, orig))
        setattr(owner, attr, wrapper)

    def restore(self) -> None:
        for owner, attr, orig in reversed(self._undo):
            setattr(owner, attr, orig)
        self._undo.clear()


def install(rec: Recorder) -> None:
    """The phases and their counts (flops, bytes, launches as run, launches merged, state bytes) per call."""
    from activeeval.methods import bayesame_paper

    def loo(self, log_params):  # per pseudo-target: potrf m³/3 + potri 2m³/3; exp, assembly, potrs, 3 contractions
        p, m = len(self.items), self.m
        return p * (m**3 + 25.0 * m * m), p * 12 * 8.0 * m * m, 12.0 * p, 12.0, 0.0

    def bucket_nlml(self, params):
        m = self.m
        return m**3 + 25.0 * m * m, 12 * 8.0 * m * m, 12.0, 12.0, 0.0

    def sums(self, phi, vec, d2=None, *args, **kwargs):
        b, k = phi.shape
        cols = 1 if np.ndim(vec) == 1 else vec.shape[1]
        if d2 is not None:  # the kernel matrix from cached distances, then a product
            return b * b * (3.0 + 2 * cols), 16.0 * b * b, 3.0, 3.0, 0.0
        tiles = math.ceil(b / kernels.BLOCK) ** 2 / 2 + math.ceil(b / kernels.BLOCK) / 2
        return b * b * (k + 2.0 + 2 * cols), 8.0 * b * (k + 2) * math.ceil(b / kernels.BLOCK), 4 * tiles, 4.0, 0.0

    def observe(self, b, score):  # k = Σ[:, b] − Vᵀ V[:, b]; the prior column (a distance row, B × K); updates
        rows, n_b = self._rows, self.n_buckets
        t = 1 if self.n_targets is None else self.n_targets
        k = rec.n_refs
        flops = 2.0 * rows * n_b + 5.0 * n_b * k + 20.0 * n_b + 2.0 * n_b * t
        nbytes = 8.0 * (rows * n_b + n_b * k + 10 * n_b + 2 * n_b * t)
        return flops, nbytes, 10.0, 10.0, 8.0 * (rows + 1) * n_b

    def rebuild(self, *args, **kwargs):  # Cholesky of the observed buckets' Gram, a triangular solve against Σ_{O,·}
        o, n_b = float((self.n_obs > 0).sum()), self.n_buckets
        return o**3 / 3 + o * o * n_b + 10 * o * n_b, 8.0 * (4 * o * n_b + o * o), 10.0, 10.0, 8.0 * o * n_b

    def gain(self, *args, **kwargs):  # Eq. 6 over the buckets
        n_b = self.n_buckets
        return 15.0 * n_b, 48.0 * n_b, 6.0, 6.0, 0.0

    def paper_gain(cov_u, *args, **kwargs):
        n_b = np.shape(cov_u)[0]
        return 15.0 * n_b, 48.0 * n_b, 6.0, 6.0, 0.0

    def paper_rebuild(self):  # the kernel matrix at new (α, β) (B² exponentials) and Σ·N; posterior.rebuild apart
        n_b = self.n_buckets
        return 4.0 * n_b * n_b, 16.0 * n_b * n_b, 4.0, 4.0, 0.0

    rec.wrap(gaussian.LeaveOneOutNLML, "__call__", "reference fit (LOO NLML)", loo, per_seed=True)
    rec.wrap(gaussian.BucketNLML, "__call__", "paper refit (bucket NLML)", bucket_nlml)
    rec.wrap(kernels.SquaredExponential, "matvec", "sums (Sigma N)", sums, dense=False)
    rec.wrap(bayesame_paper.BayesAMEPaper, "_rebuild", "paper rebuild (kernel matrix)", paper_rebuild, dense=False)
    rec.wrap(posterior.BucketPosterior, "observe", "posterior step (observe)", observe, dense=False)
    rec.wrap(posterior.BucketPosterior, "rebuild", "posterior rebuild", rebuild)
    rec.wrap(posterior.BucketPosterior, "information_gain", "Eq. 6 (select)", gain, dense=False)
    rec.wrap(bayesame_paper, "information_gain", "Eq. 6 (select)", paper_gain, dense=False)


def gpu_seconds(row: Row, device: dict, batch: int | None, seeds: int = 1) -> float:
    """The roofline + latency model of one phase: as run (``batch`` None) or with ``batch`` runs in lockstep
    (a phase done once per seed shares its kernels across the ``seeds`` only)."""
    eff = device["eff_dense"] if row.dense else device["eff_sums"]
    work = max(row.flops / (device["peak"] * eff), row.bytes / device["bw"])
    launches = row.launches if batch is None else row.launches_merged / (seeds if row.per_seed else batch)
    return work + launches * device["latency"]


def play(name: str, regime: str, method: str, max_items: int | None) -> tuple[dict[str, Row], float, int]:
    """One task under the recorder: (rows by phase, its CPU seconds, targets)."""
    matrix = datasets.load(name)
    if max_items is not None and matrix.n_items > max_items:
        matrix = matrix.select_items(list(range(max_items)))
    config = BacktestConfig(methods=(method,), regime=regime, n_seeds=1)
    split = make_split(matrix, regime, config.n_targets, config.split_seed, config.gap)
    rec = Recorder()
    rec.n_refs = max(1, round(len(split.pool) * config.ref_fraction))
    install(rec)
    try:
        start = time.process_time()
        run_task(matrix, config, split, method, 0)
        total = time.process_time() - start
    finally:
        rec.restore()
    rows = dict(rec.rows)
    other = Row(cpu=max(total - sum(r.cpu for r in rows.values()), 0.0))
    rows["other (Python, L-BFGS-B, state)"] = other
    return rows, total, len(split.targets)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["ifeval", "musr"])
    parser.add_argument("--regimes", nargs="+", default=["interpolation", "extrapolation"])
    parser.add_argument("--methods", nargs="+", default=["bayesame", "bayesame-paper"])
    parser.add_argument("--device", choices=sorted(DEVICES), default="a100")
    parser.add_argument("--seeds", type=int, default=200, help="seeds of the projected backtest (table1: 200)")
    parser.add_argument("--batch", type=int, default=None,
                        help="runs in lockstep on the GPU (default: the split's targets x --seeds)")
    parser.add_argument("--workers", type=int, default=2, help="CPU cores of the projection (this machine: 2)")
    parser.add_argument("--max-items", type=int, default=None, help="the first N items of each dataset only")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    if args.smoke:
        args.datasets, args.regimes, args.max_items = ["alpacaeval2"], ["interpolation"], 120
    device = DEVICES[args.device]
    print(f"device: {device['name']}; assumed: {device['latency'] * 1e6:.0f} us a launch, "
          f"{device['eff_dense']:.0%} of peak in batched factorisations, {device['eff_sums']:.0%} in kernel sums")
    head = (f"{'task':<36} {'phase':<32} {'calls':>7} {'GFLOP':>8} {'GB':>7} {'CPU s':>7} {'GFLOP/s':>8} "
            f"{'GPU s as run':>12} {'GPU s batched':>13}")
    print(head)
    print("-" * len(head))
    totals = {"cpu": 0.0, "run": 0.0, "batched": 0.0}
    state = 0.0
    for name in args.datasets:
        for regime in args.regimes:
            for method in args.methods:
                rows, total, n_targets = play(name, regime, method, args.max_items)
                batch = args.batch or n_targets * args.seeds
                task = f"{name} {regime[:6]} {method}"
                run_sum = bat_sum = 0.0
                for phase, row in sorted(rows.items(), key=lambda kv: -kv[1].cpu):
                    if phase.startswith("other"):
                        g_run, g_bat = row.cpu, row.cpu / batch
                    else:
                        g_run, g_bat = gpu_seconds(row, device, None), gpu_seconds(row, device, batch, args.seeds)
                    run_sum += g_run
                    bat_sum += g_bat
                    rate = f"{row.flops / row.cpu / 1e9:8.2f}" if row.cpu > 0 and row.flops else f"{'':>8}"
                    print(f"{task:<36} {phase:<32} {row.calls:>7} {row.flops / 1e9:8.2f} {row.bytes / 1e9:7.2f} "
                          f"{row.cpu:7.2f} {rate} {g_run:12.3f} {g_bat:13.5f}")
                    state = max(state, row.peak_state * batch)
                print(f"{task:<36} {'task (measured CPU; GPU modelled)':<32} {'':>7} {'':>8} {'':>7} {total:7.2f} "
                      f"{'':>8} {run_sum:12.3f} {bat_sum:13.5f}")
                totals["cpu"] += total
                totals["run"] += run_sum
                totals["batched"] += bat_sum
    cpu_min = totals["cpu"] * args.seeds / args.workers / 60
    print(f"\nsum of the tasks above: CPU {totals['cpu']:.1f} s; GPU as run {totals['run']:.2f} s "
          f"({totals['cpu'] / max(totals['run'], 1e-12):.1f}x); GPU batched {totals['batched']:.4f} s "
          f"({totals['cpu'] / max(totals['batched'], 1e-12):.0f}x)")
    print(f"{args.seeds} seeds of these tasks: CPU {cpu_min:.1f} min on {args.workers} cores; GPU as run "
          f"{totals['run'] * args.seeds / 60:.1f} min; GPU batched {totals['batched'] * args.seeds / 60:.2f} min; "
          f"device memory for a batch's largest posterior state (V): {state / 1e9:.1f} GB")


if __name__ == "__main__":
    main()
