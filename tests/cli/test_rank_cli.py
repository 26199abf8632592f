"""`activeeval rank` and `activeeval rank-backtest`: output, --json and every bad-input path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix

runner = CliRunner()


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    rng = np.random.default_rng(0)
    theta = np.linspace(-2, 2, 12)
    b = rng.normal(0, 1.5, 150)
    mu = 1 / (1 + np.exp(-(theta[:, None] - b)))
    y = np.clip(mu + rng.normal(0, 1, mu.shape) * np.sqrt(0.2 * mu * (1 - mu)), 0, 1)
    y[11, 0] = np.nan  # one incomplete model
    path = tmp_path_factory.mktemp("rank") / "toy.csv"
    write_scores(ScoreMatrix(y, [f"m{j}" for j in range(12)], [f"i{i}" for i in range(150)]), path)
    return str(path)


def test_rank_table(toy):
    r = run("rank", "--dataset", toy, "--models", "m0,m5,m10")
    assert r.exit_code == 0, r.output
    for text in ("adaptive ranking (cat", "ties (unresolved adjacent pairs):", "items used:",
                 "Kendall tau vs full ranking:"):
        assert text in r.stdout


@pytest.mark.parametrize("method", ["cat", "bayesame"])
def test_rank_json(toy, method):
    r = run("rank", "--dataset", toy, "--holdout", "4", "--method", method, "--seed", "1", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {"ranking", "ties", "items_per_model", "kendall_tau"} <= set(out)
    assert len(out["ranking"]) == 4 and sum(out["items_per_model"].values()) <= 80
    assert all(isinstance(t, list) and len(t) == 2 for t in out["ties"])


def test_rank_with_costs(toy, tmp_path):
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps({"m0": 1, "m5": 3}))
    r = run("rank", "--dataset", toy, "--models", "m0,m5", "--costs", str(costs), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["cost_spent"] <= 20 * 4


def test_rank_backtest_json_and_table(toy):
    r = run("rank-backtest", "--dataset", toy, "--folds", "2", "--holdout", "3", "--seeds", "1", "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    for key in ("adaptive_tau", "random_tau", "static_tau", "pct_used", "tie_f1", "confident_accuracy"):
        assert key in out
    r = run("rank-backtest", "--dataset", toy, "--folds", "2", "--holdout", "3", "--seeds", "1",
            "--method", "bayesame")
    assert r.exit_code == 0, r.output
    assert "adaptive τ" in r.stdout and "tie F1" in r.stdout


def bad(*args: str) -> str:
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    return r.stderr


def test_rank_errors(toy, tmp_path):
    assert "unknown model 'nobody'" in bad("rank", "--dataset", toy, "--models", "m0,nobody")
    assert "need at least 2 models to rank, got 1 (['m0']); pass two or more" in bad(
        "rank", "--dataset", toy, "--models", "m0")
    assert "--holdout must be at least 2 (models to rank), got 1" in bad("rank", "--dataset", toy, "--holdout", "1")
    assert "give exactly one of --models M1,M2,... or --holdout K" in bad("rank", "--dataset", toy)
    assert "give exactly one of" in bad("rank", "--dataset", toy, "--models", "m0,m1", "--holdout", "2")
    for g in ("0", "1", "1.5", "-0.2"):
        assert "gamma must be in (0, 1) (a confidence level such as 0.95), got" in bad(
            "rank", "--dataset", toy, "--models", "m0,m1", "--gamma", g)
    costs = tmp_path / "c.json"
    costs.write_text(json.dumps({"m0": 1}))
    assert "costs are missing for model(s) ['m1']; give a positive cost for every model to rank" in bad(
        "rank", "--dataset", toy, "--models", "m0,m1", "--costs", str(costs))
    costs.write_text(json.dumps({"m0": 1, "m1": 0}))
    assert "cost of model 'm1' must be a positive number, got 0" in bad(
        "rank", "--dataset", toy, "--models", "m0,m1", "--costs", str(costs))
    costs.write_text(json.dumps({"m0": 1, "m1": -2}))
    assert "cost of model 'm1' must be a positive number, got -2" in bad(
        "rank", "--dataset", toy, "--models", "m0,m1", "--costs", str(costs))
    assert "does not exist; give a JSON or CSV file of model,cost" in bad(
        "rank", "--dataset", toy, "--models", "m0,m1", "--costs", str(tmp_path / "none.json"))
    from activeeval.experiments.ranking_eval import rank_methods

    assert f"--method must be one of {', '.join(rank_methods())} when simulating, got 'irt' (a ranking session, " \
        "--session, takes any method spec)" in bad(
        "rank", "--dataset", toy, "--models", "m0,m1", "--method", "irt")
    assert "model 'm11' has 1 missing scores" in bad("rank", "--dataset", toy, "--models", "m0,m11")
    assert "--holdout 11 leaves fewer than 2 reference models" in bad("rank", "--dataset", toy, "--holdout", "11")


def test_rank_backtest_errors(toy):
    assert "gamma must be in (0, 1)" in bad("rank-backtest", "--dataset", toy, "--gamma", "1")
    assert "--method must be one of cat, bayesame, bayesame-paper" in bad(
        "rank-backtest", "--dataset", toy, "--method", "x")
    assert "need 20 complete models plus 2 references" in bad("rank-backtest", "--dataset", toy, "--seeds", "1")


def test_rank_backtest_family_holdout(toy):
    r = run("rank-backtest", "--dataset", toy, "--holdout-families", "m", "--seeds", "1", "--json")
    # Every toy id is "m<j>", one family "m": nothing left to calibrate on.
    assert r.exit_code == 2 and "complete reference model" in r.stderr


def test_rank_backtest_calibration_response_and_pairing_flags(toy):
    r = run("rank-backtest", "--dataset", toy, "--folds", "2", "--holdout", "3", "--seeds", "1", "--json",
            "--calibration", "paper", "--pairing", "partner")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["calibration"], out["response"], out["pairing"]) == ("paper", "rasch", "partner")
    assert out["local_error"] is False  # off with the paper's calibration
    for key in ("pooled_confident_accuracy", "n_confident", "n_wrong_confident", "expected_wrong_confident",
                "ties_reported", "false_tie_rate"):
        assert key in out
    assert 0.0 <= out["expected_wrong_confident"] <= 0.05 * out["n_confident"] + 1e-12  # each call has P >= γ
    assert out["n_pairs"] == 2 * 3
    assert "--calibration applies to --method cat only, not 'bayesame'; drop it" in bad(
        "rank-backtest", "--dataset", toy, "--folds", "2", "--holdout", "3", "--method", "bayesame",
        "--calibration", "paper")
    assert "--response 2pl needs --calibration consistent" in bad(
        "rank", "--dataset", toy, "--holdout", "3", "--calibration", "paper", "--response", "2pl")
    assert "--calibration must be consistent or paper, got 'jml'" in bad(
        "rank", "--dataset", toy, "--holdout", "3", "--calibration", "jml")
    assert "--local-error/--no-local-error applies to --method cat only" in bad(
        "rank-backtest", "--dataset", toy, "--folds", "2", "--holdout", "3", "--method", "bayesame",
        "--no-local-error")
    assert "--pairing must be 'own' or 'partner', got 'x'" in bad(
        "rank", "--dataset", toy, "--holdout", "3", "--pairing", "x")


def test_rank_local_error_flag_reaches_the_method(toy):
    on = json.loads(run("rank-backtest", "--dataset", toy, "--folds", "1", "--holdout", "3", "--seeds", "1",
                        "--json").stdout)
    off = json.loads(run("rank-backtest", "--dataset", toy, "--folds", "1", "--holdout", "3", "--seeds", "1",
                         "--json", "--no-local-error").stdout)
    assert on["local_error"] is True and off["local_error"] is False
    r = run("rank", "--dataset", toy, "--holdout", "3", "--no-local-error", "--json")
    assert r.exit_code == 0, r.output
