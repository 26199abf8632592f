"""Crash safety of ``activeeval run``: SIGKILL it at random moments, resume, compare.

Usage::

    python benchmarks/bench_crash.py                 # 100 kills (the committed numbers)
    python benchmarks/bench_crash.py --kills 20 --max-items 60 --seed 1

Setup: the bundled HELM-Lite MATH matrix (83 models x 437 items, binary); one
model is held out as the target and the other 82 are written to a CSV file
that serves as the reference. The scorer is a tiny Python script (started
with ``-I -S``, it does not import activeeval) that prints the held-out
model's real score on the item it is given.

1. An uninterrupted run (the loop ``activeeval run`` drives, run in this
   process with the same settings: ``--max-items``, ``--seed``, ``--jobs``)
   gives the expected journal and estimate.
2. The same command is started again and again on a fresh session file and
   killed with SIGKILL (its whole process group, scorers included) either at
   a uniformly random time in [0, --random-delay] s after start (this lands in start-up,
   in the journal replay or while scoring) or, half of the time, a random
   0-50 ms after it recorded a new score. After every kill the recorded scores are read back from the
   journal: what was recorded before must still be there, unchanged and in
   the same order (no loss), and no item may be recorded twice.
3. Once ``--kills`` kills are done, the command is run to completion; its
   journal (item order and scores) must equal the uninterrupted run's
   exactly, and its estimate trajectory (every estimate along the way, and
   the final one) to 1e-6 relative. Bit-for-bit equality of floating-point
   results is not promised across processes: numpy's and BLAS's vectorised
   sums depend on memory alignment, so the reference fit (an optimisation)
   made by the first ``run`` process and the one made here differ in their
   last bits (1e-12 in α, β), and the calibration factor and the variance
   after 200 Kalman updates inherit that (1e-9 seen). It is not needed
   either: the scores, the items chosen and the stopping decision are what
   a resume must reproduce, and those are compared exactly.

Prints one table: kills, kills that landed while scoring / before the first
new score, observations recorded across the kills, lost, altered, duplicated,
whether the final journal and estimate match, and the wall time.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

SCORER = """import json, sys
print(json.load(open({path!r}))[sys.argv[1]])
"""


@dataclass
class CrashCounts:
    kills: int = 0
    kills_before_new_score: int = 0
    recorded_during_kills: int = 0
    lost: int = 0
    altered: int = 0
    duplicated: int = 0
    journal_matches: bool = False
    estimate_matches: bool = False
    final_estimate: float = float("nan")
    expected_estimate: float = float("nan")
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0 and self.altered == 0 and self.duplicated == 0
            and self.journal_matches and self.estimate_matches and not self.problems
        )


def _env() -> dict[str, str]:
    import activeeval

    src = str(Path(activeeval.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def prepare(workdir: Path, dataset: str = "math", held_out: int = 0) -> tuple[Path, str]:
    """Write the reference CSV and the scorer; return (reference path, scorer command)."""
    from activeeval import datasets
    from activeeval.data.io import write_scores

    full = datasets.load(dataset)
    target = full.model_ids[held_out]
    ref_path = write_scores(full.drop_models([target]), workdir / f"{dataset}_reference.csv")
    scores = dict(zip(full.item_ids, map(float, full.model_scores(target)), strict=True))
    (workdir / "target.json").write_text(json.dumps(scores))
    script = workdir / "scorer.py"
    script.write_text(SCORER.format(path=str(workdir / "target.json")))
    return ref_path, f"{sys.executable} -I -S {script} {{item_id}}"


def run_command(ref: Path, scorer: str, session: Path, max_items: int, seed: int, jobs: int,
                method: str = "bayesame") -> list[str]:
    return [
        sys.executable, "-m", "activeeval", "run", "--reference", str(ref), "--scorer", scorer,
        "--session", str(session), "--max-items", str(max_items), "--seed", str(seed), "--jobs", str(jobs),
        "--method", method,
    ]


def read_tells(session: Path) -> list[tuple[str, float]]:
    """Recorded (item, score) pairs in journal order, read with a plain SQLite connection."""
    if not session.exists():
        return []
    conn = sqlite3.connect(session, timeout=30)
    try:
        return [(i, s) for i, s in conn.execute("SELECT item_id, score FROM events WHERE kind = 'tell' ORDER BY seq")]
    except sqlite3.OperationalError as exc:  # created but tables not there yet cannot happen: creation is atomic
        raise AssertionError(f"journal {session} unreadable after a kill: {exc}") from None
    finally:
        conn.close()


def same_trajectory(a, b, rel: float = 1e-6) -> bool:
    """Whether two estimate sequences agree: same lengths, counts and notes; means and variances to ``rel``."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if (x.n_observed, x.n_items, x.notes) != (y.n_observed, y.n_items, y.notes):
            return False
        if not (math.isclose(x.mean, y.mean, rel_tol=rel, abs_tol=1e-12)
                and math.isclose(x.var, y.var, rel_tol=rel, abs_tol=1e-15)):
            return False
    return True


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and the scorers it started
    proc.wait()


def crash_trial(
    workdir: Path, *, kills: int = 20, max_items: int = 100, seed: int = 0, jobs: int = 2,
    random_delay: float = 3.0, p_random: float = 0.5, rng_seed: int = 0, method: str = "bayesame",
) -> CrashCounts:
    """Run the experiment described in the module docstring; return the counts."""
    from activeeval.session import Session
    from activeeval.session.drivers.runner import Scorer, drive

    t0 = time.perf_counter()
    rng = np.random.default_rng(rng_seed)
    counts = CrashCounts()
    env = _env()
    ref, scorer = prepare(workdir)
    expected_path = workdir / "uninterrupted.aeval"
    # The uninterrupted run, in this process: the loop `activeeval run` drives, with the settings
    # (CLI defaults included) it passes, minus the ~2 s start-up of a new interpreter.
    with Session.create(expected_path, ref, method=method, epsilon1=0.005, epsilon2=0.03,
                        max_items=max_items, seed=seed) as s:
        drive(s, Scorer(scorer), jobs=jobs)
    expected = read_tells(expected_path)
    session = workdir / "crashed.aeval"
    cmd = run_command(ref, scorer, session, max_items, seed, jobs, method)
    prev: list[tuple[str, float]] = []
    while counts.kills < kills:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)
        if rng.random() < p_random:
            try:
                proc.wait(timeout=rng.uniform(0.0, random_delay))
            except subprocess.TimeoutExpired:
                pass
        else:
            deadline = time.monotonic() + 60
            while proc.poll() is None and len(read_tells(session)) <= len(prev) and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.05))
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            if proc.returncode != 0:
                counts.problems.append(f"run exited with {proc.returncode} before the kill: {err.strip()}")
            break  # finished before we could kill it: nothing left to interrupt
        _kill(proc)
        counts.kills += 1
        tells = read_tells(session)
        n_new = len(tells) - len(prev)
        counts.kills_before_new_score += n_new == 0
        kept = tells[: len(prev)]
        counts.lost += sum(1 for p in prev if p[0] not in {t[0] for t in tells})
        counts.altered += sum(1 for a, b in zip(prev, kept, strict=True) if a != b)
        counts.duplicated += len(tells) - len({t[0] for t in tells})
        counts.recorded_during_kills += max(n_new, 0)
        prev = tells
    final = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if final.returncode != 0:
        counts.problems.append(f"final resume failed: {final.stderr.strip()}")
    tells = read_tells(session)
    counts.lost += sum(1 for p in prev if p[0] not in {t[0] for t in tells})
    counts.duplicated += len(tells) - len({t[0] for t in tells})
    counts.journal_matches = tells == expected
    with Session.open(session) as a, Session.open(expected_path) as b:
        counts.final_estimate = a.estimate().mean
        counts.expected_estimate = b.estimate().mean
        counts.estimate_matches = same_trajectory((*a.trajectory, a.estimate()), (*b.trajectory, b.estimate()))
    counts.seconds = time.perf_counter() - t0
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--max-items", type=int, default=430)
    ap.add_argument("--seed", type=int, default=0, help="selection seed of the runs")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rng-seed", type=int, default=0, help="seed of the kill times")
    ap.add_argument("--random-delay", type=float, default=1.0,
                    help="random-moment kills land in [0, this] s after start (start-up is ~0.6 s)")
    ap.add_argument("--method", default="bayesame", help="the session's method")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        args.kills, args.max_items, args.method = 1, 4, "rs-mean"
    with tempfile.TemporaryDirectory() as tmp:
        c = crash_trial(Path(tmp), kills=args.kills, max_items=args.max_items, seed=args.seed, jobs=args.jobs,
                        random_delay=args.random_delay, rng_seed=args.rng_seed, method=args.method)
    rows = [
        ("kills (SIGKILL of the run's process group)", c.kills),
        ("  of which before any new score was recorded", c.kills_before_new_score),
        ("observations recorded across the kills", c.recorded_during_kills),
        ("observations lost", c.lost),
        ("observations altered", c.altered),
        ("observations duplicated", c.duplicated),
        ("final journal == uninterrupted run", c.journal_matches),
        ("estimates == uninterrupted run (to 1e-6)", c.estimate_matches),
        ("final estimate", f"{c.final_estimate:.6f}"),
        ("uninterrupted estimate", f"{c.expected_estimate:.6f}"),
        ("wall time (s)", f"{c.seconds:.1f}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"bench_crash: math, {args.method}, max_items={args.max_items}, jobs={args.jobs}, seed={args.seed}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    for p in c.problems:
        print("problem:", p)
    sys.exit(0 if c.ok else 1)


if __name__ == "__main__":
    main()
