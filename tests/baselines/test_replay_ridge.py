"""Fast backtest replays of Bayes-AIPW and Bayes-RS-Learn against the sequential methods.

``replay(reference, truths, seed)`` must give, for every target, the
trajectory that ``make_method(name, reference, seed=seed)`` + ``run_fixed``
gives, to round-off (rtol 1e-9, atol 1e-12).
"""

from __future__ import annotations

import numpy as np
import pytest
from replay_support import step_by_step, subset

from activeeval.data.matrix import ScoreMatrix
from activeeval.datasets import load
from activeeval.exceptions import ConfigurationError, InvalidScoresError, MissingScoresWarning
from activeeval.methods.base import random_order
from activeeval.methods.baselines import BayesAIPW, BayesRSLearn, _ridge
from activeeval.methods.baselines._common import worst_case_var
from activeeval.methods.registry import METHODS, make_method, register, resolve_replay, unregister

REPLAYS = {"bayes-aipw": BayesAIPW.replay, "bayes-rs-learn": BayesRSLearn.replay}
SEEDS = [0, 1, 5]
RTOL, ATOL = 1e-9, 1e-12  # the interface's tolerance: the two paths differ by round-off only


@pytest.fixture(scope="module")
def long_data() -> tuple[ScoreMatrix, np.ndarray]:
    # 30 models, 150 items: 120 rank-one updates, so the tracker refreshes its decomposition on the way
    return subset(load("musr"), n_refs=30, n_items=150, seed=2)


def _assert_replay_equals_sequential(
    name: str, reference: ScoreMatrix, truths: np.ndarray, seed: int, **options
) -> tuple[np.ndarray, np.ndarray]:
    means, variances = REPLAYS[name](reference, truths, seed, **options)
    assert means.shape == variances.shape == truths.shape
    for t, truth in enumerate(truths):
        seq_means, seq_vars, items = step_by_step(name, reference, truth, seed, **options)
        np.testing.assert_array_equal(items, random_order(seed, reference.n_items))
        np.testing.assert_allclose(means[t], seq_means, rtol=RTOL, atol=ATOL, err_msg=f"{name} R̂, target {t}")
        np.testing.assert_allclose(variances[t], seq_vars, rtol=RTOL, atol=ATOL, err_msg=f"{name} Var_R, target {t}")
    return means, variances


# ------------------------------------------------ replay == sequential run
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_equals_sequential_binary(name: str, seed: int, binary_data) -> None:
    reference, truths = binary_data
    assert reference.kind == "binary" and truths.shape == (3, 80)
    _assert_replay_equals_sequential(name, reference, truths, seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_equals_sequential_continuous(name: str, seed: int, continuous_data) -> None:
    reference, truths = continuous_data
    assert reference.kind == "continuous" and truths.shape == (3, 80)
    assert np.mean((truths > 0) & (truths < 1)) > 0.5  # real continuous scores
    _assert_replay_equals_sequential(name, reference, truths, seed)


@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_equals_sequential_through_tracker_refreshes(name: str, long_data) -> None:
    reference, truths = long_data
    _assert_replay_equals_sequential(name, reference, truths, 3)


@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_equals_sequential_without_the_rank_one_solver(
    name: str, binary_data, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference, truths = binary_data
    fast = REPLAYS[name](reference, truths, 4)
    monkeypatch.setattr(_ridge, "_dlaed9", lambda: None)  # every update by a new eigendecomposition
    means, variances = _assert_replay_equals_sequential(name, reference, truths, 4)
    np.testing.assert_allclose(means, fast[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variances, fast[1], rtol=RTOL, atol=ATOL)


def test_registry_finds_the_replays() -> None:
    for name, replay in REPLAYS.items():
        assert resolve_replay(name) is replay


class _Variant(BayesAIPW):
    """A subclass may play differently: it has no fast path until it declares its own."""


def test_a_replay_is_the_classs_own() -> None:
    assert resolve_replay("bayesame") is None and resolve_replay("no-such-method") is None
    register("variant", _Variant)
    try:
        assert METHODS["variant"] is _Variant
        assert resolve_replay("variant") is None  # not inherited: played step by step
    finally:
        unregister("variant")
    assert "variant" not in METHODS
    with pytest.raises(ConfigurationError, match="'bayes-aipw' is a built-in method; register yours under another"):
        register("bayes-aipw", BayesAIPW)  # nothing replaces a built-in behind the replay's back
    with pytest.raises(TypeError):
        METHODS["bayes-aipw"] = BayesAIPW  # type: ignore[index]  # read-only


# -------------------------------------------------------------- properties
def test_bayes_aipw_replay_special_cases(binary_data) -> None:
    reference, truths = binary_data
    means, variances = BayesAIPW.replay(reference, truths, 0)
    order = random_order(0, reference.n_items)
    np.testing.assert_array_equal(means[:, 0], truths[:, order[0]])  # n = 1: the single score ...
    np.testing.assert_array_equal(variances[:, 0], worst_case_var(reference))  # ... with the worst case
    np.testing.assert_allclose(means[:, -1], truths.mean(axis=1), rtol=1e-15)  # n = N: R̂ = R*
    np.testing.assert_array_equal(variances[:, -1], 0.0)  # and Var_R = 0
    assert np.all(variances[:, 1:-1] > 0)


def test_bayes_rs_learn_replay_is_not_exact_at_full_coverage(binary_data) -> None:
    reference, truths = binary_data
    means, variances = BayesRSLearn.replay(reference, truths, 0)
    assert np.all(variances > 0) and np.all(np.isfinite(means))
    assert np.abs(means[:, -1] - truths.mean(axis=1)).max() > 1e-6  # a regression, not R*


def test_the_same_design_serves_every_target(binary_data) -> None:
    # a target's trajectory does not depend on the other targets replayed with it
    reference, truths = binary_data
    for replay in REPLAYS.values():
        together = replay(reference, truths, 2)
        alone = replay(reference, truths[1:2], 2)
        np.testing.assert_allclose(together[0][1], alone[0][0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(together[1][1], alone[1][0], rtol=1e-12, atol=1e-15)


# ----------------------------------------------------------------- options
@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_takes_no_stopping_option_like_its_class(name: str, binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(TypeError, match="epsilon1"):  # stopping is the driver's (stopping.py), not a method's
        REPLAYS[name](reference, truths, 0, epsilon1=0.01, window=10, n_max=20)
    with pytest.raises(TypeError, match="window"):
        make_method(name, reference, seed=0, window=10)  # as the class


@pytest.mark.parametrize("name", list(REPLAYS))
def test_unknown_option_is_a_type_error(name: str, binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(TypeError, match="noise_var"):
        REPLAYS[name](reference, truths, 0, noise_var=0.1)
    with pytest.raises(TypeError, match="noise_var"):
        make_method(name, reference, seed=0, noise_var=0.1)  # as the class


@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_applies_the_missing_score_policy(name: str, binary_data) -> None:
    reference, truths = binary_data
    scores = reference.scores.copy()
    scores[3, 7] = np.nan  # model 3 is dropped (missing="models") or item 7 is (missing="items")
    holey = ScoreMatrix(scores, reference.model_ids, reference.item_ids, kind="binary")
    with pytest.warns(MissingScoresWarning):
        means, variances = REPLAYS[name](holey, truths, 0)
    with pytest.warns(MissingScoresWarning):
        seq_means, seq_vars, _ = step_by_step(name, holey, truths[0], 0)
    np.testing.assert_allclose(means[0], seq_means, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variances[0], seq_vars, rtol=RTOL, atol=ATOL)
    with pytest.warns(MissingScoresWarning):
        means, _ = REPLAYS[name](holey, np.delete(truths, 7, axis=1), 0, missing="items")
    assert means.shape == (3, 79)


@pytest.mark.parametrize("name", list(REPLAYS))
def test_bad_inputs_are_rejected(name: str, binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(InvalidScoresError, match="shape"):
        REPLAYS[name](reference, truths[:, :-1], 0)
    with pytest.raises(ConfigurationError, match="seed"):
        REPLAYS[name](reference, truths, -1)
