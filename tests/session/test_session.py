"""Session: resume and replay determinism, the journal, every error path."""

from __future__ import annotations

import multiprocessing as mp
import shutil
import sqlite3
import threading

import numpy as np
import pandas as pd
import pytest

from activeeval.exceptions import (
    ConfigurationError,
    CorruptedSessionError,
    DuplicateObservationError,
    InvalidScoresError,
    ScoreOutOfRangeError,
    SessionStateError,
    StorageError,
    UnknownItemError,
)
from activeeval.methods.registry import make_method
from activeeval.session import ReferenceMismatchError, Session


def _drive(session: Session, target: dict[str, float], n_rounds: int, k: int, reopen: bool) -> list[list[str]]:
    """Ask k, tell all but the last asked item (left pending), repeat; optionally reopen between steps."""
    asked: list[list[str]] = []
    path = session.path
    for _ in range(n_rounds):
        batch = [a.item_id for a in session.ask(k)]
        asked.append(batch)
        if reopen:
            session.close()
            session = Session.open(path)
        for iid in batch[:-1] if len(batch) > 1 else batch:
            session.tell(iid, target[iid])
        if reopen:
            session.close()
            session = Session.open(path)
    session.close()
    return asked


@pytest.mark.parametrize("method", ["bayesame", "bayesame-rs", "rs-mean"])
@pytest.mark.parametrize("which", ["continuous", "math"])
def test_resume_gives_identical_ask(tmp_path, method, which, request) -> None:
    ref_file = request.getfixturevalue(f"{which}_ref_file")
    _, target = request.getfixturevalue(f"{which}_split")
    live = Session.create(tmp_path / "live.aeval", ref_file, method=method, seed=11)
    resumed = Session.create(tmp_path / "resumed.aeval", ref_file, method=method, seed=11)
    a = _drive(live, target, n_rounds=8, k=3, reopen=False)
    b = _drive(resumed, target, n_rounds=8, k=3, reopen=True)
    assert a == b
    # Pending items are excluded from later asks and kept across reopening.
    with Session.open(tmp_path / "resumed.aeval") as s:
        pending = s.pending
        assert len(pending) == 8  # one left pending per round
        assert pending == tuple(batch[-1] for batch in b)
        assert not set(s.ask(4)[i].item_id for i in range(4)) & set(pending)


def test_replay_equals_live_state(tmp_path, continuous_ref_file, continuous_split) -> None:
    ref, target = continuous_split
    live = Session.create(tmp_path / "s.aeval", continuous_ref_file, epsilon2=0.05, seed=3)
    for _ in range(25):
        (item,) = live.ask(1)
        live.tell(item.item_id, target[item.item_id])
    with Session.open(tmp_path / "s.aeval") as reopened:
        assert reopened.observations == live.observations
        assert reopened.trajectory == live.trajectory  # exact: the same operations in the same order
        assert reopened.status() == live.status()
    # ... and equal to a method driven directly with the same history.
    method = make_method("bayesame", ref, **live.settings["method_kwargs"])
    for iid, score in live.observations:
        method.observe(iid, score)
    assert method.estimate() == live.estimate()
    assert live.ask(2)[0].index == method.select_batch(2)[0]
    live.close()


def test_status_history_and_stop(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    with Session.create(tmp_path / "s.aeval", math_ref_file, max_items=5, seed=0) as s:
        assert s.status().to_dict()["n_used"] == 0
        items = [a.item_id for a in s.ask(5)]
        assert s.status().pending == tuple(items)
        for iid in items[:4]:
            assert s.tell(iid, target[iid]) is True
        st = s.status().to_dict()
        assert (st["n_used"], st["n_items"], st["pending"], st["stop"]) == (4, 437, [items[4]], False)
        s.tell(items[4], target[items[4]])
        st = s.status().to_dict()
        assert st["stop"] is True and st["stop_reason"] == "budget" and st["pending"] == []
        assert st["ci_low"] <= st["estimate"] <= st["ci_high"]
        hist = s.history()
        assert [e["kind"] for e in hist] == ["ask"] * 5 + ["tell"] * 5
        assert [e["item_id"] for e in hist if e["kind"] == "tell"] == items
        assert all(e["batch"] == 1 for e in hist if e["kind"] == "ask")


def test_files_that_kept_the_stopping_rule_among_the_method_options_still_open(tmp_path, math_ref_file,
                                                                               math_split) -> None:
    """Before the stopping rule left the methods, a session stored it in ``method_kwargs`` (budget ``n_max``)."""
    import json

    from activeeval.session.journal.storage import _meta_checksum

    _, target = math_split
    f = tmp_path / "old.aeval"
    with Session.create(f, math_ref_file, epsilon2=0.2, max_items=4, seed=0) as s:
        assert s.settings["stopping"] == {"epsilon1": 0.005, "epsilon2": 0.2, "window": 30, "max_items": 4}
        assert "n_max" not in s.settings["method_kwargs"] and "epsilon2" not in s.settings["method_kwargs"]
        for a in s.ask(3):
            s.tell(a.item_id, target[a.item_id])
        live = s.estimate()
    con = sqlite3.connect(f)
    kwargs = json.loads(con.execute("SELECT value FROM meta WHERE key = 'method_kwargs'").fetchone()[0])
    kwargs.update({"epsilon1": 0.005, "epsilon2": 0.2, "window": 30, "n_max": 4})
    with con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'method_kwargs'", (json.dumps(kwargs),))
        con.execute("DELETE FROM meta WHERE key = 'stopping'")
        rows = dict(con.execute("SELECT key, value FROM meta"))
        con.execute("UPDATE meta SET value = ? WHERE key = 'checksum'", (json.dumps(_meta_checksum(rows)),))
    con.close()
    with Session.open(f) as s:
        assert s.stopping_settings == {"epsilon1": 0.005, "epsilon2": 0.2, "window": 30, "max_items": 4}
        assert s.estimate() == live  # the method is built without the stopping options
        (a,) = s.ask()
        s.tell(a.item_id, target[a.item_id])
        assert s.stop_reason() == "budget"


def test_tell_same_score_is_noop_different_score_refused(tmp_path, math_ref_file) -> None:
    with Session.create(tmp_path / "s.aeval", math_ref_file, seed=0) as s:
        assert s.tell("math-00003", 1) is True
        before = s.history()
        assert s.tell("math-00003", 1.0) is False
        with pytest.raises(DuplicateObservationError) as err:
            s.tell("math-00003", 0)
        assert str(err.value) == (
            "item 'math-00003' already has score 1 recorded; refusing to change it to 0 "
            "(recorded scores are never altered; start a new session to re-score)"
        )
        assert s.history() == before
        assert s.observations == (("math-00003", 1.0),)


@pytest.mark.parametrize(
    ("item", "score", "error", "message"),
    [
        ("nope", 1, UnknownItemError, "unknown item 'nope' in score matrix 'math_ref'"),
        ("math-00001", float("nan"), InvalidScoresError, "score for item 'math-00001' is nan; scores must be finite"),
        ("math-00001", float("inf"), InvalidScoresError, "score for item 'math-00001' is inf; scores must be finite"),
        ("math-00001", "abc", InvalidScoresError, "score for item 'math-00001' is 'abc', which is not a number"),
        ("math-00001", 0.5, ScoreOutOfRangeError, "score for item 'math-00001' is 0.5 but score matrix 'math_ref' is binary"),
        ("math-00001", 2, ScoreOutOfRangeError, "score for item 'math-00001' is 2 but score matrix 'math_ref' is binary"),
    ],
)
def test_bad_tell_writes_nothing(tmp_path, math_ref_file, item, score, error, message) -> None:
    with Session.create(tmp_path / "s.aeval", math_ref_file, seed=0) as s:
        s.ask(2)
        s.tell("math-00000", 0)
        before = (s.history(), s.status())
        with pytest.raises(error) as err:
            s.tell(item, score)
        assert message in str(err.value)
        assert (s.history(), s.status()) == before
    with Session.open(tmp_path / "s.aeval") as s:
        assert s.history() == before[0]


def test_out_of_range_continuous(tmp_path, continuous_ref_file) -> None:
    with Session.create(tmp_path / "s.aeval", continuous_ref_file, seed=0) as s:
        with pytest.raises(ScoreOutOfRangeError, match=r"score for item 'q01' is 1.5, outside the score range \[0, 1\]"):
            s.tell("q01", 1.5)
        assert s.history() == []


def test_tell_many_is_all_or_nothing(tmp_path, math_ref_file) -> None:
    with Session.create(tmp_path / "s.aeval", math_ref_file, seed=0) as s:
        s.tell("math-00001", 1)
        with pytest.raises(UnknownItemError):
            s.tell_many([("math-00002", 1), ("math-00003", 0), ("bogus", 1)])
        with pytest.raises(DuplicateObservationError):
            s.tell_many([("math-00002", 1), ("math-00002", 0)])
        assert s.observations == (("math-00001", 1.0),)
        assert s.tell_many([("math-00001", 1), ("math-00002", 1), ("math-00002", 1)]) == (1, 2)


def test_ask_validates_k_and_runs_out(tmp_path) -> None:
    ref = pd.DataFrame([[0, 1, 1], [1, 0, 1], [1, 1, 0]], index=["a", "b", "c"], columns=["x", "y", "z"])
    ref.index.name = "model"
    f = tmp_path / "tiny.csv"
    ref.to_csv(f)
    with Session.create(tmp_path / "s.aeval", f, method="rs-mean", seed=0) as s:
        with pytest.raises(ConfigurationError, match=r"k= must be a positive integer, got 0"):
            s.ask(0)
        assert len(s.ask(5)) == 3  # capped at what is left
        with pytest.raises(SessionStateError, match="every item is already observed or pending"):
            s.ask(1)


def test_create_errors_leave_no_file(tmp_path, math_ref_file) -> None:
    with pytest.raises(ConfigurationError, match="unknown method 'bayesam' \\(did you mean 'bayesame'\\?\\)"):
        Session.create(tmp_path / "s.aeval", math_ref_file, method="bayesam")
    with pytest.raises(ConfigurationError, match="epsilon2= must be > 0"):
        Session.create(tmp_path / "s.aeval", math_ref_file, epsilon2=0)
    with pytest.raises(ConfigurationError, match=r"max_items= must be a positive integer, got 0"):
        Session.create(tmp_path / "s.aeval", math_ref_file, max_items=0)
    assert list(tmp_path.glob("s.aeval*")) == []
    Session.create(tmp_path / "s.aeval", math_ref_file).close()
    with pytest.raises(StorageError, match=f"session file '{tmp_path / 's.aeval'}' already exists"):
        Session.create(tmp_path / "s.aeval", math_ref_file)


def test_seed_is_stored_when_omitted(tmp_path, math_ref_file) -> None:
    with Session.create(tmp_path / "s.aeval", math_ref_file) as s:
        seed = s.settings["method_kwargs"]["seed"]
        first = s.ask(1)[0]
    assert isinstance(seed, int)
    with Session.open(tmp_path / "s.aeval") as s:
        assert s.settings["method_kwargs"]["seed"] == seed
        assert s.pending == (first.item_id,)


def test_bundled_dataset_reference_is_reloaded_by_name(tmp_path) -> None:
    with Session.create(tmp_path / "s.aeval", "math", seed=1, max_items=3) as s:
        assert s.settings["reference_source"] == {"type": "dataset", "name": "math"}
        item = s.ask(1)[0].item_id
    with Session.open(tmp_path / "s.aeval") as s:
        assert s.pending == (item,)


# ------------------------------------------------------------ reference data
def test_reference_file_changed(tmp_path, math_ref_file, math_split) -> None:
    Session.create(tmp_path / "s.aeval", math_ref_file, seed=0).close()
    df = pd.read_csv(math_ref_file, index_col=0)
    df.iloc[0, 0] = 1 - df.iloc[0, 0]
    df.to_csv(math_ref_file)
    with pytest.raises(ReferenceMismatchError) as err:
        Session.open(tmp_path / "s.aeval")
    msg = str(err.value)
    assert f"the reference data of session '{tmp_path / 's.aeval'}' changed since the session was created" in msg
    assert f"reference file '{math_ref_file}'" in msg
    assert "same models and items, but some scores differ" in msg
    assert "pass the original data explicitly: Session.open(path, reference=...)" in msg
    # The original matrix, given explicitly, opens the session.
    with Session.open(tmp_path / "s.aeval", reference=math_split[0]) as s:
        assert s.status().estimate.n_observed == 0


def test_reference_items_changed_and_file_gone(tmp_path, math_ref_file) -> None:
    Session.create(tmp_path / "s.aeval", math_ref_file, seed=0).close()
    df = pd.read_csv(math_ref_file, index_col=0)
    df.iloc[:, :-1].to_csv(math_ref_file)
    with pytest.raises(ReferenceMismatchError, match=r"items 437 -> 436 \(item ids differ\)"):
        Session.open(tmp_path / "s.aeval")
    math_ref_file.unlink()
    with pytest.raises(StorageError, match=f"reference file '{math_ref_file}' of session .* no longer exists"):
        Session.open(tmp_path / "s.aeval")


def test_in_memory_reference_needs_it_on_open(tmp_path, continuous_split) -> None:
    ref, target = continuous_split
    with Session.create(tmp_path / "s.aeval", ref, seed=0) as s:
        s.tell("q00", target["q00"])
    with pytest.raises(StorageError, match="was created from an in-memory ScoreMatrix \\('synth'\\); open it with"):
        Session.open(tmp_path / "s.aeval")
    with Session.open(tmp_path / "s.aeval", reference=ref) as s:
        assert s.observations == (("q00", target["q00"]),)
    with pytest.raises(ReferenceMismatchError, match="models 30 -> 29"):
        Session.open(tmp_path / "s.aeval", reference=ref.drop_models(["m1"]))


# ------------------------------------------------------------------ storage
def test_corrupted_and_foreign_files(tmp_path) -> None:
    junk = tmp_path / "junk.aeval"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match=f"'{junk}' is not an activeeval session file, or it is corrupted"):
        Session.open(junk)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.close()
    with pytest.raises(StorageError, match=f"'{other}' is an SQLite file but not an activeeval session"):
        Session.open(other)
    with pytest.raises(StorageError, match=f"no session file '{tmp_path / 'missing.aeval'}'"):
        Session.open(tmp_path / "missing.aeval")


def test_truncated_session_file(tmp_path, math_ref_file) -> None:
    with Session.create(tmp_path / "s.aeval", math_ref_file, seed=0) as s:
        for i in range(5):
            s.tell(f"math-{i:05d}", 1)
    data = (tmp_path / "s.aeval").read_bytes()
    (tmp_path / "t.aeval").write_bytes(data[: len(data) // 3])
    with pytest.raises(StorageError, match="t.aeval"):
        with Session.open(tmp_path / "t.aeval") as s:
            s.history()


def test_locked_file_gives_clear_error_and_loses_nothing(tmp_path, math_ref_file) -> None:
    path = tmp_path / "s.aeval"
    with Session.create(path, math_ref_file, seed=0, timeout=0.2) as s:
        s.tell("math-00001", 1)
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StorageError) as err:
                s.tell("math-00002", 0)
            assert str(err.value) == (
                f"session file '{path}' is locked by another process (waited 0.2 s to record scores); "
                "retry when the other writer is done, or pass a longer timeout"
            )
            with pytest.raises(StorageError, match="locked by another process .* to hand out items"):
                s.ask(1)
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert s.observations == (("math-00001", 1.0),)
        assert s.tell("math-00002", 0) is True
    with Session.open(path) as s:
        assert s.observations == (("math-00001", 1.0), ("math-00002", 0.0))


def _tell_in_process(path: str, items: list[tuple[str, float]]) -> None:
    with Session.open(path, timeout=30) as s:
        for iid, score in items:
            s.tell(iid, score)


def test_two_processes_lose_no_writes(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    path = tmp_path / "s.aeval"
    Session.create(path, math_ref_file, seed=0).close()
    items = list(target.items())[:40]
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_tell_in_process, args=(str(path), items[i::2])) for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    with Session.open(path) as s:
        assert sorted(s.observations) == sorted(items)
        assert len(s.history()) == 40


def test_two_sessions_in_threads_see_each_other(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    path = tmp_path / "s.aeval"
    Session.create(path, math_ref_file, seed=0).close()
    items = list(target.items())[:30]
    errors: list[BaseException] = []

    def work(part: list[tuple[str, float]]) -> None:
        try:
            _tell_in_process(str(path), part)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(items[i::3],)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Session.open(path) as a, Session.open(path) as b:
        assert sorted(a.observations) == sorted(items)
        # A write through one object is seen by the other, and duplicates are caught across them.
        a.tell("math-00100", target["math-00100"])
        assert ("math-00100", target["math-00100"]) in b.observations
        with pytest.raises(DuplicateObservationError):
            b.tell("math-00100", 1 - target["math-00100"])


def test_file_copy_is_a_consistent_snapshot(tmp_path, math_ref_file) -> None:
    """A closed session file is self-contained (WAL checkpointed on close): it can be copied and reopened."""
    with Session.create(tmp_path / "s.aeval", math_ref_file, seed=0) as s:
        s.tell("math-00001", 1)
    shutil.copy(tmp_path / "s.aeval", tmp_path / "copy.aeval")
    with Session.open(tmp_path / "copy.aeval") as s:
        assert s.observations == (("math-00001", 1.0),)
        assert np.isfinite(s.estimate().mean)


def test_resume_across_a_hyperparameter_refit(tmp_path, continuous_ref_file, continuous_split) -> None:
    """The paper's BayesAME refits (alpha, beta) every F observations (here F = 8); replay crosses refits identically."""
    _, target = continuous_split
    kw = {"epsilon2": 1e-6, "seed": 8, "method": "bayesame-paper", "refit_every": 8}
    live = Session.create(tmp_path / "live.aeval", continuous_ref_file, **kw)
    path = tmp_path / "resumed.aeval"
    Session.create(path, continuous_ref_file, **kw).close()
    s = Session.open(path)
    for step in range(20):
        (a,) = live.ask(1)
        (b,) = s.ask(1)
        assert a == b, f"step {step}"
        s.tell(b.item_id, target[b.item_id])
        live.tell(a.item_id, target[a.item_id])
        if step % 3 == 2:  # reopen: rebuild by replay, with refits at 8 and 16 in the replayed history
            s.close()
            s = Session.open(path)
    assert s.trajectory == live.trajectory
    s.close()
    live.close()


def test_a_hybrid_session_replays_its_draws_exactly(tmp_path, math_ref_file, math_split) -> None:
    """``selection="hybrid"``: each draw's probability depends on the items scored and those pending when it was
    made, not on any score, so a reopened session registers every draw again from the journal (batches, items
    asked while others are pending, scores recorded out of order) and its estimate and next draw are the live
    one's. One at a time, with nothing pending, it is the same as replaying the scores alone."""
    ref, target = math_split
    live = Session.create(tmp_path / "h.aeval", math_ref_file, method="bayesame[selection=hybrid]", seed=4)
    for _ in range(15):
        (item,) = live.ask(1)
        live.tell(item.item_id, target[item.item_id])
    kwargs = live.settings["method_kwargs"]
    method = make_method("bayesame", ref, **kwargs)
    for iid, score in live.observations:
        method.observe(iid, score)
    assert method.estimate() == live.estimate()
    batch = live.ask(4)
    more = live.ask(2)  # asked while the four are pending
    assert len({a.item_id for a in batch + more}) == 6
    for a in [more[1], batch[2], batch[0], more[0], batch[3], batch[1]]:  # out of the order they were drawn
        live.tell(a.item_id, target[a.item_id])
    observations, estimate = live.observations, live.estimate()
    assert live.method._design.count == 21 and not live.method._queue
    design = live.method._design.estimate(1.0, "weighted")
    live.close()
    with Session.open(tmp_path / "h.aeval") as reopened:
        assert reopened.observations == observations and len(observations) == 21
        assert reopened.estimate() == estimate
        assert reopened.method._design.estimate(1.0, "weighted") == design  # model-based: the design one is kept too
        nxt = reopened.ask(1)[0]
    with Session.open(tmp_path / "h.aeval", cache=False) as again:  # rebuilt from the journal alone
        assert again.estimate() == estimate and again.pending == (nxt.item_id,)


def test_a_closed_session_says_so_and_not_that_its_file_is_corrupted(tmp_path, math_ref_file, math_split) -> None:
    s = Session.create(tmp_path / "c.aeval", math_ref_file, method="rs-mean", seed=1)
    (item,) = s.ask(1)
    s.tell(item.item_id, 1.0)
    s.close()
    with pytest.raises(StorageError, match="was closed by this program before it tried to .*open it again") as err:
        s.status()
    assert not isinstance(err.value, CorruptedSessionError)
    with Session.open(tmp_path / "c.aeval") as again:
        assert again.observations == ((item.item_id, 1.0),)
