"""What `activeeval rank` pays before its first item (CAT's calibration on the references) and what the cache saves.

Usage::

    python benchmarks/bench_rank_start.py                          # IFEval, three models, 3 repeats
    mkdir /tmp/base && git archive fd80d44 src | tar -x -C /tmp/base
    python benchmarks/bench_rank_start.py --base-src /tmp/base/src # paired with another version's code
    python benchmarks/bench_rank_start.py --smoke                  # AlpacaEval 2, two models, one run (CI)

Each row is the whole command as a user runs it (``python -m activeeval rank
--dataset D --models A,B,C``: a simulated ranking of those models, held out,
against every other model of the dataset), its own process; the times
include Python's start-up and imports. ``no cache`` runs it with
``activeeval --no-cache`` (CAT fits its item calibration and runs the
references as pseudo-targets: what every `rank` paid before the user cache
kept them); ``first`` with a fresh cache folder (the same work, and the
results stored); ``second`` again with the folder ``first`` left (what a
second `rank`, ranking session or CAT session on the same references pays).
``--base-src DIR`` runs the ``no cache`` row again with another version's
code (``PYTHONPATH=DIR``), alternating which goes first. The table gives
the median wall and CPU seconds (user + system of the child, ``wait4``)
over ``--repeats`` and whether each row printed the same ranking table as
the first ``no cache`` run.
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

IFEVAL_MODELS = "meta-llama/Llama-3.3-70B-Instruct,Qwen/Qwen2.5-72B-Instruct,Qwen/Qwen2.5-14B-Instruct-1M"


def _timed(args: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of one whole command; its CPU time is the growth of this process's children's
    resource usage (user + system) across the run."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, env=env, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="ifeval")
    parser.add_argument("--models", default=IFEVAL_MODELS, help="comma-separated models to rank (held out)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base-src", default=None, help="also run the `no cache` row with this src folder's code")
    parser.add_argument("--smoke", action="store_true", help="AlpacaEval 2, two models, one run of each row")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dataset, args.repeats = "alpacaeval2", 1
        args.models = "FuseChat-Gemma-2-9B-Instruct,OpenHermes-2.5-Mistral-7B"
    command = [sys.executable, "-m", "activeeval", "rank", "--dataset", args.dataset, "--models", args.models]
    base_env = {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}
    rows: dict[str, list[tuple[float, float]]] = {}
    same: dict[str, bool] = {}
    reference_out: str | None = None

    def record(name: str, result: tuple[float, float, str]) -> None:
        nonlocal reference_out
        wall, cpu, out = result
        if reference_out is None:
            reference_out = out
        rows.setdefault(name, []).append((wall, cpu))
        same[name] = same.get(name, True) and out == reference_out

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            versions = ["this"] + (["base"] if args.base_src else [])
            if r % 2 == 1:
                versions.reverse()
            for version in versions:
                env = {**base_env, "ACTIVEEVAL_CACHE": "off"}
                if version == "base":
                    env["PYTHONPATH"] = str(Path(args.base_src).resolve())
                record(f"no cache ({version})", _timed(command, env))
            cache = Path(tmp) / f"cache{r}"
            env = {**base_env, "ACTIVEEVAL_CACHE": str(cache)}
            record("first (fresh cache)", _timed(command, env))
            record("second (same cache)", _timed(command, env))
    print(f"bench_rank_start: `activeeval rank --dataset {args.dataset}` ({len(args.models.split(','))} models), "
          f"{args.repeats} repeat(s); wall {time.perf_counter() - t0:.0f} s")
    print(f"{'row':26s} {'wall s (median)':>16s} {'CPU s (median)':>15s} {'max wall':>9s}  same output")
    for name, values in rows.items():
        walls, cpus = [w for w, _ in values], [c for _, c in values]
        print(f"{name:26s} {statistics.median(walls):16.2f} {statistics.median(cpus):15.2f} {max(walls):9.2f}  "
              f"{'yes' if same[name] else 'NO'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
