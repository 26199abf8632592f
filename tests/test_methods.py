"""The Method protocol, RS-Mean, stopping rules and every error path of a method."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from activeeval import BayesAME, BayesAMEPaper, Method, RSMean, ScoreMatrix
from activeeval.exceptions import (
    ActiveEvalError,
    ConfigurationError,
    DuplicateObservationError,
    InvalidScoresError,
    MissingScoresWarning,
    ScoreOutOfRangeError,
    SessionStateError,
    UnknownItemError,
)
from activeeval.methods.baselines._common import eq9_variance
from activeeval.methods.estimate import Estimate
from activeeval.methods.registry import make_method
from activeeval.stopping import default_rule, stop_reason

METHODS = [BayesAME, RSMean]


def small(kind: str = "binary", n_models: int = 6, n_items: int = 20, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = rng.random((n_models, n_items))
    if kind == "binary":
        scores = (scores < 0.5).astype(float)
    return ScoreMatrix(scores, item_ids=[f"q{i}" for i in range(n_items)], kind=kind, name="small")


@pytest.mark.parametrize("cls", METHODS)
def test_methods_satisfy_protocol(cls) -> None:
    method = cls(small(), seed=0)
    assert isinstance(method, Method)
    est = method.estimate()
    assert isinstance(est, Estimate) and est.n_observed == 0 and est.n_items == 20


@pytest.mark.parametrize("cls", METHODS)
def test_observe_by_id_or_index(cls) -> None:
    method = cls(small(), seed=0)
    method.observe("q3", 1)
    method.observe(5, 0.0)
    assert method.observed_items == (3, 5)
    assert method.observed_scores == (1.0, 0.0)
    assert len(method.trajectory) == 2


@pytest.mark.parametrize("cls", METHODS)
def test_errors_lose_nothing(cls) -> None:
    method = cls(small(), seed=0)
    method.observe("q1", 1)
    before = (method.observed_items, method.observed_scores, method.estimate())
    with pytest.raises(UnknownItemError, match=r"unknown item 'nope' in score matrix 'small'"):
        method.observe("nope", 1)
    with pytest.raises(UnknownItemError, match=r"item index 20 is out of range .* 20 items"):
        method.observe(20, 1)
    with pytest.raises(DuplicateObservationError, match=r"item 'q1' was already observed \(score 1\)"):
        method.observe("q1", 0)
    with pytest.raises(InvalidScoresError, match=r"score for item 'q2' is nan; scores must be finite"):
        method.observe("q2", float("nan"))
    with pytest.raises(InvalidScoresError, match=r"score for item 'q2' is inf"):
        method.observe("q2", float("inf"))
    with pytest.raises(InvalidScoresError, match=r"score for item 'q2' is 'abc', which is not a number"):
        method.observe("q2", "abc")
    with pytest.raises(ScoreOutOfRangeError, match=r"score for item 'q2' is 0.5 but .* is binary; record 0 or 1"):
        method.observe("q2", 0.5)
    assert (method.observed_items, method.observed_scores, method.estimate()) == before
    # every one of these is an ActiveEvalError
    with pytest.raises(ActiveEvalError):
        method.observe("q1", 1)


def test_range_errors_on_continuous_benchmarks() -> None:
    method = BayesAME(small("continuous"), seed=0)
    with pytest.raises(ScoreOutOfRangeError, match=r"score for item 'q0' is 1.5, outside the score range \[0, 1\]"):
        method.observe("q0", 1.5)
    # A single item's reference range is not a bound: any value in [0, 1] is fine.
    method.observe("q0", 0.999)
    wide = ScoreMatrix(small("continuous").scores * 10, kind="continuous", score_range=(0, 10))
    m = BayesAME(wide, seed=0)
    m.observe(0, 9.5)
    unbounded = ScoreMatrix(small("continuous").scores - 3, kind="continuous", score_range=None)
    RSMean(unbounded, seed=0).observe(0, -100.0)


def test_too_few_references_or_items() -> None:
    with pytest.raises(InvalidScoresError, match="need at least 2 reference models, got 1"):
        BayesAME(ScoreMatrix([[0.0, 1.0, 1.0]]), seed=0)
    with pytest.raises(InvalidScoresError, match="need at least 2 items, got 1"):
        RSMean(ScoreMatrix([[0.0], [1.0]]), seed=0)
    with pytest.raises(ConfigurationError, match="reference must be a ScoreMatrix, got ndarray"):
        BayesAME(np.zeros((3, 3)), seed=0)  # type: ignore[arg-type]


def test_missing_reference_scores_are_dropped_loudly() -> None:
    scores = small("continuous").scores.copy()
    scores[2, 4] = np.nan
    ref = ScoreMatrix(scores, kind="continuous")
    with pytest.warns(MissingScoresWarning, match=r"1 missing reference score\(s\): dropped 1 model\(s\) .*model2"):
        method = BayesAME(ref, seed=0)
    assert method.reference.n_models == 5 and method.dropped.dropped_models == ("model2",)
    with pytest.warns(MissingScoresWarning, match=r"dropped 1 item\(s\)"):
        method = RSMean(ref, seed=0, missing="items")
    assert method.n_items == 19


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "seed must be a non-negative int"),
        ({"selection": "greedy"}, "selection must be 'auto', 'active' or 'random'"),
        ({"estimator": "x"}, "estimator must be 'auto', 'bayes' or 'cv'"),
        ({"sigma2": 0.0}, "sigma2 must be a positive number"),
        ({"alpha": 0.0}, "alpha must be a number >= 1e-05"),
        ({"refit_every": -3}, "refit_every must be a non-negative integer"),
        ({"weights": [1, 2]}, "weights must be 6 non-negative numbers"),
        ({"tolerance": -1}, "tolerance must be >= 0"),
        ({"n0": -1}, "n0 must be a non-negative integer"),
        ({"noise": "auto"}, "noise must be .fixed. or .learned."),
    ],
)
def test_configuration_errors(kwargs: dict, message: str) -> None:
    """The paper's BayesAME (its options; the default's own are pinned in test_bayesame_default.py)."""
    with pytest.raises(ConfigurationError, match=message):
        BayesAMEPaper(small(), **kwargs)


def test_select_batch_errors_and_exhaustion() -> None:
    method = RSMean(small(n_items=3), seed=0)
    with pytest.raises(ConfigurationError, match="k must be a positive integer, got 0"):
        method.select_batch(0)
    assert sorted(method.select_batch(10)) == [0, 1, 2]  # capped at what is left
    with pytest.raises(SessionStateError, match="every item is already observed or pending"):
        method.select_batch(1, exclude=["q0", "q1", "q2"])
    for i in range(3):
        method.observe(i, 1)
    assert method.exhausted and stop_reason(default_rule(), method) == "exhausted"
    with pytest.raises(SessionStateError):
        method.select()


def test_rs_mean_matches_eq9_by_hand() -> None:
    method = RSMean(small("continuous", n_items=10), seed=0)
    scores = [0.2, 0.6, 0.7, 0.1]
    for i, s in enumerate(scores):
        method.observe(i, s)
    est = method.estimate()
    s2 = np.var(scores, ddof=1)
    assert est.mean == pytest.approx(np.mean(scores))
    # Eq. 9 with w_i = 1/n: s² (1/n) (N - n)/N
    assert est.var == pytest.approx(s2 / 4 * (10 - 4) / 10)
    for i in range(4, 10):
        method.observe(i, 0.5)
    # (N - n_eff) is 0 up to round-off in (Σw)²/Σw².
    assert method.estimate().var == pytest.approx(0.0, abs=1e-15)


def test_eq9_weighted_effective_sample_size() -> None:
    w = np.array([0.5, 0.25, 0.25])
    s = np.array([1.0, 0.0, 0.5])
    n_eff = 1 / (w @ w)
    assert eq9_variance(s, w, 8, 0.25) == pytest.approx(np.var(s, ddof=1) * (w @ w) * (8 - n_eff) / 8)
    assert eq9_variance(s[:1], w[:1] / w[0], 8, 0.25) == pytest.approx(0.25 * 1 * 7 / 8)


def test_estimate_interval_is_clipped_to_the_score_range() -> None:
    est = Estimate(0.98, 0.01**2 * 25, 10, 100, bounds=(0.0, 1.0))
    lo, hi = est.ci()
    assert hi == 1.0 and lo == pytest.approx(0.98 - 1.959964 * 0.05, rel=1e-5)
    assert est.width() == pytest.approx(2 * 1.959964 * 0.05, rel=1e-5)


def test_an_interval_with_two_sides_keeps_its_width_and_each_side() -> None:
    """shift moves the centre: sides z(sd − shift) below and z(sd + shift) above, at every level; the width
    (the stopping rule's) is the symmetric interval's of the same sd."""
    est = Estimate(0.9, 0.04**2, 20, 100, bounds=(0.0, 1.0), shift=-0.015)
    for level, z in ((0.95, 1.959964), (0.8, 1.281552)):
        lo, hi = est.ci(level)
        assert 0.9 - lo == pytest.approx(z * 0.055, rel=1e-5) and hi - 0.9 == pytest.approx(z * 0.025, rel=1e-5)
        assert est.width(level) == pytest.approx(2 * z * 0.04, rel=1e-5)
    assert Estimate(0.9, 0.04**2, 20, 100, shift=0.0).ci() == Estimate(0.9, 0.04**2, 20, 100).ci()
    top = Estimate(0.99, 0.03**2, 20, 100, bounds=(0.0, 1.0), shift=0.02)
    assert top.ci()[1] == 1.0  # clipped as before
    assert Estimate(0.5, 0.0, 100, 100, shift=0.0).ci() == (0.5, 0.5)


def test_an_estimates_plain_data_rebuilds_its_interval_from_the_shift() -> None:
    """to_dict carries the shift: estimate + z·(shift ± std) is ci_low / ci_high (unclipped), at any level."""
    for shift in (0.0, -0.015, 0.01):
        est = Estimate(0.6, 0.04**2, 20, 100, bounds=(0.0, 1.0), shift=shift)
        for level, z in ((0.95, 1.959963985), (0.8, 1.281551566)):
            d = est.to_dict(level)
            assert d["shift"] == shift
            assert (d["ci_low"], d["ci_high"]) == est.ci(level)
            assert d["ci_low"] == pytest.approx(d["estimate"] + z * (d["shift"] - d["std"]), abs=1e-9)
            assert d["ci_high"] == pytest.approx(d["estimate"] + z * (d["shift"] + d["std"]), abs=1e-9)


def test_registry() -> None:
    ref = small()
    assert make_method("bayesame-paper-rs", ref, seed=0).active is False
    with pytest.raises(ConfigurationError, match=r"unknown method 'bayesme' \(did you mean 'bayesame'\?\)"):
        make_method("bayesme", ref)


def test_no_runtime_warnings_on_degenerate_references() -> None:
    """All references identical: one bucket, every item alike; nothing blows up."""
    ref = ScoreMatrix(np.ones((4, 15)), kind="binary")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        method = BayesAME(ref, seed=0)
        for i in range(15):
            method.observe(method.select(), float(i % 2))
    assert method.estimate().var == pytest.approx(0.0, abs=1e-15)


def test_sharing_factory_derives_reference_state_once_and_changes_nothing(monkeypatch):
    import numpy as np

    from activeeval.data.matrix import ScoreMatrix
    from activeeval.methods import cat as cat_module
    from activeeval.methods.registry import make_method, sharing_factory

    rng = np.random.default_rng(2)
    y = np.clip(rng.normal(0.5, 0.2, (16, 60)) + np.linspace(-0.2, 0.2, 16)[:, None], 0, 1)
    ref = ScoreMatrix(y[1:], [f"m{j}" for j in range(1, 16)], [f"i{i}" for i in range(60)])
    learned = []
    real = cat_module.learn_reference_errors
    monkeypatch.setattr(cat_module, "learn_reference_errors", lambda *a, **k: learned.append(1) or real(*a, **k))
    make = sharing_factory("cat", ref)
    shared = [make(seed=s) for s in (3, 4, 5)]
    assert len(learned) == 1  # the error model and interval were learned for the first target only
    for s, m in zip((3, 4, 5), shared):
        fresh = make_method("cat", ref, seed=s)
        for _ in range(8):
            i = fresh.select()
            assert m.select() == i
            fresh.observe(i, y[0, i])
            m.observe(i, y[0, i])
        assert m.estimate() == fresh.estimate() and m.ability() == fresh.ability()
