"""Fast backtest replays of RS-Mean, ProEval, Seq-APW and IRT against the sequential methods.

``replay(reference, truths, seed)`` must give, for every target, the
trajectory that ``make_method(name, reference, seed=seed)`` + ``run_fixed``
gives, to round-off (rtol 1e-9, atol 1e-12).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from replay_support import step_by_step

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, InvalidScoresError, MissingScoresWarning, ScoreOutOfRangeError
from activeeval.irt.baseline import (
    ability_grid,
    grid_loglik,
    grid_loglik_all,
    grid_loglik_terms,
    item_moments,
    posterior_R,
    posterior_R_rows,
)
from activeeval.methods.base import random_order
from activeeval.methods.baselines import IRTBaseline, ProEval, RSMean, proeval
from activeeval.methods.baselines.irt import fit_item_params
from activeeval.methods.baselines.seq_apw import (
    SeqAPW,
    anchor_weight_path,
    anchor_weights,
    covering_order,
    item_similarity,
)
from activeeval.methods.registry import make_method

REPLAYS = {"rs-mean": RSMean.replay, "proeval": ProEval.replay, "seq-apw": SeqAPW.replay, "irt": IRTBaseline.replay}
SEEDS = [0, 1, 5]
RTOL, ATOL = 1e-9, 1e-12  # the interface's tolerance: the two paths differ by round-off only


def _assert_replay_equals_sequential(
    name: str, reference: ScoreMatrix, truths: np.ndarray, seed: int, **options
) -> None:
    means, variances = REPLAYS[name](reference, truths, seed, **options)
    assert means.shape == variances.shape == truths.shape
    for t, truth in enumerate(truths):
        seq_means, seq_vars, _ = step_by_step(name, reference, truth, seed, **options)
        np.testing.assert_allclose(means[t], seq_means, rtol=RTOL, atol=ATOL, err_msg=f"{name} R̂, target {t}")
        np.testing.assert_allclose(variances[t], seq_vars, rtol=RTOL, atol=ATOL, err_msg=f"{name} Var_R, target {t}")


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
    # real continuous scores: no two targets' rows are equal, most scores are not 0 or 1
    assert np.mean((truths > 0) & (truths < 1)) > 0.5
    _assert_replay_equals_sequential(name, reference, truths, seed)


@pytest.mark.parametrize(
    ("name", "options"),
    [("proeval", {"noise_var": 0.05}), ("irt", {"grid_points": 15}), ("irt", {"model": "2pl", "grid_points": 51})],
)
def test_replay_passes_the_method_options(name: str, options: dict, binary_data) -> None:
    reference, truths = binary_data
    _assert_replay_equals_sequential(name, reference, truths, 2, **options)
    default_means, _ = REPLAYS[name](reference, truths, 2)
    means, _ = REPLAYS[name](reference, truths, 2, **options)
    # the option changed the result beyond round-off (equally spaced quadrature of a smooth posterior
    # converges fast: 101 points would already agree with 401 to round-off, 15 do not)
    assert np.abs(means - default_means).max() > 1e-11


def test_replay_takes_no_stopping_option_like_its_class(binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(TypeError, match="epsilon1"):  # stopping is the driver's (stopping.py), not a method's
        RSMean.replay(reference, truths, 0, epsilon1=0.01, window=10, n_max=20)
    with pytest.raises(TypeError, match="window"):
        make_method("rs-mean", reference, seed=0, window=10)  # as the class


def test_replay_applies_the_missing_score_policy(binary_data) -> None:
    reference, truths = binary_data
    scores = reference.scores.copy()
    scores[3, 7] = np.nan  # model 3 is dropped (missing="models") or item 7 is (missing="items")
    holey = ScoreMatrix(scores, reference.model_ids, reference.item_ids, kind="binary")
    with pytest.warns(MissingScoresWarning):
        means, variances = SeqAPW.replay(holey, truths, 0)
    with pytest.warns(MissingScoresWarning):
        seq_means, seq_vars, _ = step_by_step("seq-apw", holey, truths[0], 0)
    np.testing.assert_allclose(means[0], seq_means, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(variances[0], seq_vars, rtol=RTOL, atol=ATOL)
    kept = np.delete(truths, 7, axis=1)  # with missing="items" the targets' rows lose item 7 too
    with pytest.warns(MissingScoresWarning):
        means, _ = RSMean.replay(holey, kept, 0, missing="items")
    assert means.shape == (3, 79)


# ---------------------------------------------------- orders and pieces
@pytest.mark.parametrize("seed", [0, 4])
def test_rs_mean_plays_random_order(seed: int, binary_data) -> None:
    reference, truths = binary_data
    _, _, items = step_by_step("rs-mean", reference, truths[0], seed)
    np.testing.assert_array_equal(items, random_order(seed, reference.n_items))
    means, _ = RSMean.replay(reference, truths, seed)
    ordered = truths[:, random_order(seed, reference.n_items)]
    np.testing.assert_allclose(means[:, 9], ordered[:, :10].mean(axis=1), rtol=1e-15)  # mean of the first 10


def _binary_with_ties(n_models: int, n_items: int, seed: int) -> ScoreMatrix:
    """Few models, so many items share a score vector and covering gains tie."""
    rng = np.random.default_rng(seed)
    scores = (rng.random((n_models, n_items)) < rng.random(n_items)).astype(float)
    return ScoreMatrix(scores, [f"m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)], kind="binary")


@pytest.mark.parametrize("case", range(6))
def test_covering_order_is_the_methods_choice_bit_for_bit(case: int) -> None:
    reference = _binary_with_ties(3 + case, 25 + 7 * case, seed=case)
    sim = item_similarity(reference.scores.T)
    for seed in (0, 1, 2):
        method = SeqAPW(reference, seed=seed)
        picked = []
        for _ in range(reference.n_items):
            picked.append(method.select())
            method.observe(picked[-1], 0.0)
        # the dense gain throughout, the sparse one from the first step on, and the default switch
        for dense_fraction in (0.0, 0.25, 1.0):
            np.testing.assert_array_equal(covering_order(sim, seed, dense_fraction=dense_fraction), picked)


def test_covering_order_breaks_ties_with_the_seed() -> None:
    reference = _binary_with_ties(3, 40, seed=0)  # 3 models: at most 8 distinct items, many ties
    sim = item_similarity(reference.scores.T)
    orders = {tuple(covering_order(sim, seed)) for seed in range(5)}
    assert len(orders) > 1


def test_anchor_weight_path_equals_anchor_weights_for_every_prefix(binary_data) -> None:
    reference, _ = binary_data
    sim = item_similarity(reference.scores.T)
    order = covering_order(sim, 3)
    tied = item_similarity(_binary_with_ties(3, 30, seed=1).scores.T)  # identical items: ties to the earlier anchor
    for s, o in ((sim, order), (tied, np.random.default_rng(0).permutation(30))):
        for n, weights in enumerate(anchor_weight_path(s, o), start=1):
            np.testing.assert_array_equal(weights, anchor_weights(s, o[:n]))


def test_irt_grid_pieces_equal_the_per_item_functions(binary_data, continuous_data) -> None:
    grid, log_prior = ability_grid(61)
    for reference, truths in (binary_data, continuous_data):
        params = fit_item_params(reference)
        table = grid_loglik_all(params, grid, truths[0], grid_loglik_terms(params, grid))
        per_item = np.column_stack([grid_loglik(params, grid, i, truths[0, i]) for i in range(reference.n_items)])
        np.testing.assert_allclose(table, per_item, rtol=1e-14, atol=0)  # same operations element by element
        mu, var = item_moments(params, grid)
        log_post = log_prior + np.cumsum(table.T, axis=0)[:10]
        sums = np.cumsum(truths[0])[:10]
        u_mean = mu.sum(axis=1) - np.cumsum(mu.T, axis=0)[:10]
        u_var = var.sum(axis=1) - np.cumsum(var.T, axis=0)[:10]
        rows = posterior_R_rows(log_post, sums, u_mean, u_var, reference.n_items)
        for r in range(10):
            mean, v = posterior_R(log_post[r], sums[r], u_mean[r], u_var[r], reference.n_items)
            assert rows[0][r] == pytest.approx(mean, rel=1e-13)  # only the sums' order differs
            assert rows[1][r] == pytest.approx(v, rel=1e-12)


def test_proeval_path_keeps_late_variances_accurate(binary_data) -> None:
    reference, truths = binary_data
    m, a = proeval.proeval_factor(reference.scores)
    order = random_order(0, reference.n_items)
    _, var = proeval.proeval_path(m, a, order, truths, 1e-4)  # a small σ²: Var_R falls by orders of magnitude
    for n in (1, 40, 79, 80):
        _, expected = proeval.proeval_posterior(m, a, order[:n], truths[0, order[:n]], 1e-4)
        assert var[n - 1] == pytest.approx(expected, rel=1e-9)
    assert var[-1] < 1e-2 * var[0]


# ----------------------------------------------------------------- errors
@pytest.mark.parametrize("name", list(REPLAYS))
def test_unknown_option_is_a_type_error(name: str, binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'noise'"):
        REPLAYS[name](reference, truths, 0, noise=0.1)
    with pytest.raises(TypeError):  # the class rejects it too
        make_method(name, reference, seed=0, noise=0.1)


def test_bad_method_options_raise_as_the_class_does(binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(ConfigurationError, match=r"noise_var must be a positive number, got -1.0; try 0.3"):
        ProEval.replay(reference, truths, 0, noise_var=-1.0)
    with pytest.raises(ConfigurationError, match=r"grid_points must be an integer >= 11, got 3"):
        IRTBaseline.replay(reference, truths, 0, grid_points=3)
    with pytest.raises(ConfigurationError, match=r"model must be 'auto', '2pl' or 'beta', got 'rasch'"):
        IRTBaseline.replay(reference, truths, 0, model="rasch")


def test_bad_inputs_are_rejected(binary_data) -> None:
    reference, truths = binary_data
    with pytest.raises(InvalidScoresError, match=r"truths must have shape \(targets, 80\).*got \(80,\)"):
        RSMean.replay(reference, truths[0], 0)
    bad = truths.copy()
    bad[1, 5] = np.nan
    with pytest.raises(InvalidScoresError, match=r"target 1 has a missing or infinite score"):
        SeqAPW.replay(reference, bad, 0)
    bad[1, 5] = 0.5
    with pytest.raises(ScoreOutOfRangeError, match=r"target 1 scores 0.5 .* but the reference is binary"):
        ProEval.replay(reference, bad, 0)
    with pytest.raises(ConfigurationError, match=r"fixed non-negative int seed"):
        IRTBaseline.replay(reference, truths, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete reference: no warning
        RSMean.replay(reference, truths, 0)
