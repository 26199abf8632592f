"""`activeeval rank --jobs N` against `--jobs 1`: wall time, scorer calls, and the same journal.

Usage::

    python benchmarks/bench_rank_jobs.py                      # --jobs 1, 2, 4; a scorer that takes 0.5 s per call
    python benchmarks/bench_rank_jobs.py --jobs 1,4 --delay 1 --repeats 3
    python benchmarks/bench_rank_jobs.py --smoke               # the smallest run (tests/test_benchmarks.py)

Setup: the bundled AlpacaEval 2 matrix (continuous scores), its first
``--models`` complete models ranked as new models against the others, CAT
(the default; ``--method``), ``--budget-per-model`` items each after ``--min-items``
warm-up items. The scorer is a small Python script (``-I -S``: it imports
nothing of activeeval) that waits ``--delay`` seconds, as a model call would,
and prints the model's real score on the item. Each ``--jobs`` value ranks on
a fresh session file, ``--repeats`` times; the table shows the median wall
time of the whole command, its ratio to ``--jobs 1``, the scorer calls made
(the extra ones scored pairs the ranker did not ask for in the end) and
whether the journal (every ask and score, in order) equals ``--jobs 1``'s.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCORER = """\
import json, sys, time
time.sleep(float(sys.argv[3]))
with open(sys.argv[2], "a") as fh:
    fh.write("x\\n")
print(json.load(open(sys.argv[1]))[sys.argv[4]][sys.argv[5]])
"""


def journal(path: Path) -> list[tuple]:
    """Every ask and score of the session file in order (without their times), read with plain SQLite."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.execute("SELECT seq, kind, target, item_id, score, batch FROM events ORDER BY seq"))
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", default="1,2,4", help="comma-separated --jobs values (1 is the baseline)")
    ap.add_argument("--models", type=int, default=4)
    ap.add_argument("--budget-per-model", type=float, default=10.0)
    ap.add_argument("--min-items", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.5, help="seconds a scorer call takes")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-items", type=int, default=0, help="only the first MAX_ITEMS items (0: all)")
    ap.add_argument("--method", default="cat", help="the ranker's method (rank --method)")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        args.jobs, args.models, args.budget_per_model, args.min_items, args.delay, args.max_items, args.method = (
            "1,2", 2, 2.0, 1, 0.0, 60, "rs-mean")
    jobs = sorted({int(j) for j in args.jobs.split(",")} | {1})

    from activeeval import datasets
    from activeeval.data.io import write_scores

    full, _ = datasets.load("alpacaeval2").dropna("models")
    if args.max_items:
        full = full.select_items(list(full.item_ids[: args.max_items]))
    models = list(full.model_ids[: args.models])
    truth = {m: dict(zip(full.item_ids, map(float, full.model_scores(m)), strict=True)) for m in models}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ref = write_scores(full.drop_models(models), folder / "ref.csv")
        (folder / "truth.json").write_text(json.dumps(truth))
        (folder / "score.py").write_text(SCORER)
        rows = {}
        for j in jobs:
            walls, calls, logs = [], [], []
            for r in range(args.repeats):
                session, log = folder / f"r{j}-{r}.aeval", folder / f"calls{j}-{r}.txt"
                scorer = (f"{sys.executable} -I -S {folder / 'score.py'} {folder / 'truth.json'} {log} {args.delay} "
                          "{model} {item_id}")
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "activeeval", "rank", "--session", str(session), "--reference",
                                str(ref), "--models", ",".join(models), "--scorer", scorer, "--budget-per-model",
                                str(args.budget_per_model), "--min-items", str(args.min_items), "--seed", "0",
                                "--jobs", str(j), "--method", args.method, "--json"],
                               check=True, stdout=subprocess.DEVNULL)
                walls.append(time.perf_counter() - start)
                calls.append(len(log.read_text().splitlines()))
                logs.append(journal(session))
            rows[j] = (walls, calls, logs)
    base = rows[1]
    print(f"rank: {args.models} AlpacaEval 2 models ({full.n_items} items), {args.method}, "
          f"{args.budget_per_model:g} items per model ({args.min_items} warm-up), scorer {args.delay:g} s per call; "
          f"median of {args.repeats} run(s)")
    print(f"{'--jobs':>6} {'wall s':>8} {'vs --jobs 1':>12} {'scorer calls':>13} {'scores recorded':>16} "
          f"{'journal == --jobs 1':>20}")
    for j, (walls, calls, logs) in rows.items():
        ratio = statistics.median(w / b for w, b in zip(walls, base[0], strict=True))
        told = sum(1 for e in logs[0] if e[1] == "tell")
        same = all(log == base[2][0] for log in logs)
        print(f"{j:>6} {statistics.median(walls):>8.2f} {ratio:>12.2f} {statistics.median(calls):>13.0f} "
              f"{told:>16} {same!s:>20}")


if __name__ == "__main__":
    main()
