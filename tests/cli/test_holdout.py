"""Holding out and cleaning references from the CLI (issue 27, item 4): --exclude-models, run --target MODEL
(a one-line tryout), and `datasets --models` to find the names."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.session import Session

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture()
def ref_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    scores = (rng.random((8, 40)) < np.linspace(0.2, 0.8, 8)[:, None]).astype(float)
    return write_scores(ScoreMatrix(scores, [f"m{j}" for j in range(8)], [f"q{i}" for i in range(40)]),
                        tmp_path / "ref.csv")


def test_run_target_holds_the_model_out_and_scores_with_its_own_scores(tmp_path, ref_file) -> None:
    f = tmp_path / "try.aeval"
    r = invoke("run", "--session", f, "--reference", ref_file, "--target", "m3", "--method", "rs-mean",
               "--max-items", 10, "--seed", 0)
    assert r.exit_code == 0, r.output
    full = datasets.resolve(ref_file)
    truth = float(full.model_scores("m3").mean())
    lines = r.stdout.splitlines()
    assert lines[0].startswith("estimate ") and "items used 10/40  stop: yes (budget)" in lines[0]
    assert lines[1].startswith(f"true score of m3 (all 40 items): {truth:.4f}; error ")
    assert lines[2] == f"wrote {tmp_path / 'try.results.json'}"
    with Session.open(f, readonly=True) as s:
        assert "m3" not in s.reference.model_ids and s.reference.n_models == 7 and s.label == "m3"
        assert all(score == full.model_scores("m3")[full.item_ids.index(iid)] for iid, score in s.observations)
    # resumed with the same --target (and a larger budget); --json has the true score too
    r = invoke("run", "--session", f, "--target", "m3", "--max-items", 12, "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["n_used"] == 12 and doc["tryout"]["model"] == "m3" and doc["tryout"]["truth"] == pytest.approx(truth)
    assert "changed max-items: 10 -> 12" in r.stderr  # stdout is the JSON alone
    r = invoke("run", "--session", f, "--target", "m4")
    assert r.exit_code == 2 and "was not created with --target m4" in r.stderr


@pytest.mark.parametrize(("extra", "message"), [
    (["--scorer", "echo {item_id}"], "drop --scorer"),
    (["--harness", "lm-eval", "--model", "hf"], "drop --harness, --model"),
    (["--metric", "acc"], "drop --metric"),
])
def test_run_target_refuses_a_scorer_of_its_own(tmp_path, ref_file, extra, message) -> None:
    r = invoke("run", "--session", tmp_path / "x.aeval", "--reference", ref_file, "--target", "m1", *extra)
    assert r.exit_code == 2 and message in r.stderr and not (tmp_path / "x.aeval").exists()


def test_exclude_models_is_stored_and_applied_on_open(tmp_path, ref_file) -> None:
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", ref_file, "--method", "rs-mean", "--exclude-models", "m1, m2")
    assert r.exit_code == 0 and "(6 models x 40 items)" in r.stdout, r.output
    with Session.open(f) as s:
        assert s.reference.model_ids == ("m0", "m3", "m4", "m5", "m6", "m7")
        assert s.settings["reference_source"]["read"] == {"exclude_models": ["m1", "m2"]}
    # a bundled dataset takes it too (its kind and range stay the catalog's)
    r = invoke("session", "new", tmp_path / "b.aeval", "--reference", "mmlu", "--method", "rs-mean",
               "--exclude-models", "model000")
    assert r.exit_code == 0 and "(82 models x 567 items)" in r.stdout, r.output
    with Session.open(tmp_path / "b.aeval") as s:
        assert "model000" not in s.reference.model_ids


def test_an_unknown_model_is_named_with_the_closest_ones(tmp_path, ref_file) -> None:
    r = invoke("session", "new", tmp_path / "s.aeval", "--reference", ref_file, "--exclude-models", "m10,m1")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: --exclude-models names 'm10', not a model of ref (did you mean 'm1'")
    assert "`activeeval datasets --models NAME`" in r.stderr and "exclude_models=" not in r.stderr
    with pytest.raises(ConfigurationError, match=r"exclude_models= names 'm9'"):
        Session.create(tmp_path / "p.aeval", ref_file, exclude_models=["m9"])


def test_datasets_models_lists_names_and_scores(ref_file) -> None:
    r = invoke("datasets", "--models", ref_file)
    assert r.exit_code == 0, r.output
    full = datasets.resolve(ref_file)
    assert r.stdout.splitlines()[3] == f"m3\t{full.model_scores('m3').mean():.4f}"
    rows = json.loads(invoke("datasets", "--models", "mmlu", "--json").stdout)
    assert len(rows) == 83 and rows[0]["model"] == "model000" and rows[0]["missing"] == 0
