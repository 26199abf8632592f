"""Later session commands (`next`, `record`, `status`) as whole processes, against their floor and another checkout.

Usage::

    python benchmarks/bench_startup.py                                  # 20 000 items x 50 models, 9 paired rounds
    python benchmarks/bench_startup.py --before /tmp/main/src           # and the same commands on another checkout
    python benchmarks/bench_startup.py --methods rs-mean --items 567 --models 83
    python benchmarks/bench_startup.py --smoke                          # 200 items x 20 models, rs-mean, 1 round (CI)

A user's loop runs one `session next` and one `session record` per item, so
each one's start-up is the user's wait (issue 26: ≤ 0.3 s at 20 000 items x
50 models; issue 24: under 1 s). This script times them as a user runs them
(``python -m activeeval ...``, one process each, from compiled bytecode, a
fresh user cache) and, in the same rounds, the floor any such command pays
on this machine: Python alone, ``import numpy``, and NumPy with Typer
validating one option through pydantic (Typer 0.29 validates every option
with a pydantic ``TypeAdapter``). With ``--before SRC`` (the ``src`` folder
of another checkout, e.g. ``git archive main src | tar -x -C /tmp/main``)
each round runs the same commands with that code first on the path, on its
own copy of the session (a session's snapshot slot is per file), right after
this checkout's: the ratios are taken round by round (a paired ratio holds
when the machine's load drifts). Medians of CPU time (user + system, what a
loaded machine inflates least) and of wall time.

Setup: the synthetic binary reference of ``bench_session.py`` (a 1PL model,
seed 0, a wide CSV); one session per method made with this checkout (the
journal format is the same for both), then one `next` per checkout and
session before the rounds (it rebuilds the state and stores the snapshot
the later commands start from).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_session import make_reference

FLOORS = {
    "python": "pass",
    "numpy": "import numpy",
    "numpy+typer": "import numpy, typer; from pydantic import TypeAdapter; TypeAdapter(str)",
}


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one process (the system's accounting of it); fails loudly if it fails."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {err.read().strip()[-800:]}")
        return usage.ru_utime + usage.ru_stime, wall, out.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=20000)
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--methods", default="bayesame,rs-mean", help="comma-separated method specs")
    ap.add_argument("--repeats", type=int, default=9, help="rounds (each: every command once per checkout)")
    ap.add_argument("--before", type=Path, help="the src folder of another checkout, timed in the same rounds")
    ap.add_argument("--smoke", action="store_true", help="200 items x 20 models, rs-mean, one round, one floor")
    a = ap.parse_args()
    floors = dict(FLOORS)
    if a.smoke:
        a.items, a.models, a.methods, a.repeats = 200, 20, "rs-mean", 1
        floors = {"python": FLOORS["python"]}
    codes = {"this": None} | ({"before": a.before.resolve()} if a.before else {})
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        base["ACTIVEEVAL_CACHE"] = str(folder / "cache")  # fresh, and not the home's
        envs = {code: base | ({"PYTHONPATH": str(src)} if src else {}) for code, src in codes.items()}
        ref = make_reference(a.items, a.models, folder)
        sessions: dict[tuple[str, str], Path] = {}
        for method in a.methods.split(","):
            made = folder / f"{method}.aeval"
            timed([sys.executable, "-m", "activeeval", "session", "new", str(made), "--reference", str(ref),
                   "--seed", "0", "--method", method, "--no-forecast"], envs["this"])
            for code in codes:
                sessions[method, code] = folder / f"{method}-{code}.aeval"
                shutil.copy(made, sessions[method, code])
                if not a.smoke:  # the state rebuilt once, and its snapshot stored
                    timed([sys.executable, "-m", "activeeval", "session", "next", str(sessions[method, code])],
                          envs[code])
        cpu: dict[tuple[str, str, str], list[float]] = {}
        wall: dict[tuple[str, str, str], list[float]] = {}

        def note(key: tuple[str, str, str], result: tuple[float, float, str]) -> str:
            cpu.setdefault(key, []).append(result[0])
            wall.setdefault(key, []).append(result[1])
            return result[2]

        for _ in range(a.repeats):
            for name, code in floors.items():
                note(("floor", name, "this"), timed([sys.executable, "-c", code], envs["this"]))
            for (method, code), f in sessions.items():
                cli = [sys.executable, "-m", "activeeval", "session"]
                item = note((method, "next", code), timed([*cli, "next", str(f)], envs[code])).split()[0]
                note((method, "record", code), timed([*cli, "record", str(f), item, "1"], envs[code]))
                note((method, "status", code), timed([*cli, "status", str(f)], envs[code]))
        header = (f"{'items':>6} {'models':>6} {'method':<10} {'command':<12} {'CPU s':>6} {'wall s':>7}"
                  + (f" {'before CPU':>10} {'before wall':>11} {'CPU ratio':>9}" if a.before else ""))
        print(f"{a.repeats} rounds; medians (CPU: user + system of the process)")
        print(header)
        print("-" * len(header))
        for name in floors:
            key = ("floor", name, "this")
            print(f"{'':>6} {'':>6} {'floor':<10} {name:<12} {statistics.median(cpu[key]):>6.2f} "
                  f"{statistics.median(wall[key]):>7.2f}")
        for method in a.methods.split(","):
            for command in ("next", "record", "status"):
                key = (method, command, "this")
                row = (f"{a.items:>6} {a.models:>6} {method:<10} {command:<12} {statistics.median(cpu[key]):>6.2f} "
                       f"{statistics.median(wall[key]):>7.2f}")
                if a.before:
                    old = (method, command, "before")
                    ratio = statistics.median(x / y for x, y in zip(cpu[key], cpu[old], strict=True))
                    row += (f" {statistics.median(cpu[old]):>10.2f} {statistics.median(wall[old]):>11.2f} "
                            f"{ratio:>9.2f}")
                print(row, flush=True)


if __name__ == "__main__":
    main()
