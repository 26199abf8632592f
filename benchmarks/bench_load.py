"""BLAS threads under load: `activeeval demo` and `session new` while other processes keep the cores busy.

Usage::

    python benchmarks/bench_load.py                      # 3 busy processes, 5 paired runs, demo + session new on IFEval
    python benchmarks/bench_load.py --busy 2 --repeats 3
    python benchmarks/bench_load.py --free-threads 2     # also: no added load, ACTIVEEVAL_THREADS=2 vs the default
    python benchmarks/bench_load.py --smoke              # the smallest run (CI: tests/test_benchmarks.py)
    python benchmarks/bench_load.py --warm-cache         # commands may reuse the user cache (a second session)

NumPy's and SciPy's OpenBLAS start one thread per core for every matrix
operation; activeeval's operations are small and many, so when the cores are
busy those threads mostly wait for each other. activeeval limits them itself
(``activeeval._threads``). This script measures that where users meet it:

1. **Under load.** For ``demo``, ``session new`` and the Python API's
   ``make_method`` (the README's loop, in a fresh process), it starts ``--busy`` processes that spin on the CPU (and
   stops them at the end), then runs each command as its own process, as a
   user would, in the *default environment* (no ``OPENBLAS_NUM_THREADS``,
   ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` or ``ACTIVEEVAL_THREADS``) and
   under ``OPENBLAS_NUM_THREADS=1``, in pairs (the order alternates between
   pairs), with the user cache off (``ACTIVEEVAL_CACHE=off``: each command
   fits the default's prior as a first session does; ``--warm-cache`` lets
   them reuse it, which hides the fit). It prints, per command, the median wall time of each, the median
   of the paired ratios default / one thread (target: ≤ 1.3), and the median
   CPU time (user + system of the process).
2. **Without added load** (``--free-threads N``): the default against
   ``ACTIVEEVAL_THREADS=N``, paired the same way: what the default limit costs
   when cores are free.
3. **Overhead of the limit** (in this process, no added load): the README's
   loop (``--method``, BayesAME by default, on IFEval, one model held out, ``select`` + ``observe``)
   where each call enters and leaves the limit itself, against the same loop
   inside one ``limit_threads()`` scope (inner calls then cost a check), and
   the time to enter and leave an outermost scope.

To measure the code before a change, run the same script with the other
checkout first on the path, e.g. ``PYTHONPATH=/tmp/before/src python
benchmarks/bench_load.py`` (part 3 needs ``activeeval._threads``; it is
skipped when that module is missing).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "ACTIVEEVAL_THREADS")
SPIN = "while True:\n    pass\n"
# The Python API's first step in the README's loop: build the method on a reference (one model held out).
API_BUILD = """
from activeeval import datasets
from activeeval.methods.registry import make_method
full = datasets.load({dataset!r})
make_method({method!r}, full.drop_models([full.model_ids[0]]), seed=0)
"""


def default_env(warm_cache: bool = False) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    if not warm_cache:
        env["ACTIVEEVAL_CACHE"] = "off"  # every run fits, as a user's first session on a reference does
    return env


def timed(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of ``python -m activeeval ARGS`` (or ``python -c CODE`` when
    ARGS is ``["-c", CODE]``) as its own process."""
    start = time.perf_counter()
    argv = [sys.executable, *args] if args[0] == "-c" else [sys.executable, "-m", "activeeval", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env, text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"activeeval {' '.join(args)} failed: {err.strip()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def paired(commands: dict[str, list[str]], conditions: dict[str, dict[str, str]], repeats: int
           ) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{command: {condition: [(wall, cpu)] per repeat}}, the two conditions run back to back, order alternating.

    ``{file}`` in a command's arguments is a new session file in a temporary folder each time."""
    out = {name: {c: [] for c in conditions} for name in commands}
    names = list(conditions)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            for name, args in commands.items():
                for k, c in enumerate(names if r % 2 == 0 else names[::-1]):
                    run_args = [a.replace("{file}", str(Path(tmp) / f"{r}-{k}-{name.replace(' ', '_')}.aeval"))
                                for a in args]
                    out[name][c].append(timed(run_args, conditions[c]))
    return out


def table(title: str, results: dict[str, dict[str, list[tuple[float, float]]]], base: str, other: str) -> None:
    print(f"\n{title}")
    print(f"{'command':<14} {base + ' s':>22} {other + ' s':>26} {'ratio':>7} {'CPU s ' + base:>22} "
          f"{'CPU s ' + other:>26}")
    for name, res in results.items():
        a, b = res[base], res[other]
        ratio = statistics.median(x[0] / y[0] for x, y in zip(a, b, strict=True))
        print(f"{name:<14} {statistics.median(x[0] for x in a):>22.2f} {statistics.median(y[0] for y in b):>26.2f} "
              f"{ratio:>7.2f} {statistics.median(x[1] for x in a):>22.2f} {statistics.median(y[1] for y in b):>26.2f}")
    print("(medians over the pairs; ratio: median of the paired ratios, the first condition over the second)")


def overhead(steps: int, repeats: int, dataset: str, method: str) -> None:
    try:
        from activeeval._threads import limit_threads
    except ImportError:
        print("\noverhead of the limit: skipped (this activeeval has no activeeval._threads)")
        return
    import numpy as np

    from activeeval import datasets
    from activeeval.methods.registry import make_method

    full = datasets.load(dataset)
    target = full.model_ids[0]
    truth = np.asarray(full.model_scores(target), dtype=float)
    ref = full.drop_models([target])

    def loop() -> float:
        m = make_method(method, ref, seed=0)  # the fit is cached after the first loop: the steps are timed
        start = time.perf_counter()
        for _ in range(steps):
            i = m.select()
            m.observe(i, truth[i])
        return (time.perf_counter() - start) / steps

    per_call, scoped = [], []
    for r in range(repeats):
        for kind in (("call", "scope") if r % 2 == 0 else ("scope", "call")):
            if kind == "call":
                per_call.append(loop())
            else:
                with limit_threads():
                    scoped.append(loop())
    n = 2000
    start = time.perf_counter()
    for _ in range(n):
        with limit_threads():
            pass
    enter = (time.perf_counter() - start) / n
    with limit_threads():
        start = time.perf_counter()
        for _ in range(n):
            with limit_threads():
                pass
        inner = (time.perf_counter() - start) / n
    ratio = statistics.median(a / b for a, b in zip(per_call, scoped, strict=True))
    print(f"\noverhead of the limit: {method} on {dataset}, select + observe, {steps} steps x {repeats} paired runs")
    print(f"{'each call limits itself ms/step':>32} {'inside one scope ms/step':>25} {'ratio':>6} "
          f"{'outermost enter+leave us':>25} {'inner enter+leave us':>21}")
    print(f"{statistics.median(per_call) * 1e3:>32.3f} {statistics.median(scoped) * 1e3:>25.3f} {ratio:>6.3f} "
          f"{enter * 1e6:>25.1f} {inner * 1e6:>21.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=3, help="CPU-bound processes started as background load")
    parser.add_argument("--repeats", type=int, default=5, help="paired runs per command")
    parser.add_argument("--dataset", default="ifeval", help="bundled dataset of demo and session new")
    parser.add_argument("--free-threads", type=int, default=None,
                        help="also compare ACTIVEEVAL_THREADS=N with the default, without added load")
    parser.add_argument("--steps", type=int, default=100, help="steps of the overhead loop")
    parser.add_argument("--method", default="bayesame", help="method of every command and of the overhead loop")
    parser.add_argument("--warm-cache", action="store_true",
                        help="let the commands reuse the user cache (default: ACTIVEEVAL_CACHE=off, every run fits)")
    parser.add_argument("--smoke", action="store_true",
                        help="smallest run: no busy process, 1 pair, rs-mean (no fit), a 3-item demo")
    args = parser.parse_args()
    demo = ["demo", "--dataset", args.dataset, "--method", args.method]
    if args.smoke:
        args.busy, args.repeats, args.dataset, args.steps, args.method = 0, 1, "math", 5, "rs-mean"
        demo = ["demo", "--dataset", "math", "--method", "rs-mean", "--max-items", "3"]
    commands = {"demo": demo, "session new": ["session", "new", "{file}", "--reference", args.dataset, "--method",
                                              args.method, "--seed", "0"],
                "api build": ["-c", API_BUILD.format(dataset=args.dataset, method=args.method)]}
    base = default_env(args.warm_cache)
    one = {**base, "OPENBLAS_NUM_THREADS": "1"}
    print(f"{os.cpu_count()} cores; {args.busy} busy processes; {args.repeats} paired runs; dataset {args.dataset}; "
          f"user cache {'on' if args.warm_cache else 'off'}")
    busy = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(args.busy)]
    try:
        loaded = paired(commands, {"default env": base, "OPENBLAS_NUM_THREADS=1": one}, args.repeats)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    table(f"under load ({args.busy} busy processes)", loaded, "default env", "OPENBLAS_NUM_THREADS=1")
    if args.free_threads is not None:
        more = {**base, "ACTIVEEVAL_THREADS": str(args.free_threads)}
        free = paired(commands, {"default env": base, f"ACTIVEEVAL_THREADS={args.free_threads}": more}, args.repeats)
        table("no added load", free, "default env", f"ACTIVEEVAL_THREADS={args.free_threads}")
    overhead(args.steps, args.repeats, args.dataset, args.method)


if __name__ == "__main__":
    main()
