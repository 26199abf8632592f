"""BayesAME (the default) at 10 000 to 100 000 buckets: build time, step time against the numpy floor, peak memory.

Usage::

    python benchmarks/bench_scale.py                          # B = 10 000, 50 000, 100 000; binary, K = 50; n = 500
    python benchmarks/bench_scale.py --kind continuous --refs 100 --sizes 10000 50000
    python benchmarks/bench_scale.py --threads 2              # the build's tiles on two threads (ACTIVEEVAL_THREADS=2)

Each size runs in a fresh process (so its peak memory is its own) on
*synthetic* data of a realistic shape — no real matrix has 100 000 items with
distinct reference vectors (the largest in ../shared/data is MMLU-Pro,
12 032 × 29). ``--kind binary`` (default): K reference models and one target
answer items of an IRT model (ability − difficulty + noise, then a coin), and
B items with distinct answer patterns are kept, so every item is its own
bucket (B = N, the unique, active regime); ``--kind continuous``: the
logistic scores of ``benchmarks/bench_step.py``. These are speed and memory
figures only: nothing here measures accuracy.

Printed per size:

* ``fit s``: the reference fit and calibration (wall; independent of B beyond
  reading the matrix: they subsample items), done once per reference — and
  read from the user cache when an earlier run made them (the data are the
  same for a size): ``ACTIVEEVAL_CACHE=off`` times them every run;
* ``build s`` / ``build cpu``: building the method once they are known (wall
  and CPU of the process, all threads): bucketing, Σ·N over B² bucket pairs
  (:func:`activeeval.gp.kernels.kernel_sums`), the posterior state;
* ``step ms``: median select + observe of the first ``--steps`` steps
  (n ≤ ``--steps``), and ``floor ms``: the median time, in the same process at
  the same n, of what a step cannot avoid written as plain numpy — one
  distance row (B × K product), the kernel column, the posterior column
  k = Σ[:, b] − Vᵀ V[:, b] (n × B), the rank-one updates of the mean,
  diag(Σ|C) and Σ|C u, and Eq. 6 with its argmax — timed before each step
  on the method's own arrays (at n − 1); ``ratio`` = step / floor;
* ``peak MB``: the process's peak resident memory (``ru_maxrss``) at n = ``--steps``
  (making the synthetic data included);
* with ``--baseline``: the CPU seconds of Σ·N alone (``ΣN cpu``), of the
  same sums as computed before issue 26 (``former``: rows of 512 × B, every
  pair twice, one exponential each), their ratio and largest relative
  difference — measured after the steps, in the same process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def synthetic(n_buckets: int, n_refs: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference scores (K, B), every item with its own reference vector, and the target's scores (B,)."""
    rng = np.random.default_rng(seed)
    if kind == "continuous":
        ability = rng.normal(size=(n_refs + 1, 1))
        logits = ability - rng.normal(size=(1, n_buckets)) + 0.7 * rng.normal(size=(n_refs + 1, n_buckets))
        scores = 1.0 / (1.0 + np.exp(-logits))
        return scores[1:], scores[0]
    if 2.0**n_refs < 2 * n_buckets:
        raise SystemExit(f"{n_refs} binary references have too few answer patterns for {n_buckets} buckets")
    kept = np.zeros((n_refs + 1, 0))
    while kept.shape[1] < n_buckets:
        draw = 2 * n_buckets
        ability = rng.normal(size=(n_refs + 1, 1))
        logits = ability - rng.normal(size=(1, draw)) + 0.7 * rng.normal(size=(n_refs + 1, draw))
        scores = (rng.random((n_refs + 1, draw)) < 1.0 / (1.0 + np.exp(-logits))).astype(float)
        both = np.hstack([kept, scores])
        _, first = np.unique(both[1:].T, axis=0, return_index=True)  # distinct reference patterns
        kept = both[:, np.sort(first)]
    return kept[1:, :n_buckets], kept[0, :n_buckets]


def _floor(method, b: int, scratch: dict[str, np.ndarray]) -> float:
    """Seconds of a step's unavoidable arithmetic in plain numpy, on the method's arrays (not changed)."""
    post, kern = method.posterior, method.kernel
    feat, sq, m, phi_c, cc = method._feat, method._feat_sq, method._m, method._phi_c, method._cc
    v = post.v
    t0 = time.perf_counter()
    d2 = np.maximum(sq + sq[b] - 2.0 * (feat @ feat[b]), 0.0)
    col = kern.alpha * np.exp(-(kern.beta / feat.shape[1]) * d2) + kern.tau0 + (kern.tau1 * m[b]) * m
    col += (kern.gamma / feat.shape[1]) * (0.5 * (sq + sq[b] - d2) - phi_c - phi_c[b] + cc)  # ψ·ψ_b from d²
    k = col - v.T @ v[:, b]
    d = float(k[b] + post.noise[b])
    np.subtract(post.diag, k * k / d, out=scratch["diag"])
    np.subtract(post.cov_u, k * (1.0 + float(k @ post.remaining) / d), out=scratch["cov_u"])
    np.add(post.mean, k * 0.1, out=scratch["mean"])
    c = scratch["cov_u"] + post.noise
    rho2 = c * c / (float(post.remaining @ scratch["cov_u"]) * (np.maximum(scratch["diag"], 0.0) + post.noise))
    int(np.argmax(-np.log1p(-np.minimum(rho2, 0.999))))
    return time.perf_counter() - t0


def _former_sums(points: np.ndarray, vec: np.ndarray, scale: float, block: int = 512) -> np.ndarray:
    """Σ_j exp(scale · d²_ij) vec_j as activeeval computed it before issue 26 (``--baseline``): rows of
    512 × B, every pair twice, one exponential each."""
    sq = (points * points).sum(1)[:, None]
    ones = np.ones_like(sq)
    left, right = np.hstack([points, sq, ones]), np.hstack([-2.0 * points, ones, sq])
    out = np.empty(points.shape[0])
    for start in range(0, points.shape[0], block):
        k = left[start:start + block] @ right.T
        np.maximum(k, 0.0, out=k)
        k *= scale
        np.exp(k, out=k)
        out[start:start + block] = k @ vec
    return out


def _baseline(method) -> dict[str, float]:
    """CPU seconds of Σ·N now (:func:`activeeval.gp.kernels.kernel_sums`) and as before, and their largest relative
    difference, on the method's bucket vectors and fitted kernel."""
    from activeeval.gp.kernels import kernel_sums

    feat, counts = method._feat, method.buckets.counts
    scale = -method.kernel.beta / feat.shape[1]
    cpu = time.process_time()
    now = kernel_sums(feat, counts, scale)
    now_s = time.process_time() - cpu
    cpu = time.process_time()
    former = _former_sums(feat, counts, scale)
    former_s = time.process_time() - cpu
    return {"sums_cpu": now_s, "former_cpu": former_s, "rel_diff": float(np.max(np.abs(now - former) / former))}


def one(size: int, refs: int, kind: str, steps: int, threads: int, baseline: bool = False) -> dict[str, float]:
    """One size, in this process: what ``main`` prints for it."""
    from activeeval import ScoreMatrix
    from activeeval._threads import limit_threads
    from activeeval.gp.prior import _cached_calibration, _resolve_fit
    from activeeval.methods.bayesame import BayesAME

    scores, truth = synthetic(size, refs, kind, seed=size)
    reference = ScoreMatrix(scores, kind=kind)
    with limit_threads(threads):
        t0 = time.perf_counter()
        fit = _resolve_fit(reference, None, 20, 300, 0, True, True)
        calibration = _cached_calibration(reference, fit)
        fit_s = time.perf_counter() - t0
        wall, cpu = time.perf_counter(), time.process_time()
        method = BayesAME(reference, seed=0, hyperparameters=fit, calibration=calibration, selection="active")
        build_s, build_cpu = time.perf_counter() - wall, time.process_time() - cpu
        scratch = {name: np.empty(method.n_buckets) for name in ("diag", "cov_u", "mean")}
        step_t, floor_t, b = [], [], 0
        for _ in range(steps):
            floor_t.append(_floor(method, b, scratch))  # before the step: neither finds the other's data in cache
            t = time.perf_counter()
            item = method.select()
            method.observe(item, float(truth[item]))
            step_t.append(time.perf_counter() - t)
            b = int(method.buckets.of_item[item])
        extra = _baseline(method) if baseline else {}
    step_ms, floor_ms = 1e3 * float(np.median(step_t)), 1e3 * float(np.median(floor_t))
    return {**extra, "B": method.n_buckets, "K": refs, "n": steps, "fit_s": fit_s, "build_s": build_s,
            "build_cpu": build_cpu,
            "step_ms": step_ms, "floor_ms": floor_ms, "ratio": step_ms / floor_ms,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 50_000, 100_000], help="numbers of buckets B")
    parser.add_argument("--refs", type=int, default=50, help="reference models K")
    parser.add_argument("--kind", choices=("binary", "continuous"), default="binary")
    parser.add_argument("--steps", type=int, default=500, help="select + observe steps (n at the peak memory)")
    parser.add_argument("--threads", type=int, default=1, help="activeeval's thread limit (the build's tiles)")
    parser.add_argument("--baseline", action="store_true",
                        help="also time Σ·N alone, now and as computed before issue 26 (CPU s; slow at large B)")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # a child process: one size, a JSON line
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.refs, args.steps, args.baseline = [300], 12, 20, True
    if args.one is not None:
        print(json.dumps(one(args.one, args.refs, args.kind, args.steps, args.threads, args.baseline)))
        return
    header = (f"{'kind':<10} {'B':>7} {'K':>4} {'n':>4} {'fit s':>6} {'build s':>8} {'build cpu':>9} {'step ms':>8} "
              f"{'floor ms':>8} {'ratio':>6} {'peak MB':>8}" + (f" {'ΣN cpu':>7} {'former':>7} {'×':>5} {'rel diff':>8}"
                                                                if args.baseline else ""))
    print(header)
    print("-" * len(header))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    for size in args.sizes:
        cmd = [sys.executable, __file__, "--one", str(size), "--refs", str(args.refs), "--kind", args.kind,
               "--steps", str(args.steps), "--threads", str(args.threads)] + (["--baseline"] if args.baseline else [])
        r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.splitlines()[-1])
        print(f"{args.kind:<10} {r['B']:>7} {r['K']:>4} {r['n']:>4} {r['fit_s']:>6.1f} {r['build_s']:>8.1f} "
              f"{r['build_cpu']:>9.1f} {r['step_ms']:>8.2f} {r['floor_ms']:>8.2f} {r['ratio']:>6.2f} "
              f"{r['peak_mb']:>8.0f}" + (f" {r['sums_cpu']:>7.1f} {r['former_cpu']:>7.1f} "
                                         f"{r['former_cpu'] / r['sums_cpu']:>5.1f} {r['rel_diff']:>8.1e}"
                                         if args.baseline else ""), flush=True)


if __name__ == "__main__":
    main()
