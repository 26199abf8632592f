"""Design-based maths: the Wilson bounds and the sampling-variance floor of RS-Mean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import brentq

from activeeval import RSMean, ScoreMatrix
from activeeval.design import effective_sample_size, sampling_var_floor, wilson_bounds
from activeeval.exceptions import ConfigurationError

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
    _means, vars_ = RSMean.replay(ref, truths, 0)
    one = RSMean(ref, seed=0)
    for _ in range(60):
        item = one.select()
        one.observe(item, float(truths[0, item]))
    # the replay equals the step-by-step play, floor included (rtol: running sums vs np.var)
    assert vars_[0, 59] == pytest.approx(one.estimate().var, rel=1e-9)
    assert vars_[0, 59] > 0.0


# ------------------------------------------------------------------ issue 25: the ridge control, the variance
def _ridge_closed_form(x: np.ndarray, y: np.ndarray, alpha: float, x_all: np.ndarray) -> np.ndarray:
    """min ‖y − b0 − Xβ‖² + α‖β‖² (intercept not penalised), predicted on ``x_all``."""
    n, k = x.shape
    design = np.hstack([np.ones((n, 1)), x])
    penalty = alpha * np.eye(k + 1)
    penalty[0, 0] = 0.0
    coef = np.linalg.solve(design.T @ design + penalty, design.T @ y)
    return coef[0] + x_all @ coef[1:]


@pytest.mark.parametrize("primal_max", [512, 0])
def test_ridge_control_is_the_ridge_with_an_intercept(monkeypatch: pytest.MonkeyPatch, primal_max: int) -> None:
    """Primal (K × K sums) and dual (n × n Gram) both equal scikit-learn's Ridge(alpha) with an intercept, at the
    α of the smallest leave-one-out error (n > K here with the primal, n < K with the dual)."""
    import activeeval.design as design

    monkeypatch.setattr(design, "RIDGE_PRIMAL_MAX", primal_max)
    rng = np.random.default_rng(3)
    features = rng.random((80, 15))
    y = features @ rng.normal(size=15) + 0.1 * rng.normal(size=80)
    ridge = design.RidgeControl(features, alpha=10.0)
    items = rng.permutation(80)[:25]
    assert np.all(ridge.predict() == 0.0)  # nothing scored: the plain mean of nothing
    for t, i in enumerate(items):
        ridge.add(int(i), float(y[i]))
        if t == 0:
            assert np.allclose(ridge.predict(), y[i])  # one item: its score everywhere
    pred = ridge.predict()  # chooses α by leave-one-out error
    want = _ridge_closed_form(features[items], y[items], ridge.alpha_, features)
    assert np.allclose(pred, want, atol=1e-10)
    # the choice is the brute-force leave-one-out argmin over the grid (relative to tr(X_cᵀX_c)/K)
    x, yy = features[items], y[items]
    scale = float(((x - x.mean(0)) ** 2).sum()) / x.shape[1]
    loo = []
    for rel in design.RIDGE_ALPHAS:
        errs = [yy[j] - _ridge_closed_form(np.delete(x, j, 0), np.delete(yy, j), rel * scale, x[j : j + 1])[0]
                for j in range(len(items))]
        loo.append(float(np.sum(np.square(errs))))
    assert ridge.alpha_ == pytest.approx(design.RIDGE_ALPHAS[int(np.argmin(loo))] * scale, rel=1e-12)


def test_ridge_control_predictions_stay_in_the_score_range() -> None:
    from activeeval.design import RidgeControl

    rng = np.random.default_rng(4)
    features = rng.random((40, 6))
    ridge = RidgeControl(features, alpha=0.01, score_range=(0.0, 1.0))
    for i in range(12):
        ridge.add(i, float(features[i] @ np.full(6, 0.5) * 2.0))  # scores that run past 1
    pred = ridge.predict()
    assert pred.min() >= 0.0 and pred.max() <= 1.0


def _prequential_run(pop: np.ndarray, order: np.ndarray, n: int, start: float, variance: str) -> tuple[float, float]:
    from activeeval.design import Prequential

    p = Prequential(pop.size, n_controls=0)
    total = 0.0
    for t, i in enumerate(order[:n]):
        p.add(float(pop[i]), total, pop.size - t, total / t if t else start, np.zeros(0), np.zeros(0))
        total += pop[i]
    return p.estimate(1.0, variance=variance)


def test_the_increments_variance_is_honest_and_leaves_out_the_first_predictions_bias() -> None:
    """Over many random orders, the mean reported variance ≈ the estimates' real variance for "increments";
    "residuals" also counts the bias of the first prediction (a start far from the scores) and overstates it."""
    rng = np.random.default_rng(5)
    pop = (rng.random(300) < 0.8).astype(float)
    runs = {"increments": [], "residuals": []}
    for rep in range(1500):
        order = np.random.default_rng(rep).permutation(pop.size)
        for variance, out in runs.items():
            out.append(_prequential_run(pop, order, 20, 0.2, variance))
    est = np.array([m for m, _ in runs["increments"]])
    assert np.allclose(est, [m for m, _ in runs["residuals"]])  # the same estimate: only the variance differs
    real = est.var()
    inc = np.mean([v for _, v in runs["increments"]])
    res = np.mean([v for _, v in runs["residuals"]])
    assert 0.85 * real < inc < 1.15 * real
    assert res > 1.2 * real


def test_variance_reduction_is_measured_out_of_sample() -> None:
    from activeeval.design import Prequential

    rng = np.random.default_rng(6)
    pop = rng.random(100)
    for pred, low, high in ((pop, 10.0, np.inf), (rng.random(100), 0.0, 1.5)):
        p = Prequential(100, n_controls=1, b_prior=np.ones(1))
        total = 0.0
        assert p.variance_reduction == 1.0
        for t, i in enumerate(rng.permutation(100)[:30]):
            p.add(float(pop[i]), total, 100 - t, total / t if t else 0.5, pred[i : i + 1], np.array([pred.sum()]))
            total += pop[i]
        assert low <= p.variance_reduction <= high  # a perfect control: only the first steps' residuals (before it won); a useless one: ≈ 1


@given(st.floats(0.0, 1.0), st.integers(1, 400), st.integers(0, 600), st.booleans())
def test_the_split_floor_is_never_above_the_two_sided_one(p: float, n: int, extra: int, binary: bool) -> None:
    """Splitting α between the two sides can only shrink the symmetric floor (the even split is a candidate)."""
    n_items = n + extra
    low, high = (0.0, 1.0) if binary else (min(p, 0.3), max(p, 0.8))
    both = sampling_var_floor(p, low, high, n, n_items, (0.0, 1.0), binary)
    split = sampling_var_floor(p, low, high, n, n_items, (0.0, 1.0), binary, split=True)
    assert split <= both * (1 + 1e-9) + 1e-300


def test_the_split_floor_is_wilsons_at_one_half_and_narrower_near_a_bound() -> None:
    both = sampling_var_floor(0.5, 0.0, 1.0, 14, 10**9, (0.0, 1.0), True)
    split = sampling_var_floor(0.5, 0.0, 1.0, 14, 10**9, (0.0, 1.0), True, split=True)
    assert split == pytest.approx(both, rel=1e-9)  # symmetric bounds: the even split is the best
    both = sampling_var_floor(0.9, 0.0, 1.0, 14, 10**9, (0.0, 1.0), True)
    split = sampling_var_floor(0.9, 0.0, 1.0, 14, 10**9, (0.0, 1.0), True, split=True)
    assert split < 0.7 * both  # Wilson's at 0.9 of 14: 0.27 below, 0.12 above; the split spends α below
    # arrays broadcast as the scalars do
    many = sampling_var_floor(np.array([0.5, 0.9]), 0.0, 1.0, np.array([14, 14]), 10**9, (0.0, 1.0), True, split=True)
    assert many.shape == (2,) and many[1] == pytest.approx(split, rel=1e-12)


@pytest.mark.parametrize("n", [10, 30, 100])
def test_the_split_floor_covers_as_nominal_on_average_where_the_two_sided_one_over_covers(n: int) -> None:
    """Exact binomial coverage of p̂ ± 1.96·sqrt(max(Wald, floor)), averaged over p in [0.02, 0.98] (N = ∞):
    the split floor's is the nominal 95 % (0.940–0.965), the two-sided floor's about 97 %."""
    from math import comb

    z = 1.959963984540054
    k = np.arange(n + 1)
    p_hat = k / n
    wald = p_hat * (1 - p_hat) / (n - 1)
    coverage = {}
    for split in (False, True):
        floor = sampling_var_floor(p_hat, 0.0, 1.0, np.full(n + 1, n), 10**12, (0.0, 1.0), True, split=split)
        half = z * np.sqrt(np.maximum(wald, floor))
        covs = []
        for p in np.linspace(0.02, 0.98, 49):
            pmf = np.array([comb(n, j) * p**j * (1 - p) ** (n - j) for j in k])
            covs.append(pmf[np.abs(p_hat - p) <= half].sum())
        coverage[split] = float(np.mean(covs))
    assert 0.940 <= coverage[True] <= 0.965
    assert coverage[False] >= coverage[True] + 0.005


def _weighted_run(pop: np.ndarray, rng: np.random.Generator, n: int, block_at: int | None = None):
    """n draws without replacement with unequal known probabilities (∝ 1 + 2·[item odd]), no control variate:
    the Prequential, and each step's (T, w, earlier) computed by hand."""
    from activeeval.design import Prequential

    p = Prequential(pop.size, n_controls=0)
    free = np.ones(pop.size, bool)
    total, steps = 0.0, []
    weight = 1.0 + 2.0 * (np.arange(pop.size) % 2)
    for t in range(n):
        if t == block_at:
            p.start_block()
        q = np.where(free, weight, 0.0)
        q /= q.sum()
        i = int(rng.choice(pop.size, p=q))
        u = pop.size - t
        ybar = total / t if t else 0.5
        p.add(float(pop[i]), total, u, ybar, np.zeros(0), np.zeros(0), prob=float(q[i]))
        steps.append(((total + u * ybar) / pop.size + (pop[i] - ybar) / (pop.size * q[i]), 1.0 / (u * (u - 1.0)),
                      block_at is not None and t < block_at))
        free[i] = False
        total += pop[i]
    return p, steps


def test_the_earlier_block_is_weighted_down_exactly_and_at_weight_one_nothing_changes() -> None:
    pop = (np.random.default_rng(3).random(80) < 0.7).astype(float)
    plain, _ = _weighted_run(pop, np.random.default_rng(4), 30)
    blocked, steps = _weighted_run(pop, np.random.default_rng(4), 30, block_at=12)
    for variance in ("residuals", "increments", "weighted"):
        assert blocked.estimate(1.0, variance) == plain.estimate(1.0, variance)
    t, w, early = (np.array(x, dtype=float) for x in zip(*steps, strict=True))
    g = np.where(early > 0, 0.25, 1.0)
    mean, var = blocked.estimate(1.0, "increments", earlier_weight=0.25)
    assert mean == pytest.approx(np.sum(g * w * t) / np.sum(g * w), rel=1e-12)
    spread = sum(np.sum(w[m] * (t[m] - np.sum(w[m] * t[m]) / np.sum(w[m])) ** 2) for m in (early > 0, early == 0))
    assert var == pytest.approx(spread / (30 - 2) / np.sum(g * w), rel=1e-9)  # pooled within the two blocks
    assert blocked.effective_count(0.25) == pytest.approx(0.25 * 12 + 18)


def test_the_weighted_variance_is_honest_for_unequal_probabilities() -> None:
    """Over many runs of draws with unequal known probabilities, the inverse-probability estimate is unbiased,
    and the mean "weighted" variance is at least its real variance (it also counts the plain predictions' bias),
    not far above it."""
    pop = (np.random.default_rng(5).random(200) < 0.8).astype(float)
    runs = [_weighted_run(pop, np.random.default_rng(rep), 25)[0] for rep in range(1500)]
    est = np.array([r.estimate(1.0, "weighted")[0] for r in runs])
    real = np.mean((est - pop.mean()) ** 2)
    assert abs(est.mean() - pop.mean()) < 3 * est.std() / np.sqrt(est.size)
    weighted = np.mean([r.estimate(1.0, "weighted")[1] for r in runs])
    assert real < weighted < 1.5 * real


# ------------------------------------------------------------------ intervals with two sides (Estimate.shift)
@given(st.floats(0.0, 1.0), st.integers(1, 400), st.integers(0, 600), st.booleans())
def test_the_side_floors_are_the_symmetric_floors_two_sides(p: float, n: int, extra: int, binary: bool) -> None:
    """sampling_var_floor is the longer of sampling_side_floors' sides; for 0/1 scores they are Wilson's bounds."""
    from activeeval.design import sampling_side_floors

    n_items = n + extra
    low, high = (0.0, 1.0) if binary else (min(p, 0.3), max(p, 0.8))
    both = sampling_var_floor(p, low, high, n, n_items, (0.0, 1.0), binary)
    v_low, v_high = sampling_side_floors(p, low, high, n, n_items, (0.0, 1.0), binary)
    assert max(v_low, v_high) == pytest.approx(both, rel=1e-12, abs=1e-300)
    if binary:
        z = 1.959963984540054
        lo, hi = wilson_bounds(p, effective_sample_size(n, n_items), z)
        assert p - z * np.sqrt(v_low) == pytest.approx(lo, abs=1e-12)
        assert p + z * np.sqrt(v_high) == pytest.approx(hi, abs=1e-12)


@given(st.floats(0.0, 0.1), st.floats(0.0, 0.1), st.floats(0.0, 0.1), st.booleans())
def test_two_sided_keeps_the_width_and_moves_the_centre(var: float, v_low: float, v_high: float, whole: bool) -> None:
    """(variance, shift): sd ± shift are the two sides; floored each on its own, or (``whole``) the floors' sides
    where the longer is longer than sd; with equal floors the symmetric max(var, floor), shift 0."""
    from activeeval.design import two_sided

    v, shift = (float(x) for x in two_sided(var, v_low, v_high, whole=whole))
    sd, side_low, side_high = np.sqrt(v), np.sqrt(v) - shift, np.sqrt(v) + shift
    assert side_low >= -1e-15 and side_high >= -1e-15
    if not whole:
        assert side_low == pytest.approx(max(np.sqrt(var), np.sqrt(v_low)), abs=1e-12)
        assert side_high == pytest.approx(max(np.sqrt(var), np.sqrt(v_high)), abs=1e-12)
    elif max(v_low, v_high) > var:
        assert (side_low, side_high) == pytest.approx((np.sqrt(v_low), np.sqrt(v_high)), abs=1e-12)
    else:
        assert (sd, shift) == pytest.approx((np.sqrt(var), 0.0), abs=1e-12)
    even, zero = two_sided(var, v_low, v_low)
    assert float(even) == pytest.approx(max(var, v_low), rel=1e-12, abs=1e-300) and float(zero) == 0.0


def test_the_asymmetric_floor_covers_as_nominal_where_the_symmetric_one_over_covers() -> None:
    """Exact binomial coverage (N = ∞, p in [0.02, 0.98]) of RS-Mean's interval at n = 14 and 30 with
    ``interval="wilson"`` (Wilson's where its longer side is longer than Eq. 9's): nearer the nominal 95 % on
    average (0.962, 0.958) than the symmetric floor's (0.972, 0.969), and never wider."""
    from math import comb

    from activeeval.design import sampling_side_floors, two_sided

    z = 1.959963984540054
    for n in (14, 30):  # 14: 2.5 % of IFEval's 541 items
        k = np.arange(n + 1)
        p_hat = k / n
        wald = p_hat * (1 - p_hat) / (n - 1)
        ones = np.full(n + 1, n)
        v_sym = np.maximum(wald, sampling_var_floor(p_hat, 0.0, 1.0, ones, 10**12, (0.0, 1.0), True))
        var, shift = two_sided(wald, *sampling_side_floors(p_hat, 0.0, 1.0, ones, 10**12, (0.0, 1.0), True),
                               whole=True)
        cov = {}
        for name, centre, half in (("sym", p_hat, z * np.sqrt(v_sym)), ("asym", p_hat + z * shift, z * np.sqrt(var))):
            covs = []
            for p in np.linspace(0.02, 0.98, 49):
                pmf = np.array([comb(n, j) * p**j * (1 - p) ** (n - j) for j in k])
                covs.append(pmf[np.abs(centre - p) <= half].sum())
            cov[name] = float(np.mean(covs))
        assert 0.945 <= cov["asym"] <= 0.965 and cov["asym"] <= cov["sym"] - 0.008
        assert np.all(var <= v_sym * (1 + 1e-12))


@pytest.mark.parametrize("interval", ["sides", "wilson"])
def test_rs_mean_two_sided_replay_equals_the_class_and_keeps_the_floors_sides(interval: str) -> None:
    """RS-Mean with interval "sides" or "wilson": the fast replay's (means, vars, shifts) are the class's, the
    estimates are the symmetric run's, the symmetric interval is the longer side on both sides, and the interval
    is Wilson's at the effective sample size where that is wider ("wilson"), or keeps Wilson's long side and Eq. 9's
    sd on the short one ("sides")."""
    from activeeval.experiments.simulate import run_fixed

    rng = np.random.default_rng(3)
    ref = ScoreMatrix((rng.random((6, 150)) < 0.5).astype(float), kind="binary")
    truths = (rng.random((3, 150)) < np.array([[0.95], [0.5], [0.05]])).astype(float)
    means, variances, shifts = RSMean.replay(ref, truths, 5, interval=interval)
    sym_means, sym_vars = RSMean.replay(ref, truths, 5)
    assert np.array_equal(means, sym_means)
    assert np.allclose(np.sqrt(sym_vars), np.sqrt(variances) + np.abs(shifts), rtol=1e-12, atol=1e-15)
    for t in range(3):
        method = RSMean(ref, seed=5, interval=interval)
        run_fixed(method, truths[t], 150)
        traj = method.trajectory
        assert np.allclose([e.mean for e in traj], means[t], rtol=1e-12, atol=1e-15)
        assert np.allclose([e.var for e in traj], variances[t], rtol=1e-9, atol=1e-15)
        assert np.allclose([e.shift for e in traj], shifts[t], rtol=1e-9, atol=1e-15)
    e = RSMean(ref, seed=5, interval=interval)
    run_fixed(e, truths[0], 20)
    est = e.estimate()
    lo, hi = wilson_bounds(est.mean, effective_sample_size(20, 150), 1.959963984540054)
    assert est.shift < 0 and est.ci()[0] == pytest.approx(float(lo), abs=1e-12)  # the long side: Wilson's
    scores = np.asarray(e.observed_scores)
    eq9 = 1.959963984540054 * np.sqrt(scores.var(ddof=1) * (1 - 20 / 150) / 20)
    assert est.ci()[1] == pytest.approx(float(hi) if interval == "wilson" else min(est.mean + eq9, 1.0), abs=1e-12)
    with pytest.raises(ConfigurationError, match="interval"):
        RSMean(ref, interval="wide")
