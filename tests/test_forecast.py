"""The cost forecast (issue 27, item 3): reference models play the target through the run's own method, and each
stops where a real run on it stops; the CLI prints it before starting."""

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
from activeeval.experiments.simulate import run_fixed, run_until_stop
from activeeval.forecast import _folds, _play, _Work, break_even, forecast_items, supported
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.registry import make_method
from activeeval.stopping import default_rule

runner = CliRunner()


@pytest.fixture(scope="module")
def math_method() -> BayesAME:
    return BayesAME(datasets.load("math"), seed=5)


def _fold(method: BayesAME) -> tuple[object, np.ndarray]:
    ref = method.reference
    group = _folds(ref.n_models, method.seed_)[0]
    keep = [ref.model_ids[i] for i in range(ref.n_models) if i not in set(group)]
    return ref.select_models(keep), ref.scores[group]


def test_each_pseudo_target_stops_where_a_real_run_on_it_stops(math_method) -> None:
    """The shared pass is the method itself: a pseudo-target's stop equals run_until_stop's on the same reference."""
    ref_g, truths = _fold(math_method)
    rule = (0.005, 0.1, 30)
    played = _play(math_method, ref_g, truths, *rule, None, _Work(None))
    checked = 0
    for k in range(truths.shape[0]):
        if played.reasons[k] == "outside":
            continue
        m = BayesAME(ref_g, seed=math_method.seed_, hyperparameters=math_method.fit_,
                     calibration=math_method.calibration_)
        reason = run_until_stop(m, truths[k], default_rule(*rule))
        assert (m.n_observed, reason) == (played.stops[k], played.reasons[k]), k
        checked += 1
        if checked == 4:
            break
    assert checked == 4


def test_the_forecast_switches_as_the_run_does_under_switch_z() -> None:
    """With ``switch_z=0`` (switch once the point estimate is beyond every reference) the pseudo-targets the forecast
    counts as switched within a budget of 20 items are those whose real runs switch within it."""
    from activeeval.gp.prior import ReferenceFit

    fit = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.02, tau0=1.0, tau1=1.0, gamma=0.1)
    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((8, 120)) < np.linspace(0.25, 0.55, 8)[:, None]).astype(float), kind="binary")
    truths = np.vstack([(rng.random(120) < q).astype(float) for q in (0.6, 0.65, 0.7, 0.4, 0.5, 0.58)])
    played = {}
    for z in (None, 0.0):
        kw = {} if z is None else {"switch_z": z}
        method = BayesAME(ref, seed=3, hyperparameters=fit, calibration=None, **kw)
        played[z] = _play(method, ref, truths, 0.005, 0.01, 30, 20, _Work(None))
        for k in range(truths.shape[0]):
            m = BayesAME(ref, seed=3, hyperparameters=fit, calibration=None, **kw)
            run_fixed(m, truths[k], 20)
            assert (played[z].reasons[k] == "outside") == (m.mode == "design"), (z, k)
    assert played[0.0].reasons.count("outside") > played[None].reasons.count("outside")  # the option counts


def test_the_forecast_switches_as_the_run_does_when_the_interval_alone_is_capped() -> None:
    """``calibrate_by="capped"`` narrows the interval but switches on the pooled factor, as the run does: the
    forecast counts as switched exactly the pseudo-targets a pooled run switches, and their real capped runs too."""
    from activeeval.gp.prior import Calibration, ReferenceFit

    fit = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.02, tau0=1.0, tau1=1.0, gamma=0.1)
    cal = Calibration(factor=2.0, fractions=(0.05, 0.5), factors=(0.5, 0.5))  # capped: 4x narrower than pooled
    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((8, 120)) < np.linspace(0.25, 0.55, 8)[:, None]).astype(float), kind="binary")
    truths = np.vstack([(rng.random(120) < q).astype(float) for q in (0.6, 0.65, 0.7, 0.4, 0.5, 0.58, 0.8)])
    played = {}
    for by in ("pooled", "capped", "budget"):
        method = BayesAME(ref, seed=3, hyperparameters=fit, calibration=cal, calibrate_by=by)
        played[by] = _play(method, ref, truths, 0.005, 0.01, 30, 20, _Work(None))
        for k in range(truths.shape[0]):
            m = BayesAME(ref, seed=3, hyperparameters=fit, calibration=cal, calibrate_by=by)
            run_fixed(m, truths[k], 20)
            assert (played[by].reasons[k] == "outside") == (m.mode == "design"), (by, k)
    outside = {by: [r == "outside" for r in p.reasons] for by, p in played.items()}
    assert outside["capped"] == outside["pooled"] and outside["budget"] != outside["pooled"]  # the factor counts


def test_the_forecast_draws_and_switches_as_a_hybrid_run_does() -> None:
    """``selection="hybrid"``: the forecast's pass draws each pseudo-target's items with the run's probabilities
    (they do not depend on the scores), so it switches exactly the pseudo-targets whose real runs switch."""
    from activeeval.gp.prior import ReferenceFit

    fit = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.02, tau0=1.0, tau1=1.0, gamma=0.1)
    rng = np.random.default_rng(0)
    difficulty = rng.normal(size=(1, 150))
    ability = np.concatenate([np.linspace(-1.0, 1.0, 14), [0.2, 0.5, 1.4, 2.5, 3.5]])[:, None]
    scores = (rng.random((19, 150)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    ref, truths = ScoreMatrix(scores[:14], kind="binary"), scores[14:]
    method = BayesAME(ref, seed=3, hyperparameters=fit, calibration=None, selection="hybrid")
    played = _play(method, ref, truths, 0.005, 0.01, 30, 25, _Work(None))
    for k in range(truths.shape[0]):
        m = BayesAME(ref, seed=3, hyperparameters=fit, calibration=None, selection="hybrid")
        run_fixed(m, truths[k], 25)
        assert (played.reasons[k] == "outside") == (m.mode == "design"), k
    assert 0 < played.reasons.count("outside") < truths.shape[0]


def test_the_width_at_a_budget_is_the_real_run_s(math_method) -> None:
    ref_g, truths = _fold(math_method)
    played = _play(math_method, ref_g, truths[:3], 0.005, 0.03, 30, 25, _Work(None))
    assert played.stops == [25, 25, 25] and played.reasons == ["budget"] * 3
    for k in range(3):
        m = BayesAME(ref_g, seed=math_method.seed_, hyperparameters=math_method.fit_,
                     calibration=math_method.calibration_)
        assert run_fixed(m, truths[k], 25).width() == pytest.approx(played.width_at_budget[k], rel=1e-9)


def test_the_forecast_summarises_the_pseudo_targets(math_method) -> None:
    f = forecast_items(math_method, epsilon2=0.1)
    assert f.n_pseudo == len(f.stops) >= 30 and f.low <= f.median <= f.high <= f.n_items == 437
    assert (f.low, f.median, f.high) == tuple(int(round(q)) for q in np.percentile(f.stops, (10, 50, 90),
                                                                                   method="weibull"))
    assert sum(f.reasons.values()) == f.n_pseudo and f.extrapolated_from is None
    assert forecast_items(math_method, epsilon2=0.1) == f  # deterministic given the method's seed


def test_what_cannot_be_forecast() -> None:
    assert break_even(82, 567, 367) == 233 and break_even(10, 100, 100) is None
    tiny = ScoreMatrix(np.array([[0, 1, 1, 0] * 5, [1, 1, 0, 0] * 5], dtype=float), ["a", "b"],
                       [f"q{i}" for i in range(20)])
    assert not supported(make_method("rs-mean", tiny))
    assert not supported(BayesAME(tiny, seed=0, selection="sampled"))  # its estimate is never the model's
    with pytest.raises(ConfigurationError, match="needs at least 3 reference models; the reference has 2"):
        forecast_items(BayesAME(tiny, seed=0))


def _ref(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    ability, difficulty = rng.normal(size=(14, 1)), rng.normal(size=(1, 80))
    scores = (rng.random((14, 80)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return write_scores(ScoreMatrix(scores, [f"m{j}" for j in range(14)], [f"q{i}" for i in range(80)]),
                        tmp_path / "built.csv")


def test_session_new_prints_the_forecast_and_the_break_even(tmp_path) -> None:
    ref = _ref(tmp_path)
    r = runner.invoke(app, ["session", "new", str(tmp_path / "a.aeval"), "--reference", str(ref), "--seed", "0",
                            "--epsilon2", "0.2", "--max-items", "40"])
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[0].startswith("created ") and lines[1].startswith("forecast: about ")
    assert "from 14 reference models playing the target" in lines[1]
    assert any(line.startswith("forecast: expected 95 % interval width at --max-items 40: ") for line in lines)
    assert lines[-1].startswith("break-even: building the reference took 14 models x 80 items = 1120 item "
                                "evaluations; at about ")
    r = runner.invoke(app, ["session", "new", str(tmp_path / "b.aeval"), "--reference", str(ref), "--no-forecast"])
    assert r.exit_code == 0 and "forecast" not in r.output
    r = runner.invoke(app, ["session", "new", str(tmp_path / "c.aeval"), "--reference", str(ref), "--method",
                            "rs-mean"])
    assert r.exit_code == 0 and r.stderr == "" and "forecast" not in r.stdout  # nothing to forecast, nothing said
    r = runner.invoke(app, ["session", "new", str(tmp_path / "d.aeval"), "--reference", str(ref), "--method",
                            "rs-mean", "--forecast"])
    assert r.exit_code == 0 and r.stderr == ("note: no cost forecast for --method rs-mean (the forecast plays "
                                             "reference models through bayesame's own model)\n")


def test_a_forecast_beyond_a_few_seconds_is_made_only_when_asked(math_method) -> None:
    f = forecast_items(math_method, epsilon2=0.1)
    assert forecast_items(math_method, epsilon2=0.1, max_work=1e6) is None  # not even the folds' methods
    assert forecast_items(math_method, epsilon2=0.1, max_work=1e12) == f


def test_run_prints_the_forecast_on_stderr_and_in_its_json(tmp_path) -> None:
    ref = _ref(tmp_path)
    r = runner.invoke(app, ["run", "--session", str(tmp_path / "r.aeval"), "--reference", str(ref), "--target", "m2",
                            "--epsilon2", "0.2", "--seed", "0", "--json"])
    assert r.exit_code == 0, r.output
    assert r.stderr.startswith("forecast: about ")  # before the run, beside its progress
    doc = json.loads(r.stdout)  # stdout is the JSON alone
    assert doc["forecast"]["n_pseudo"] == 13 and doc["forecast"]["low"] <= doc["forecast"]["high"]


def test_the_commands_say_so_when_the_forecast_would_take_long(tmp_path, monkeypatch) -> None:
    import activeeval.forecast

    monkeypatch.setattr(activeeval.forecast, "AUTO_WORK", 1.0)
    ref = _ref(tmp_path)
    r = runner.invoke(app, ["session", "new", str(tmp_path / "a.aeval"), "--reference", str(ref), "--seed", "0"])
    assert r.exit_code == 0 and "forecast: " not in r.stdout, r.output
    assert r.stderr.startswith("note: no cost forecast by default for a reference this large (")
    assert r.stderr.endswith("models: more than a few seconds of work); --forecast makes it\n")
    r = runner.invoke(app, ["session", "new", str(tmp_path / "b.aeval"), "--reference", str(ref), "--seed", "0",
                            "--forecast"])
    assert r.exit_code == 0 and "forecast: about " in r.stdout and r.stderr == ""


def test_a_session_of_several_targets_forecasts_each(tmp_path) -> None:
    ref = _ref(tmp_path)
    r = runner.invoke(app, ["session", "new", str(tmp_path / "m.aeval"), "--reference", str(ref), "--seed", "0",
                            "--targets", "a,b", "--epsilon2", "0.2"])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[1].startswith("forecast: about ") and " items for each target to the stop" in r.stdout


def _forecast_entries(folder: Path) -> list[Path]:
    return sorted((folder / "forecast").glob("*.aec"))


def test_a_forecast_is_kept_in_the_user_cache_and_read_back_exactly(tmp_path, monkeypatch) -> None:
    """Issue 26: a second session on the same reference, seed and rule reads its forecast; the same one, bit for bit,
    and for every change of what it depends on, another."""
    from activeeval import forecast as fc
    from activeeval import user_cache

    method = BayesAME(datasets.load("math"), seed=5, hyperparameters={"alpha": 0.05, "beta": 3.0, "sigma2": 0.01,
                      "tau0": 1.0, "tau1": 1.0, "gamma": 0.02}, calibration=None)
    calls: list[int] = []
    compute = fc._forecast_items
    monkeypatch.setattr(fc, "_forecast_items", lambda *a, **k: calls.append(1) or compute(*a, **k))
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    cold = forecast_items(method, epsilon2=0.1, max_items=40)
    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(folder))
    assert forecast_items(method, epsilon2=0.1, max_items=40) == cold and len(calls) == 2  # derived, stored
    assert forecast_items(method, epsilon2=0.1, max_items=40) == cold and len(calls) == 2  # read back
    assert forecast_items(method, epsilon2=0.1, max_items=40, max_work=cold.work / 2) is None  # too costly, as before
    assert forecast_items(method, epsilon2=0.1, max_items=40, max_work=cold.work) == cold
    other = BayesAME(method.reference, seed=6, hyperparameters=method.fit_, calibration=None)
    forecast_items(other, epsilon2=0.1, max_items=40)  # another seed
    forecast_items(method, epsilon2=0.1, max_items=41)  # another rule
    assert len(calls) == 4 and len(_forecast_entries(folder)) == 3
    # damaged entries are derived again, never trusted: a flipped byte (the checksum), a field that is not a count
    (path,) = [p for p in _forecast_entries(folder) if user_cache.load("forecast", p.stem).meta == cold.to_dict()]
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))
    assert forecast_items(method, epsilon2=0.1, max_items=40) == cold and len(calls) == 5
    for wrong in ({"median": "395"}, {"stops": cold.to_dict()["stops"][:-1]}, {"n_items": 7}, {"extra": 1}):
        assert user_cache.store("forecast", path.stem, {**cold.to_dict(), **wrong})
        assert forecast_items(method, epsilon2=0.1, max_items=40) == cold
    assert len(calls) == 9
