"""Backtest tasks timed under two versions of activeeval, paired: each task run by both, one after the other.

Usage::

    mkdir /tmp/base && git archive main src | tar -x -C /tmp/base    # the version to compare with
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_paired_tasks.py --base-src /tmp/base/src \\
        --tasks ifeval:interpolation:bayesame,musr:interpolation:bayesame-paper --seeds 0,1,2
    python benchmarks/bench_paired_tasks.py --smoke     # this checkout against itself, one small task

A task is what a backtest worker runs (:func:`activeeval.experiments.runner.run_task`:
one seed's references, every target of the split, n = 1..N). Each task runs
in a fresh process under ``--base-src`` (``PYTHONPATH``) and then under this
checkout, with no user cache (``ACTIVEEVAL_CACHE=off``: the cold path, as a
first backtest on these references); the time is the task's own CPU time
(imports and data loading excluded), so other jobs on a busy machine inflate
it less than the wall time, and pairing the two runs of a task cancels most
of what remains. Printed per task: both CPU times, their ratio, and whether
the two versions' trajectories (means and variances) are identical to the
last bit; then the median ratio and the sums.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
SRC = HERE.parents[1] / "src"

# run by each child: one task, its CPU seconds and a SHA-256 of its means and variances
CHILD = """
import hashlib, sys, time
import numpy as np
from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig, make_split
from activeeval.experiments.runner import run_task
name, regime, method, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
matrix = datasets.load(name)
config = BacktestConfig(methods=(method,), regime=regime, n_seeds=seed + 1)
split = make_split(matrix, regime, config.n_targets, config.split_seed, config.gap)
start = time.process_time()
out = run_task(matrix, config, split, method, seed)
cpu = time.process_time() - start
h = hashlib.sha256()
for a in out[2:4]:
    if a is not None:
        h.update(np.ascontiguousarray(np.asarray(a, dtype=float)).tobytes())
print(cpu, h.hexdigest())
"""


def run(src: Path, task: tuple[str, str, str, int]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(src), "ACTIVEEVAL_CACHE": "off"}
    out = subprocess.run([sys.executable, "-c", CHILD, *map(str, task)], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"task {task} under {src} failed:\n{out.stderr}")
    cpu, digest = out.stdout.split()
    return float(cpu), digest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-src", type=Path, help="the other version's src folder (default: this checkout's)")
    ap.add_argument("--tasks", default="ifeval:interpolation:bayesame",
                    help="comma-separated dataset:regime:method")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds")
    ap.add_argument("--smoke", action="store_true", help="one small task (math, rs-mean), this checkout twice")
    a = ap.parse_args()
    if a.smoke:
        a.tasks, a.seeds, a.base_src = "math:interpolation:rs-mean", "0", None
    base = (a.base_src or SRC).resolve()
    tasks = [(*spec.split(":"), int(s)) for spec in a.tasks.split(",") for s in a.seeds.split(",")]
    print(f"base: {base}\nnew:  {SRC}")
    print(f"{'dataset':<12} {'regime':<13} {'method':<18} {'seed':>4} {'base CPU s':>10} {'new CPU s':>9} "
          f"{'ratio':>6}  results")
    ratios, sums = [], [0.0, 0.0]
    for task in tasks:
        (b, hb), (n, hn) = run(base, task), run(SRC, task)
        ratios.append(n / b if b > 0 else float("nan"))
        sums[0] += b
        sums[1] += n
        print(f"{task[0]:<12} {task[1]:<13} {task[2]:<18} {task[3]:>4} {b:>10.2f} {n:>9.2f} {ratios[-1]:>6.3f}  "
              f"{'identical' if hb == hn else 'differ'}", flush=True)
    print(f"median ratio {statistics.median(ratios):.3f}; sum {sums[0]:.1f} s -> {sums[1]:.1f} s")


if __name__ == "__main__":
    main()
