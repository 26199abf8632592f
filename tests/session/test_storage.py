"""Sessions under damage and at scale (issue 10, item 6): corrupted files, read-only commands, snapshots."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from activeeval import user_cache
from activeeval.cli import app
from activeeval.exceptions import StorageError
from activeeval.session import CorruptedSessionError, Session
from activeeval.session.journal import snapshot as snap

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _session(path: Path, ref_file: Path, target: dict[str, float], n: int, **kw) -> None:
    with Session.create(path, ref_file, seed=0, **kw) as s:
        for a in s.ask(n):
            s.tell(a.item_id, target[a.item_id])


def _files(folder: Path) -> dict[str, tuple[int, int, bytes]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in folder.iterdir()}


# ------------------------------------------------------------------ damage
def test_bytes_overwritten_anywhere_give_the_corrupted_error_or_the_same_data(tmp_path, math_ref_file, math_split):
    """Overwrite 16 bytes at every 512th offset: each open either fails cleanly or reads exactly what was recorded."""
    _, target = math_split
    good = tmp_path / "good.aeval"
    _session(good, math_ref_file, target, 25)
    with Session.open(good) as s:
        expected = (s.observations, s.settings)
    data = good.read_bytes()
    outcomes = {"corrupted": 0, "same": 0}
    for offset in range(100, len(data), 512):
        bad = tmp_path / "bad.aeval"
        bad.write_bytes(data[:offset] + b"\xa5" * 16 + data[offset + 16:])
        try:
            with Session.open(bad) as s:
                got = (s.observations, s.settings)
        except StorageError as exc:
            assert type(exc).__name__ in ("CorruptedSessionError", "StorageError")
            assert "corrupted" in str(exc), str(exc)
            outcomes["corrupted"] += 1
            continue
        assert got == expected, f"offset {offset}: damaged file read as different data"
        outcomes["same"] += 1
    assert outcomes["corrupted"] >= 3, outcomes  # the damage was seen where it mattered (pages in use)


def test_an_altered_score_is_caught_by_the_checksum(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    _session(f, math_ref_file, target, 5)
    con = sqlite3.connect(f)
    seq = con.execute("SELECT seq FROM events WHERE kind = 'tell' ORDER BY seq LIMIT 1").fetchone()[0]
    con.execute("UPDATE events SET score = 1 - score WHERE seq = ?", (seq,))
    con.commit()
    con.close()
    with pytest.raises(CorruptedSessionError) as err:
        Session.open(f)
    assert str(err.value) == (
        f"session file '{f}' is corrupted (journal event {seq} does not match its checksum); restore it from a copy "
        "or backup, or start a new session (the scores recorded in a damaged file cannot be trusted)"
    )
    r = invoke("session", "status", f)
    assert r.exit_code == 2 and r.stderr.startswith(f"error: session file '{f}' is corrupted (journal event {seq}")
    assert "Traceback" not in r.output


def test_altered_settings_are_caught(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    _session(f, math_ref_file, target, 2)
    con = sqlite3.connect(f)
    con.execute("UPDATE meta SET value = '\"rs-mean\"' WHERE key = 'method'")
    con.commit()
    con.close()
    r = invoke("session", "status", f)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: session file '{f}' is corrupted (the settings do not match their checksum)")


# ------------------------------------------------------------------ read-only commands
@pytest.mark.parametrize("command", [["status"], ["status", "--json"], ["history"], ["report", "--out", "{out}"]])
def test_read_only_commands_never_create_or_change_a_file(tmp_path, math_ref_file, math_split, command) -> None:
    _, target = math_split
    folder = tmp_path / "sessions"
    folder.mkdir()
    f = folder / "s.aeval"
    _session(f, math_ref_file, target, 4)
    empty = folder / "empty.aeval"
    empty.write_bytes(b"")
    before = _files(folder)
    args = [a.replace("{out}", str(tmp_path / "r.html")) for a in command]
    r = invoke("session", args[0], f, *args[1:])
    assert r.exit_code == 0, r.output
    r = invoke("session", args[0], empty, *args[1:])
    assert r.exit_code == 2
    assert r.stderr == f"error: '{empty}' is empty (0 bytes), not an activeeval session file; remove it or choose " \
        "another path\n"
    r = invoke("session", args[0], folder / "missing.aeval", *args[1:])
    assert r.exit_code == 2 and "no session file" in r.stderr
    assert _files(folder) == before  # same files, same bytes, same modification times; no -journal/-wal/-shm


def test_a_version_1_wal_file_is_read_without_leaving_files(tmp_path, math_ref_file, math_split) -> None:
    """A file made by the previous format (WAL journal, no checksums) still opens; status leaves no -wal/-shm."""
    _, target = math_split
    from activeeval.data.io import read_scores
    from activeeval.session.reference import reference_summary

    f = tmp_path / "old.aeval"
    ref = read_scores(math_ref_file)
    con = sqlite3.connect(f, isolation_level=None)
    con.execute("PRAGMA journal_mode = WAL")
    con.executescript("""
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT,
            kind TEXT NOT NULL CHECK (kind IN ('ask', 'tell')), item_id TEXT NOT NULL, score REAL, batch INTEGER,
            created TEXT NOT NULL, CHECK ((kind = 'tell') = (score IS NOT NULL)));
        CREATE UNIQUE INDEX one_tell_per_item ON events(item_id) WHERE kind = 'tell';
    """)
    meta = {"format_version": 1, "method": "bayesame", "method_kwargs": {"epsilon1": 0.005, "epsilon2": 0.03,
            "window": 30, "n_max": None, "seed": 0}, "reference_source": {"type": "file", "path": str(math_ref_file)},
            "reference": reference_summary(ref), "created": "2026-01-01T00:00:00+00:00", "library_version": "0.1.0"}
    con.executemany("INSERT INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in meta.items()])
    items = list(target)[:3]
    for i in items:
        con.execute("INSERT INTO events(kind, item_id, score, batch, created) VALUES ('tell', ?, ?, NULL, 'x')",
                    (i, target[i]))
    con.close()
    before = _files(tmp_path)
    r = invoke("session", "status", f, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_used"] == 3
    assert _files(tmp_path) == before
    with Session.open(f) as s:  # a write open converts it; writes keep working
        s.tell(list(target)[5], target[list(target)[5]])
        assert len(s.observations) == 4


# ------------------------------------------------------------------ snapshots
def always_snapshot(monkeypatch) -> None:
    """Snapshot after every write, whatever it costs (the real policy depends on measured times)."""
    monkeypatch.setattr(snap, "SNAPSHOT_AFTER_SECONDS", -1.0)
    monkeypatch.setattr(snap, "LOAD_BYTES_PER_SECOND", float("inf"))


def snapshot_file(slot: str) -> Path:
    return user_cache.root() / "snapshot" / f"{slot}.aec"


def test_a_snapshot_is_made_only_when_loading_it_beats_rebuilding() -> None:
    import numpy as np

    arrays = [np.zeros(3_000_000)]  # 24 MB: about 0.08 s to load at 300 MB/s
    assert not snap.worth_storing(arrays, rebuild_seconds=0.1)  # loading would cost most of the rebuild
    assert snap.worth_storing(arrays, rebuild_seconds=5.0)
    with pytest.raises(snap.Unencodable):  # not data: no snapshot, no error
        snap.encode_state({"f": lambda: 0}, {})


@pytest.mark.parametrize(
    "method", ["bayesame", "bayesame-rs", "bayesame-paper", "bayesame-paper-rs", "rs-mean", "bayes-aipw", "proeval", "irt",
               "bayesame[selection=hybrid]"]  # hybrid: the draws pending when the snapshot was taken
)
def test_a_snapshot_gives_exactly_the_replayed_state(tmp_path, continuous_ref_file, continuous_split, method,
                                                    monkeypatch) -> None:
    _, target = continuous_split
    always_snapshot(monkeypatch)
    f = tmp_path / "s.aeval"
    options = {"refit_every": 7} if method.startswith("bayesame-paper") else {}  # replay crosses a refit
    with Session.create(f, continuous_ref_file, method=method, seed=4, **options) as s:
        for _ in range(12):
            (a,) = s.ask(1)
            s.tell(a.item_id, target[a.item_id])
        s.ask(2)
        slot = s._snapshot_slot()
    entry = user_cache.load("snapshot", slot)
    assert entry is not None and entry.meta["upto"] > 0

    def state(sess: Session) -> tuple:
        m = sess.method
        out = (sess.trajectory, sess.pending, m.select_batch(3, exclude=sess.pending), sess.status())
        for iid in reversed(sess.pending):  # in memory only: what the state knows of the pending draws shows
            m.observe(iid, target[iid])
        design = getattr(m, "_design", None)
        return (*out, m.estimate(), design.estimate(1.0) if design is not None and design.count else None)

    with Session.open(f) as fast:
        assert fast._snapshot_upto == entry.meta["upto"]  # the snapshot was current: only the asks after it
        from_snapshot = state(fast)
    with Session.open(f, cache=False) as slow:
        assert slow._snapshot_upto == 0  # rebuilt by replay
        assert state(slow) == from_snapshot


def test_the_codec_keeps_shared_objects_cycles_and_flags() -> None:
    import numpy as np

    ref = np.arange(6.0).reshape(2, 3)
    ro = np.ones(3)
    ro.setflags(write=False)
    shared = [1, 2]
    rng = np.random.default_rng(5)
    rng.random(3)
    fortran = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    state = {"a": shared, "b": shared, (1, "k"): {-0.0, 2}, "ro": ro, "ref": ref, "nan": float("nan"),
             "scalar": np.float32(1.5), "rng": rng, "same_rng": rng, "big": 10**30, "text": "\x00\ud800 é",
             "fortran": fortran}
    state["self"] = state
    graph, arrays = snap.encode_state(state, {"ref": ref})
    assert all(a is not ref for a in arrays)  # the external is referred to, not written
    # the user cache writes arrays in C order: the Fortran one comes back in its own order (BLAS rounds by it)
    back = snap.decode_state(json.loads(json.dumps(graph)), tuple(a.copy(order="C") for a in arrays), {"ref": ref})
    assert back["fortran"].flags.f_contiguous and np.array_equal(back["fortran"], fortran)
    assert back["a"] is back["b"] and back["self"] is back and back["ref"] is ref
    assert back["same_rng"] is back["rng"] and back["rng"].random() == rng.random()
    assert not back["ro"].flags.writeable and back["ro"].tolist() == [1.0, 1.0, 1.0]
    assert back["scalar"] == np.float32(1.5) and type(back["scalar"]) is np.float32
    assert back[(1, "k")] == {0.0, 2} and back["big"] == 10**30 and back["text"] == "\x00\ud800 é"
    assert back["nan"] != back["nan"]


def test_a_long_list_of_arrays_is_one_array_of_the_entry() -> None:
    """BayesAME's bucket members (one small array per bucket, 20 000 at 20 000 items) are written as one array and
    their lengths: reading them back is a split, not 20 000 arrays of the entry; identities and flags are kept."""
    import numpy as np

    members = [np.arange(i % 4, dtype=np.int64) + i for i in range(40)]
    frozen = [np.full(2, float(i)) for i in range(snap.PACK_MIN)]
    for a in frozen:
        a.setflags(write=False)
    mixed = [np.zeros(1)] * snap.PACK_MIN  # the same array again: kept as references, not packed
    short = [np.ones(2) for _ in range(3)]
    state = {"members": members, "again": members[7], "frozen": frozen, "mixed": mixed, "short": short}
    graph, arrays = snap.encode_state(state, {})
    assert len(arrays) == 2 + 2 + 1 + 3  # members and frozen packed (values, lengths); mixed once; short one each
    back = snap.decode_state(json.loads(json.dumps(graph)), tuple(a.copy() for a in arrays), {})
    assert [a.tolist() for a in back["members"]] == [a.tolist() for a in members]
    assert all(a.dtype == np.int64 and a.flags.writeable for a in back["members"])
    assert back["again"] is back["members"][7]
    assert [a.tolist() for a in back["frozen"]] == [a.tolist() for a in frozen]
    assert not any(a.flags.writeable for a in back["frozen"])
    assert back["mixed"][0] is back["mixed"][-1] and [a.tolist() for a in back["short"]] == [[1.0, 1.0]] * 3
    back["members"][1][0] = -1  # one array's element, not its neighbour's
    assert back["members"][0].tolist() == [] and back["members"][2].tolist() == [2, 3]
    node = graph["v"][0][1]  # the packed members
    assert node["$"] == "packed"
    with pytest.raises(Exception):  # noqa: B017 - lengths that do not add up to the values: refused
        snap.decode_state(node, (arrays[0], arrays[1] + 1), {})


@settings(max_examples=60, deadline=None)
@given(data=st.data(), dtype=st.sampled_from(["int64", "float64", "bool"]), write=st.booleans())
def test_a_packed_list_of_arrays_reads_back_exactly(data, dtype, write) -> None:
    """Property: any list of same-dtype, same-flag 1-D arrays long enough to be packed reads back with the same
    values (bit for bit: -0.0, NaN, infinities), dtype, flag and count, whatever the lengths (zeros among them)."""
    import numpy as np

    n = data.draw(st.integers(snap.PACK_MIN, snap.PACK_MIN + 20))
    lengths = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    elems = {"int64": st.integers(-(2**63), 2**63 - 1), "bool": st.booleans(),
             "float64": st.floats(allow_nan=True, allow_infinity=True)}[dtype]
    arrays = [np.array(data.draw(st.lists(elems, min_size=k, max_size=k)), dtype=dtype) for k in lengths]
    for a in arrays:
        a.setflags(write=write)
    graph, stored = snap.encode_state({"v": arrays}, {})
    back = snap.decode_state(json.loads(json.dumps(graph)), tuple(a.copy() for a in stored), {})["v"]
    assert len(back) == len(arrays)
    for a, b in zip(arrays, back, strict=True):
        assert b.dtype == a.dtype and b.shape == a.shape and b.tobytes() == a.tobytes()
        assert b.flags.writeable == write


@pytest.mark.parametrize("node", [
    {"$": "object", "id": 0, "class": "os:system"},
    {"$": "object", "id": 0, "class": "subprocess:Popen"},
    {"$": "object", "id": 0, "class": "activeeval.methods.bayesame:np"},  # not a class defined there
    {"$": "object", "id": 0, "class": "activeeval.methods.bayesame:Path"},  # imported there, defined elsewhere
    {"$": "object", "id": 0, "class": "activeeval.session.drivers.runner:Scorer"},  # activeeval, but not a method's
    {"$": "object", "id": 0, "class": "activeeval.methods.registry:METHODS.__class__"},
    {"$": "method", "self": {"$": "dict", "id": 0, "v": []}, "name": "clear"},
    {"$": "rng", "id": 0, "bits": "RandomState", "state": None},
    {"$": "array", "id": 0, "a": 5, "write": True},
    {"$": "packed", "id": 0, "a": 0, "lengths": 1, "write": True},
])
def test_the_codec_refuses_what_it_did_not_write(node) -> None:
    with pytest.raises(Exception):  # noqa: B017 - any error: the caller then replays the journal
        snap.decode_state(node, (), {})


def test_a_stale_or_damaged_snapshot_is_not_used(tmp_path, continuous_ref_file, continuous_split, monkeypatch) -> None:
    _, target = continuous_split
    always_snapshot(monkeypatch)
    f = tmp_path / "s.aeval"
    with Session.create(f, continuous_ref_file, seed=1) as s:
        for a in s.ask(4):
            s.tell(a.item_id, target[a.item_id])
        expected = s.trajectory
    # Another version of the code: the key no longer matches, the state is rebuilt.
    monkeypatch.setattr(snap, "code_fingerprint", lambda: "other code")
    with Session.open(f) as s:
        assert s._snapshot_upto == 0 and s.trajectory == expected
    monkeypatch.undo()
    always_snapshot(monkeypatch)
    with Session.open(f) as s:  # stores a snapshot for this code again
        assert s._snapshot_upto == 0
    with Session.open(f) as s:
        assert s._snapshot_upto > 0
        entry = snapshot_file(s._snapshot_slot())
    data = bytearray(entry.read_bytes())
    data[-20:] = bytes(20)
    entry.write_bytes(bytes(data))
    with Session.open(f) as s:  # the damaged entry is ignored and the state rebuilt
        assert s._snapshot_upto == 0 and s.trajectory == expected


def test_a_reference_file_is_parsed_once(tmp_path, continuous_ref_file, continuous_split, monkeypatch) -> None:
    _, target = continuous_split
    f = tmp_path / "s.aeval"
    _session(f, continuous_ref_file, target, 3)
    from activeeval.data import datasets

    calls = []
    real = datasets._parse
    monkeypatch.setattr(datasets, "_parse", lambda *a: calls.append(a) or real(*a))
    datasets._load_cached.cache_clear()
    with Session.open(f) as s:
        s.status()
    assert calls == []  # parsed when the session was created; read from the user cache since
    with Session.open(f, cache=False) as s:
        assert len(s.observations) == 3
    assert len(calls) == 1
    # Touch it with the same content: still not parsed again (the cache is keyed by the content).
    os.utime(continuous_ref_file, ns=(time.time_ns(), time.time_ns() + 10**9))
    with Session.open(f) as s:
        assert len(s.observations) == 3
    assert len(calls) == 1
    # Change its content: parsed, and the usual mismatch error.
    continuous_ref_file.write_text(continuous_ref_file.read_text().replace("0.", "0.0", 1))
    with pytest.raises(StorageError, match="changed since the session was created"):
        Session.open(f)
    assert len(calls) >= 2


# ------------------------------------------------------------------ Ctrl-C
SLOW_SCORER = """\
import json, sys, time
time.sleep(float(sys.argv[3]))
print(json.load(open(sys.argv[1]))[sys.argv[2]])
"""


def test_ctrl_c_exits_130_and_a_rerun_resumes(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    (tmp_path / "t.json").write_text(json.dumps(target))
    (tmp_path / "score.py").write_text(SLOW_SCORER)
    f = tmp_path / "s.aeval"

    def cmd(delay: str) -> list[str]:
        return [sys.executable, "-m", "activeeval", "run", "--reference", str(math_ref_file), "--session", str(f),
                "--max-items", "6", "--seed", "5", "--jobs", "2",
                "--scorer", f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 't.json'} {{item_id}} {delay}"]

    # the child gets Ctrl-C's default handling as from a terminal, even when pytest itself runs as a background
    # job (a shell's `cmd &` ignores SIGINT, and children inherit that: the run would then never be interrupted)
    proc = subprocess.Popen(cmd("0.4"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    start = time.time()
    deadline = start + 60
    told = -1
    while time.time() < deadline:
        time.sleep(0.05)
        if f.exists():
            # count the recorded scores straight from the journal: opening the session rebuilds the method,
            # which on a loaded machine can take longer than the whole run has left
            try:
                con = sqlite3.connect(f"file:{f}?mode=ro", uri=True, timeout=1)
                try:
                    told = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'tell'").fetchone()[0]
                finally:
                    con.close()
            except sqlite3.Error:
                continue
            if told >= 2:
                break
    waited = time.time() - start
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (f"rc {proc.returncode} after SIGINT at {waited:.1f} s with {told} tells; "
                                    f"stdout {out!r}; stderr {err!r}")
    with Session.open(f) as s:
        n = len(s.observations)
    assert err.splitlines()[-1] == f"interrupted: {n} scores recorded, re-run to resume"
    assert 2 <= n < 6
    done = subprocess.run(cmd("0"), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # The same journal as a run never interrupted.
    with Session.create(tmp_path / "u.aeval", math_ref_file, max_items=6, seed=5) as u:
        from activeeval.session.drivers.runner import drive

        drive(u, lambda i: target[i], jobs=2)
        expected = u.observations
    with Session.open(f) as s:
        assert s.observations == expected


@pytest.mark.parametrize("kind", ["multi-bayesame-multi", "multi-cat", "rank-cat", "rank-bayesame"])
def test_a_snapshot_of_several_targets_gives_exactly_the_replayed_state(tmp_path, continuous_ref_file,
                                                                       continuous_split, kind, monkeypatch) -> None:
    from activeeval.session.multi import MultiSession
    from activeeval.session.ranking import RankSession

    ref, _ = continuous_split
    truth = {t: dict(zip(ref.item_ids, map(float, ref.model_scores(t)))) for t in ("m1", "m2")}
    always_snapshot(monkeypatch)
    session, method = kind.split("-", 1)
    f = tmp_path / "s.aeval"
    if session == "multi":
        with MultiSession.create(f, continuous_ref_file, ["m1", "m2"], method=method, seed=3) as s:
            for _ in range(4):
                for t, i in s.ask(2):
                    s.tell(t, i, truth[t][i])

        def state(sess):
            return sess.observations, sess.status().to_dict(), sess.method.select_batch(3, exclude=sess.pending)
        cls = MultiSession
    else:
        with RankSession.create(f, continuous_ref_file, ["m1", "m2"], method=method, seed=3, min_items=4) as s:
            for _ in range(6):  # within the warm-up: six asks, none the last
                a = s.ask()
                s.tell(a.model, a.item_id, truth[a.model][a.item_id])

        def state(sess):
            return sess.status().to_dict(), {m: meth.select_batch(2) for m, meth in sess.methods.items()}
        cls = RankSession
    with cls.open(f) as fast:
        assert fast._snapshot_upto > 0
        from_snapshot = state(fast)
    with cls.open(f, cache=False) as slow:
        assert slow._snapshot_upto == 0
        assert state(slow) == from_snapshot
