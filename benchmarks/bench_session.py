"""Session commands at scale: `session new`, `next`, `record`, `status` as whole processes.

Usage::

    python benchmarks/bench_session.py                                  # 1 000 / 5 000 / 20 000 items x 50 models
    python benchmarks/bench_session.py --items 20000 --methods rs-mean --repeats 3
    python benchmarks/bench_session.py --items 12000 --models 2000 --methods rs-mean,bayesame --repeats 3
                                                                        # a 48 MB reference (24 M cells, issue 24)
    python benchmarks/bench_session.py --items 20000 --methods bayesame --no-cache
                                                                        # every command without the user cache
    python benchmarks/bench_session.py --smoke                          # 200 items x 20 models, rs-mean, 1 run

Setup: a synthetic binary reference (50 models, a 1PL response model, seed 0)
written as a wide CSV, the format a user's reference usually has. Each
command is run as its own process (``python -m activeeval ...``), as a user
runs it, so the times include Python start-up and imports; peak memory is
the process's maximum resident set (``wait4``). The user cache (parsed
reference files, session snapshots) is a fresh folder of the run
(``ACTIVEEVAL_CACHE``), as on a user's first use; ``--no-cache`` runs every
command with ``activeeval --no-cache`` (no parse cache, no snapshots: what
the cache buys). ``new`` is run ``--repeats``
times on fresh files; then, on one session, ``next`` / ``record`` (of the item
just handed out) / ``status`` are each run ``--repeats`` times. The table
shows medians and maxima of the wall time, the median CPU time (user + system:
what a loaded machine inflates least), and first those of ``activeeval --version``
(the start-up every command pays), the session file's size, and, for ``new``, how much
of it is building the method (timed in-process, the same construction the
session does): the rest is the session machinery (reading the reference,
fingerprint, journal, snapshot).

Targets (issue 10): ``new`` ≤ 5 s and ≤ 300 MB, every later command ≤ 1 s,
at 20 000 items x 50 models. Issue 24: later commands under 1 s on a 48 MB
reference (2 000 models x 12 000 items).
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


def make_reference(n_items: int, n_models: int, folder: Path) -> Path:
    """The reference CSV, written by a child process (so this one stays small: a child's peak memory, as the
    system counts it, starts at its parent's)."""
    path = folder / f"ref{n_items}.csv"
    code = f"""
import numpy as np
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
rng = np.random.default_rng(0)
p = 1 / (1 + np.exp(-(rng.normal(size=({n_models}, 1)) - rng.normal(size=(1, {n_items})))))
scores = (rng.random(({n_models}, {n_items})) < p).astype(float)
m = ScoreMatrix(scores, [f"model{{j:02d}}" for j in range({n_models})], [f"item{{i:05d}}" for i in range({n_items})],
                name="synth{n_items}")
write_scores(m, {str(path)!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    return path


def run(args: list[str]) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS MB, stdout, CPU seconds) of ``python -m activeeval ARGS``."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "activeeval", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"activeeval {' '.join(args)} failed: {err.strip()}")
    return wall, usage.ru_maxrss / 1024, out, usage.ru_utime + usage.ru_stime


def build_seconds(method: str, ref: Path) -> float:
    """In-process time to build the method on the reference (what the session's creation cannot avoid)."""
    code = ("import time; from activeeval.data.io import read_scores; from activeeval.methods.registry import "
            f"make_method; m = read_scores({str(ref)!r}); t = time.perf_counter(); make_method({method!r}, m, seed=0); "
            "print(time.perf_counter() - t)")
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", default="1000,5000,20000", help="comma-separated item counts")
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--methods", default="bayesame,rs-mean", help="comma-separated method specs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="200 items x 20 models, rs-mean, one run of each command")
    ap.add_argument("--no-cache", action="store_true", help="run every command with `activeeval --no-cache`")
    a = ap.parse_args()
    flags = ["--no-cache"] if a.no_cache else []
    if a.smoke:
        a.items, a.models, a.methods, a.repeats = "200", 20, "rs-mean", 1
    header = (f"{'items':>6} {'models':>6} {'method':<10} {'command':<8} {'median s':>9} {'max s':>7} {'CPU s':>6} "
              f"{'peak MB':>8} {'file MB':>8}  note")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["ACTIVEEVAL_CACHE"] = str(folder / "cache")  # the commands' user cache: fresh, and not the home's
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the commands run from compiled bytecode, as installed
        # the floor of every command on this machine now: start-up and imports alone (`activeeval --version`)
        floor = [run(["--version"]) for _ in range(a.repeats)]
        walls = [r[0] for r in floor]
        print(f"{'':>6} {'':>6} {'':<10} {'start-up':<8} {statistics.median(walls):>9.2f} {max(walls):>7.2f} "
              f"{statistics.median(r[3] for r in floor):>6.2f} {'':>8} {'':>8}  python -m activeeval --version",
              flush=True)
        for n_items in (int(x) for x in a.items.split(",")):
            ref = make_reference(n_items, a.models, folder)
            for method in a.methods.split(","):
                times, peaks, cpus = [], [], []
                for r in range(a.repeats):
                    f = folder / f"s{n_items}-{method}-{r}.aeval"
                    wall, peak, _, cpu = run([*flags, "session", "new", str(f), "--reference", str(ref), "--seed", "0",
                                              "--method", method])
                    times.append(wall)
                    peaks.append(peak)
                    cpus.append(cpu)
                build = build_seconds(method, ref)
                size = f.stat().st_size / 1e6
                row = (f"{n_items:>6} {a.models:>6} {method:<10} {'new':<8} {statistics.median(times):>9.2f} "
                       f"{max(times):>7.2f} {statistics.median(cpus):>6.2f} {max(peaks):>8.0f} {size:>8.1f}  "
                       f"method build {build:.2f} s in-process")
                print(row, flush=True)
                results: dict[str, list[tuple[float, float, str, float]]] = {c: [] for c in ("next", "record", "status")}
                for _ in range(a.repeats):
                    results["next"].append(run([*flags, "session", "next", str(f)]))
                    item = results["next"][-1][2].split()[0]
                    results["record"].append(run([*flags, "session", "record", str(f), item, "1"]))
                    results["status"].append(run([*flags, "session", "status", str(f)]))
                size = f.stat().st_size / 1e6
                for cmd, runs in results.items():
                    ts = [r[0] for r in runs]
                    print(f"{n_items:>6} {a.models:>6} {method:<10} {cmd:<8} {statistics.median(ts):>9.2f} "
                          f"{max(ts):>7.2f} {statistics.median(r[3] for r in runs):>6.2f} "
                          f"{max(r[1] for r in runs):>8.0f} {size:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
