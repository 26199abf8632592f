"""The default's reference fit on worker threads (issue 26, item 2): LAPACK with and without the GIL, and the fit.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fit_threads.py                       # synthetic 20 000 x 50
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_fit_threads.py --dataset ifeval
    python benchmarks/bench_fit_threads.py --smoke

1. **LAPACK and the GIL.** What one evaluation of the fit's NLML asks of
   LAPACK, ``--pseudo`` factorisations and inverses (``dpotrf`` + ``dpotri``)
   of ``--m`` × ``--m`` matrices, on one thread and on ``--threads`` threads:
   through SciPy's wrappers (``scipy.linalg.lapack``, which hold the GIL), and
   through :mod:`activeeval._lapack` (the same routines from SciPy's Cython
   table by ctypes, which releases it). Median ms per evaluation over
   ``--repeats``, and whether the two give the same numbers.
2. **The fit.** :func:`~activeeval.gp.prior.fit_hyperparameters` (no cache)
   with its pseudo-targets on 1 and on ``--threads`` worker threads
   (:func:`activeeval._threads.worker_threads`), the BLAS limit at one
   thread: median wall and CPU seconds over ``--repeats`` alternating runs,
   and whether the fitted hyperparameters are the same to the last bit.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from unittest import mock

import numpy as np


def _lapack_ms(n_pseudo: int, m: int, threads: int, repeats: int, ours: bool) -> tuple[float, list[np.ndarray]]:
    from scipy.linalg import lapack

    from activeeval import _lapack

    rng = np.random.default_rng(0)
    mats = []
    for _ in range(n_pseudo):
        a = rng.normal(size=(m, m))
        mats.append(a @ a.T / m + np.eye(m))
    out: list[np.ndarray] = [np.empty(0)] * n_pseudo

    def work(i: int) -> None:
        a = np.array(mats[i], order="F")
        if ours:
            _lapack.potrf_lower(a)
            _lapack.potri_lower(a)
        else:
            factor, _ = lapack.dpotrf(a, lower=1, clean=0, overwrite_a=1)
            a, _ = lapack.dpotri(factor, lower=1, overwrite_c=1)
        out[i] = np.tril(a)

    def one_call() -> None:
        if threads <= 1:
            for i in range(n_pseudo):
                work(i)
            return
        chunks = [list(range(t, n_pseudo, threads)) for t in range(threads)]
        pool = [threading.Thread(target=lambda c=c: [work(i) for i in c]) for c in chunks]
        for t in pool:
            t.start()
        for t in pool:
            t.join()

    one_call()  # warm: the first call loads the routines
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        one_call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), out


def _reference(args: argparse.Namespace):
    from activeeval import datasets
    from activeeval.data.matrix import ScoreMatrix

    if args.dataset:
        return datasets.load(args.dataset)
    rng = np.random.default_rng(0)  # bench_session.py's synthetic reference: a 1PL response model, seed 0
    k, n = args.models, args.items
    p = 1 / (1 + np.exp(-(rng.normal(size=(k, 1)) - rng.normal(size=(1, n)))))
    return ScoreMatrix((rng.random((k, n)) < p).astype(float), [f"model{j:02d}" for j in range(k)],
                       [f"item{i:05d}" for i in range(n)], name=f"synth{n}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", help="a bundled dataset instead of the synthetic reference")
    ap.add_argument("--items", type=int, default=20000, help="synthetic reference: items")
    ap.add_argument("--models", type=int, default=50, help="synthetic reference: models")
    ap.add_argument("--pseudo", type=int, default=20, help="matrices per NLML evaluation (the fit's pseudo-targets)")
    ap.add_argument("--m", type=int, default=300, help="their order (the fit's items)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="a 200 x 12 synthetic reference, small matrices, 1 repeat")
    a = ap.parse_args()
    if a.smoke:
        a.dataset, a.items, a.models, a.pseudo, a.m, a.repeats = None, 200, 12, 4, 40, 1
    if a.threads < 2:
        ap.error(f"--threads must be 2 or more (it is compared with one thread), got {a.threads}")

    from activeeval import gaussian, limit_threads
    from activeeval._cache import clear_caches
    from activeeval.gp.prior import fit_hyperparameters

    print(f"1. LAPACK: {a.pseudo} x (dpotrf + dpotri) of {a.m} x {a.m}, median ms of {a.repeats}")
    print(f"{'route':<26} {'1 thread':>10} {f'{a.threads} threads':>10} {'ratio':>7}")
    outputs = []
    with limit_threads(1):
        for ours, name in ((False, "scipy.linalg.lapack"), (True, "activeeval._lapack (ctypes)")):
            alone, first = _lapack_ms(a.pseudo, a.m, 1, a.repeats, ours)
            together, second = _lapack_ms(a.pseudo, a.m, a.threads, a.repeats, ours)
            outputs += [first, second]
            print(f"{name:<26} {alone:>10.2f} {together:>10.2f} {alone / together:>7.2f}")
    same = all(np.array_equal(x, y) for out in outputs[1:] for x, y in zip(outputs[0], out, strict=True))
    print(f"the same numbers on both routes and any count of threads: {'yes' if same else 'NO'}")

    ref = _reference(a)
    print(f"\n2. the reference fit on {ref.name or 'the reference'} ({ref.n_models} models x {ref.n_items} items), "
          f"no cache, BLAS at 1 thread; median of {a.repeats}")
    print(f"{'workers':>7} {'wall s':>8} {'CPU s':>8}  fit")
    rows: dict[int, tuple[list[float], list[float], object]] = {1: ([], [], None), a.threads: ([], [], None)}
    with limit_threads(1):
        fit_hyperparameters(ref, n_pseudo=2, n_items=20)  # warm: imports SciPy's optimiser, not timed
    for _ in range(a.repeats):
        for workers in rows:
            clear_caches()
            walls, cpus, _fit = rows[workers]
            with mock.patch.object(gaussian, "worker_threads", lambda w=workers: w), limit_threads(1):
                start, cpu = time.perf_counter(), time.process_time()
                fit = fit_hyperparameters(ref)
                walls.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
            rows[workers] = (walls, cpus, fit)
    for workers, (walls, cpus, fit) in rows.items():
        print(f"{workers:>7} {statistics.median(walls):>8.2f} {statistics.median(cpus):>8.2f}  "
              f"alpha {fit.alpha:.6g} beta {fit.beta:.6g} sigma2 {fit.sigma2:.6g} gamma {fit.gamma:.6g}")
    fits = [fit for _, _, fit in rows.values()]
    print(f"the same fit to the last bit: {'yes' if all(f == fits[0] for f in fits) else 'NO'}")


if __name__ == "__main__":
    import os

    os.environ.setdefault("ACTIVEEVAL_CACHE", "off")  # every fit computed, none read from the user cache
    main()
