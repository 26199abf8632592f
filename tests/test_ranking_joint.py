"""The adaptive ranker on a joint multi-target posterior (issue 13, item 4): activeeval.ranking.joint and its drivers.

Real data: a small AlpacaEval 2 subset (4 models to rank, 25 references, 300 items).
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pytest
from scipy.special import ndtr
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import ConfigurationError
from activeeval.experiments import ranking_eval as ev
from activeeval.methods import registry
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import Independent, MultiTargetMethod, pairwise_probability
from activeeval.methods.registry import sharing_factory
from activeeval.ranking import (
    AdaptiveRanker,
    JointTarget,
    joint_targets,
    pairwise_confidence,
    rank_fixed_length,
    rank_random,
    ranking_posterior,
)
from activeeval.session.ranking import RankSession

JOINT = "independent-joint"  # Independent registered as a joint method (bayesame-multi's stand-in)
runner = CliRunner()


@pytest.fixture(scope="module")
def alpaca():
    full, _ = datasets.load("alpacaeval2").dropna("models")
    full = full.select_items(full.item_ids[:300])
    models = list(full.model_ids[:4])
    rest = full.drop_models(models)
    ref = rest.select_models(rest.model_ids[:25])
    truth = {m: full.model_scores(m) for m in models}
    return full.select_models(list(ref.model_ids) + models), ref, models, truth


@pytest.fixture()
def joint_name():
    """Independent under a joint-method name, as ``bayesame-multi`` will be (``is_multi_target`` true: its class
    declares it, so one registry call is all it takes)."""
    registry.register(JOINT, Independent)
    yield JOINT
    registry.unregister(JOINT)


def oracle(truth):
    return lambda m, i: float(truth[m][i])


# ------------------------------------------------------------------ maths
def test_pairwise_probability_is_the_brute_force_formula_and_sharper_with_positive_correlation():
    rng = np.random.default_rng(0)
    sd = np.array([0.03, 0.02, 0.04, 0.025])
    corr = np.full((4, 4), 0.8) + 0.2 * np.eye(4)  # every pair correlated 0.8
    cov = corr * np.outer(sd, sd)
    means = np.array([0.50, 0.47, 0.52, 0.49])
    p = pairwise_probability(means, cov)
    for i in range(4):
        for j in range(4):
            if i == j:
                continue
            brute = ndtr((means[i] - means[j]) / np.sqrt(cov[i, i] + cov[j, j] - 2 * cov[i, j]))
            assert p[i, j] == pytest.approx(brute, rel=1e-12)
            assert pairwise_confidence(means[i], cov[i, i], means[j], cov[j, j], cov[i, j]) == pytest.approx(
                brute, rel=1e-12)
            indep = pairwise_confidence(means[i], cov[i, i], means[j], cov[j, j])
            assert abs(p[i, j] - 0.5) > abs(indep - 0.5)  # positive correlation: a surer comparison
    # and it is the probability of the event under the joint Gaussian (Monte Carlo, 400k draws)
    draws = rng.multivariate_normal(means, cov, size=400_000)
    assert np.mean(draws[:, 0] > draws[:, 1]) == pytest.approx(p[0, 1], abs=3e-3)
    # a negative covariance makes it less sure; a zero variance of the difference gives 1, 0 or ½
    assert abs(pairwise_confidence(0.5, 1e-3, 0.45, 1e-3, -5e-4) - 0.5) < abs(
        pairwise_confidence(0.5, 1e-3, 0.45, 1e-3) - 0.5)
    assert pairwise_confidence(0.5, 1e-3, 0.45, 1e-3, 1e-3) == 1.0
    assert pairwise_confidence(0.5, 1e-3, 0.5, 1e-3, 1e-3) == 0.5


# ---------------------------------------------- Independent == independent
def test_joint_ranking_on_a_diagonal_covariance_is_the_independent_ranking(alpaca):
    _, ref, models, truth = alpaca
    joint = Independent(ref, models, seed=3)
    seeds = {m: joint.methods_[t].seed for t, m in enumerate(models)}
    make = sharing_factory("bayesame", ref)
    kw = {"budget": 60, "min_items": 5}
    single = AdaptiveRanker(models, lambda m: make(seed=seeds[m]), oracle(truth), **kw).run()
    together = AdaptiveRanker(models, joint, oracle(truth), **kw).run()
    assert together.items == single.items  # the same (model, item) decisions, in the same order per model
    assert together.ranking == single.ranking and together.stop_reason == single.stop_reason
    assert together.means == single.means and together.variances == single.variances
    assert set(together.covariances.values()) == {0.0} and len(together.covariances) == 6
    for i, a in enumerate(models):
        for b in models[i + 1:]:
            assert together.confidence(a, b) == single.confidence(a, b)
    assert together.uncertain_pairs() == single.uncertain_pairs()
    # the joint posterior the ranker reads is the method's estimates() and covariance()
    p = pairwise_probability([e.mean for e in joint.estimates()], joint.covariance())
    for i, a in enumerate(models):
        for j, b in enumerate(models):
            if i != j:
                assert together.confidence(a, b) == pytest.approx(p[i, j], rel=1e-12)
    assert joint.n_observed == together.n_items_used  # every observation of the joint method was the ranker's


class Correlated(MultiTargetMethod):
    """Fixed means, variance 0.01 / (1 + n) per target, every pair correlated ``rho``."""

    def __init__(self, reference, targets, means, rho, **kw):
        super().__init__(reference, targets, **kw)
        self.means, self.rho = dict(means), rho

    def _update(self, target, item, score):
        pass

    def _current_estimate(self, target):
        n = self.n_observed_of(target)
        return Estimate(self.means[self.targets[target]], 0.01 / (1 + n), n, self.n_items)

    def covariance(self):
        sd = np.sqrt([e.var for e in self.estimates()])
        c = self.rho * np.outer(sd, sd)
        np.fill_diagonal(c, sd**2)
        return c


def test_correlated_posteriors_decide_pairs_with_fewer_items(alpaca):
    _, ref, models, truth = alpaca
    means = dict(zip(models, [0.30, 0.33, 0.36, 0.39]))
    runs = {rho: AdaptiveRanker(models, Correlated(ref, models, means, rho, seed=0), oracle(truth), min_items=2,
                                budget=1000).run() for rho in (0.0, 0.9)}
    assert runs[0.9].stop_reason == runs[0.0].stop_reason == "confident"
    assert runs[0.9].n_items_used < runs[0.0].n_items_used / 3  # Var(R_i − R_j) is 5x smaller at ρ = 0.9
    assert runs[0.9].ranking == runs[0.0].ranking == tuple(reversed(models))
    # ignoring the covariance (rho 0) the final state of the correlated run is not decided
    fast = runs[0.9]
    a, b = fast.ranking[:2]
    assert fast.confidence(a, b) > 0.975
    assert pairwise_confidence(fast.means[a], fast.variances[a], fast.means[b], fast.variances[b]) < 0.975


def test_warm_start_observations_are_the_rankers_and_count_in_the_budget(alpaca):
    _, ref, models, truth = alpaca
    joint = Independent(ref, models, seed=1, warm_start=0.05)  # 15 common items per model first
    res = AdaptiveRanker(models, joint, oracle(truth), budget=40, min_items=2).run()
    assert res.stop_reason == "budget" and res.n_items_used == 40 == joint.n_observed
    warm = set(int(i) for i in joint.warm_items_)
    assert all(set(res.items[m]) <= warm for m in models)  # 40 < 4 x 15: the warm start is all it could do
    assert res.cost_spent == 40
    # a joint method given with observations: they are the ranking's too, and count
    again = Independent(ref, models, seed=1)
    again.observe(models[0], 7, float(truth[models[0]][7]))
    res = AdaptiveRanker(models, again, oracle(truth), budget=9, min_items=2).run()
    assert res.items[models[0]][0] == 7 and res.n_items_used == 9 == again.n_observed


def test_baselines_and_ranker_take_a_joint_method_and_refuse_a_wrong_one(alpaca):
    _, ref, models, truth = alpaca
    fixed = rank_fixed_length(models, Independent(ref, models, seed=0), oracle(truth), n_items=4)
    assert fixed.n_items_used == 16 and len(fixed.covariances) == 6
    rnd = rank_random(models, Independent(ref, models, seed=0), oracle(truth), budget=12, seed=0)
    assert rnd.n_items_used == 12
    with pytest.raises(ConfigurationError, match=r"the joint method's targets \(a, b\) must be the models to rank"):
        AdaptiveRanker(models, Independent(ref, ["a", "b"], seed=0), oracle(truth)).run()
    sides = joint_targets(Independent(ref, models, seed=0), models)
    assert isinstance(sides[models[1]], JointTarget) and sides[models[1]].target == 1
    with pytest.raises(ConfigurationError, match=r"scale='ability' needs a method with an ability\(\) estimate"):
        ranking_posterior(models, sides, "ability")
    with pytest.raises(ConfigurationError, match=r"sides of different joint methods"):
        other = joint_targets(Independent(ref, models, seed=0), models)
        ranking_posterior(models, {**sides, models[0]: other[models[0]]})


# ----------------------------------------------------------- simulation
def test_simulated_ranking_and_backtest_with_a_joint_method(alpaca, joint_name, monkeypatch):
    full, _, models, _ = alpaca
    built = []
    monkeypatch.setattr(Independent, "__init__", _spy(Independent.__init__, built))
    rec = ev.simulate_ranking(full, models, method=f"{joint_name}[warm_start=0.02]", seed=0, budget_per_model=8,
                              min_items=2, n_boot=200)
    assert built and all(kw["warm_start"] == 0.02 and kw["targets"] == models for kw in built)
    assert len(built) == 3  # adaptive, random and fixed-length each on a fresh joint method
    assert rec.items_adaptive <= 32 and rec.items_random == rec.items_adaptive and len(rec.adaptive.covariances) == 6
    assert ev.summarize_rank_backtest([rec]).keys() == ev.summarize_rank_backtest(
        [ev.simulate_ranking(full, models, method="bayesame", budget_per_model=8, min_items=2, n_boot=200)]).keys()
    assert joint_name in ev.rank_methods()
    with pytest.raises(ConfigurationError, match=r"'seed' is set by the simulation; use seed="):
        ev.simulate_ranking(full, models, method=f"{joint_name}[seed=3]")
    with pytest.raises(ConfigurationError, match=r"'targets' is set by the simulation: the models ranked"):
        ev.simulate_ranking(full, models, method=f"{joint_name}[targets=3]")
    unknown = re.escape(f"method must be one of {ev.rank_methods()} for ranking, got 'irt'")
    with pytest.raises(ConfigurationError, match=unknown):
        ev.run_rank_backtest(full, method="irt")
    with pytest.raises(ConfigurationError, match=r"pass models= \(its targets\)"):
        ev.method_factory(joint_name, full)


def _spy(init, built):
    def wrapped(self, reference, targets, **kw):
        built.append({"targets": list(targets), **kw})
        init(self, reference, targets, **kw)
    return wrapped


def test_cli_rank_and_rank_backtest_with_a_joint_method(alpaca, joint_name, tmp_path):
    full, _, models, _ = alpaca
    path = write_scores(full, tmp_path / "alpaca.csv")
    args = ["--dataset", str(path), "--budget-per-model", "6", "--min-items", "2", "--json"]
    r = runner.invoke(app, ["rank", "--models", ",".join(models), "--method", f"{joint_name}[warm_start=0.02]", *args])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["method"] == f"{joint_name}[warm_start=0.02]" and out["scale"] == "score"
    assert sum(out["items_per_model"].values()) <= 24 and len(out["ranking"]) == 4
    keys = {}
    for method in (joint_name, "bayesame"):
        r = runner.invoke(app, ["rank-backtest", "--method", method, "--folds", "1", "--holdout", "3", "--seeds", "1",
                                *args])
        assert r.exit_code == 0, r.output
        keys[method] = set(json.loads(r.stdout))
    assert keys[joint_name] == keys["bayesame"]
    r = runner.invoke(app, ["rank", "--models", ",".join(models), "--method", "irt", *args])
    assert r.exit_code == 2
    assert f"--method must be one of {', '.join(ev.rank_methods())} when simulating, got 'irt'" in r.output
    r = runner.invoke(app, ["rank", "--models", ",".join(models), "--method", f"{joint_name}[seed=1]", *args])
    assert r.exit_code == 2 and "--method: method" in r.output and "use --seed" in r.output
    r = runner.invoke(app, ["rank", "--models", ",".join(models), "--method", joint_name, "--calibration", "paper",
                            *args])
    assert r.exit_code == 2 and "--calibration applies to --method cat only" in r.output


# --------------------------------------------------------------- session
def test_rank_session_with_a_joint_method_decides_like_the_ranker_and_survives_reopening(alpaca, joint_name,
                                                                                         tmp_path):
    _, ref, models, truth = alpaca
    ref_file = write_scores(ref, tmp_path / "ref.csv")
    s = RankSession.create(tmp_path / "r.aeval", ref_file, models, method=f"{joint_name}[warm_start=0.02]", seed=5,
                           budget_per_model=5, min_items=2)
    n = 0
    while (a := s.ask()) is not None:
        if n % 7 == 3:
            s.close()
            s = RankSession.open(tmp_path / "r.aeval")
        s.tell(a.model, a.item_id, float(truth[a.model][a.index]))
        n += 1
    st = s.status()
    joint = s.methods[models[0]].joint
    s.close()
    direct = AdaptiveRanker(models, Independent(ref, models, seed=joint.seed, warm_start=0.02), oracle(truth),
                            budget=20, min_items=2).run()
    assert st.result.items == direct.items and st.result.ranking == direct.ranking
    assert st.result.covariances == direct.covariances and st.stop_reason == direct.stop_reason
    assert n == direct.n_items_used
    with pytest.raises(ConfigurationError, match=r"its targets are the models ranked \(models=\); drop targets="):
        RankSession.create(tmp_path / "bad.aeval", ref_file, models, method=f"{joint_name}[targets=2]")
    assert not (tmp_path / "bad.aeval").exists()


SCORER = """\
import json, sys
print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])
"""


def test_cli_rank_session_with_a_joint_method_then_status(alpaca, joint_name, tmp_path):
    _, ref, models, truth = alpaca
    ref_file = write_scores(ref, tmp_path / "ref.csv")
    (tmp_path / "truth.json").write_text(json.dumps(
        {m: dict(zip(ref.item_ids, map(float, truth[m]))) for m in models}))
    (tmp_path / "score.py").write_text(SCORER)
    scorer = f"{sys.executable} {tmp_path / 'score.py'} {tmp_path / 'truth.json'} {{model}} {{item_id}}"
    f = tmp_path / "r.aeval"
    r = runner.invoke(app, ["rank", "--session", str(f), "--reference", str(ref_file), "--models", ",".join(models),
                            "--scorer", scorer, "--method", f"{joint_name}[warm_start=0.01]", "--budget-per-model",
                            "3", "--min-items", "1", "--seed", "2"])
    assert r.exit_code == 0, r.output
    st = json.loads(runner.invoke(app, ["session", "status", str(f), "--json"]).stdout)
    assert st["stop_reason"] == "budget" and sum(st["items_per_model"].values()) == 12
    with RankSession.open(f) as s:
        joint = s.methods[models[0]].joint
        assert isinstance(joint, Independent) and joint.warm_start == 0.01 and joint.n_observed == 12
        res = s.status().result
    for p in st["adjacent_pairs"]:
        assert p["confidence"] == pytest.approx(res.confidence(p["higher"], p["lower"]), rel=1e-12)
