"""Design-based maths: the Wilson bounds and the sampling-variance floor of RS-Mean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq

from activeeval import RSMean, ScoreMatrix
from activeeval.design import effective_sample_size, sampling_var_floor, wilson_bounds

Z = 1.959963984540054


@given(k=st.integers(0, 200), extra=st.integers(0, 200))
def test_wilson_bounds_solve_the_score_equation(k: int, extra: int) -> None:
    """L and U are the roots of |p̂ − p| = z sqrt(p(1 − p)/n) (brute force by bracketing)."""
    n = k + extra
    if n == 0:
        return
    p_hat = k / n
    lo, hi = wilson_bounds(np.array(p_hat), np.array(float(n)), Z)

    def g(p: float) -> float:
        return (p_hat - p) ** 2 - Z * Z * p * (1 - p) / n

    # g ≤ 0 between the bounds and > 0 beyond them; at p̂ ∈ {0, 1} one bound is p̂ itself and
    # the other is the non-trivial root, bracketed just off p̂ (where g < 0)
    inner_lo, inner_hi = max(p_hat, 1e-12), min(p_hat, 1 - 1e-12)
    exp_lo = 0.0 if k == 0 else brentq(g, 0.0, inner_hi)
    exp_hi = 1.0 if k == n else brentq(g, inner_lo, 1.0)
    assert float(lo) == pytest.approx(exp_lo, abs=1e-10)  # brentq's default xtol is 2e-12
    assert float(hi) == pytest.approx(exp_hi, abs=1e-10)


def test_effective_sample_size_is_the_finite_population_correction() -> None:
    n_eff = effective_sample_size(np.array([1.0, 50.0, 100.0]), 100)
    # p(1-p)/n' == p(1-p)/n * (N-n)/(N-1)
    assert n_eff[0] == pytest.approx(1.0)
    assert n_eff[1] == pytest.approx(50 * 99 / 50)
    assert np.isinf(n_eff[2])


def test_floor_binary_all_zero_is_wilsons_upper_bound() -> None:
    n, big = 40, 10**9
    floor = sampling_var_floor(0.0, 0.0, 0.0, n, big, (0.0, 1.0), binary=True)
    # mean ± z·sd must reach Wilson's upper bound z²/(n + z²) (for 0 successes, N ≫ n)
    assert Z * np.sqrt(floor) == pytest.approx(Z * Z / (n + Z * Z), rel=1e-6)  # N = 1e9: fpc ~ 4e-8


def test_floor_continuous_counts_only_the_unseen_range() -> None:
    n, big = 100, 10**9
    # every score seen in [0, 1]: nothing of the range is unseen, no floor
    assert sampling_var_floor(0.4, 0.0, 1.0, n, big, (0.0, 1.0), binary=False) == 0.0
    # seen [0.2, 0.7] of [0, 1]: the far gap is 0.3 (above)
    half = Z * np.sqrt(sampling_var_floor(0.4, 0.2, 0.7, n, big, (0.0, 1.0), binary=False))
    assert half == pytest.approx(Z * Z / (n + Z * Z) * 0.3, rel=1e-6)
    # unbounded scores: no floor
    assert sampling_var_floor(0.4, 0.2, 0.7, n, big, None, binary=False) == 0.0


def test_floor_vanishes_when_everything_is_observed() -> None:
    assert sampling_var_floor(0.0, 0.0, 0.0, 50, 50, (0.0, 1.0), binary=True) == 0.0
    assert sampling_var_floor(0.3, 0.3, 0.3, 50, 50, (0.0, 1.0), binary=False) == 0.0


def rare() -> ScoreMatrix:
    """Binary benchmark that the references almost never solve: 2 solved items of 400."""
    scores = np.zeros((4, 400))
    scores[:, :2] = 1.0
    return ScoreMatrix(scores, kind="binary", name="rare")


def test_rs_mean_no_zero_width_interval_on_a_run_of_zeros() -> None:
    ref = rare()
    method = RSMean(ref, seed=0)
    zeros = [i for i in range(2, 400)][:40]
    for item in zeros:
        method.observe(item, 0.0)
    est = method.estimate()
    assert est.mean == 0.0
    # Eq. 9 alone gives 0 here; the floor keeps the upper end at Wilson's bound (with the fpc)
    n_eff = 40 * 399 / 360
    assert est.ci()[1] == pytest.approx(Z * Z / (n_eff + Z * Z), rel=1e-9)
    assert est.ci()[1] > 0.05


def test_rs_mean_replay_keeps_the_floor() -> None:
    ref = rare()
    truths = np.zeros((2, 400))
    truths[1, :3] = 1.0
    means, vars_ = RSMean.replay(ref, truths, 0)
    one = RSMean(ref, seed=0)
    for _ in range(60):
        item = one.select()
        one.observe(item, float(truths[0, item]))
    # the replay equals the step-by-step play, floor included (rtol: running sums vs np.var)
    assert vars_[0, 59] == pytest.approx(one.estimate().var, rel=1e-9)
    assert vars_[0, 59] > 0.0
