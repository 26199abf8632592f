"""Backtest protocol (splits, references, seeds) and metrics: hand values and exact equivalences."""

from __future__ import annotations

import numpy as np
import pytest

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.metrics import (
    coverage_curve,
    covered,
    ew_irmse,
    rmse_curve,
    rmse_gain_db,
    spearman_across_targets,
    stop_indices,
)
from activeeval.experiments.protocol import BacktestConfig, make_split, method_seed, sample_references
from activeeval.experiments.simulate import run_until_stop
from activeeval.methods.baselines import RSMean
from activeeval.stopping import WindowCIRule


def toy_matrix(n_models: int = 30, n_items: int = 40, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability = np.sort(rng.normal(size=n_models))
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(size=n_items)[None, :])))
    scores = (rng.random((n_models, n_items)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{j:02d}" for j in range(n_models)], [f"i{i}" for i in range(n_items)],
                       kind="binary", name="toy")


# ------------------------------------------------------------------ splits
def test_interpolation_split_is_deterministic_and_disjoint() -> None:
    m = toy_matrix()
    a, b = make_split(m, "interpolation", 5, split_seed=3), make_split(m, "interpolation", 5, split_seed=3)
    assert a == b and len(a.targets) == 5
    assert not set(a.targets) & set(a.pool) and len(a.pool) == 25
    assert make_split(m, "interpolation", 5, split_seed=4).targets != a.targets


def test_extrapolation_split_takes_the_best_and_discards_a_gap() -> None:
    m = toy_matrix()
    full = m.scores.mean(axis=1)
    s = make_split(m, "extrapolation", 5)
    order = sorted(range(30), key=lambda j: (-full[j], m.model_ids[j]))
    assert s.targets == tuple(m.model_ids[j] for j in order[:5])
    assert len(s.discarded) == 6  # round(0.2 · 30)
    assert min(full[m.model_index(t)] for t in s.targets) >= max(full[m.model_index(p)] for p in s.pool)


def test_exact_twins_of_a_target_leave_the_pool() -> None:
    m = toy_matrix()
    scores = np.vstack([m.scores, m.model_scores("m05")[None, :]])
    m2 = ScoreMatrix(scores, list(m.model_ids) + ["twin"], m.item_ids, kind="binary", name="toy")
    for split_seed in range(200):
        split = make_split(m2, "interpolation", 5, split_seed=split_seed)
        if "m05" in split.targets and "twin" not in split.targets:
            break
    else:  # pragma: no cover - 200 draws of 5 of 31 models
        pytest.fail("no split drew m05 without its twin")
    assert split.dropped_twins == ("twin",)
    assert "twin" not in split.pool and len(split.pool) == 31 - 5 - 1


def test_split_and_reference_errors_are_pinned() -> None:
    m = toy_matrix(n_models=12)
    with pytest.raises(ConfigurationError, match=r"n_targets=12 is too many: toy has 12 models with complete scores"):
        make_split(m, "interpolation", 12)
    with pytest.raises(ConfigurationError, match=r"the extrapolation split of toy \(12 models, 10 targets, "
                       r"2 discarded\) "
                       r"leaves 0 reference model\(s\); at least 2 are needed"):
        make_split(m, "extrapolation", 10)
    with pytest.raises(ConfigurationError, match=r"ref_fraction=0.05 of a pool of 20 models gives 1 reference model\(s\)"):
        sample_references(tuple(f"m{i}" for i in range(20)), 0.05, 0)
    with pytest.raises(ConfigurationError, match=r"ref_fraction= must be in \(0, 1\], got 1.5"):
        BacktestConfig(methods=("rs-mean",), ref_fraction=1.5)
    with pytest.raises(ConfigurationError, match=r"regime must be 'interpolation' or 'extrapolation', got 'mid'"):
        BacktestConfig(methods=("rs-mean",), regime="mid")


def test_reference_sample_and_method_seed_depend_only_on_coordinates() -> None:
    pool = tuple(f"m{i}" for i in range(20))
    assert sample_references(pool, 0.5, 7) == sample_references(pool, 0.5, 7)
    assert sample_references(pool, 0.5, 7) != sample_references(pool, 0.5, 8)
    assert len(sample_references(pool, 0.5, 7)) == 10
    assert method_seed(0, 1, 2) == method_seed(0, 1, 2) != method_seed(0, 1, 3)


# ----------------------------------------------------------------- metrics
def test_rmse_curve_by_hand() -> None:
    # 2 targets, 2 seeds, 1 n: errors (0.1, −0.1) → RMSE 0.1; (0.3, 0.4) → sqrt(0.125)
    means = np.array([[[0.6], [0.4]], [[0.3], [0.4]]])
    truth = np.array([0.5, 0.0])
    assert rmse_curve(means, truth)[0] == pytest.approx((0.1 + np.sqrt(0.125)) / 2)


def test_ew_irmse_and_gain_by_hand() -> None:
    # N = 2, RMSE ≡ r: x = (0.5, 1), 100 · trapezoid(100 r x) = 100 · 0.5 · (50r + 100r)/2 = 3750 r
    assert ew_irmse(np.array([0.01, 0.01])) == pytest.approx(37.5)
    assert rmse_gain_db(np.array([0.05]), np.array([0.1]))[0] == pytest.approx(20 * np.log10(2))
    assert np.isnan(rmse_gain_db(np.array([0.0]), np.array([0.1]))[0])  # exact method: gain undefined


def test_coverage_by_hand() -> None:
    truth = np.array([0.5])
    means = np.array([[[0.5 + 1.9], [0.5 + 2.0]]])  # 1.9 and 2.0 sd away with var = 1
    vars_ = np.ones_like(means)
    assert covered(means, vars_, truth).ravel().tolist() == [True, False]  # z = 1.95996
    assert coverage_curve(means.reshape(1, 1, 2), vars_.reshape(1, 1, 2), truth).tolist() == [1.0, 0.0]


def test_coverage_of_an_interval_with_two_sides_is_estimates_ci() -> None:
    """covered(..., shifts) is Estimate.ci's membership, and standardised_errors ≤ z exactly when covered."""
    from activeeval.experiments.metrics import standardised_errors
    from activeeval.methods.estimate import Estimate

    rng = np.random.default_rng(0)
    truth = rng.random(40)
    means = rng.random((40, 3, 5))
    sd = rng.uniform(0.05, 0.4, means.shape)
    shifts = sd * rng.uniform(-1, 1, means.shape)
    got = covered(means, sd**2, truth, shifts=shifts)
    z = 1.959963984540054
    err = standardised_errors(means, sd**2, truth, shifts)
    for idx in np.ndindex(means.shape):
        lo, hi = Estimate(means[idx], sd[idx] ** 2, 1, 10, shift=shifts[idx]).ci()
        assert got[idx] == (lo - 1e-12 <= truth[idx[0]] <= hi + 1e-12)
        assert got[idx] == (err[idx] <= z + 1e-9)
    assert np.array_equal(covered(means, sd**2, truth, shifts=np.zeros_like(means)), covered(means, sd**2, truth))
    assert np.allclose(standardised_errors(means, sd**2, truth), np.abs(means - truth[:, None, None]) / sd)


def test_spearman_by_hand() -> None:
    truth = np.array([0.1, 0.5, 0.3])
    assert spearman_across_targets(np.array([1.0, 3.0, 2.0]), truth) == pytest.approx(1.0)
    assert spearman_across_targets(np.array([3.0, 1.0, 2.0]), truth) == pytest.approx(-1.0)
    assert np.isnan(spearman_across_targets(np.array([1.0, 1.0, 1.0]), truth))


@pytest.mark.parametrize("epsilon2", [0.05, 0.1, 0.2, 0.3])
def test_stop_from_trajectory_equals_running_the_rule(epsilon2: float) -> None:
    m = toy_matrix(n_items=120)
    truth = m.scores[0]
    ref = m.drop_models([m.model_ids[0]])
    full = RSMean(ref, seed=5)
    for _ in range(120):
        item = full.select()
        full.observe(item, float(truth[item]))
    traj = full.trajectory
    means = np.array([[[e.mean for e in traj]]])
    vars_ = np.array([[[e.var for e in traj]]])
    expected_stop = stop_indices(means, vars_, 0.02, epsilon2, 30)[0, 0]
    live = RSMean(ref, seed=5)
    run_until_stop(live, truth, WindowCIRule(epsilon1=0.02, epsilon2=epsilon2, window=30))
    assert live.n_observed == expected_stop


def test_parse_draws_reads_ids_and_ranges_and_names_what_it_cannot_read() -> None:
    from activeeval.exceptions import ConfigurationError
    from activeeval.experiments.protocol import parse_draws

    assert parse_draws("0-4") == [0, 1, 2, 3, 4]
    assert parse_draws("0,3,7") == [0, 3, 7]
    assert parse_draws("0-2, 5") == [0, 1, 2, 5]
    assert parse_draws("7") == [7]
    with pytest.raises(ConfigurationError, match="cannot read the draws 'a-b'"):
        parse_draws("a-b")
