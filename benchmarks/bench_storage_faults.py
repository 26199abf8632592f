"""Concurrent writers on one session file, at the reliability audit's sizes (issue 24, item 7).

Usage::

    python benchmarks/bench_storage_faults.py              # 2 x 200 `session record` processes, 4 x 40 ask/tell
    python benchmarks/bench_storage_faults.py --smoke      # 2 x 1 and 4 x 1 (tests/test_benchmarks.py)

Setup: the bundled HELM-Lite MATH matrix (83 models x 437 items) with one
model held out, the other 82 written to a CSV reference; sessions use
``rs-mean`` (so the time is the storage's, not the method's).

1. *CLI writers*: two processes each run ``python -m activeeval session
   record FILE ITEM SCORE`` for their half of the items, one command after
   the other, both at once: every command is a whole process that opens the
   file, waits for the write lock, records and exits.
2. *API writers*: four processes each open the session once and do
   ``ask(1)`` / ``tell`` ``--calls`` times, all at once.

After each, the journal is read back with its checksums verified. One row
per experiment: calls made, calls that failed, scores recorded, scores
missing, scores recorded twice (the database's unique index makes that
impossible, checked anyway), whether the file verifies, and the wall time.
The default test suite runs both with fewer calls (tests/session/test_faults.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

RECORDER = textwrap.dedent("""
    import subprocess, sys
    path, scores = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
    failed = 0
    for item, score in scores.items():
        done = subprocess.run([sys.executable, "-m", "activeeval", "session", "record", "--", path, item, score],
                              capture_output=True, text=True)
        failed += done.returncode != 0
    print(failed)
""")

ASK_TELL = textwrap.dedent("""
    import json, sys
    from activeeval.session import Session
    path, truth, n = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
    told, failed = [], 0
    with Session.open(path, timeout=120) as s:
        for _ in range(n):
            try:
                (a,) = s.ask(1)
                s.tell(a.item_id, truth[a.item_id])
                told.append(a.item_id)
            except Exception:
                failed += 1
    print(json.dumps({"told": told, "failed": failed}))
""")


def read_back(path: Path) -> tuple[list[str], bool]:
    from activeeval.session.journal.storage import Journal

    try:
        j = Journal.open(path, readonly=True)
        try:
            return [e.item_id for e in j.events() if e.kind == "tell"], True
        finally:
            j.close()
    except Exception:
        return [], False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200, help="`session record` commands per CLI process")
    ap.add_argument("--calls", type=int, default=40, help="ask/tell calls per API process")
    ap.add_argument("--smoke", action="store_true", help="2 x 1 records and 4 x 1 calls (that the script runs)")
    a = ap.parse_args()
    if a.smoke:
        a.records, a.calls = 1, 1  # each record is a whole process: 2 x 10 took 27 CPU-s, 2 x 3 6 CPU-s
    from activeeval import datasets
    from activeeval.data.io import write_scores
    from activeeval.session import Session

    full = datasets.load("math")
    target = full.model_ids[0]
    truth = dict(zip(full.item_ids, map(float, full.model_scores(target)), strict=True))
    print(f"{'experiment':<32} {'calls':>6} {'failed':>6} {'recorded':>8} {'missing':>7} {'twice':>5} "
          f"{'verifies':>8} {'wall s':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ref = write_scores(full.drop_models([target]), folder / "ref.csv")
        (folder / "truth.json").write_text(json.dumps(truth))

        f = folder / "cli.aeval"
        Session.create(f, ref, seed=0, method="rs-mean").close()
        items = list(truth)[: 2 * a.records]
        halves = [items[0::2], items[1::2]]
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(f), *(f"{i}={truth[i]:g}" for i in h)],
                                  stdout=subprocess.PIPE, text=True) for h in halves]
        failed = sum(int(p.communicate()[0]) for p in procs)
        wall = time.perf_counter() - start
        got, ok = read_back(f)
        print(f"{'2 processes x session record':<32} {len(items):>6} {failed:>6} {len(got):>8} "
              f"{len(set(items) - set(got)):>7} {len(got) - len(set(got)):>5} {ok!s:>8} {wall:>7.1f}", flush=True)

        f = folder / "api.aeval"
        Session.create(f, ref, seed=0, method="rs-mean").close()
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", ASK_TELL, str(f), str(folder / "truth.json"),
                                   str(a.calls)], stdout=subprocess.PIPE, text=True) for _ in range(4)]
        results = [json.loads(p.communicate()[0]) for p in procs]
        wall = time.perf_counter() - start
        told = [i for r in results for i in r["told"]]
        failed = sum(r["failed"] for r in results)
        got, ok = read_back(f)
        print(f"{'4 processes x ask/tell':<32} {4 * a.calls:>6} {failed:>6} {len(got):>8} "
              f"{len(set(told) - set(got)):>7} {len(got) - len(set(got)):>5} {ok!s:>8} {wall:>7.1f}", flush=True)


if __name__ == "__main__":
    main()
