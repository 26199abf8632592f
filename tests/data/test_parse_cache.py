"""Issue 24, item 6: a reference file is parsed once; the user cache that keeps it (activeeval.user_cache)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval import user_cache
from activeeval.cli import app
from activeeval.data import datasets
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import InvalidScoresError
from activeeval.session import Session


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(folder))
    return folder


@pytest.fixture()
def parses(monkeypatch) -> list:
    """The files actually parsed (read_scores calls) from here on."""
    calls: list = []
    real = datasets._parse
    monkeypatch.setattr(datasets, "_parse", lambda path, kw: calls.append(path) or real(path, kw))
    return calls


def _matrix(seed: int = 0, missing: bool = True) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((4, 6)), 3)
    if missing:
        scores[1, 2] = np.nan
    return ScoreMatrix(scores, [f"m{j}" for j in range(4)], [f"i {k}" for k in range(6)], name="x")


def _same(a: ScoreMatrix, b: ScoreMatrix) -> bool:
    return (a.fingerprint() == b.fingerprint() and a.name == b.name and a.kind == b.kind
            and np.array_equal(a.scores, b.scores, equal_nan=True) and a.model_ids == b.model_ids)


def _entries(cache: Path) -> list[Path]:
    return sorted((cache / "reference").glob("*.aec"))


def test_a_file_is_parsed_once_and_read_back_exactly(tmp_path, cache, parses) -> None:
    f = write_scores(_matrix(), tmp_path / "x.csv")
    first = datasets.read_file(f)
    second = datasets.read_file(f)
    assert parses == [f] and len(_entries(cache)) == 1
    assert _same(first, second) and not second.scores.flags.writeable
    assert second._n_missing == 1 == first.n_missing  # counted at the parse, kept with it (0.2 s at 24 M cells)
    assert second.dropna("models")[0].model_ids == ("m0", "m2", "m3")
    assert second.fingerprint() == ScoreMatrix(second.scores, second.model_ids, second.item_ids,
                                               kind=second.kind, name="x").fingerprint()  # computed, not just kept
    # other read options, another entry; the same bytes under another name, another one too (its name differs)
    wide = datasets.read_file(f, score_range=(0, 2))
    assert wide.score_range == (0.0, 2.0) and len(parses) == 2
    g = tmp_path / "other.csv"
    g.write_bytes(f.read_bytes())
    assert datasets.read_file(g).name == "other" and len(parses) == 3


def test_the_key_is_the_content_not_the_modification_time(tmp_path, cache, parses) -> None:
    f = write_scores(_matrix(0), tmp_path / "x.csv")
    datasets.read_file(f)
    st = f.stat()
    write_scores(_matrix(1), f, overwrite=True)  # new content, same size and time: parsed again, never the stale copy
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size
    assert _same(datasets.read_file(f), _matrix(1))
    assert len(parses) == 2


def test_no_cache_means_no_cache(tmp_path, cache, parses, monkeypatch) -> None:
    f = write_scores(_matrix(), tmp_path / "x.csv")
    datasets.read_file(f, cache=False)
    datasets.resolve(f, cache=False)
    assert len(parses) == 2 and not cache.exists()
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    datasets.read_file(f)
    assert len(parses) == 3 and not cache.exists()


def test_a_damaged_or_foreign_entry_is_ignored_and_rebuilt(tmp_path, cache, parses) -> None:
    f = write_scores(_matrix(), tmp_path / "x.csv")
    expected = datasets.read_file(f)
    (entry,) = _entries(cache)
    data = bytearray(entry.read_bytes())
    for damage in (lambda d: d.__setitem__(slice(-8, None), b"\xff" * 8),  # a flipped byte of the scores
                   lambda d: d.__delitem__(slice(-100, None)),  # cut short
                   lambda d: d.__setitem__(slice(0, 8), b"NOTCACHE")):  # another format
        damaged = bytearray(data)
        damage(damaged)
        entry.write_bytes(bytes(damaged))
        assert _same(datasets.read_file(f), expected)
        assert user_cache.load("reference", entry.stem) is not None  # rebuilt whole
    # a valid entry of another key, renamed to this one: its header names another key
    key = user_cache.key("something else")
    assert user_cache.store("reference", key, {"model_ids": ["z"]}, [np.zeros((1, 1))])
    (cache / "reference" / f"{key}.aec").replace(entry)
    assert _same(datasets.read_file(f), expected)
    # a valid entry under this key that is not a matrix (what another version might have stored)
    assert user_cache.store("reference", entry.stem, {"model_ids": ["z"]}, [np.zeros((1, 1))])
    assert _same(datasets.read_file(f), expected)
    assert len(parses) == 6


def test_a_file_that_does_not_parse_is_not_cached(tmp_path, cache) -> None:
    f = tmp_path / "bad.csv"
    f.write_text("model,a,b\nm0,1,x\n")
    for _ in range(2):
        with pytest.raises(InvalidScoresError, match="not a number"):
            datasets.read_file(f)
    assert _entries(cache) == []


def test_writing_never_fails_a_command(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv(user_cache.CACHE_ENV, str(blocker / "cache"))  # cannot be created
    assert user_cache.store("reference", user_cache.key(1), {}, [np.zeros(3)]) is False
    f = write_scores(_matrix(), tmp_path / "x.csv")
    assert _same(datasets.read_file(f), _matrix())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file", "x.csv"]


def test_entries_round_trip_every_numeric_array_and_json(cache) -> None:
    arrays = [np.arange(12.0).reshape(3, 4)[:, ::2], np.array([True, False]), np.array(7, dtype=np.int32),
              np.zeros((0, 3)), np.array([1 + 2j]), np.array([-0.0, np.nan, np.inf])]
    meta = {"text": "é\x00\ud800", "numbers": [1, 2.5, -0.0], "nested": {"a": None}}
    key = user_cache.key("t")
    assert user_cache.store("test", key, meta, arrays)
    entry = user_cache.load("test", key)
    assert json.dumps(entry.meta) == json.dumps(meta)
    for a, b in zip(arrays, entry.arrays):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    entry.arrays[0][0, 0] = 99.0  # writable, and private: the file does not change
    assert user_cache.load("test", key).arrays[0][0, 0] == 0.0
    assert list((cache / "test").iterdir()) == [cache / "test" / f"{key}.aec"]  # no temporary file left
    with pytest.raises(TypeError, match="numeric arrays only"):
        user_cache.store("test", key, {}, [np.array(["a"], dtype=object)])


def test_the_folder_is_trimmed_least_recently_read_first(cache, monkeypatch) -> None:
    monkeypatch.setattr(user_cache, "MAX_BYTES", 3 * 8_000 + 1_000)
    keys = [user_cache.key(k) for k in range(4)]
    for k in keys[:3]:
        assert user_cache.store("test", k, {}, [np.zeros(1_000)])
    import os
    import time

    for n, k in enumerate(keys[:3]):  # read times in order 1, 2, 0 (0 most recent)
        os.utime(cache / "test" / f"{k}.aec", (time.time() - 100 + n, time.time() - 100 + n))
    os.utime(cache / "test" / f"{keys[0]}.aec")
    assert user_cache.store("test", keys[3], {}, [np.zeros(1_000)])
    assert [user_cache.load("test", k) is not None for k in keys] == [True, False, True, True]


def test_a_session_on_a_cached_reference_and_the_no_cache_flag(tmp_path, cache, parses, monkeypatch) -> None:
    f = write_scores(_matrix(missing=False), tmp_path / "x.csv")
    s = tmp_path / "s.aeval"
    Session.create(s, f, method="rs-mean", seed=0).close()
    runner = CliRunner()
    r = runner.invoke(app, ["session", "next", str(s)])
    assert r.exit_code == 0 and len(parses) == 1, r.output  # parsed at creation only
    monkeypatch.setenv(user_cache.CACHE_ENV, str(cache))  # restored after the test (--no-cache sets it off)
    before = sorted(cache.rglob("*"))
    r = runner.invoke(app, ["--no-cache", "session", "status", str(s)])
    assert r.exit_code == 0 and len(parses) == 2, r.output
    assert sorted(cache.rglob("*")) == before


@pytest.fixture()
def checks(monkeypatch) -> dict[str, int]:
    """Full checks made from here on: SHA-256 of a file, CRC-32 of an entry. A change less than 50 ms before a
    check is too recent to be trusted by its status (in use: 2 s; here shorter, so the test need not wait)."""
    counts = {"sha256": 0, "crc32": 0}
    for name in counts:
        real = getattr(user_cache, f"_{name}")
        monkeypatch.setattr(user_cache, f"_{name}",
                            lambda data, real=real, name=name: counts.__setitem__(name, counts[name] + 1) or real(data))
    monkeypatch.setattr(user_cache, "_RACY_NS", 50_000_000)
    return counts


def _records(cache: Path, what: str) -> list[Path]:
    return sorted((cache / "verified" / what).glob("*.json"))


def _a_day_later(monkeypatch, record: Path) -> None:
    """As if the check recorded were a day old: the day shortened to its age so far."""
    age = time.time_ns() - json.loads(record.read_text())["checked_ns"]
    monkeypatch.setattr(user_cache, "VERIFY_EVERY_NS", age)


def test_a_reference_whose_status_is_unchanged_is_not_hashed_again_and_a_changed_one_is(tmp_path, cache, parses,
                                                                                         checks, monkeypatch) -> None:
    f = write_scores(_matrix(0), tmp_path / "x.csv")
    time.sleep(0.1)
    datasets.read_file(f)
    assert checks == {"sha256": 1, "crc32": 0} and parses == [f]
    time.sleep(0.1)  # (the parsed copy, just written, is not trusted by its status yet)
    assert _same(datasets.read_file(f), _matrix(0))  # the status as at the last hash: neither hashed nor parsed
    assert checks == {"sha256": 1, "crc32": 1} and parses == [f]  # (the parsed copy's first full check)
    datasets.read_file(f)
    assert checks == {"sha256": 1, "crc32": 1}
    # new content of the same size, written in place (same inode), the modification time set back: the change
    # time still moved
    st = f.stat()
    new = write_scores(_matrix(1), tmp_path / "y.csv").read_bytes()
    assert len(new) == st.st_size
    with open(f, "r+b") as fh:
        fh.write(new)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (f.stat().st_size, f.stat().st_mtime_ns, f.stat().st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert _same(datasets.read_file(f), _matrix(1)) and checks["sha256"] == 2 and len(parses) == 2
    # a check a day old is made again in full, whatever the status says
    time.sleep(0.1)
    datasets.read_file(f)
    assert checks["sha256"] == 3
    datasets.read_file(f)
    assert checks["sha256"] == 3
    (record,) = _records(cache, "file-digests")
    _a_day_later(monkeypatch, record)
    datasets.read_file(f)
    assert checks["sha256"] == 4 and len(parses) == 2
    assert json.loads(record.read_text())["path"] == os.path.abspath(f)


def test_a_cached_copy_damaged_unseen_is_found_at_the_next_full_check_and_never_used_after(cache, checks,
                                                                                             monkeypatch) -> None:
    key = user_cache.key("damage")
    data = np.arange(1000.0)
    assert user_cache.store("test", key, {"n": 1}, [data])
    entry = cache / "test" / f"{key}.aec"
    time.sleep(0.1)
    assert user_cache.load("test", key) is not None and checks["crc32"] == 1
    assert user_cache.load("test", key) is not None and checks["crc32"] == 1  # the status as checked: trusted
    # damage through a write: the status changes, the entry is checked at once and refused
    good = entry.read_bytes()
    entry.write_bytes(good[:-8] + b"\xff" * 8)
    assert user_cache.load("test", key) is None and checks["crc32"] == 2
    assert _records(cache, "test") == []  # its record dropped with it
    # damage the status cannot show (a disk error): forge the record to the damaged file's status
    entry.write_bytes(good)
    time.sleep(0.1)
    assert user_cache.load("test", key) is not None and checks["crc32"] == 3
    (record,) = _records(cache, "test")
    entry.write_bytes(good[:-8] + b"\xff" * 8)
    time.sleep(0.1)
    known = json.loads(record.read_text())
    known["status"] = user_cache._status(entry.stat())
    known["checked_ns"] = time.time_ns()
    record.write_text(json.dumps(known))
    assert user_cache.load("test", key) is not None and checks["crc32"] == 3  # unseen until the next full check
    _a_day_later(monkeypatch, record)
    assert user_cache.load("test", key) is None and checks["crc32"] == 4  # found: refused, and the record dropped
    assert not record.exists()
    for _ in range(2):  # and never read from again: every load checks it in full and refuses it
        assert user_cache.load("test", key) is None
    assert checks["crc32"] == 6
    # what derived() does with it: computes the value again and stores a sound entry in its place
    value = user_cache.derived("test", key, lambda: data, lambda a: ({"n": 1}, [a]), lambda e: e.arrays[0].copy())
    assert np.array_equal(value, data) and entry.read_bytes() == good


def test_a_file_changed_within_the_clock_resolution_of_its_check_is_checked_again(tmp_path, cache, checks,
                                                                                   monkeypatch) -> None:
    monkeypatch.setattr(user_cache, "_RACY_NS", 3600 * 10**9)  # every change "just now": never trusted by status
    f = write_scores(_matrix(0), tmp_path / "x.csv")
    for n in range(1, 4):
        datasets.read_file(f)
        assert checks["sha256"] == n
    assert _records(cache, "file-digests") == []
