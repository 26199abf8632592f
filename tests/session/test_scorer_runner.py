"""The scorer runner cannot be hung or crashed by what it runs, and loses no score it obtained (issue 24, item 3)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.matrix import ScoreMatrix, parse_score_text
from activeeval.exceptions import InvalidScoresError
from activeeval.session import Session
from activeeval.session.drivers.runner import DEFAULT_TIMEOUT, Scorer, ScorerError, drive, drive_multi
from activeeval.session.multi import MultiSession

posix_only = pytest.mark.skipif(os.name != "posix", reason="process groups and sh are POSIX")


@pytest.fixture(scope="module")
def small() -> ScoreMatrix:
    rng = np.random.default_rng(3)
    scores = np.round(rng.uniform(size=(12, 30)), 3)
    return ScoreMatrix(scores, [f"m{j}" for j in range(12)], [f"q{i:02d}" for i in range(30)], name="small")


def _gone(pid: int, within: float = 2.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def _read_pid(path: Path) -> int:
    end = time.monotonic() + 2
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < end, "the scorer did not write its pid"
        time.sleep(0.01)
    return int(path.read_text())


# ------------------------------------------------------------------ timeouts
@posix_only
def test_timeout_kills_the_whole_group_within_timeout_plus_one_second(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    # The grandchild (sleep) holds the pipes: killing only `sh` used to leave the run waiting 40 s.
    sc = Scorer(f"sh -c 'sleep 40 & echo $! > {pidfile}; wait; echo 1' {{item_id}}", timeout=1)
    start = time.monotonic()
    (result,) = sc.score_many(["q1"])
    took = time.monotonic() - start
    assert isinstance(result, ScorerError) and "timed out after 1 s" in str(result)
    assert took < 2.0, took
    assert _gone(_read_pid(pidfile)), "the grandchild outlived the timeout"


@posix_only
def test_a_grandchild_that_leaves_the_group_cannot_hold_the_run(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    escaped = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' &"
    sc = Scorer(f"sh -c {shlex.quote(escaped + ' sleep 30')} {{item_id}}", timeout=1)
    start = time.monotonic()
    (result,) = sc.score_many(["q1"])
    try:
        assert isinstance(result, ScorerError) and "timed out" in str(result)
        assert time.monotonic() - start < 2.0
    finally:
        os.kill(_read_pid(pidfile), signal.SIGKILL)


@posix_only
def test_a_background_process_left_behind_does_not_delay_the_answer(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    sc = Scorer(f"sh -c 'sleep 30 & echo $! > {pidfile}; echo 0.25' {{item_id}}", timeout=20)
    start = time.monotonic()
    assert sc.score_many(["q1"]) == [0.25]
    assert time.monotonic() - start < 1.5
    os.kill(_read_pid(pidfile), signal.SIGKILL)


def test_timeout_option_default_and_validation() -> None:
    assert Scorer("echo {item_id}").timeout == DEFAULT_TIMEOUT == 600
    assert Scorer("echo {item_id}", timeout=0).score_many(["1"]) == [1.0]  # 0: no limit
    for bad in (-1, float("nan"), float("inf"), "5", True):
        with pytest.raises(ScorerError.__mro__[1], match="timeout"):
            Scorer("echo {item_id}", timeout=bad)  # type: ignore[arg-type]
    text = " ".join(CliRunner().invoke(app, ["run", "--help"]).stdout.split())
    assert f"[default: {DEFAULT_TIMEOUT:g}," in text and "0: no limit" in text


# ------------------------------------------------------------------ output
@posix_only
def test_non_utf8_output_never_raises() -> None:
    ok = Scorer(r"""sh -c 'printf "\377\376 log\n0.5\n"; printf "\377oops\n" >&2' {item_id}""")
    assert ok.score_many(["q"]) == [0.5]
    (failed,) = Scorer(r"""sh -c 'printf "\377\376" >&2; exit 3' {item_id}""").score_many(["q"])
    assert isinstance(failed, ScorerError) and "exited with code 3; stderr: \ufffd\ufffd" in str(failed)
    (garbage,) = Scorer(r"""sh -c 'printf "\377\376\n"' {item_id}""").score_many(["q"])
    assert isinstance(garbage, ScorerError) and "printed no number" in str(garbage)


@pytest.mark.parametrize("text, value", [
    ("1", 1.0), ("0.5", 0.5), ("-0", -0.0), ("1e-3", 1e-3), (" 0.5\n", 0.5), ("+1", 1.0), (".5", 0.5), ("2.", 2.0),
    ("1E2", 100.0),
])
def test_ordinary_numbers_are_scores(text: str, value: float) -> None:
    assert parse_score_text(text) == value


@pytest.mark.parametrize("text, reason", [
    ("1_0", "digit separators"), ("nan", "not a finite number"), ("-inf", "not a finite number"),
    ("Infinity", "not a finite number"), ("1e999", "too large"), ("\u0661", "is not a number"),
    ("0x1", "is not a number"), ("", "is not a number"), ("1 2", "is not a number"), ("½", "is not a number"),
])
def test_what_float_accepts_but_is_no_score(text: str, reason: str) -> None:
    with pytest.raises(InvalidScoresError, match=re.escape(reason)):
        parse_score_text(text)


def test_scorer_output_is_parsed_strictly() -> None:
    py = shlex.quote(sys.executable)
    for printed in ("1_0", "nan", "inf"):
        (r,) = Scorer(f"{py} -c 'print(\"{printed}\")' {{item_id}}").score_many(["q"])
        assert isinstance(r, ScorerError) and f"printed {printed!r} on stdout, which is not" in str(r), r


# ------------------------------------------------------------- batches lose nothing
def _script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "score.py"
    path.write_text(body)
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(path))}"


@posix_only
def test_a_batch_records_every_score_obtained_when_others_fail_or_hang(tmp_path: Path, small: ScoreMatrix) -> None:
    with Session.create(tmp_path / "probe.aeval", small, method="rs-mean", seed=1, max_items=8) as probe:
        first = [a.item_id for a in probe.ask(4)]
    hang, garbage, bad_range = first[1], first[2], first[3]
    script = _script(tmp_path, f"""\
import sys, time
item = sys.argv[1]
if item == {hang!r}:
    time.sleep(30)
if item == {garbage!r}:
    sys.stdout.buffer.write(b"\\xff\\xfe\\n")
    sys.stderr.buffer.write(b"\\xff")
    sys.exit(0)
print(7 if item == {bad_range!r} else 0.5)
""")
    path = tmp_path / "s.aeval"
    with Session.create(path, small, method="rs-mean", seed=1, max_items=8) as s:
        start = time.monotonic()
        with pytest.raises(ScorerError):
            drive(s, Scorer(f"{script} {{item_id}}", timeout=1, jobs=4), jobs=4)
        assert time.monotonic() - start < 3
    with Session.open(path, reference=small) as s:
        assert s.observations == ((first[0], 0.5),)
        assert set(s.pending) == {hang, garbage, bad_range}


def test_a_python_scorer_that_raises_costs_no_other_score(tmp_path: Path, small: ScoreMatrix) -> None:
    path = tmp_path / "s.aeval"
    calls: list[str] = []

    def score(item: str) -> float:
        calls.append(item)
        if len(calls) == 3:
            raise ValueError("model server returned 500")
        return "0.25" if len(calls) == 2 else 0.5  # a text is read as strictly as a command's output

    with Session.create(path, small, method="rs-mean", seed=2, max_items=8) as s:
        with pytest.raises(ScorerError, match="ValueError: model server returned 500") as info:
            drive(s, score, jobs=4)
        assert isinstance(info.value.__cause__, ValueError)
    with Session.open(path, reference=small) as s:
        assert s.observations == ((calls[0], 0.5), (calls[1], 0.25), (calls[3], 0.5))
        assert s.pending == (calls[2],)


# ------------------------------------------------------------- placeholders
def test_placeholders_are_substituted_in_one_pass() -> None:
    sc = Scorer("score --model {model} --item {item_id} --tag {model}/{item_id}", needs_model=True)
    assert sc.argv("q{model}1", "m{item_id}") == [
        "score", "--model", "m{item_id}", "--item", "q{model}1", "--tag", "m{item_id}/q{model}1"]
    assert Scorer("echo {item_id} {model}").argv("{model}") == ["echo", "{model}", "{model}"]


@posix_only
def test_multi_target_run_passes_item_ids_with_placeholder_text_verbatim(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    items = ["{model}", "{item_id}", "a{model}b"] + [f"q{i}" for i in range(17)]
    ref = ScoreMatrix(np.round(rng.uniform(size=(8, 20)), 2), [f"r{j}" for j in range(8)], items, name="odd")
    truth = {("ta", i): round(0.01 * k, 2) for k, i in enumerate(items)} | {
        ("tb", i): round(0.5 + 0.01 * k, 2) for k, i in enumerate(items)}
    script = _script(tmp_path, f"import sys\nprint({truth!r}[(sys.argv[1], sys.argv[2])])\n")
    path = tmp_path / "m.aeval"
    with MultiSession.create(path, ref, ["ta", "tb"], method="rs-mean", seed=0, max_items=20) as s:
        drive_multi(s, Scorer(f"{script} {{model}} {{item_id}}", needs_model=True, jobs=3), jobs=3)
        told = s.history()
    tells = [(e["model"], e["item_id"], e["score"]) for e in told if e["kind"] == "tell"]
    assert len(tells) == 40
    assert all(score == truth[(t, i)] for t, i, score in tells)


# ------------------------------------------------------------- lm-eval in the loop
def _fake_harness(samples: object):
    """An LmEvalHarness whose lm-eval run returns ``samples`` (or raises it), without loading lm-eval."""
    from types import SimpleNamespace

    from activeeval.session.drivers.lm_eval_harness import LmEvalHarness

    def simple_evaluate(**_: object) -> dict:
        if isinstance(samples, Exception):
            raise samples
        return {"samples": {"t": samples}}

    h = object.__new__(LmEvalHarness)
    h.model, h.model_args, h.task, h.metric, h.filter = "dummy", "", "t", "acc", None
    h.options, h._tasks, h._lms = {}, object(), {"": object()}
    h.verbose, h.output_path, h._samples, h._stamp = False, None, {}, None
    h._lm_eval = SimpleNamespace(simple_evaluate=simple_evaluate)
    return h


def test_lm_eval_harness_keeps_the_good_documents_of_a_batch() -> None:
    samples = [{"doc_id": 0, "acc": 1.0}, {"doc_id": 1, "acc": float("nan")}, {"doc_id": 2, "acc": [1]},
               {"doc_id": 3, "other": 1}, {"doc_id": 4, "acc": np.float64(0.0)}]
    out = _fake_harness(samples).score_many(["0", "1", "2", "3", "4", "5"])
    assert out[0] == 1.0 and out[4] == 0.0
    assert "score is nan" in str(out[1]) and "is not a number" in str(out[2]) and "no metric 'acc'" in str(out[3])
    assert "returned no sample for document 5" in str(out[5])
    assert all(isinstance(r, ScorerError) for r in out[1:4] + out[5:])


@pytest.mark.parametrize("returned", [RuntimeError("CUDA out of memory"), [{"acc": 1}], "not a list", [3]])
def test_lm_eval_harness_failures_are_per_batch_errors_not_exceptions(returned: object) -> None:
    out = _fake_harness(returned).score_many(["0", "1"])
    assert len(out) == 2 and all(isinstance(r, ScorerError) for r in out), out


@posix_only
def test_ranking_run_passes_item_ids_with_placeholder_text_verbatim(tmp_path: Path) -> None:
    from activeeval.session.drivers.runner import drive_ranking
    from activeeval.session.ranking import RankSession

    rng = np.random.default_rng(6)
    items = ["{model}", "{item_id}", "x{model}{item_id}"] + [f"q{i}" for i in range(3)]
    ref = ScoreMatrix(np.round(rng.uniform(size=(12, 6)), 2), [f"r{j}" for j in range(12)], items, name="odd")
    log = tmp_path / "argv.log"
    script = _script(tmp_path, f"import sys\nopen({str(log)!r}, 'a').write(repr(sys.argv[1:]) + '\\n')\n"
                               f"print(0.25 if sys.argv[2] in {items!r} and sys.argv[1] in ('a', 'b') else 'wrong')\n")
    with RankSession.create(tmp_path / "r.aeval", ref, ["a", "b"], method="rs-mean", seed=0, min_items=3,
                            budget_per_model=6) as s:
        drive_ranking(s, Scorer(f"{script} {{model}} {{item_id}}", needs_model=True))
    calls = [eval(line) for line in log.read_text().splitlines()]
    assert all(model in ("a", "b") and item in items for model, item in calls)
    assert sorted(calls) == sorted([m, i] for m in ("a", "b") for i in items)  # each item of each model, verbatim


_INTERRUPT_WHILE_STARTING = """
import sys, threading
from activeeval.session.drivers.runner import Scorer
start = threading.Thread.start
hit = []
def interrupted_start(self):  # Ctrl-C arriving while the first worker thread starts
    start(self)
    if not hit:
        hit.append(1)
        raise KeyboardInterrupt
threading.Thread.start = interrupted_start
scorer = Scorer(sys.argv[1], jobs=3)
try:
    scorer.score_pairs([(None, "a"), (None, "b"), (None, "c")])
except KeyboardInterrupt as exc:
    KEPT = exc  # the CLI's Exit keeps the interrupt (and its frames) alive until the interpreter exits
    print(type(exc).__name__, len(exc.partial))
"""


@posix_only
def test_ctrl_c_while_a_worker_starts_exits_and_never_hangs(tmp_path: Path) -> None:
    """CI caught `run --jobs 2` hanging after Ctrl-C: a ThreadPoolExecutor worker started but not yet registered
    waited on its queue for ever and the interpreter joined it at exit. The workers are daemon threads now."""
    script = tmp_path / "interrupt.py"
    script.write_text(_INTERRUPT_WHILE_STARTING)
    cmd = f"{shlex.quote(sys.executable)} -c 'import time; time.sleep(0.3); print(1)' {{item_id}}"
    import subprocess

    proc = subprocess.run([sys.executable, str(script), cmd], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["Interrupted", "3"]


def test_ctrl_c_during_a_parallel_batch_keeps_the_scores_obtained() -> None:
    """Interrupted.partial has one entry per pair: the score where it came, None where it did not."""
    import threading

    from activeeval.session.drivers.runner import Interrupted

    release = threading.Event()

    class Slow(Scorer):
        def __call__(self, item_id: str, model: str | None = None) -> float:
            if item_id == "slow":
                release.wait(5)
                raise KeyboardInterrupt  # stands for the main thread's Ctrl-C reaching result()
            return 0.25

    scorer = Slow("x {item_id}", jobs=2)
    with pytest.raises(Interrupted) as info:
        scorer.score_pairs([(None, "fast"), (None, "slow"), (None, "later")])
    release.set()
    assert info.value.partial[0] == 0.25
    assert len(info.value.partial) == 3
