"""Inspect AI in the loop, for real: its mock model on a small local task, no network.

The test writes a task file whose samples ask for the answer the mock model
(``mockllm/model``) always gives on some of them, so its true per-sample
score is known. The reference models' logs are written by the real Inspect
(``inspect_ai.eval``) with mock models that answer each sample right or
wrong by a fixed rule, in both log formats (``.eval`` and ``.json``), one of
them over two epochs. Then, from the command line as a user would:

1. ``activeeval reference build --from inspect LOGS`` (item ids = sample ids);
2. ``activeeval run --harness inspect --task FILE@quiz --model mockllm/model`` to a budget;
3. the same command with a larger ``--max-items`` resumes; the journal equals a
   session driven in Python with the mock model's known scores;
4. ``activeeval rank --harness inspect --models mockllm/a,mockllm/b``;
5. errors (a task or model that does not exist, samples the task lacks, a
   sample that fails) end in one line naming the fix, and every score
   obtained before is kept; Ctrl-C (SIGINT to a real ``activeeval run``
   process) while Inspect runs stops it with exit code 130, the batch pending.

Inspect runs in this process (as ``activeeval run`` runs it), so the test
stays within seconds; tests/integration/offline/offline_mockllm.py says why
the mock model needs a tokenizer stand-in offline.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.adapters import reference_from_inspect
from activeeval.data.io import read_scores
from activeeval.session import Session
from activeeval.session.drivers.runner import drive

pytest.importorskip("inspect_ai", reason='inspect-ai is not installed (pip install "activeeval[inspect]")')

sys.path.insert(0, str(Path(__file__).parent / "offline"))
import offline_mockllm

N = 18
N_REFS = 6
ANSWER = "Default output from mockllm/model"  # what Inspect's mockllm/model always answers

TASK_FILE = '''
from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, match, scorer, accuracy
from inspect_ai.solver import generate, solver

ANSWER = "Default output from mockllm/model"

def target(i):
    return ANSWER if i % 3 == 0 else f"A{i}"

@task
def quiz(n: int = N):
    return Task(dataset=[Sample(id=f"q{i}", input=f"Q{i}: say it", target=target(i)) for i in range(n)],
                solver=generate(), scorer=match())

@scorer(metrics={"grade": [accuracy()], "length": [accuracy()]})
def graded():
    async def score(state, target):
        text = state.output.completion
        grade = "C" if text == target.text else ("P" if "output" in text else "I")
        return Score(value={"grade": grade, "length": len(text) / 100})
    return score

@task
def graded_quiz():
    return Task(dataset=[Sample(id=i, input=f"Q{i}: say it", target=target(i)) for i in range(12)],
                solver=generate(), scorer=graded())

@solver
def fails_on_q2():
    async def solve(state, generate):
        if state.sample_id == "q2":
            raise RuntimeError("the model server went away on q2")
        return await generate(state)
    return solve

@solver
def hangs_after_two():
    """Answers two samples, then hangs (a model server that stopped answering): for the Ctrl-C test."""
    import asyncio, os
    calls = os.path.join(os.path.dirname(__file__), "calls")
    async def solve(state, generate):
        os.makedirs(calls, exist_ok=True)
        n = len(os.listdir(calls))
        open(os.path.join(calls, str(state.sample_id)), "w").close()
        if n >= 2:
            await asyncio.sleep(600)
        return await generate(state)
    return solve

@task
def hangs():
    return Task(dataset=[Sample(id=f"q{i}", input=f"Q{i}: say it", target=target(i)) for i in range(N)],
                solver=hangs_after_two(), scorer=match())

@task
def flaky():
    return Task(dataset=[Sample(id=f"q{i}", input=f"Q{i}: say it", target=target(i)) for i in range(N)],
                solver=fails_on_q2(), scorer=match())
'''.replace("range(N)", f"range({N})").replace("n: int = N", f"n: int = {N}")


def _target(i: int) -> str:
    return ANSWER if i % 3 == 0 else f"A{i}"


def _right(i: int, k: int) -> bool:
    return (i * 3 + 2 * k) % 11 < 3 + k % 5


TRUTH = {f"q{i}": float(_target(i) == ANSWER) for i in range(N)}  # the mock model's true score per sample


@pytest.fixture(scope="module", autouse=True)
def _offline() -> Iterator[None]:
    """The mock model's tokenizer stand-in for this module's tests, removed after them."""
    import tiktoken.registry

    before = tiktoken.registry.ENCODINGS.get("o200k_base")
    tiktoken.registry.ENCODINGS["o200k_base"] = offline_mockllm.stand_in()
    yield
    if before is None:
        del tiktoken.registry.ENCODINGS["o200k_base"]
    else:
        tiktoken.registry.ENCODINGS["o200k_base"] = before


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    """The task file and the reference models' logs (written by the real Inspect)."""
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import ModelOutput, get_model

    root = tmp_path_factory.mktemp("inspect")
    (root / "tasks.py").write_text(TASK_FILE)
    task = f"{root / 'tasks.py'}@quiz"

    def answers(k: int, alternate: bool = False):
        calls: dict[int, int] = {}

        def answer(messages, tools, tool_choice, config):
            i = int(messages[-1].text.split(":")[0][1:])
            calls[i] = calls.get(i, 0) + 1
            right = calls[i] % 2 == 1 if alternate else _right(i, k)
            return ModelOutput.from_content(model=f"ref-{k}", content=_target(i) if right else "no idea")
        return answer

    for fmt, first in (("eval", 0), ("json", 1)):  # one Inspect run per log format, the models run side by side
        models = [get_model(f"mockllm/ref-{k}", custom_outputs=answers(k)) for k in range(first, N_REFS, 2)]
        inspect_eval(task, model=models, log_dir=str(root / "logs"), log_format=fmt, display="none", ctl_server=False)
    # Two more models, for the reader: one over two epochs (right on the first, wrong on the second), one on
    # a third of the samples only.
    inspect_eval(task, model=get_model("mockllm/two-epochs", custom_outputs=answers(0, alternate=True)), epochs=2,
                 log_dir=str(root / "more"), display="none", ctl_server=False)
    inspect_eval(task, model=get_model("mockllm/partial", custom_outputs=answers(1)), limit=N // 3,
                 log_dir=str(root / "more"), display="none", ctl_server=False)
    return {"root": root, "file": root / "tasks.py", "task": Path(task), "logs": root / "logs", "more": root / "more"}


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def error(r) -> str:
    """The command's error line (pytest shows Inspect's deprecation warnings, which the CLI prints after it)."""
    return next(line for line in r.stderr.splitlines() if line.startswith("error: "))


def _reference(setup: dict[str, Path], tmp_path: Path) -> Path:
    ref = tmp_path / "ref.csv"
    r = invoke(["reference", "build", "--from", "inspect", str(setup["logs"]), "--out", str(ref)])
    assert r.exit_code == 0, r.output
    return ref


def test_reference_from_inspect_logs(setup, tmp_path) -> None:
    ref = _reference(setup, tmp_path)
    matrix = read_scores(ref)
    assert sorted(matrix.model_ids) == [f"mockllm/ref-{k}" for k in range(N_REFS)]  # named from the logs
    assert list(matrix.item_ids) == [f"q{i}" for i in range(N)]
    for k in range(N_REFS):
        assert list(matrix.model_scores(f"mockllm/ref-{k}")) == [float(_right(i, k)) for i in range(N)]

    both = reference_from_inspect([setup["logs"], setup["more"]])  # files and folders of any models
    epochs = both.model_scores("mockllm/two-epochs")
    assert list(epochs) == [0.5] * N  # right on one epoch of two: the mean
    partial = both.model_scores("mockllm/partial")
    assert [math.isnan(x) for x in partial] == [i >= N // 3 for i in range(N)]  # not run: missing
    assert list(partial[: N // 3]) == [float(_right(i, 1)) for i in range(N // 3)]
    r = invoke(["reference", "build", "--from", "inspect", str(setup["logs"]), str(setup["more"]), "--out",
                str(tmp_path / "both.csv")])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"wrote {tmp_path / 'both.csv'}: {N_REFS + 2} models x {N} items, continuous, "
                               f"{N - N // 3} missing scores (Inspect task 'quiz'")


def test_run_and_resume_with_the_real_harness(setup, tmp_path) -> None:
    ref = _reference(setup, tmp_path)
    harness = ["--harness", "inspect", "--task", str(setup["task"]), "--model", "mockllm/model", "--log-dir",
               str(tmp_path / "inspect-logs"), "--k", "4"]
    common = ["--reference", str(ref), "--seed", "0", "--method", "bayesame-rs", "--json"]
    first = invoke(["run", *harness, *common, "--session", str(tmp_path / "s.aeval"), "--max-items", "8"])
    assert first.exit_code == 0, first.output
    st = json.loads(first.stdout)
    assert (st["n_used"], st["stop_reason"], st["pending"]) == (8, "budget", [])
    assert len(list((tmp_path / "inspect-logs").glob("*.eval"))) == 2  # one Inspect run per batch of --k 4
    with Session.open(tmp_path / "s.aeval") as s:
        recorded = s.observations
    assert all(score == TRUTH[iid] for iid, score in recorded)  # exactly what the mock model scored
    assert {score for _, score in recorded} == {0.0, 1.0}

    resumed = invoke(["run", *harness, *common, "--session", str(tmp_path / "s.aeval"), "--max-items", "12"])
    assert resumed.exit_code == 0, resumed.output
    assert "changed max-items: 8 -> 12 (recorded in the journal)" in resumed.stderr
    assert json.loads(resumed.stdout)["n_used"] == 12  # stdout: the result alone
    with Session.create(tmp_path / "t.aeval", ref, method="bayesame-rs", seed=0, max_items=12) as t:
        drive(t, lambda iid: TRUTH[iid], jobs=4)  # the same session, scored by a lookup of the true scores
        expected = t.observations
    with Session.open(tmp_path / "s.aeval") as s:
        assert s.observations[:8] == recorded
        assert s.observations == expected  # Inspect recorded each sample's score, in the order asked


def test_scorer_choice_and_value_map(setup, tmp_path) -> None:
    """A scorer with several values (C/I/P and a number): --score-name picks one, --value-map maps strings."""
    import numpy as np

    from activeeval.data.io import write_scores
    from activeeval.data.matrix import ScoreMatrix

    ids = [str(i) for i in range(12)]  # integer sample ids, as text
    ref = tmp_path / "ref.csv"
    write_scores(ScoreMatrix(np.random.default_rng(0).random((5, 12)), [f"m{k}" for k in range(5)], ids), ref)
    task = f"{setup['file']}@graded_quiz"
    base = ["run", "--harness", "inspect", "--task", task, "--model", "mockllm/model", "--reference", str(ref),
            "--log-dir", str(tmp_path / "logs"), "--max-items", "12", "--k", "12", "--method", "rs-mean"]
    r = invoke([*base, "--session", str(tmp_path / "a.aeval")])
    assert r.exit_code == 2
    assert error(r).startswith("error: Inspect log ")
    assert "the score has several values ['grade', 'length']" in r.stderr
    assert "--score-name SCORER/KEY" in r.stderr and "score_name=" not in r.stderr  # the CLI user's fix: the flag
    r = invoke([*base, "--session", str(tmp_path / "b.aeval"), "--score-name", "graded/grade", "--value-map", "P=0.25"])
    assert r.exit_code == 0, r.output
    with Session.open(tmp_path / "b.aeval") as s:  # C on the mock's samples, partial (its text has "output") else
        assert dict(s.observations) == {str(i): 1.0 if i % 3 == 0 else 0.25 for i in range(12)}
    r = invoke([*base, "--session", str(tmp_path / "c.aeval"), "--score-name", "graded/length"])
    assert r.exit_code == 0, r.output
    with Session.open(tmp_path / "c.aeval") as s:
        assert dict(s.observations) == {str(i): len(ANSWER) / 100 for i in range(12)}


def test_errors_name_the_fix_and_keep_the_scores(setup, tmp_path) -> None:
    ref = _reference(setup, tmp_path)
    base = ["run", "--harness", "inspect", "--reference", str(ref), "--log-dir", str(tmp_path / "logs"),
            "--method", "rs-mean", "--seed", "1"]
    task = str(setup["file"])

    r = invoke([*base, "--task", f"{task[:-3]}_nope.py@quiz", "--model", "mockllm/model", "--session",
                str(tmp_path / "a.aeval")])
    assert r.exit_code == 2
    assert error(r).startswith(f"error: Inspect could not load task '{task[:-3]}_nope.py@quiz': ")
    assert "give --task as FILE.py@TASK (a task file) or a registered task name" in r.stderr
    r = invoke([*base, "--task", f"{task}@nope", "--model", "mockllm/model", "--session", str(tmp_path / "a.aeval")])
    assert r.exit_code == 2 and "Task named 'nope' not found" in r.stderr
    r = invoke([*base, "--task", f"{task}@quiz", "--model", "nosuchprovider/x", "--session", str(tmp_path / "a.aeval")])
    assert r.exit_code == 2
    assert error(r).startswith("error: Inspect could not create model 'nosuchprovider/x': ")
    assert "give --model as PROVIDER/MODEL" in r.stderr
    assert not (tmp_path / "a.aeval").exists()  # refused before a session was created

    # The task with 10 samples (--task-arg n=10) against a reference of 18: the 10 it has are scored and recorded,
    # the others stay pending, and the message says how to fix the reference.
    r = invoke([*base, "--task", f"{task}@quiz", "--task-arg", "n=10", "--model", "mockllm/model", "--max-items",
                str(N), "--k", str(N), "--session", str(tmp_path / "b.aeval")])
    assert r.exit_code == 2
    assert error(r).startswith("error: Inspect task 'quiz' has no sample 'q1")
    assert "build it with `activeeval reference build --from inspect LOGS` from logs of this task (with the same " \
           "--task-arg)" in r.stderr
    with Session.open(tmp_path / "b.aeval") as s:
        assert dict(s.observations) == {f"q{i}": TRUTH[f"q{i}"] for i in range(10)}
        assert sorted(s.pending) == sorted(f"q{i}" for i in range(10, N))

    # A sample that fails (the model server went away): the others are recorded; re-running retries it.
    r = invoke([*base, "--task", f"{task}@flaky", "--model", "mockllm/model", "--max-items", str(N), "--k", str(N),
                "--session", str(tmp_path / "c.aeval")])
    assert r.exit_code == 2
    assert error(r).startswith(
        "error: Inspect sample 'q2' of task 'flaky' failed: RuntimeError('the model server went away on q2')")
    assert "fix the cause and re-run the same command to retry it" in r.stderr
    with Session.open(tmp_path / "c.aeval") as s:
        assert dict(s.observations) == {iid: v for iid, v in TRUTH.items() if iid != "q2"}
        assert s.pending == ("q2",)


def test_rank_with_the_real_harness(setup, tmp_path) -> None:
    """`rank --harness inspect`: the ranked ids are Inspect models; each is created once and kept."""
    from activeeval.session.ranking import RankSession

    ref = _reference(setup, tmp_path)
    r = invoke(["rank", "--session", str(tmp_path / "r.aeval"), "--reference", str(ref), "--models",
                "mockllm/a,mockllm/b", "--harness", "inspect", "--task", str(setup["task"]), "--log-dir",
                str(tmp_path / "logs"), "--method", "rs-mean", "--budget-per-model", "4", "--min-items", "2", "--json"])
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert st["stop_reason"] == "budget" and sum(st["items_per_model"].values()) == 8
    with RankSession.open(tmp_path / "r.aeval") as s:
        tells = [e for e in s.history() if e["kind"] == "tell"]
    assert {e["model"] for e in tells} == {"mockllm/a", "mockllm/b"}
    assert all(e["score"] == TRUTH[e["item_id"]] for e in tells)  # both are the mock model: its real scores
    from inspect_ai.log import list_eval_logs, read_eval_log

    assert {read_eval_log(info, header_only=True).eval.model for info in list_eval_logs(str(tmp_path / "logs"))} \
        == {"mockllm/a", "mockllm/b"}


def test_ctrl_c_while_inspect_runs(setup, tmp_path) -> None:
    """SIGINT in the middle of an Inspect run: Inspect cancels it, the run exits 130, nothing recorded is lost."""
    import os
    import signal
    import subprocess
    import time

    ref = _reference(setup, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent / "offline")}
    session = tmp_path / "s.aeval"
    proc = subprocess.Popen(
        [sys.executable, "-m", "activeeval", "run", "--harness", "inspect", "--task", f"{setup['file']}@hangs",
         "--model", "mockllm/model", "--reference", str(ref), "--session", str(session), "--k", "2", "--method",
         "rs-mean", "--seed", "0", "--log-dir", str(tmp_path / "logs")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # a child of a background job ignores it
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # the first batch of two is recorded, the second hangs in Inspect
            if session.exists():
                with Session.open(session, readonly=True) as s:
                    if len(s.observations) == 2 and len(s.pending) == 2:
                        break
            time.sleep(0.2)
        else:
            pytest.fail("the first batch was not recorded")
        time.sleep(1.0)  # Inspect is waiting on the hung samples now
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert err.splitlines()[-1] == "interrupted: 2 scores recorded, re-run to resume"
    with Session.open(session) as s:
        assert len(s.observations) == 2 and len(s.pending) == 2
        assert all(score == TRUTH[iid] for iid, score in s.observations)
    from inspect_ai.log import list_eval_logs, read_eval_log

    statuses = sorted(read_eval_log(i, header_only=True).status for i in list_eval_logs(str(tmp_path / "logs")))
    assert statuses == ["cancelled", "success"]  # Inspect's own log of the cancelled run is kept


def test_inspect_runs_with_its_own_blas_threads(setup, tmp_path, monkeypatch) -> None:
    """`run --harness inspect` runs Inspect in this process: activeeval's BLAS thread limit (activeeval._threads)
    holds in its own work (here: recording a score) and is lifted for each Inspect call (and model loading)."""
    import functools

    import inspect_ai
    import inspect_ai.model
    from threadpoolctl import threadpool_info, threadpool_limits

    ref = _reference(setup, tmp_path)
    monkeypatch.delenv("ACTIVEEVAL_THREADS", raising=False)
    ours = {d["filepath"] for d in threadpool_info() if d["user_api"] == "blas"}  # NumPy's and SciPy's

    def blas() -> set[int]:
        return {d["num_threads"] for d in threadpool_info() if d["filepath"] in ours}

    seen: dict[str, list[set[int]]] = {"inspect": [], "model": [], "activeeval": []}
    real_eval, real_model, real_tell = inspect_ai.eval, inspect_ai.model.get_model, Session.tell

    @functools.wraps(real_eval)
    def evaluate(*args, **kwargs):
        seen["inspect"].append(blas())
        return real_eval(*args, **kwargs)

    @functools.wraps(real_model)
    def get_model(*args, **kwargs):
        seen["model"].append(blas())
        return real_model(*args, **kwargs)

    def tell(self, *args, **kwargs):
        seen["activeeval"].append(blas())
        return real_tell(self, *args, **kwargs)

    monkeypatch.setattr(inspect_ai, "eval", evaluate)
    monkeypatch.setattr(inspect_ai.model, "get_model", get_model)
    monkeypatch.setattr(Session, "tell", tell)
    with threadpool_limits(3, user_api="blas"):  # the process's own setting: no machine's default, not the limit
        r = invoke(["run", "--harness", "inspect", "--task", str(setup["task"]), "--model", "mockllm/model",
                    "--log-dir", str(tmp_path / "logs"), "--k", "4", "--reference", str(ref), "--seed", "0",
                    "--method", "bayesame", "--session", str(tmp_path / "s.aeval"), "--max-items", "8"])
        assert r.exit_code == 0, r.output
        assert blas() == {3}  # given back when the command ends
    # the task is loaded (a run of no samples) before numeric work starts: the limit is not applied yet then
    assert seen == {"inspect": [{3}] * 3, "model": [{3}], "activeeval": [{1}] * 8}
