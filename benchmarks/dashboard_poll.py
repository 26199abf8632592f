"""The dashboard beside a writer: what one update costs, and whether it holds the writer up.

Usage::

    python benchmarks/dashboard_poll.py                 # the committed numbers (docs/benchmarks/history.md)
    python benchmarks/dashboard_poll.py --smoke         # a few seconds, to check the script runs

Setup: a synthetic binary reference (``--models`` x ``--items``, a 1PL
response model, seed 0) written as a CSV, and a session on it (``--method``).
The writer (this process) records ``--tells`` scores one by one with
``Session.tell`` (each a committed transaction), timing each call, in two
phases taken in turn (A B A B ...): A with nobody reading, B with a dashboard
reader in another process (:class:`activeeval.dashboard.data.Board`, what the
server calls) reading every session summary and the session's full detail
every ``--interval`` seconds, as the open page asks for them. The writer's
lock timeout is 0.5 s, so a reader that held it up that long would fail the
run. The table gives the tell latency per phase (median, max), their ratio
B/A (medians of the same run), and the reader's time per update (median,
max) as the session grows.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def reader(path: str, interval: float, stop, out) -> None:
    from activeeval.dashboard.data import Board, session_id

    sid = session_id(Path(path))
    times = []
    with Board([path]) as board:
        while not stop.is_set():
            start = time.perf_counter()
            (entry,) = board.sessions()
            detail = board.detail(sid)
            times.append((time.perf_counter() - start, detail["status"]["n_used"]))
            if "error" in entry:
                raise SystemExit(f"reader failed: {entry['error']}")
            time.sleep(interval)
    out.put(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--tells", type=int, default=200, help="scores recorded per phase, in rounds of 20")
    ap.add_argument("--method", default="bayesame-rs")
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--smoke", action="store_true", help="tiny sizes: checks that the script runs")
    a = ap.parse_args()
    if a.smoke:
        a.items, a.tells, a.method = 200, 40, "rs-mean"

    from activeeval.data.io import write_scores
    from activeeval.data.matrix import ScoreMatrix
    from activeeval.session import Session

    rng = np.random.default_rng(0)
    ability = rng.normal(size=(a.models + 1, 1))
    difficulty = rng.normal(size=(1, a.items))
    scores = (rng.random((a.models + 1, a.items)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    ids = [f"i{j:05d}" for j in range(a.items)]
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "ref.csv"
        write_scores(ScoreMatrix(scores[1:], [f"m{k}" for k in range(a.models)], ids), ref)
        path = Path(tmp) / "s.aeval"
        Session.create(path, ref, method=a.method, seed=0).close()
        truth = dict(zip(ids, scores[0], strict=True))
        order = list(rng.permutation(ids))
        lat: dict[str, list[float]] = {"A": [], "B": []}
        polls: list[tuple[float, int]] = []
        ctx = mp.get_context("spawn")
        with Session.open(path, timeout=0.5) as s:
            rounds = a.tells // 20
            for r in range(2 * rounds):
                phase = "AB"[r % 2]
                proc = stop = out = None
                if phase == "B":
                    stop, out = ctx.Event(), ctx.Queue()
                    proc = ctx.Process(target=reader, args=(str(path), a.interval, stop, out))
                    proc.start()
                    time.sleep(max(1.0, 5 * a.interval))  # the reader has opened the session and is polling
                for _ in range(20):
                    item = order.pop()
                    start = time.perf_counter()
                    s.tell(item, truth[item])
                    lat[phase].append(time.perf_counter() - start)
                    time.sleep(a.interval / 4)  # scores arrive over time, as from a harness
                if proc is not None:
                    stop.set()
                    polls.extend(out.get(timeout=120))
                    proc.join(timeout=60)
                    if proc.exitcode != 0:
                        raise SystemExit(f"the dashboard reader failed (exit {proc.exitcode})")
    ms = lambda xs, f: 1000 * f(xs)  # noqa: E731
    print(f"dashboard_poll: {a.models} models x {a.items} items, method {a.method}, {a.tells} tells per phase, "
          f"reader every {a.interval:g} s")
    print(f"{'phase':<28} {'n':>5} {'median ms':>10} {'max ms':>8}")
    for phase, label in (("A", "tell, nobody reading"), ("B", "tell, dashboard reading")):
        print(f"{label:<28} {len(lat[phase]):>5} {ms(lat[phase], statistics.median):>10.2f} "
              f"{ms(lat[phase], max):>8.2f}")
    print(f"{'ratio of medians B/A':<28} {'':>5} {statistics.median(lat['B']) / statistics.median(lat['A']):>10.2f}")
    if polls:
        t = [p for p, _ in polls]
        print(f"{'dashboard update (read)':<28} {len(t):>5} {ms(t, statistics.median):>10.2f} {ms(t, max):>8.2f}"
              f"   (session at {min(n for _, n in polls)}..{max(n for _, n in polls)} items)")


if __name__ == "__main__":
    sys.exit(main())
