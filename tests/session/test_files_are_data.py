"""Issue 24, item 4: a session file is data, never code.

Earlier versions kept a pickle of the rebuilt state in the file's table ``snapshots``, and a pickle runs code
when it is loaded: a crafted file ran its author's code on ``session status``. Snapshots are now plain data in
the user cache; the table is never read, and a crafted cache entry is refused, not executed.
"""

from __future__ import annotations

import hashlib
import pickle
import sqlite3
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from activeeval import user_cache
from activeeval.cli import app
from activeeval.session import Session
from activeeval.session.journal import snapshot as snap

runner = CliRunner()


class Plant:
    """Unpickling this creates ``marker``: the proof that a file's code ran."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _plant_old_snapshot(f: Path, marker: Path) -> None:
    """The table earlier versions wrote, holding a malicious pickle under a checksum that verifies."""
    data = pickle.dumps(Plant(marker))
    with Session.open(f) as s:
        upto, key = s._seq, snap.snapshot_key(s._settings, s._digest.hexdigest())
    con = sqlite3.connect(f, isolation_level=None)
    con.execute("CREATE TABLE IF NOT EXISTS snapshots (id INTEGER PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL, "
                "key TEXT NOT NULL, info TEXT NOT NULL, checksum TEXT NOT NULL, data BLOB NOT NULL, "
                "created TEXT NOT NULL)")
    con.execute("INSERT OR REPLACE INTO snapshots VALUES (1, ?, ?, '{}', ?, ?, '2026-01-01')",
                (upto, key, hashlib.sha256(data).hexdigest(), data))
    con.close()


def test_a_planted_pickle_is_never_run(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    marker = tmp_path / "pwned"
    f = tmp_path / "evil.aeval"
    with Session.create(f, math_ref_file, seed=0, method="rs-mean") as s:
        for a in s.ask(3):
            s.tell(a.item_id, target[a.item_id])
    _plant_old_snapshot(f, marker)
    pickle.loads(pickle.dumps(Plant(tmp_path / "control")))  # the plant works: unpickling it runs its code
    assert (tmp_path / "control").exists()

    with Session.open(f) as s:
        assert len(s.observations) == 3
    for args in (["status", f], ["status", f, "--json"], ["next", f], ["history", f]):
        r = runner.invoke(app, ["session", *map(str, args)])
        assert r.exit_code == 0 and r.exception is None, r.output
    item = runner.invoke(app, ["session", "status", str(f), "--json"]).stdout.split('"pending": [')[1].split('"')[1]
    r = runner.invoke(app, ["session", "record", str(f), item, str(int(target[item]))])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["session", "report", str(f), "--out", str(tmp_path / "report.html")])
    assert r.exit_code == 0, r.output
    done = subprocess.run([sys.executable, "-m", "activeeval", "session", "status", str(f)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert not marker.exists()


def test_a_crafted_cache_entry_is_refused_and_the_journal_replayed(tmp_path, math_ref_file, math_split,
                                                                   monkeypatch) -> None:
    """Whoever writes into the user cache cannot make a session build an object of their choosing either."""
    _, target = math_split
    f = tmp_path / "s.aeval"
    with Session.create(f, math_ref_file, seed=0, method="rs-mean") as s:
        for a in s.ask(2):
            s.tell(a.item_id, target[a.item_id])
        expected = s.trajectory
        slot, upto = s._snapshot_slot(), s._seq
        key = snap.snapshot_key(s._settings, s._digest.hexdigest())
    for state in ({"$": "object", "id": 0, "class": "subprocess:Popen", "dict": [["args", "touch pwned"]]},
                  {"$": "object", "id": 0, "class": "activeeval.methods.baselines.rs_mean:RSMean",
                   "dict": [["reference", {"$": "object", "id": 1, "class": "pathlib:Path"}]]},
                  {"$": "unknown"}, ["not", "a", "node"]):
        assert user_cache.store("snapshot", slot, {"upto": upto, "key": key, "state": state})
        with Session.open(f) as s:
            assert s._snapshot_upto == 0 and s.trajectory == expected  # replayed from the journal
        r = runner.invoke(app, ["session", "status", str(f)])
        assert r.exit_code == 0 and r.exception is None, r.output
    assert not (tmp_path / "pwned").exists()
