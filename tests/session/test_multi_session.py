"""MultiSession: several targets in one session — round trip, resume and replay, per-target stopping, the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import (
    ConfigurationError,
    DuplicateObservationError,
    InvalidScoresError,
    SessionStateError,
    StorageError,
    UnknownItemError,
    UnknownModelError,
)
from activeeval.methods.bayesame_multi import BayesAMEMulti
from activeeval.methods.multi import Independent
from activeeval.session import MultiSession, Session
from activeeval.session.base import open_session
from activeeval.session.drivers.runner import drive_multi
from activeeval.session.ranking import RankSession

runner = CliRunner()
TARGETS = 3


@pytest.fixture(scope="module")
def multi_split() -> tuple:
    """Bundled HELM-Lite MATH, first 120 items: 3 held-out models as the targets, 40 others as the reference."""
    full = datasets.load("math")
    full = full.select_items(full.item_ids[:120])
    targets = list(full.model_ids[:TARGETS])
    truth = {t: dict(zip(full.item_ids, map(float, full.model_scores(t)))) for t in targets}
    return full.select_models(full.model_ids[TARGETS:TARGETS + 40]), targets, truth


@pytest.fixture()
def ref_file(tmp_path: Path, multi_split) -> Path:
    return write_scores(multi_split[0], tmp_path / "math_ref.csv")


def _asks(s: MultiSession) -> list[tuple[str, str]]:
    return [tuple(p) for p in s.ask(1)]


def _state(s: MultiSession) -> tuple:
    """Everything a reopened session must reproduce, compared with == (floats bit for bit)."""
    return s.observations, s.pending, s.status(), {t: s.trajectory(t) for t in s.targets}


# ------------------------------------------------------------------ round trip
def test_create_ask_tell_status_round_trip(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    with MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method="rs-mean", max_items=3, seed=4) as s:
        assert s.targets == tuple(targets)
        pairs = s.ask(5)
        # round robin over the targets, each target's item its own method's choice
        assert [p.target for p in pairs] == (targets * 2)[:5]
        assert all(sorted(p.to_dict()) == ["index", "item_id", "reference_mean", "target"] for p in pairs)
        assert s.pending == tuple(tuple(p) for p in pairs)
        more = s.ask(3)
        assert not {tuple(p) for p in more} & set(s.pending[:5])  # pending pairs are not handed out again
        for target, iid in pairs[:4]:
            assert s.tell(target, iid, truth[target][iid]) is True
        assert s.tell(*pairs[0], truth[pairs[0].target][pairs[0].item_id]) is False  # the same score: a no-op
        st = s.status()
        d = st.to_dict()
        assert d["n_used"] == 4 and d["stop"] is False and d["stop_reason"] is None
        assert [d["targets"][t]["n_used"] for t in targets] == [2, 1, 1]
        assert {(p["target"], p["item_id"]) for p in d["pending"]} == {tuple(pairs[4]), *map(tuple, more)}
        for t in targets:
            est = s.estimate(t)
            assert st.targets[t].estimate == est and est.n_observed == d["targets"][t]["n_used"]
            assert d["targets"][t]["ci_low"] <= d["targets"][t]["estimate"] <= d["targets"][t]["ci_high"]
        assert len(d["covariance"]) == TARGETS and d["covariance"][0][1] == 0.0  # Independent: no cross terms
        hist = s.history()
        assert [(e["kind"], e["model"]) for e in hist if e["kind"] == "tell"] == [("tell", t) for t, _ in pairs[:4]]
        assert s.observations == tuple((t, i, truth[t][i]) for t, i in pairs[:4])


def test_tell_many_record_and_errors_write_nothing(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    a, b = targets[:2]
    with MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method="rs-mean", seed=0) as s:
        asked = s.ask(2)
        first = asked[0].item_id
        s.tell(a, first, truth[a][first])
        before = (s.observations, s.pending)
        with pytest.raises(UnknownModelError, match=r"unknown target 'nobody' in session .*; its targets are "
                                                    rf"{targets[0]}, .* \(name one with target='NAME'\)"):
            s.tell("nobody", first, 1)
        with pytest.raises(UnknownItemError):
            s.tell(a, "no-such-item", 1)
        with pytest.raises(InvalidScoresError, match="is binary"):
            s.tell(b, first, 0.5)
        other = 1 - truth[a][first]
        with pytest.raises(DuplicateObservationError, match=f"item '{first}' of target '{a}' already has score"):
            s.tell(a, first, other)
        with pytest.raises(UnknownModelError):  # all or nothing: the good first row is not recorded either
            s.tell_many([(b, first, truth[b][first]), ("nobody", first, 1)])
        assert (s.observations, s.pending) == before
        # record: one target's results file; items not handed out to that target are skipped unless asked for
        items = list(truth[b])[:5]
        done = s.record(b, {i: truth[b][i] for i in items})
        handed = [p.item_id for p in asked if p.target == b]
        assert done.recorded == len([i for i in items if i in handed]) and len(done.skipped) == 5 - done.recorded
        done = s.record(b, {i: truth[b][i] for i in items}, include_unasked=True)
        assert done.already + done.recorded == 5
        assert s.tell_many([(c, i, truth[c][i]) for c in targets for i in items[:2]]) == (4, 2)


def test_create_errors_leave_no_file(tmp_path, ref_file, multi_split) -> None:
    _, targets, _ = multi_split
    f = tmp_path / "m.aeval"
    for bad, message in [
        ([], "need at least one target.*targets=\\['a', 'b', 'c'\\]"),
        (["a", "a"], "must be distinct; repeated: \\['a'\\]"),
        ("a,b", "must be a list of names"),
    ]:
        with pytest.raises(ConfigurationError, match=message):
            MultiSession.create(f, ref_file, bad)
    with pytest.raises(ConfigurationError, match="'seed' is set by the session; use seed="):
        MultiSession.create(f, ref_file, targets, method="bayesame[seed=3]")
    with pytest.raises(ConfigurationError, match="rs-mean has no option 'nosie'"):
        MultiSession.create(f, ref_file, targets, method="rs-mean[nosie=1]")
    with pytest.raises(ConfigurationError, match="epsilon2"):
        MultiSession.create(f, ref_file, targets, epsilon2=-1)
    assert not f.exists()


def test_session_kinds_are_not_mixed_up(tmp_path, ref_file, multi_split) -> None:
    _, targets, _ = multi_split
    MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method="rs-mean", seed=0).close()
    Session.create(tmp_path / "s.aeval", ref_file, method="rs-mean", seed=0).close()
    with pytest.raises(StorageError, match="is a multi session, not a single one; open it with `activeeval "
                                           "session` / MultiSession.open"):
        Session.open(tmp_path / "m.aeval")
    with pytest.raises(StorageError, match="is a multi session, not a rank one"):
        RankSession.open(tmp_path / "m.aeval")
    with pytest.raises(StorageError, match="is a single session, not a multi one; open it with `activeeval session` "
                                           "/ Session.open"):
        MultiSession.open(tmp_path / "s.aeval")
    with open_session(tmp_path / "m.aeval") as m, open_session(tmp_path / "s.aeval") as s:
        assert (type(m), type(s)) == (MultiSession, Session)
        assert s.history() == [] and s.settings["kind"] == "single"


# ------------------------------------------------------------------ resume and replay
@pytest.mark.parametrize("method", ["bayesame-multi", "bayesame-multi[level=separate]", "bayesame", "rs-mean"])
def test_resume_gives_identical_state(tmp_path, ref_file, multi_split, method) -> None:
    """Reopening between every step asks the same pairs and ends in the same state, bit for bit."""
    _, targets, truth = multi_split
    live = MultiSession.create(tmp_path / "live.aeval", ref_file, targets, method=method, seed=7)
    path = tmp_path / "resumed.aeval"
    MultiSession.create(path, ref_file, targets, method=method, seed=7).close()
    asked = {"live": [], "resumed": []}
    for _ in range(5):
        asked["live"].append([tuple(p) for p in live.ask(3)])
        with MultiSession.open(path) as s:
            asked["resumed"].append([tuple(p) for p in s.ask(3)])
        for t, i in asked["live"][-1][:-1]:  # the last pair of each batch stays pending
            live.tell(t, i, truth[t][i])
            with MultiSession.open(path) as s:
                s.tell(t, i, truth[t][i])
    assert asked["live"] == asked["resumed"]
    with MultiSession.open(path) as s:
        assert _state(s) == _state(live)
        assert len(s.pending) == 5
    # without a snapshot the replay gives the same state
    with MultiSession.open(path, cache=False) as c:
        assert _state(c) == _state(live)
    # ... and equal to the method driven directly with the same history
    kw = dict(live.settings["method_kwargs"])
    if method.startswith("bayesame-multi"):  # its options (level=separate) are among the stored kwargs
        direct = BayesAMEMulti(multi_split[0], targets, seed=kw.pop("seed"), **kw)
    else:
        direct = Independent(multi_split[0], targets, method=method, seed=kw.pop("seed"), **kw)
    for t, i, score in live.observations:
        direct.observe(t, i, score)
    assert direct.estimates() == list(live.estimates().values())
    chosen = direct.select_batch(2, exclude=live.pending)
    assert [(targets[t], direct.item_ids[i]) for t, i in chosen] == [tuple(p) for p in live.ask(2)]
    live.close()


SLOW_SCORER = """\
import json, sys, time
time.sleep(float(sys.argv[4]))
print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])
"""


def _count(path: Path, kind: str) -> int:
    """Journal events of ``kind``, read straight from the file (opening the session would replay it)."""
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM events WHERE kind = ?", (kind,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return -1


def _pending(path: Path) -> bool:
    return _count(path, "ask") > _count(path, "tell") >= 0


@pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL and process groups (POSIX)")
def test_a_run_killed_mid_scorer_reopens_to_the_identical_state(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    (tmp_path / "t.json").write_text(json.dumps(truth))
    (tmp_path / "score.py").write_text(SLOW_SCORER)
    budget = 4
    f = tmp_path / "killed.aeval"
    settings = {"method": "bayesame-multi[warm_start=0.02]", "seed": 3, "max_items": budget}
    MultiSession.create(f, ref_file, targets, **settings).close()

    def cmd(delay: str) -> list[str]:
        scorer = f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 't.json'} {{model}} {{item_id}} {delay}"
        return [sys.executable, "-m", "activeeval", "run", "--session", str(f), "--jobs", "2", "--scorer", scorer]

    proc = subprocess.Popen(cmd("0.3"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    # kill it once it has recorded 3 scores and handed out more: its scorers are then running (0.3 s each)
    while time.time() < deadline and proc.poll() is None and not (_count(f, "tell") >= 3 and _pending(f)):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and the scorers it started
    proc.wait()
    with MultiSession.open(f) as s:
        killed = _state(s)
        n = len(s.observations)
    assert 3 <= n < budget * TARGETS and killed[1], f"killed with {n} scores recorded, {killed[1]} pending"
    assert all(score == truth[t][i] for t, i, score in killed[0])
    with MultiSession.open(f) as s:  # reopening again: the same state
        assert _state(s) == killed
    nxt = []
    for copy in ("c1.aeval", "c2.aeval"):  # ... and the same next pairs, each time it is reopened
        shutil.copy(f, tmp_path / copy)
        with MultiSession.open(tmp_path / copy) as c:
            nxt.append([tuple(p) for p in c.ask(2)])
    assert nxt[0] == nxt[1] and not set(nxt[0]) & set(killed[1])
    # the same scores, told in-process to a fresh session with the same settings, give the same estimates
    with MultiSession.create(tmp_path / "same.aeval", ref_file, targets, **settings) as same:
        same.tell_many(killed[0])
        assert same.estimates() == {t: st.estimate for t, st in killed[2].targets.items()}
        assert {t: same.trajectory(t) for t in targets} == killed[3]
    # resuming finishes the run, with the journal of a run never interrupted
    done = subprocess.run(cmd("0"), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    with MultiSession.create(tmp_path / "u.aeval", ref_file, targets, **settings) as u:
        assert drive_multi(u, lambda t, i: truth[t][i], jobs=2) == "budget"
        expected = (u.observations, u.status())
    with MultiSession.open(f) as s:
        assert (s.observations, s.status()) == expected
        assert len(s.observations) == budget * TARGETS


# ------------------------------------------------------------------ stopping
def test_each_target_stops_on_its_own(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    a, b, c = targets
    items = list(truth[a])
    with MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method="rs-mean", max_items=3, seed=1) as s:
        s.tell_many([(a, i, truth[a][i]) for i in items[:3]])  # a reaches its budget without being asked
        assert s.stop_reasons() == {a: "budget", b: None, c: None}
        pairs = s.ask(10)  # a is not asked; b and c no further than their budget
        assert sorted(p.target for p in pairs) == [b] * 3 + [c] * 3
        with pytest.raises(SessionStateError, match=r"the running targets \(.*\) have their whole budget pending; "
                                                    "record the pending scores first"):
            s.ask(1)
        for t, i in pairs[:3]:
            s.tell(t, i, truth[t][i])
        st = s.status()
        assert st.running == tuple(t for t in (b, c) if st.targets[t].stop_reason is None)
        assert st.stop is False and st.stop_reason is None and st.targets[a].waiting_for == ()
        assert {w.name for w in st.targets[c].waiting_for} >= {"window"}
        for t, i in pairs[3:]:
            s.tell(t, i, truth[t][i])
        st = s.status()
        assert (st.stop, st.stop_reason, st.running) == (True, "budget", ())
        assert s.ask(3) == []  # every target has stopped: nothing to hand out
        # a larger budget, recorded in the journal, lets every target go on
        assert s.change_settings(max_items=4) == {"max_items": 4}
        assert sorted(p.target for p in s.ask(5)) == [a, b, c]
    with MultiSession.open(tmp_path / "m.aeval") as s:
        assert s.stopping_settings["max_items"] == 4 and len(s.pending) == 3


@pytest.mark.parametrize("method", ["bayesame-multi", "bayesame"])
def test_precision_stop_per_target(tmp_path, ref_file, multi_split, method) -> None:
    """The paper's rule (window, stability, width) is checked on each target's own trajectory."""
    _, targets, truth = multi_split
    with MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method=method, epsilon1=0.05,
                             epsilon2=0.4, window=5, seed=2) as s:
        # one pair at a time (a batch of k pairs is asked before any of them is scored, as for one target)
        reason = drive_multi(s, lambda t, i: truth[t][i], jobs=1)
        st, rule = s.status(), s.stopping_rule()
        assert reason == st.stop_reason == "precision"
        lengths = {t: len(s.trajectory(t)) for t in targets}
        assert len(set(lengths.values())) > 1, lengths  # the targets stopped at different times
        for t in targets:
            traj = s.trajectory(t)
            # each target was asked until its own rule held, and no further
            assert rule.check(traj) == "precision" and rule.check(traj[:-1]) is None
            assert all(c.met for c in st.targets[t].conditions)


def test_the_joint_method_shares_what_the_targets_have_in_common(tmp_path, ref_file, multi_split) -> None:
    """bayesame-multi: built with the session's targets, warm start first, a covariance with cross terms."""
    ref, targets, truth = multi_split
    with pytest.raises(ConfigurationError, match="'targets' is set by the session; use targets="):
        MultiSession.create(tmp_path / "x.aeval", ref_file, targets, method="bayesame-multi[targets=2]")
    method = "bayesame-multi[warm_start=0.1]"  # the paper's shared start (the default has none)
    with MultiSession.create(tmp_path / "m.aeval", ref_file, targets, method=method, seed=0) as s:
        assert isinstance(s.method, BayesAMEMulti) and s.method.targets == tuple(targets)
        assert {"reference_fit", "calibration"} <= set(s.settings["method_kwargs"])  # derived once, stored
        n_warm = round(0.1 * ref.n_items)
        pairs = s.ask(n_warm * TARGETS + 2)
        # the warm start: every target on the same random tenth of the items, item by item
        warm = pairs[:n_warm * TARGETS]
        assert [p.target for p in warm] == targets * n_warm
        assert all(len({p.item_id for p in warm[j:j + TARGETS]}) == 1 for j in range(0, len(warm), TARGETS))
        assert [p.target for p in pairs[-2:]] == targets[:2]  # then the targets in turn, each its own choice
        for t, i in pairs:
            s.tell(t, i, truth[t][i])
        assert s.status().to_dict()["covariance"][1][0] == 0.0  # W starts at I: independent until the first refit
        while len(s.observations) < 60:  # refits every 50 observations (refit_every)
            for t, i in s.ask(TARGETS):
                s.tell(t, i, truth[t][i])
        cov = s.status().to_dict()["covariance"]
        assert len(cov) == TARGETS and any(cov[a][b] != 0.0 for a in range(TARGETS) for b in range(a))
        before, traj = s.estimate(targets[0]), s.trajectory(targets[0])
        s.tell(targets[1], next(i for i in truth[targets[1]] if (targets[1], i) not in {
            (t, j) for t, j, _ in s.observations}), 1.0)
        # a score of one target moves another's estimate (its own trajectory, that the stopping rule reads, not)
        assert s.estimate(targets[0]) != before and s.trajectory(targets[0]) == traj


# ------------------------------------------------------------------ CLI
def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


SCORER = """\
import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])
"""


def _scorer(tmp_path: Path, truth: dict) -> str:
    (tmp_path / "score.py").write_text(SCORER)
    (tmp_path / "t.json").write_text(json.dumps(truth))
    return f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 't.json'} {{model}} {{item_id}}"


def test_cli_new_next_record_status_set(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    f = tmp_path / "m.aeval"
    r = invoke("session", "new", f, "--reference", ref_file, "--targets", ",".join(targets), "--method", "rs-mean",
               "--max-items", "2", "--seed", "4")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"created {f}: method rs-mean, reference 'math_ref' (40 models x 120 items), "
                               f"targets {', '.join(targets)}, epsilon2 0.03, seed 4")
    r = invoke("session", "next", f, "--k", "4", "--json")
    assert r.exit_code == 0, r.output
    asked = json.loads(r.stdout)
    assert [a["target"] for a in asked] == (targets * 2)[:4]
    r = invoke("session", "next", f, "--k", "2")
    assert r.exit_code == 0, r.output
    lines = [line.split("\t") for line in r.stdout.splitlines()]
    assert [t for t, _ in lines] == [targets[1], targets[2]]
    pairs = [(a["target"], a["item_id"]) for a in asked] + [tuple(x) for x in lines]
    for t, i in pairs:
        r = invoke("session", "record", f, i, truth[t][i], "--target", t)
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith(f"recorded {i} = {truth[t][i]} for target {t}")
    r = invoke("session", "status", f)
    assert r.exit_code == 0, r.output
    text = r.stdout
    assert all(text.count(f"{t}  estimate ") == 1 for t in targets)
    assert "items used 2/120  stop: yes (budget)" in text and "every target has stopped: stop: yes (budget)" in text
    r = invoke("session", "status", f, "--json")
    st = json.loads(r.stdout)
    assert (st["stop"], st["n_used"], st["stopping"]["max_items"]) == (True, 6, 2)
    assert [st["targets"][t]["n_used"] for t in targets] == [2, 2, 2]
    r = invoke("session", "next", f)
    assert r.exit_code == 0 and r.stdout == "" and "nothing to hand out" in r.stderr
    r = invoke("session", "set", f, "--max-items", "3")
    assert r.exit_code == 0 and "changed max-items: 2 -> 3" in r.stdout and "stop: no" in r.stdout
    r = invoke("session", "history", f)
    assert r.exit_code == 0 and all(f" tell {t} " in r.stdout for t in targets)
    with MultiSession.open(f) as s:
        assert s.observations == tuple((t, i, truth[t][i]) for t, i in pairs)


def test_cli_errors_name_the_flag_and_lose_nothing(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    a = targets[0]
    f, single = tmp_path / "m.aeval", tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", ref_file, "--targets", ",".join(targets), "--method", "rs-mean")
    invoke("session", "new", single, "--reference", ref_file, "--method", "rs-mean")
    item = next(iter(truth[a]))
    assert invoke("session", "record", f, item, truth[a][item], "--target", a).exit_code == 0

    def err(*args: object) -> str:
        r = invoke(*args)
        assert r.exit_code == 2, r.output
        return r.stderr

    assert err("session", "record", f, item, "1") == (
        f"error: '{f}' evaluates several targets ({', '.join(targets)}); name the target of these scores with "
        "--target NAME\n")
    assert err("session", "record", f, item, "1", "--target", "nobody").startswith(
        f"error: unknown target 'nobody' in session '{f}'; its targets are {', '.join(targets)} "
        "(name one with --target NAME)")
    assert err("session", "record", f, item, 1 - truth[a][item], "--target", a).startswith(
        f"error: item '{item}' of target '{a}' already has score")
    assert err("session", "record", single, item, "1", "--target", a).startswith(
        f"error: '{single}' evaluates one model; drop --target")
    assert err("session", "report", f, "--out", tmp_path / "r.html").startswith(
        f"error: '{f}' is a multi-target session; reports are for single-model sessions")
    scorer = _scorer(tmp_path, truth)
    assert err("run", "--session", single, "--targets", ",".join(targets), "--scorer", scorer).startswith(
        f"error: session '{single}' evaluates one model; drop --targets to resume it")
    assert err("run", "--session", f, "--targets", "x,y", "--scorer", scorer).startswith(
        f"error: session '{f}' evaluates {', '.join(targets)}, not x, y; drop --targets to resume it")
    no_model = scorer.replace("{model} ", "")
    assert err("run", "--session", f, "--scorer", no_model).startswith(
        f"error: --scorer '{no_model}' has no {{model}} placeholder; the session evaluates several targets "
        f"({', '.join(targets)}) and passes each one's name there, e.g. --scorer 'python score.py {{model}} "
        "{item_id}'")
    new = tmp_path / "new.aeval"
    assert "has no {model} placeholder" in err("run", "--session", new, "--reference", ref_file, "--targets", "a,b",
                                                "--scorer", no_model)
    assert err("session", "new", new, "--reference", ref_file, "--targets", "a,a").startswith(
        "error: target names must be distinct; repeated: ['a'] (give the target models as --targets a,b,c)")
    assert not new.exists()
    with MultiSession.open(f) as s:
        assert s.observations == ((a, item, truth[a][item]),)


def test_cli_run_until_every_target_stops_then_resume_is_a_noop(tmp_path, ref_file, multi_split) -> None:
    _, targets, truth = multi_split
    f = tmp_path / "m.aeval"
    scorer = _scorer(tmp_path, truth)
    method = "bayesame-multi[warm_start=0.02]"
    r = invoke("run", "--session", f, "--reference", ref_file, "--targets", ",".join(targets), "--method", method,
               "--scorer", scorer, "--max-items", "3", "--seed", "2", "--jobs", "2", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert (st["stop"], st["stop_reason"], st["pending"], st["n_used"]) == (True, "budget", [], 3 * TARGETS)
    with MultiSession.open(f) as s:
        assert all(score == truth[t][i] for t, i, score in s.observations)
        n_events = len(s.history())
    r = invoke("run", "--session", f, "--scorer", scorer, "--method", method)
    assert r.exit_code == 0 and "every target has stopped: stop: yes (budget)" in r.stdout
    r = invoke("run", "--session", f, "--scorer", scorer, "--method", "bayesame")
    assert r.exit_code == 2 and "--method bayesame (session has bayesame-multi[warm_start=0.02])" in r.stderr
    r = invoke("run", "--session", f, "--scorer", scorer, "--max-items", "4")
    assert r.exit_code == 0 and "changed max-items: 3 -> 4" in r.stdout
    with MultiSession.open(f) as s:
        assert len(s.observations) == 4 * TARGETS and len(s.history()) == n_events + 2 * TARGETS + 1
        # the same as driving the session in-process with the same settings
        with MultiSession.create(tmp_path / "u.aeval", ref_file, targets, method=method, max_items=3,
                                 seed=2) as u:
            drive_multi(u, lambda t, i: truth[t][i], jobs=2)
            u.change_settings(max_items=4)
            drive_multi(u, lambda t, i: truth[t][i], jobs=2)
            assert u.observations == s.observations and u.status() == s.status()
