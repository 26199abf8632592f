"""Ranking new models for real (issue 10, item 2): a crash-safe multi-target session, from Python and the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import ConfigurationError, DuplicateObservationError, StorageError, UnknownModelError
from activeeval.methods.registry import make_method
from activeeval.ranking import AdaptiveRanker
from activeeval.session import Session
from activeeval.session.ranking import RankSession

runner = CliRunner()
MODELS = 3


@pytest.fixture(scope="module")
def alpaca() -> tuple:
    full, _ = datasets.load("alpacaeval2").dropna("models")
    models = list(full.model_ids[:MODELS])
    truth = {m: dict(zip(full.item_ids, map(float, full.model_scores(m)))) for m in models}
    return full.drop_models(models), models, truth


@pytest.fixture()
def ref_file(tmp_path: Path, alpaca) -> Path:
    return write_scores(alpaca[0], tmp_path / "ref.csv")


def test_rank_session_decides_like_the_ranker_and_survives_reopening(tmp_path, ref_file, alpaca) -> None:
    ref, models, truth = alpaca
    s = RankSession.create(tmp_path / "r.aeval", ref_file, models, seed=3, budget_per_model=12)
    n = 0
    while (a := s.ask()) is not None:
        assert s.ask() == a  # pending until told: asking again hands out the same (model, item)
        if n % 5 == 2:
            s.close()
            s = RankSession.open(tmp_path / "r.aeval")
        s.tell(a.model, a.item_id, truth[a.model][a.item_id])
        n += 1
    st = s.status()
    s.close()
    direct = AdaptiveRanker(models, lambda m: make_method("cat", ref, seed=3),
                            lambda m, i: truth[m][ref.item_ids[i]], budget=12 * MODELS).run()
    assert st.result.ranking == direct.ranking
    assert st.result.items_per_model == direct.items_per_model
    assert st.result.items == direct.items
    assert st.stop_reason == direct.stop_reason == "budget"
    assert n == 12 * MODELS
    d = st.to_dict()
    assert [p["higher"] for p in d["adjacent_pairs"]] == list(st.result.ranking[:-1])
    assert all(0.5 <= p["confidence"] <= 1 for p in d["adjacent_pairs"])
    assert d["ties"] == [[p["higher"], p["lower"]] for p in d["adjacent_pairs"] if not p["decided"]]


def test_rank_session_errors_write_nothing(tmp_path, ref_file, alpaca) -> None:
    _, models, truth = alpaca
    with pytest.raises(ConfigurationError, match=r"need at least 2 models to rank, got 1"):
        RankSession.create(tmp_path / "x.aeval", ref_file, models[:1])
    assert not (tmp_path / "x.aeval").exists()
    with RankSession.create(tmp_path / "r.aeval", ref_file, models, seed=0) as s:
        a = s.ask()
        with pytest.raises(UnknownModelError, match="model 'nobody' is not ranked in session"):
            s.tell("nobody", a.item_id, 0.5)
        s.tell(a.model, a.item_id, truth[a.model][a.item_id])
        with pytest.raises(DuplicateObservationError) as refused:
            s.tell(a.model, a.item_id, 1 - truth[a.model][a.item_id])
        old = truth[a.model][a.item_id]  # the ranking's own wording, kept when its tell joined the shared path
        assert str(refused.value) == (f"item '{a.item_id}' of model '{a.model}' already has score {old:g} recorded; "
                                      f"refusing to change it to {1 - old:g} (recorded scores are never altered)")
        assert s.tell(a.model, a.item_id, truth[a.model][a.item_id]) is False  # the same score again: a no-op
        assert s.n_scored == 1
        assert [e["kind"] for e in s.history()] == ["ask", "tell"]
    with pytest.raises(StorageError, match="is a rank session, not a single one; open it with `activeeval rank`"):
        Session.open(tmp_path / "r.aeval")


SCORER = """\
import json, sys
model, item = sys.argv[2], sys.argv[3]
print(json.load(open(sys.argv[1]))[model][item])
"""


def test_rank_cli_with_a_scorer_command_then_status(tmp_path, ref_file, alpaca) -> None:
    _, models, truth = alpaca
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    (tmp_path / "score.py").write_text(SCORER)
    scorer = f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 'truth.json'} {{model}} {{item_id}}"
    f = tmp_path / "r.aeval"
    args = ["rank", "--session", str(f), "--reference", str(ref_file), "--models", ",".join(models),
            "--scorer", scorer, "--budget-per-model", "6", "--min-items", "3", "--seed", "1"]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    lines = [line for line in r.stdout.splitlines() if not line.startswith("note (")]
    assert lines[0].split() == ["rank", "model", "score", "interval", "items"]
    assert [line.split()[1] for line in lines[1:1 + MODELS]] and len(lines) == 1 + MODELS + (MODELS - 1) + 2
    assert lines[-1] == f"cost spent {6 * MODELS} of budget {6 * MODELS}; stop: yes (budget)"
    st = json.loads(runner.invoke(app, ["session", "status", str(f), "--json"]).stdout)
    assert st["stop_reason"] == "budget" and sum(st["items_per_model"].values()) == 6 * MODELS
    text = runner.invoke(app, ["session", "status", str(f)]).stdout
    assert text.count("P(") == MODELS - 1 and "ties:" in text
    # Resuming a finished ranking does nothing; other models are refused.
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and runner.invoke(app, ["session", "history", str(f)]).stdout.count(" tell ") == 6 * MODELS
    r = runner.invoke(app, [*args[:5], "--models", "a,b", *args[7:]])
    assert r.exit_code == 2 and "ranks " in r.stderr and "not a, b; drop --models to resume it" in r.stderr


TIMED_SCORER = """\
import json, sys, time
start = time.time()
time.sleep(0.3)
model, item = sys.argv[3], sys.argv[4]
with open(sys.argv[2], "a") as fh:
    fh.write(json.dumps([model, item, start, time.time()]) + "\\n")
print(json.load(open(sys.argv[1]))[model][item])
"""


def test_rank_jobs_scores_ahead_in_parallel_and_ranks_as_one_job(tmp_path, ref_file, alpaca) -> None:
    """`rank --jobs 3` runs up to 3 scorer calls at once and records exactly what --jobs 1 records."""
    _, models, truth = alpaca
    (tmp_path / "truth.json").write_text(json.dumps(truth))
    (tmp_path / "score.py").write_text(TIMED_SCORER)
    journals, calls = {}, {}
    for jobs in (1, 3):
        log = tmp_path / f"calls{jobs}.jsonl"
        scorer = f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 'truth.json'} {log} {{model}} {{item_id}}"
        f = tmp_path / f"r{jobs}.aeval"
        r = runner.invoke(app, ["rank", "--session", str(f), "--reference", str(ref_file), "--models",
                                ",".join(models), "--scorer", scorer, "--budget-per-model", "5", "--min-items", "3",
                                "--seed", "1", "--jobs", str(jobs), "--json"])
        assert r.exit_code == 0, r.output
        with RankSession.open(f) as s:
            journals[jobs] = [(e["kind"], e.get("model"), e["item_id"], e.get("score")) for e in s.history()]
        calls[jobs] = [json.loads(line) for line in log.read_text().splitlines()]
    assert journals[3] == journals[1]
    tells = [(m, i) for kind, m, i, _ in journals[1] if kind == "tell"]
    assert len(tells) == 5 * MODELS and [(m, i) for m, i, *_ in calls[1]] == tells  # one call per score
    assert {(m, i) for m, i in tells} <= {(m, i) for m, i, *_ in calls[3]}  # every score came from a call ...
    events = sorted([(start, 1) for *_, start, _ in calls[3]] + [(end, -1) for *_, end in calls[3]])
    running = [sum(d for _, d in events[:k + 1]) for k in range(len(events))]
    assert 2 <= max(running) <= 3  # ... up to 3 at once


def test_rank_cli_argument_errors(tmp_path, ref_file, alpaca) -> None:
    _, _models, _ = alpaca
    f = str(tmp_path / "r.aeval")

    def err(*args: str) -> str:
        r = runner.invoke(app, ["rank", *args])
        assert r.exit_code == 2, r.output
        return r.stderr

    assert err("--session", f, "--reference", str(ref_file), "--models", "a,b", "--scorer", "x {item_id}") == (
        "error: scorer command 'x {item_id}' has no {model} placeholder; the model and the item to score are passed "
        "there, e.g. 'python score.py {model} {item_id}'\n")
    assert err("--session", f, "--models", "a,b", "--scorer", "x {model} {item_id}").startswith(
        f"error: session '{f}' does not exist yet: give --reference and --models M1,M2,... to create it")
    assert err("--session", f, "--reference", str(ref_file), "--models", "a,b") == (
        "error: give exactly one of --scorer 'COMMAND {item_id}' or --harness lm-eval / --harness inspect (with "
        "--model, --task)\n")
    assert err("--reference", str(ref_file), "--scorer", "x {model} {item_id}").startswith(
        "error: --scorer/--harness/--reference/--jobs rank new models for real: give --session FILE too")
    assert err("--session", f, "--reference", str(ref_file), "--models", "a,b", "--scorer", "x {model} {item_id}",
               "--jobs", "0") == "error: --jobs must be a positive integer, got 0\n"
    assert err("--session", f, "--reference", str(ref_file), "--models", "a,b", "--harness", "inspect", "--task",
               "x.py@t", "--jobs", "2") == (
        "error: --jobs runs several scorer commands at once and goes with --scorer; --harness inspect runs in this "
        "process, one (model, item) at a time: drop --jobs\n")
    assert err("--session", f, "--dataset", "alpacaeval2", "--scorer", "x {model} {item_id}").startswith(
        "error: --dataset/--holdout simulate a ranking; with --session give --reference")
    assert err("--session", f, "--reference", str(ref_file), "--models", "a,b", "--harness", "lm-eval", "--model",
               "dummy", "--task", "x", "--model-args", "pretrained=a").startswith(
        "error: ranking with lm-eval: --model-args 'pretrained=a' has no {model} placeholder")
    assert not Path(f).exists()


def test_pair_aware_rank_session_replays_the_rankers_choices(tmp_path, ref_file, alpaca) -> None:
    ref, models, truth = alpaca
    s = RankSession.create(tmp_path / "p.aeval", ref_file, models, seed=4, budget_per_model=14, pairing="partner")
    stored = s._settings["method_kwargs"]
    assert {"error_scale", "error_floor"} <= set(stored)  # the learned error model is in the file, shared by all
    n = 0
    while (a := s.ask()) is not None:
        if n % 7 == 3:
            s.close()
            s = RankSession.open(tmp_path / "p.aeval")
        s.tell(a.model, a.item_id, truth[a.model][a.item_id])
        n += 1
    st = s.status()
    s.close()
    direct = AdaptiveRanker(models, lambda m: make_method("cat", ref, seed=4), lambda m, i: truth[m][ref.item_ids[i]],
                            budget=14 * MODELS, pairing="partner").run()
    assert st.result.items == direct.items and st.result.ranking == direct.ranking
    with pytest.raises(ConfigurationError, match=r"pairing= must be 'own' or 'partner'"):
        RankSession.create(tmp_path / "q.aeval", ref_file, models, pairing="pairs")
    assert not (tmp_path / "q.aeval").exists()


def test_rank_session_keeps_the_local_error_setting(tmp_path, ref_file, alpaca) -> None:
    ref, models, truth = alpaca
    s = RankSession.create(tmp_path / "l.aeval", ref_file, models, seed=5, budget_per_model=6, local_error=False)
    assert s._settings["method_kwargs"]["local_error"] is False
    while (a := s.ask()) is not None:
        s.tell(a.model, a.item_id, truth[a.model][a.item_id])
    s.close()
    with RankSession.open(tmp_path / "l.aeval") as s:
        st = s.status()
    direct = AdaptiveRanker(models, lambda m: make_method("cat", ref, seed=5, local_error=False),
                            lambda m, i: truth[m][ref.item_ids[i]], budget=6 * MODELS).run()
    assert st.result.items == direct.items and st.result.variances == direct.variances


def _toy(n_refs: int, seed: int = 0):
    """A reference of ``n_refs`` models and three models to rank: one inside their range, two above every one."""
    import numpy as np

    from activeeval.data.matrix import ScoreMatrix

    rng = np.random.default_rng(seed)
    theta, b = np.linspace(-1.5, 1.0, n_refs), rng.normal(0, 1.5, 120)
    mu = 1 / (1 + np.exp(-(np.r_[theta, 0.0, 3.0, 3.5][:, None] - b)))
    y = (rng.random(mu.shape) < mu).astype(float)
    ids = [f"r{j}" for j in range(n_refs)] + ["mid", "top", "top2"]
    full = ScoreMatrix(y, ids, [f"i{i}" for i in range(120)])
    return full.select_models(ids[:n_refs]), {m: dict(zip(full.item_ids, map(float, full.model_scores(m))))
                                              for m in ids[n_refs:]}


@pytest.mark.parametrize("n_refs", [30, 12])
def test_rank_status_shows_the_calibrated_interval_or_says_why_not(tmp_path, n_refs) -> None:
    # Issue 25: the score interval a ranking prints is the calibrated one; a model above every reference gets
    # the best references' own error (30 references: 6 of them held out above the rest) or, when too few were
    # above the others to measure it (12 references: 2), no interval and a note.
    ref, truth = _toy(n_refs)
    ref_path = write_scores(ref, tmp_path / "ref.csv")
    with RankSession.create(tmp_path / "r.aeval", ref_path, list(truth), seed=0, budget_per_model=15,
                            min_items=5) as s:
        while (a := s.ask()) is not None:
            s.tell(a.model, a.item_id, truth[a.model][a.item_id])
        estimates = {m: method.estimate() for m, method in s.methods.items()}
    st = json.loads(runner.invoke(app, ["session", "status", str(tmp_path / "r.aeval"), "--json"]).stdout)
    text = runner.invoke(app, ["session", "status", str(tmp_path / "r.aeval")]).stdout
    rows = {row["model"]: row for row in st["ranking"]}
    top = max(ref.scores.mean(axis=1))
    for model in ("top", "top2"):
        row = rows[model]
        assert row["score"] > top
        if n_refs == 30:
            assert row["score_ci_low"] < row["score"] < row["score_ci_high"]
            assert any("above every reference" in n and "best references' own errors" in n for n in row["notes"])
            assert f"note ({model}): the target is above every reference" in text
        else:
            assert row["score_ci_low"] is None and row["score_ci_high"] is None
            assert row["notes"] and row["notes"][0].startswith("no interval: the target is above every reference")
            line = next(t for t in text.splitlines() if f" {model} " in t)
            assert "not shown (note)" in line and f"note ({model}): no interval" in text
    for model, row in rows.items():  # what is printed is the method's own estimate and interval
        est = estimates[model]
        assert row["score"] == est.mean and row["notes"] == list(est.notes)
        if row["score_ci_low"] is not None:
            assert (row["score_ci_low"], row["score_ci_high"]) == pytest.approx(est.ci(0.95))
    assert rows["mid"]["score_ci_low"] is not None and rows["mid"]["notes"] == []
