"""`activeeval demo` end to end on a bundled real dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app

runner = CliRunner()


def test_demo_json_reports_truth_and_estimate() -> None:
    result = runner.invoke(app, ["demo", "--dataset", "ifeval", "--epsilon2", "0.1", "--seed", "3", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    for key in ("dataset", "target", "n_items", "n_used", "estimate", "ci_low", "ci_high", "truth",
                "rs_mean_estimate", "stopped_by"):
        assert key in out
    matrix = datasets.load("ifeval")
    assert out["n_items"] == matrix.n_items
    assert out["truth"] == pytest.approx(float(np.mean(matrix.model_scores(out["target"]))))
    assert out["stopped_by"] == "precision"
    assert 30 <= out["n_used"] < out["n_items"]
    assert out["ci_high"] - out["ci_low"] <= 0.1 + 1e-12
    assert out["error"] == pytest.approx(out["estimate"] - out["truth"])


def test_demo_table_output() -> None:
    result = runner.invoke(app, ["demo", "--dataset", "gsm", "--epsilon2", "0.15", "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "true full-benchmark score" in result.stdout
    assert "RS-Mean after" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "ifevall"], "ifeval"),
        (["--target", "no/such-model"], "unknown model 'no/such-model'"),
        (["--epsilon2", "0"], "epsilon2 must be > 0"),
        (["--method", "bayesame[noise=x]"], "bayesame has no option 'noise'"),
        (["--method", "bayesame-paper[noise=x]"], "noise must be 'fixed' or 'learned'"),
    ],
)
def test_demo_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["demo", *args])
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_demo_fixed_budget_on_the_largest_bundled_benchmark() -> None:
    result = runner.invoke(app, ["demo", "--dataset", "mmlu_pro", "--max-items", "40", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["stopped_by"] == "budget" and out["n_used"] == 40 and out["n_items"] == 12032
    # mmlu_pro has missing reference scores: the drop is reported, not silent.
    assert "note: 1713 missing reference score(s): dropped 3 model(s)" in result.stderr
