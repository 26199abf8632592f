"""Interrupted backtests keep their finished tasks and resume to the uninterrupted result, bit for bit.

In Python (``run_backtest(checkpoint=...)``, on the local, Dask and Ray backends) and from the command
line (``--out``: Ctrl-C exits 130 and says how to resume; ``kill -9`` loses no finished task either).
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.experiments import runner
from activeeval.experiments.checkpoint import MANIFEST, TaskStore
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import BacktestInterrupted, run_backtest


def toy_matrix(n_models: int, n_items: int, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(np.sort(rng.normal(size=n_models))[:, None] - rng.normal(size=n_items)[None, :])))
    scores = (rng.random((n_models, n_items)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{j:02d}" for j in range(n_models)], [f"i{i}" for i in range(n_items)],
                       kind="binary", name="toy")

# bayesame-rs: copied from bayesame where it repeats it; the two-sided RS-Mean's intervals have shifts to keep
METHODS = ("rs-mean", "bayes-aipw", "bayesame", "bayesame-rs", "rs-mean[interval=wilson]")
CONFIG = BacktestConfig(methods=METHODS, n_targets=3, n_seeds=3, ref_fraction=0.5)
TOTAL = len(METHODS) * 3


@pytest.fixture(scope="module")
def matrix():
    return toy_matrix(n_models=24, n_items=30)


@pytest.fixture(scope="module")
def uninterrupted(matrix):
    return run_backtest(matrix, CONFIG, workers=1)


def _same(a, b) -> None:
    for name in METHODS:
        np.testing.assert_array_equal(a.means[name], b.means[name])  # bit-identical, no tolerance
        np.testing.assert_array_equal(a.vars[name], b.vars[name])
    assert set(a.shifts) == set(b.shifts) == {"rs-mean[interval=wilson]"}
    for name in a.shifts:
        np.testing.assert_array_equal(a.shifts[name], b.shifts[name])


def _interrupt_after(k: int):
    def progress(done: int, total: int) -> None:
        if done == k:
            raise KeyboardInterrupt  # as Ctrl-C would, right after the k-th task was kept
    return progress


def _interrupted_checkpoint(matrix, folder: Path, k: int = 5) -> None:
    with pytest.raises(BacktestInterrupted) as info:
        run_backtest(matrix, CONFIG, workers=1, checkpoint=folder, progress=_interrupt_after(k))
    assert (info.value.done, info.value.total, info.value.checkpoint) == (k, TOTAL, folder)
    assert len(TaskStore(folder, runner.run_identity(matrix, CONFIG)).names()) == k


def test_resume_computes_only_the_missing_tasks_and_equals_the_uninterrupted_run(matrix, uninterrupted, tmp_path,
                                                                                monkeypatch) -> None:
    folder = tmp_path / "tasks"
    _interrupted_checkpoint(matrix, folder)
    computed = []
    real = runner.play_task

    def counting(*args):
        computed.append(args[3:])
        return real(*args)

    monkeypatch.setattr(runner, "play_task", counting)
    calls = []
    resumed = run_backtest(matrix, CONFIG, workers=1, checkpoint=folder, progress=lambda d, t: calls.append(d))
    assert len(computed) == TOTAL - 5 and calls == list(range(1, TOTAL + 1))
    _same(uninterrupted, resumed)
    again = run_backtest(matrix, CONFIG, workers=1, checkpoint=folder)  # everything kept: nothing computed again
    assert len(computed) == TOTAL - 5
    _same(uninterrupted, again)


def test_a_checkpoint_of_another_run_is_refused_and_a_cut_write_is_no_task(matrix, tmp_path) -> None:
    folder = tmp_path / "tasks"
    _interrupted_checkpoint(matrix, folder, k=2)
    (folder / ".task-00-00009.npz.abc.tmp").write_bytes(b"half a file")  # what a kill -9 mid-write leaves
    other = BacktestConfig(methods=METHODS, n_targets=3, n_seeds=4, ref_fraction=0.5)
    with pytest.raises(ConfigurationError, match=r"holds the finished tasks of another run \(it differs in "
                                                 r"settings\.n_seeds\); re-run the command that started it"):
        run_backtest(matrix, other, workers=1, checkpoint=folder)
    assert len(TaskStore(folder, runner.run_identity(matrix, CONFIG)).names()) == 2
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigurationError, match=f"is not empty and holds no {MANIFEST}; choose a new folder"):
        run_backtest(matrix, CONFIG, workers=1, checkpoint=tmp_path / "stray")


def test_kept_tasks_read_back_exactly(matrix, tmp_path) -> None:
    folder = tmp_path / "tasks"
    _interrupted_checkpoint(matrix, folder, k=TOTAL - 1)
    store = TaskStore(folder, runner.run_identity(matrix, CONFIG))
    direct = runner.run_task(matrix, CONFIG, runner.backtest_split(matrix, CONFIG), "bayesame", 0)
    data = store.load_arrays("task-02-00000")
    assert (str(data["method"]), int(data["seed"])) == ("bayesame", 0)
    assert data["means"].tobytes() == direct[2].tobytes() and data["vars"].tobytes() == direct[3].tobytes()
    assert "shifts" not in data  # symmetric intervals: nothing more is stored
    played = runner.play_task(matrix, CONFIG, runner.backtest_split(matrix, CONFIG), "rs-mean[interval=wilson]", 0)
    data = store.load_arrays("task-04-00000")
    assert played[4] is not None and data["shifts"].tobytes() == played[4].tobytes()


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="dask[distributed] not installed")
def test_dask_resumes_a_local_checkpoint_to_the_same_result(matrix, uninterrupted, tmp_path) -> None:
    folder = tmp_path / "tasks"
    _interrupted_checkpoint(matrix, folder)
    _same(uninterrupted, run_backtest(matrix, CONFIG, workers=2, backend="dask", checkpoint=folder))


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (pip install 'activeeval[ray]')")
def test_ray_resumes_a_local_checkpoint_to_the_same_result(matrix, uninterrupted, tmp_path) -> None:
    folder = tmp_path / "tasks"
    _interrupted_checkpoint(matrix, folder)
    _same(uninterrupted, run_backtest(matrix, CONFIG, workers=2, backend="ray", checkpoint=folder))


# ------------------------------------------------------------------ the command line, with real signals
CLI_ARGS = ["backtest", "--methods", "bayes-aipw,rs-mean", "--orders", "independent", "--targets", "2", "--seeds", "8",
            "--format", "csv", "--no-plots", "--no-progress"]


def _cli(dataset: Path, out: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "activeeval", *CLI_ARGS, "--dataset", str(dataset), "--out", str(out),
            "--workers", str(workers)]


@pytest.fixture(scope="module")
def cli_data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume_cli")
    dataset = write_scores(toy_matrix(n_models=30, n_items=80, seed=3), folder / "toy.csv")
    straight = folder / "straight"
    r = subprocess.run(_cli(dataset, straight, 1), capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return dataset, straight


def _stop_after_first_task(cmd: list[str], out: Path, sig: int, log: Path) -> tuple[int, str]:
    """(exit code, stderr) of ``cmd`` sent ``sig`` once it has kept a task. Its output goes to a file: after a
    kill -9 its workers, which hold the same output, are only gone once they notice (within a second)."""
    with open(log, "w") as fh:
        # a child of a background job (`cmd &` in a script) ignores SIGINT, and so would this one: Ctrl-C's default
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=fh,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 300
        while not list((out / "tasks").glob("task-*.npz")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(proc.pid, sig)
        code = proc.wait(timeout=300)
    return code, log.read_text()


@pytest.mark.parametrize("sig, workers", [(signal.SIGINT, 1), (signal.SIGKILL, 2)], ids=["ctrl-c", "kill-9"])
def test_cli_keeps_finished_tasks_and_resumes_to_the_same_files(cli_data, tmp_path, sig, workers) -> None:
    dataset, straight = cli_data
    out = tmp_path / "out"
    code, stderr = _stop_after_first_task(_cli(dataset, out, workers), out, sig, tmp_path / "stderr.txt")
    kept = sorted(p.name for p in (out / "tasks").glob("task-*.npz"))
    assert kept and len(kept) < 16, "the run must be stopped part-way"
    assert [p.name for p in out.iterdir()] == ["tasks"]
    if sig == signal.SIGINT:
        assert code == 130
        assert stderr.strip().splitlines()[-1] == (
            f"interrupted: {len(kept)} finished task(s) kept in {str(out)!r}; re-run the same command to resume")
    else:
        assert code == -signal.SIGKILL
    resumed = subprocess.run(_cli(dataset, out, workers), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert not (out / "tasks").exists()  # kept until the results were written
    for name in ("runs.csv", "stops.csv", "curves.csv", "cost_accuracy.csv", "config.json"):
        assert (out / name).read_bytes() == (straight / name).read_bytes(), name
    summary, expected = (json.loads((d / "summary.json").read_text()) for d in (out, straight))
    assert summary["methods"] == expected["methods"]


# ------------------------------------------------------------------ the ranking backtest
RANK = dict(method="cat", folds=2, holdout=3, seeds=2, budget_per_model=4.0, min_items=2)


@pytest.fixture(scope="module")
def rank_data(tmp_path_factory):
    from activeeval.experiments.ranking_eval import run_rank_backtest

    matrix = toy_matrix(n_models=20, n_items=40, seed=5)
    path = write_scores(matrix, tmp_path_factory.mktemp("rank") / "toy.csv")
    return matrix, run_rank_backtest(matrix, **RANK), path


def _text(records) -> list[str]:
    from activeeval.experiments.ranking_eval import record_to_json

    return [json.dumps(record_to_json(r), sort_keys=True) for r in records]  # NaN-safe, exact: the stored form


def test_rank_records_read_back_exactly(rank_data) -> None:
    import dataclasses

    from activeeval.experiments.ranking_eval import record_from_json, record_to_json

    _, records, _ = rank_data
    rec = records[0]
    a, b = rec.adaptive.ranking[:2]
    joint = dataclasses.replace(rec, adaptive=dataclasses.replace(rec.adaptive, covariances={frozenset((a, b)): -0.25}),
                                tie_precision=float("nan"))  # what a joint method and an empty tie set give
    for r in (*records, joint):
        back = record_from_json(json.loads(json.dumps(record_to_json(r))))
        assert _text([back]) == _text([r])
        assert back.adaptive == r.adaptive and back.models == r.models


def test_rank_backtest_resumes_to_the_same_records_and_the_cli_to_the_same_summary(rank_data, tmp_path) -> None:
    from typer.testing import CliRunner

    from activeeval.cli import app
    from activeeval.experiments.ranking_eval import run_rank_backtest

    matrix, records, path = rank_data
    folder = tmp_path / "out" / "tasks"
    with pytest.raises(BacktestInterrupted) as info:
        run_rank_backtest(matrix, **RANK, checkpoint=folder, progress=_interrupt_after(2))
    assert (info.value.done, info.value.total) == (2, 4)
    assert _text(run_rank_backtest(matrix, **RANK, checkpoint=folder)) == _text(records)
    (folder / "run-00001-00.json").unlink()  # as if stopped after the first two: the command line resumes it
    (folder / "run-00001-01.json").unlink()
    args = ["rank-backtest", "--dataset", str(path), "--method", "cat", "--folds", "2", "--holdout", "3", "--seeds",
            "2", "--budget-per-model", "4", "--min-items", "2", "--json"]
    other = CliRunner().invoke(app, [*args, "--gamma", "0.9", "--out", str(tmp_path / "out")])
    assert other.exit_code == 2
    assert other.stderr.startswith(f"error: --out {str(folder)!r} holds the finished tasks of another run (it differs "
                                   "in settings.gamma); re-run the command that started it")
    r = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    assert r.stdout == CliRunner().invoke(app, args).stdout
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".activeeval-results", "records.jsonl",
                                                                    "summary.json"]
    lines = (tmp_path / "out" / "records.jsonl").read_text().splitlines()
    assert [json.dumps(json.loads(line), sort_keys=True) for line in lines] == _text(records)
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == json.loads(r.stdout)


def test_reproduce_keeps_every_finished_task_and_resumes(tmp_path, monkeypatch) -> None:
    """`reproduce table1 --out`: Ctrl-C in its second run (here: raised by the 5th task) keeps the first run's tasks
    and the second's finished ones; the same command then ends with the uninterrupted run's numbers."""
    from typer.testing import CliRunner

    from activeeval.cli import app

    args = ["reproduce", "table1", "--seeds", "2", "--datasets", "ifeval", "--methods", "rs-mean,seq-apw",
            "--workers", "1", "--format", "csv", "--no-progress", "--json"]
    straight = CliRunner().invoke(app, args)
    assert straight.exit_code == 0, straight.output
    out = tmp_path / "out"
    real, calls = runner.play_task, []

    def stop_at_fifth(*a):
        calls.append(a[3:])
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(*a)

    monkeypatch.setattr(runner, "play_task", stop_at_fifth)
    r = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 130
    assert r.stderr.strip() == (f"interrupted: 4 finished task(s) kept in {str(out)!r}; re-run the same command to "
                                "resume")
    assert sorted(p.name for p in (out / "tasks" / "ifeval_interpolation").glob("task-*")) == [
        "task-00-00000.npz", "task-00-00001.npz", "task-01-00000.npz", "task-01-00001.npz"]
    assert [p.name for p in out.iterdir()] == ["tasks"]
    monkeypatch.setattr(runner, "play_task", real)
    r = CliRunner().invoke(app, [*args, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["rows"] == json.loads(straight.stdout)["rows"]
    assert "tasks" not in {p.name for p in out.iterdir()} and (out / "table1.json").exists()
