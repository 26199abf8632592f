"""--prior-weights (BayesAME App. B.2) on sessions and backtests, and backtest --likelihood, end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.datasets import load
from activeeval.session import Session

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def ifeval() -> ScoreMatrix:
    return load("ifeval")


def _weights(models, seed: int = 0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {m: float(w) for m, w in zip(models, rng.integers(1, 5, size=len(models)))}


def _write_csv(path, weights: dict[str, float], sep: str = ",") -> None:
    path.write_text(f"model{sep}weight\n" + "".join(f"{m}{sep}{w}\n" for m, w in weights.items()))


# --------------------------------------------------------------------- sessions
def test_session_with_prior_weights_end_to_end(tmp_path, ifeval) -> None:
    weights = _weights(ifeval.model_ids)
    wfile = tmp_path / "w.csv"
    _write_csv(wfile, weights)
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", "ifeval", "--method", "bayesame-paper", "--prior-weights", wfile,
               "--seed", "5")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"created {f}: method bayesame-paper, reference 'ifeval' (429 models x 541 items), "
                               "prior weights for 429 models, epsilon2 0.03, seed 5")
    truth = dict(zip(ifeval.item_ids, ifeval.model_scores(ifeval.model_ids[0])))
    for _ in range(3):
        r = invoke("session", "next", f, "--k", "2")
        assert r.exit_code == 0, r.output
        for iid in r.stdout.split():
            r = invoke("session", "record", f, iid, truth[iid])
            assert r.exit_code == 0, r.output
    r = invoke("session", "status", f, "--json")
    assert r.exit_code == 0, r.output
    status = json.loads(r.stdout)
    assert status["n_used"] == 6
    with Session.open(f) as s:
        assert s.settings["method_kwargs"]["weights"] == weights
        assert s.settings["method_spec"] == "bayesame-paper"  # the weights are stored, not put in the label
        reopened = s.estimate()
        observations = s.observations
        prior_mean = s.method.prior()[0]
    # the status prints the standard deviation: its square is the variance to within rounding, not bit for bit
    assert reopened.mean == status["estimate"] and reopened.var == pytest.approx(status["std"] ** 2, rel=1e-12)
    # the same history through the Python API with the weights as a mapping: the same state, bit for bit
    with Session.create(tmp_path / "py.aeval", "ifeval", method="bayesame-paper", prior_weights=weights,
                        seed=5) as s:
        s.tell_many(observations)
        assert (s.estimate().mean, s.estimate().var) == (reopened.mean, reopened.var)
        np.testing.assert_array_equal(s.method.prior()[0], prior_mean)
    # and the weights matter: uniform ones give another prior
    with Session.create(tmp_path / "u.aeval", "ifeval", method="bayesame-paper", seed=5) as s:
        assert np.abs(s.method.prior()[0] - prior_mean).max() > 1e-3


def test_json_and_tsv_weight_files_read_as_csv(tmp_path, ifeval) -> None:
    weights = _weights(ifeval.model_ids, seed=1)
    (tmp_path / "w.json").write_text(json.dumps(weights))
    _write_csv(tmp_path / "w.tsv", weights, sep="\t")
    means = []
    for name in ("w.json", "w.tsv"):
        f = tmp_path / f"{name}.aeval"
        r = invoke("session", "new", f, "--reference", "ifeval", "--method", "bayesame-paper-rs", "--prior-weights",
                   tmp_path / name, "--seed", "1")
        assert r.exit_code == 0, r.output
        with Session.open(f) as s:
            means.append(s.method.prior()[0])
    np.testing.assert_array_equal(means[0], means[1])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ("drop", r"prior weights: no weight for 1 reference model\(s\): 01-ai/Yi-1.5-34B; give exactly one weight "
                 r"per reference model \(429 models\)"),
        ("unknown", r"prior weights: 1 model\(s\) that are not reference models: not-a-model"),
        ("negative", r"line 2: the weight of '01-ai/Yi-1.5-34B' must be a number >= 0, got '-1'"),
        ("text", r"line 2: the weight of '01-ai/Yi-1.5-34B' must be a number >= 0, got 'heavy'"),
        ("header", r"needs a header with the columns model and weight, got \['name', 'w'\]"),
        ("zero", r"weights must be 429 non-negative numbers \(one per reference model\) with a positive sum"),
    ],
)
def test_bad_weight_files_are_refused_and_nothing_is_written(tmp_path, ifeval, edit, message) -> None:
    weights = _weights(ifeval.model_ids)
    first = ifeval.model_ids[0]
    if edit == "drop":
        del weights[first]
    elif edit == "unknown":
        weights["not-a-model"] = 1.0
    elif edit in ("negative", "text"):
        weights[first] = -1 if edit == "negative" else "heavy"  # type: ignore[assignment]
    elif edit == "zero":
        weights = dict.fromkeys(weights, 0.0)
    wfile = tmp_path / "w.csv"
    _write_csv(wfile, weights)
    if edit == "header":
        wfile.write_text("name,w\n" + wfile.read_text().split("\n", 1)[1])
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", "ifeval", "--method", "bayesame-paper", "--prior-weights", wfile)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: ")
    import re

    assert re.search(message, " ".join(r.stderr.split())), r.stderr
    assert not f.exists()


def test_default_method_refuses_prior_weights_naming_the_paper_method(tmp_path, ifeval) -> None:
    wfile = tmp_path / "w.csv"
    _write_csv(wfile, _weights(ifeval.model_ids))
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", "ifeval", "--prior-weights", wfile)
    assert r.exit_code == 2
    assert "method 'bayesame' has no such prior" in r.stderr
    assert "use --method bayesame-paper (or bayesame-paper-rs)" in " ".join(r.stderr.split())
    assert not f.exists()
    r = invoke("session", "new", f, "--reference", "ifeval", "--method", "bayesame-paper", "--prior-weights", wfile,
               "--targets", "a,b")
    assert r.exit_code == 2 and "--prior-weights applies to a single-target session" in r.stderr


def test_recording_after_a_refused_resume_loses_nothing(tmp_path, ifeval) -> None:
    weights = _weights(ifeval.model_ids)
    wfile, other = tmp_path / "w.csv", tmp_path / "other.csv"
    _write_csv(wfile, weights)
    _write_csv(other, _weights(ifeval.model_ids, seed=9))
    f = tmp_path / "s.aeval"
    with Session.create(f, "ifeval", method="bayesame-paper", prior_weights=wfile, seed=2) as s:
        (asked,) = s.ask()
        s.tell(asked.item_id, 1.0)
    r = invoke("run", "--session", f, "--scorer", "echo 1 {item_id}", "--prior-weights", other)
    assert r.exit_code == 2
    assert "differs from the weights session" in r.stderr
    with Session.open(f) as s:
        assert s.observations == ((asked.item_id, 1.0),)


# -------------------------------------------------------------------- backtests
@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    rng = np.random.default_rng(0)
    ability = np.sort(rng.normal(size=16))
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(size=40)[None, :])))
    scores = (rng.random((16, 40)) < p).astype(float)
    path = tmp_path_factory.mktemp("pw") / "toy.csv"
    write_scores(ScoreMatrix(scores, [f"m{j}" for j in range(16)], [f"i{i}" for i in range(40)], kind="binary"), path)
    return str(path)


BASE = ("backtest", "--targets", "3", "--seeds", "2", "--workers", "1", "--no-progress", "--json")


def _ew(r) -> dict[str, float]:
    assert r.exit_code == 0, r.output
    return {k: v["ew_irmse"] for k, v in json.loads(r.stdout)["methods"].items()}


def test_backtest_prior_weights(toy, tmp_path) -> None:
    models = [f"m{j}" for j in range(16)]
    uniform, skewed = tmp_path / "u.csv", tmp_path / "s.csv"
    _write_csv(uniform, dict.fromkeys(models, 1.0))
    _write_csv(skewed, {m: float(j + 1) ** 2 for j, m in enumerate(models)})
    plain = _ew(invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper"))
    same = _ew(invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper", "--prior-weights", uniform))
    other = _ew(invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper", "--prior-weights", skewed))
    # uniform weights are the paper's default prior (φ_bᵀw = mean φ_b up to round-off)
    assert same["bayesame-paper"] == pytest.approx(plain["bayesame-paper"], rel=1e-9)
    assert other["bayesame-paper"] != pytest.approx(plain["bayesame-paper"], rel=1e-3)
    assert other["rs-mean"] == plain["rs-mean"]  # the added baseline takes no weights
    _write_csv(skewed, {m: 1.0 for m in models[1:]})
    r = invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper", "--prior-weights", skewed)
    assert r.exit_code == 2 and "--prior-weights: no weight for 1 model(s) of the reference pool" in r.stderr
    r = invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper,bayes-aipw", "--prior-weights", uniform)
    assert r.exit_code == 2
    assert "--prior-weights applies to methods with a weights option (bayesame-paper, bayesame-paper-rs); method " \
           "'bayes-aipw' has none" in " ".join(r.stderr.split())


def test_backtest_likelihood(toy) -> None:
    ew = _ew(invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper,bayesame-paper-rs", "--likelihood", "logit"))
    assert set(ew) == {"bayesame-paper[likelihood=logit]", "bayesame-paper-rs[likelihood=logit]", "rs-mean"}
    spec = _ew(invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper[likelihood=logit]"))
    assert spec["bayesame-paper[likelihood=logit]"] == ew["bayesame-paper[likelihood=logit]"]  # one and the same
    r = invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper,rs-mean", "--likelihood", "logit")
    assert r.exit_code == 2
    assert "--likelihood applies to methods with a likelihood option (bayesame-paper, bayesame-paper-rs); method " \
           "'rs-mean' has none" in " ".join(r.stderr.split())
    r = invoke(*BASE, "--dataset", toy, "--methods", "bayesame-paper", "--likelihood", "probit")
    assert r.exit_code == 2 and "--likelihood must be 'gaussian' or 'logit', got 'probit'" in r.stderr
