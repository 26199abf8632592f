"""Issue 24, item 7 (storage): the journal under failing writes, torn copies and concurrent writers.

Every committed score must survive, exactly once, and the file must stay verifiable; a command that cannot do
its work says so in one line, never with a traceback. The audit's full sizes (2 x 200 CLI records, 4 x 40
ask/tell) run in benchmarks/bench_storage_faults.py; here fewer calls, with the same real concurrency.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from activeeval.exceptions import ActiveEvalError
from activeeval.session import Session
from activeeval.session.journal.storage import Journal


def tells(path: Path) -> list[tuple[str, float]]:
    """Every recorded (item, score), read with the journal's checksum verification."""
    j = Journal.open(path, readonly=True)
    try:
        return [(e.item_id, e.score) for e in j.events() if e.kind == "tell"]
    finally:
        j.close()


# ------------------------------------------------------------------ fault injection
class FailingConnection:
    """An sqlite3 connection whose ``n``-th write statement (from 0) fails as a full disk would."""

    WRITES = ("INSERT", "UPDATE", "DELETE", "CREATE", "COMMIT")

    def __init__(self, conn: sqlite3.Connection, n: int) -> None:
        self._conn, self._n, self.seen = conn, n, 0

    def execute(self, sql: str, *args):
        if sql.lstrip().upper().startswith(self.WRITES):
            self.seen += 1
            if self.seen - 1 == self._n:
                raise sqlite3.OperationalError("database or disk is full")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


@pytest.mark.parametrize("path", ["tell", "tell_many", "record", "ask", "change"])
def test_every_write_of_a_record_path_failing_in_turn_loses_nothing(tmp_path, math_ref_file, math_split,
                                                                     path) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    with Session.create(f, math_ref_file, seed=0, method="rs-mean") as s:
        for a in s.ask(3):
            s.tell(a.item_id, target[a.item_id])
        committed = tells(f)
        fresh = [i for i in target if i not in dict(committed)][:2]

        def operation() -> None:
            if path == "tell":
                s.tell(fresh[0], target[fresh[0]])
            elif path == "tell_many":
                s.tell_many([(i, target[i]) for i in fresh])
            elif path == "record":
                s.record({i: target[i] for i in fresh}, include_unasked=True)
            elif path == "ask":
                s.ask(2)
            else:
                s.change_settings(epsilon2=0.2)

        real = s._journal._conn
        n = 0
        while True:  # the n-th write fails, for n = 0, 1, ... until the operation has no n-th write
            failing = FailingConnection(real, n)
            s._journal._conn = failing
            try:
                operation()
            except ActiveEvalError as exc:
                assert "disk is full" in str(exc) or "cannot" in str(exc), exc
                failed = True
            else:
                failed = False
            finally:
                s._journal._conn = real
            assert tells(f)[:len(committed)] == committed  # nothing committed is lost, the file verifies
            if not failed:
                break
            assert tells(f) == committed  # a failed operation wrote nothing
            with Session.open(f) as again:  # and a reopened session sees exactly that
                assert list(again.observations) == committed
            n += 1
        assert n >= 1  # the operation did write, and each of its writes was made to fail once
    # ... and the operation, once it succeeds, did its whole work (a failure left no stale state behind)
    after = tells(f)
    if path in ("tell", "tell_many", "record"):
        assert after == committed + [(i, target[i]) for i in (fresh if path != "tell" else fresh[:1])]
    with Session.open(f) as again:
        assert len(again.pending) == (2 if path == "ask" else 0)
        assert again.stopping_settings["epsilon2"] == (0.2 if path == "change" else 0.03)


# ------------------------------------------------------------------ torn writes
WRITER = textwrap.dedent("""
    import json, sys
    from activeeval.session import Session
    path, items = sys.argv[1], json.loads(sys.argv[2])
    with Session.open(path) as s:
        print("ready", flush=True)
        for item, score in items:
            s.tell(item, score)  # one transaction each
""")


def test_a_copy_taken_mid_transaction_opens_as_a_committed_state(tmp_path, math_ref_file, math_split) -> None:
    """Freeze a writer at random moments (SIGSTOP), copy the file and its rollback journal, let it go on.

    A frozen writer leaves on disk what a crash at that moment would: each copy must open (a hot journal is
    rolled back) as one of the states the writer committed, verifiable, without a traceback.
    """
    _, target = math_split
    f = tmp_path / "s.aeval"
    with Session.create(f, math_ref_file, seed=0, method="rs-mean") as s:
        for a in s.ask(4):
            s.tell(a.item_id, target[a.item_id])
    old = tells(f)
    batch = [(i, target[i]) for i in target if i not in dict(old)][:60]
    states = [old + batch[:k] for k in range(len(batch) + 1)]
    copies = tmp_path / "copies"
    copies.mkdir()
    rng = random.Random(0)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(f), json.dumps(batch)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "ready\n"
    snaps: list[tuple[Path, bool]] = []
    while proc.poll() is None:
        time.sleep(rng.uniform(0, 0.004))
        try:
            os.kill(proc.pid, signal.SIGSTOP)
        except ProcessLookupError:
            break
        try:
            c = copies / f"c{len(snaps)}.aeval"
            shutil.copyfile(f, c)
            hot = Path(str(f) + "-journal").exists()
            if hot:
                shutil.copyfile(str(f) + "-journal", str(c) + "-journal")
            snaps.append((c, hot))
        finally:
            os.kill(proc.pid, signal.SIGCONT)
    assert proc.wait(timeout=60) == 0
    seen = set()
    for c, _ in snaps:
        got = tells(c)
        assert got in states, (c, len(got))
        seen.add(len(got))
    assert sum(hot for _, hot in snaps) >= 3, "too few copies caught a transaction in flight"
    assert len(seen) >= 3


# ------------------------------------------------------------------ concurrency
RECORDER = textwrap.dedent("""
    import sys
    from typer.testing import CliRunner
    from activeeval.cli import app
    path, items = sys.argv[1], sys.argv[2:]
    runner = CliRunner()
    for item in items:  # each call a whole command: it opens the file, records, closes it
        result = runner.invoke(app, ["session", "record", "--", path, item, "1"])
        if result.exit_code != 0:
            print(item, result.output.strip())
""")


def test_two_processes_recording_through_the_cli_at_once(tmp_path, math_ref_file) -> None:
    f = tmp_path / "s.aeval"
    with Session.create(f, math_ref_file, seed=0, method="rs-mean") as s:
        items = list(s.item_ids[:40])
    halves = [items[0::2], items[1::2]]
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(f), *h], stdout=subprocess.PIPE, text=True)
             for h in halves]
    failures = [p.communicate(timeout=300)[0] for p in procs]
    assert failures == ["", ""], failures
    assert sorted(tells(f)) == sorted((i, 1.0) for i in items)  # every score, once


ASK_TELL = textwrap.dedent("""
    import json, sys
    from activeeval.session import Session
    path, truth, n = sys.argv[1], json.load(open(sys.argv[2])), int(sys.argv[3])
    told = []
    with Session.open(path, timeout=60) as s:
        for _ in range(n):
            (a,) = s.ask(1)
            s.tell(a.item_id, truth[a.item_id])
            told.append(a.item_id)
    print(json.dumps(told))
""")


def test_four_processes_asking_and_telling_at_once(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    Session.create(f, math_ref_file, seed=0, method="rs-mean").close()
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(target))
    procs = [subprocess.Popen([sys.executable, "-c", ASK_TELL, str(f), str(truth), "15"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-500:] for o in outs]
    told = [i for out, _ in outs for i in json.loads(out)]
    got = tells(f)
    assert len(told) == 60 and sorted(told) == sorted(i for i, _ in got)  # each process's scores, once each
    assert all(score == target[i] for i, score in got)
    with Session.open(f) as s:
        assert s.pending == ()


# ------------------------------------------------------------------ a folder that cannot be written
def _in_readonly_folder(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    """Run ``activeeval ARGS`` with ``folder`` read-only: by its mode, or (as root, whom modes do not stop) as a
    read-only file system mounted in a private namespace."""
    cmd = [sys.executable, "-m", "activeeval", *args]
    if os.geteuid() != 0:
        folder.chmod(0o555)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        finally:
            folder.chmod(0o755)
    if shutil.which("unshare") is None:
        pytest.skip("running as root without unshare: no way to make a folder read-only here")
    script = f"mount -t tmpfs -o ro tmpfs {shlex.quote(str(folder))} || exit 99; exec {shlex.join(cmd)}"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=60)
    if done.returncode == 99 or "unshare:" in done.stderr:
        pytest.skip(f"cannot mount a read-only folder here: {done.stderr.strip()}")
    return done


def test_session_new_in_a_read_only_folder_is_a_clean_error(tmp_path, math_ref_file) -> None:
    folder = tmp_path / "rodir"
    folder.mkdir()
    done = _in_readonly_folder(folder, ["session", "new", str(folder / "new.aeval"), "--reference",
                                        str(math_ref_file)])
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"error: cannot create session file '{folder / 'new.aeval'}': folder '{folder}' is not "
                           "writable (read-only); choose a folder you can write to\n")
    assert list(folder.iterdir()) == []
