"""The default BayesAME: its maths against brute force, the reference fit, the calibration and the switch.

Synthetic matrices are fine here (unit tests of the maths); the real-data
checks are in tests/integration/.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal

from activeeval import BayesAME, ScoreMatrix
from activeeval.design import Prequential
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.simulate import run_fixed, run_until_stop
from activeeval.gaussian import LeaveOneOutNLML, kernel_matvec, se_kernel, sq_dists
from activeeval.gp.kernels import LevelKernel
from activeeval.methods.bayesame import (
    FLOOR_GAIN_MAX,
    BayesAMERS,
    Calibration,
    ReferenceFit,
    calibrate,
    fit_hyperparameters,
)

# Round-off tolerance of the incremental (Kalman) updates against dense batch solves on small,
# well-conditioned problems: far above double round-off, far below any difference that matters.
ATOL = 1e-8
FIT = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.02, tau0=1.0, tau1=1.0, gamma=0.1)


def binary_reference(n_models: int, n_items: int, seed: int) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)))))
    return ScoreMatrix((rng.random((n_models, n_items)) < p).astype(float), kind="binary")


def continuous_reference(n_models: int, n_items: int, seed: int) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)) + 0.5 * rng.normal(size=(n_models, n_items))
    return ScoreMatrix(1 / (1 + np.exp(-logits)), kind="continuous")


def dense_prior(method: BayesAME) -> tuple[np.ndarray, np.ndarray]:
    """Prior mean and covariance of the bucket abilities, built densely from the definition."""
    phi = method.buckets.phi
    counts = method.buckets.counts
    k = method.reference.n_models
    mu = phi.mean(1)
    m = mu - (mu @ counts) / counts.sum()
    psi = phi - method.reference.scores.mean(1)[None, :]
    fit = method.fit_
    sigma = (
        fit.alpha * np.exp(-(fit.beta / k) * sq_dists(phi, phi))
        + (fit.gamma / k) * psi @ psi.T
        + fit.tau0
        + fit.tau1 * np.outer(m, m)
    )
    return mu, sigma


def dense_posterior(method: BayesAME) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 7 with the default's noise (σ² per item), from the method's history."""
    mu, sigma = dense_prior(method)
    items = np.array(method.observed_items, dtype=int)
    if items.size == 0:
        return mu, sigma
    b = method.buckets.of_item[items]
    gram = sigma[np.ix_(b, b)] + method.sigma2_ * np.eye(items.size)
    gain = np.linalg.solve(gram, sigma[b]).T  # (B, n)
    mean = mu + gain @ (np.array(method.observed_scores) - mu[b])
    cov = sigma - gain @ sigma[b]
    return mean, cov


def unscaled_var_r(method: BayesAME, cov: np.ndarray) -> float:
    """Eq. 2 with per-item noise: (uᵀ Σ|C u + σ² Σ_b u_b) / N²."""
    counts = method.buckets.counts
    n_b = np.bincount(method.buckets.of_item[list(method.observed_items)], minlength=counts.size)
    u = counts - n_b
    return float((u @ cov @ u + method.sigma2_ * u.sum()) / method.n_items**2)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_obs=st.integers(0, 30), kind=st.sampled_from(["binary", "continuous"]),
       cache_mb=st.sampled_from([256.0, 0.0]))
def test_sequential_updates_equal_the_dense_posterior(seed: int, n_obs: int, kind: str, cache_mb: float) -> None:
    """With the distances cached, and without (Σ·N by ``kernel_sums``, each column's distances computed)."""
    ref = binary_reference(6, 30, seed) if kind == "binary" else continuous_reference(5, 30, seed)
    method = BayesAME(ref, seed=seed, hyperparameters=FIT, calibration=None, extrapolation="off", cache_mb=cache_mb)
    truth = binary_reference(1, 30, seed + 1).scores[0]
    run_fixed(method, truth, n_obs)
    mean, cov = dense_posterior(method)
    np.testing.assert_allclose(method.posterior.mean, mean, atol=ATOL)
    np.testing.assert_allclose(method.posterior.diag, np.diag(cov), atol=ATOL)
    est = method.estimate()
    n_b = np.bincount(method.buckets.of_item[list(method.observed_items)], minlength=method.n_buckets)
    u = method.buckets.counts - n_b
    expected_mean = (sum(method.observed_scores) + u @ mean) / method.n_items
    seen, unseen = sum(method.observed_scores), method.n_items - len(method.observed_items)
    expected_mean = np.clip(expected_mean, seen / method.n_items, (seen + unseen) / method.n_items)  # scores in [0, 1]
    assert est.mean == pytest.approx(expected_mean, abs=ATOL)
    assert est.var == pytest.approx(method.scale * unscaled_var_r(method, cov), abs=ATOL)


@pytest.mark.parametrize("kind", ["binary", "continuous"])
def test_without_the_distance_cache_the_posterior_is_the_same_past_v_growth_and_rebuilds(kind: str) -> None:
    """120 items of 12 buckets: V outgrows its first 64 rows and is rebuilt when crowded; the batch selection reads
    blocks of prior columns. The uncached path (no B x B distances, no rows kept) gives the dense posterior too."""
    rng = np.random.default_rng(5)
    base = binary_reference(7, 12, 2) if kind == "binary" else continuous_reference(7, 12, 2)
    ref = ScoreMatrix(base.scores[:, rng.integers(0, 12, 150)], kind=kind)  # 150 items, at most 12 buckets
    truth = rng.random(150).round() if kind == "binary" else rng.random(150)
    methods = [BayesAME(ref, seed=1, hyperparameters=FIT, calibration=None, extrapolation="off", cache_mb=c)
               for c in (256.0, 0.0)]
    for method in methods:
        run_fixed(method, truth, 120)
    cached, uncached = methods
    assert uncached._d2_full is None and cached._d2_full is not None
    assert uncached.posterior._v.shape[0] > 64 and uncached.posterior.rows < 120  # V outgrew 64 rows, and was rebuilt
    assert uncached.observed_items == cached.observed_items
    mean, cov = dense_posterior(uncached)
    np.testing.assert_allclose(uncached.posterior.mean, mean, atol=ATOL)
    np.testing.assert_allclose(uncached.posterior.diag, np.diag(cov), atol=ATOL)
    np.testing.assert_allclose(uncached.posterior.cov_u, cached.posterior.cov_u, atol=ATOL)
    np.testing.assert_allclose(uncached._prior_cols(np.arange(5)), cached._prior_cols(np.arange(5)), atol=1e-12)
    assert uncached.select_batch(3) == cached.select_batch(3)


@pytest.mark.parametrize("cache_mb", [256, 0])  # distances cached, and rows computed on demand
def test_prior_columns_equal_the_dense_prior(cache_mb: float) -> None:
    ref = continuous_reference(9, 60, 4)
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, cache_mb=cache_mb)
    _, sigma = dense_prior(method)
    for b in (0, 5, method.n_buckets - 1):
        np.testing.assert_allclose(method._prior_col(b), sigma[:, b], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(method.posterior.prior_diag, np.diag(sigma), rtol=1e-12)


@pytest.mark.parametrize("n_buckets", [1, 7, 512, 1300])
def test_blockwise_kernel_matvec_equals_the_dense_product(n_buckets: int) -> None:
    rng = np.random.default_rng(n_buckets)
    phi = rng.random((n_buckets, 9))
    vec = rng.normal(size=n_buckets)
    dense = se_kernel(sq_dists(phi, phi), 0.7, 3.0, 9) @ vec
    np.testing.assert_allclose(kernel_matvec(phi, vec, 0.7, 3.0, block=256), dense, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel_matvec(phi, vec, 0.7, 3.0, d2=sq_dists(phi, phi)), dense, rtol=1e-12)


def test_the_estimate_stays_in_the_range_the_score_can_still_take() -> None:
    """After one correct answer the posterior mean of a 0/1 benchmark can exceed 1; the estimate cannot."""
    ref = binary_reference(30, 200, 1)
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, extrapolation="off")
    clipped = 0
    for n in range(1, 41):
        method.observe(method.select(), 1.0)
        post = method.posterior
        raw = (n + float(post.remaining @ post.mean)) / 200
        est = method.estimate()
        lo, hi = n / 200, 1.0
        clipped += raw > hi
        assert lo <= est.mean <= hi
        assert est.mean == pytest.approx(min(max(raw, lo), hi), abs=1e-12)
        c_lo, c_hi = est.ci()
        assert lo <= c_lo <= c_hi <= hi
    assert clipped > 0  # the case this guards against did happen


@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.parametrize("selection", ["auto", "random", "sampled", "hybrid"])
def test_everything_observed_gives_the_exact_score_and_zero_variance(kind: str, selection: str) -> None:
    ref = binary_reference(8, 25, 3) if kind == "binary" else continuous_reference(8, 25, 3)
    truth = binary_reference(1, 25, 9).scores[0] if kind == "binary" else continuous_reference(1, 25, 9).scores[0]
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, selection=selection)
    run_fixed(method, truth, 25)
    est = method.estimate()
    assert est.mean == pytest.approx(truth.mean(), abs=1e-12)
    assert est.var == pytest.approx(0.0, abs=1e-15)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n_obs=st.integers(0, 15))
def test_information_gain_is_nonnegative_and_matches_brute_force(seed: int, n_obs: int) -> None:
    ref = continuous_reference(5, 18, seed)
    method = BayesAME(ref, seed=seed, hyperparameters=FIT, calibration=None, extrapolation="off")
    run_fixed(method, continuous_reference(1, 18, seed + 1).scores[0], n_obs)
    ig = method.information_gains()
    assert np.all(ig >= 0)
    _, cov = dense_posterior(method)
    counts = method.buckets.counts
    n_b = np.bincount(method.buckets.of_item[list(method.observed_items)], minlength=counts.size)
    u = counts - n_b
    var_r = unscaled_var_r(method, cov)
    for b in np.flatnonzero(u > 0):
        # observing one more item of bucket b: condition the joint Gaussian of (R, s) by brute force
        cov_rs = (cov[b] @ u + method.sigma2_) / method.n_items
        var_s = cov[b, b] + method.sigma2_
        var_after = var_r - cov_rs**2 / var_s
        assert ig[b] == pytest.approx(0.5 * np.log(var_r / var_after), rel=1e-6, abs=1e-10)


def loo_brute_force(x: np.ndarray, pseudo: list[int], params: np.ndarray, tau: float) -> float:
    """The leave-one-out NLML from its definition: scipy's multivariate normal log-density."""
    alpha, beta, sigma2, gamma = np.exp(params)
    m, k = x.shape
    col_means = x.mean(0)  # here the subsample is the whole benchmark
    total = 0.0
    for j in pseudo:
        others = np.delete(x, j, axis=1)
        mu = others.mean(1)
        mm = mu - mu.mean()
        psi = others - np.delete(col_means, j)[None, :]
        cov = (
            alpha * np.exp(-(beta / (k - 1)) * sq_dists(others, others))
            + (gamma / (k - 1)) * psi @ psi.T
            + tau
            + tau * np.outer(mm, mm)
            + sigma2 * np.eye(m)
        )
        total -= multivariate_normal(mu, cov).logpdf(x[:, j])
    return total


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), log_params=st.tuples(*[st.floats(-4, 1)] * 4))
def test_leave_one_out_nlml_value_and_gradient(seed: int, log_params: tuple[float, ...]) -> None:
    x = continuous_reference(6, 12, seed).scores.T  # (m items, K models)
    params = np.array(log_params)
    nlml = LeaveOneOutNLML(x, x.mean(0), [0, 2, 5], 0.3, 0.3, linear=True)
    value, grad = nlml(params)
    assert value == pytest.approx(loo_brute_force(x, [0, 2, 5], params, 0.3), rel=1e-8)
    h = 1e-4  # central differences in log space; the NLML is smooth there, so O(h²) ≈ 1e-8 relative
    for i in range(4):
        step = np.zeros(4)
        step[i] = h
        fd = (nlml(params + step)[0] - nlml(params - step)[0]) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-6)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), log_params=st.tuples(*[st.floats(-4, 2)] * 4))
def test_leave_one_out_nlml_table_and_value_alone_are_the_same_numbers(seed: int, log_params: tuple[float, ...]) -> None:
    """Binary scores: E read off a table of the distinct distances is E entry by entry, to the last bit (value and
    gradient); ``value`` (no inverse) is the call's value, to the last bit, for binary and continuous scores."""
    params = np.array(log_params)
    x = binary_reference(9, 40, seed).scores.T
    tabled = LeaveOneOutNLML(x, x.mean(0), [0, 3, 8], 0.3, 0.3)
    assert all(isinstance(item[0], tuple) for item in tabled.items)  # whole-number distances: the table
    by_entry = LeaveOneOutNLML.__new__(LeaveOneOutNLML)
    by_entry.MAX_LEVELS = 0  # no table: every entry exponentiated
    by_entry.__init__(x, x.mean(0), [0, 3, 8], 0.3, 0.3)
    assert not any(isinstance(item[0], tuple) for item in by_entry.items)
    value, grad = tabled(params)
    other, other_grad = by_entry(params)
    assert value == other and np.array_equal(grad, other_grad)
    assert tabled.value(params) == value
    y = continuous_reference(6, 12, seed).scores.T
    continuous = LeaveOneOutNLML(y, y.mean(0), [0, 2, 5], 0.3, 0.3)
    assert not any(isinstance(item[0], tuple) for item in continuous.items)
    assert continuous.value(params) == continuous(params)[0]
    # LAPACK is handed the Gram matrix's transpose (column-major, no copy): the same matrix only if every term is
    # exactly symmetric, continuous scores included
    alpha, beta, _, gamma = np.exp(params)
    for dist, lin, _, fixed in continuous.items:
        gram = alpha * np.exp(-beta * dist) + fixed + gamma * lin
        assert np.array_equal(gram, gram.T)


@pytest.mark.parametrize("path", ["table", "fallback"])
def test_leave_one_out_nlml_is_the_same_number_on_any_count_of_threads(monkeypatch, path: str) -> None:
    """The pseudo-targets on worker threads (LAPACK without the GIL, or SciPy's wrappers where scipy's table lacks
    the routines): value and gradient to the last bit whatever the count, summed in the pseudo-targets' order."""
    from activeeval import _lapack, limit_threads

    if path == "fallback":
        monkeypatch.setattr(_lapack, "capsule_routine", lambda *args: None)
    x = binary_reference(12, 200, 3).scores.T  # 200 items: BLAS splits a dot product of 200² terms over threads
    y = continuous_reference(8, 200, 3).scores.T
    for data, linear in ((x, True), (y, False), (x, False)):
        params = np.array([-1.0, 0.7, -3.0, -2.0][: 4 if linear else 3])
        results = []
        for limit in (1, 2):  # BLAS held at one thread inside on any count of workers, whatever the limit
            with limit_threads(limit):
                calls = [LeaveOneOutNLML(data, data.mean(0), [0, 2, 3, 5, 7], 0.3, 0.3, linear=linear, threads=t)
                         for t in (1, 2, 3)]
                results += [nlml(params) for nlml in calls]
                assert all(nlml.value(params) == results[0][0] for nlml in calls)
        assert all(r[0] == results[0][0] and np.array_equal(r[1], results[0][1]) for r in results)
    with limit_threads(1):
        # a Gram matrix that is not positive definite (two items alike, no noise to speak of): +inf, counted once
        twins = np.vstack([x[:1], x[:1], x[1:]])
        for t in (1, 2):
            nlml = LeaveOneOutNLML(twins, twins.mean(0), [0, 2, 3], 0.0, 0.0, linear=False, threads=t)
            value, grad = nlml(np.array([0.0, -8.0, -60.0]))
            assert value == np.inf and not grad.any() and nlml.failures == 1


def test_fit_is_deterministic_cached_and_ignores_nothing_but_the_reference() -> None:
    ref = binary_reference(30, 80, 1)
    first = fit_hyperparameters(ref, n_pseudo=8, n_items=60)
    again = fit_hyperparameters(ref, n_pseudo=8, n_items=60)
    assert first == again
    assert first.n_pseudo == 8 and first.n_items == 60
    assert all(np.isfinite([first.alpha, first.beta, first.sigma2, first.gamma]))
    assert first.sigma2 >= 1e-4  # the nugget's lower bound
    assert ReferenceFit.from_dict(first.to_dict()) == first


def test_calibration_sees_only_the_reference() -> None:
    """calibrate() takes the reference alone; the factor a method applies cannot depend on its target."""
    ref = binary_reference(20, 60, 2)
    fit = fit_hyperparameters(ref, n_pseudo=6, n_items=50)
    cal = calibrate(ref, fit, folds=4)
    assert cal == calibrate(ref, fit, folds=4)
    assert cal.factor >= 1.0 and cal.n_pseudo == 20 and cal.n_z > 0  # every reference is a pseudo-target once
    targets = [np.zeros(60), np.ones(60), binary_reference(1, 60, 7).scores[0]]
    factors = set()
    for truth in targets:
        method = BayesAME(ref, seed=0, hyperparameters=fit, calibration=cal)
        run_fixed(method, truth, 30)
        factors.add(method.calibration_.factor)
    assert factors == {cal.factor}
    assert Calibration.from_dict(cal.to_dict()) == cal


def test_calibration_widens_the_model_interval_by_its_factor() -> None:
    ref = binary_reference(12, 40, 4)
    truth = binary_reference(1, 40, 5).scores[0]
    plain = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, extrapolation="off")
    wide = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=Calibration(factor=1.5), extrapolation="off")
    run_fixed(plain, truth, 12)
    run_fixed(wide, truth, 12)
    assert wide.observed_items == plain.observed_items  # selection does not depend on the factor
    assert wide.estimate().mean == plain.estimate().mean
    assert wide.estimate().var == pytest.approx(2.25 * plain.estimate().var, rel=1e-12)


def test_a_large_calibration_factor_is_said_in_the_notes() -> None:
    ref = binary_reference(12, 40, 4)
    truth = binary_reference(1, 40, 5).scores[0]
    quiet = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=Calibration(factor=1.2, rms=1.2),
                     extrapolation="off")
    loud = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=Calibration(factor=2.0, rms=2.0), extrapolation="off")
    capped = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=Calibration(factor=3.0, rms=4.5),
                      extrapolation="off")
    for method in (quiet, loud, capped):
        run_fixed(method, truth, 12)
    assert not any(n.startswith("calibrated") for n in quiet.estimate().notes)
    (note,) = [n for n in loud.estimate().notes if n.startswith("calibrated")]
    assert "errors were 2.0x its own standard deviation, so its interval is widened 2.0x" in note
    assert "capped" not in note
    (note,) = [n for n in capped.estimate().notes if n.startswith("calibrated")]
    assert "widened 3.0x (capped at 3x: the references predict each other poorly here)" in note


def test_a_target_above_every_reference_switches_to_the_design_based_estimate() -> None:
    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((10, 400)) < 0.3).astype(float), kind="binary")  # references score ~0.3
    truth = (rng.random(400) < 0.9).astype(float)  # the target ~0.9
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None)
    run_fixed(method, truth, 60)
    assert method.mode == "design" and method.switch_reason == "outside"
    assert method.switch_test in ("interval", "paired", "switch_z")  # the tests of "outside"
    assert 1 <= method.switched_at <= method.switch_until_
    est = method.estimate()
    assert any(note.startswith("design-based: the target looks to be outside") for note in est.notes)
    said = {"interval": "(its model-based 95 % interval lay wholly outside it)",
            "paired": "significantly beyond every reference",
            "switch_z": "1 standard deviation beyond it"}[method.switch_test]
    assert any(said in note for note in est.notes)  # the note says which test switched
    lo, hi = est.ci()
    assert lo <= truth.mean() <= hi


def test_the_design_based_floor_is_that_of_the_pool_the_random_items_came_from() -> None:
    """After a switch at n0, the c random items were drawn from the P = N − n0 items then unscored: R's error is
    P/N times the mean error over that pool, whose floor is Wilson's for c items of P. A target that scores 1
    everywhere has no variance but the floor's."""
    from activeeval.design import sampling_var_floor

    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((10, 400)) < 0.3).astype(float), kind="binary")
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, interval="symmetric")
    run_fixed(method, np.ones(400), 200)
    assert method.mode == "design"
    pool, count = 400 - method.switched_at, method._design.count
    assert count == 200 - method.switched_at
    floor = float(sampling_var_floor(1.0, 1.0, 1.0, count, pool, (0.0, 1.0), True)) * (pool / 400) ** 2
    assert method.estimate().var == pytest.approx(floor)
    # the floor shrunk by (U/N)² on top of the finite-population correction, as before, was half as wide here
    before = float(sampling_var_floor(1.0, 1.0, 1.0, count, 400, (0.0, 1.0), True)) * (200 / 400) ** 2
    assert before < 0.6 * floor


def test_items_scored_before_the_switch_keep_counting_in_the_ridge_control() -> None:
    """The AIPW ridge control is fitted on every item scored, those chosen before the switch included, and a
    target that is a combination of the references gets a far narrower design-based interval than the plain mean's."""
    rng = np.random.default_rng(0)
    ref = ScoreMatrix(rng.random((8, 400)) * 0.5, kind="continuous", score_range=(0.0, 1.0))  # references ~0.25
    truth = 0.6 * (ref.scores[0] + ref.scores[1]) + 0.3 + 0.01 * rng.normal(size=400)  # above every one
    sds = {}
    for controls in ("none", "model+near+ridge"):
        method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, controls=controls,
                          design_variance="increments", floor="effective")
        run_fixed(method, truth, 40)
        assert method.mode == "design" and method.switched_at >= 1
        if controls != "none":
            assert method._ridge is not None and method._ridge.count == 40  # the chosen items too
        est = method.estimate()
        assert abs(est.mean - truth.mean()) < 3 * est.std
        sds[controls] = est.std
    assert sds["model+near+ridge"] < 0.6 * sds["none"]


def test_the_effective_floor_lowers_the_floor_by_what_the_controls_buy() -> None:
    rng = np.random.default_rng(1)
    ref = ScoreMatrix((rng.random((12, 500)) < 0.3).astype(float), kind="binary")
    truth = np.maximum(ref.scores[0], ref.scores[1])  # a target the references predict, far above them
    sds = {}
    for floor in ("wilson", "effective"):
        method = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, controls="ridge", floor=floor)
        run_fixed(method, truth, 60)
        assert method.mode == "design"
        sds[floor] = method.estimate().std
        reduction = method._design.variance_reduction
    assert reduction > 1.5
    assert sds["effective"] < sds["wilson"]


def test_independent_target_keeps_an_honest_interval() -> None:
    """References full of structure, a target that ignores it: no confident miss, RS-Mean-like accuracy."""
    rng = np.random.default_rng(11)
    ability = rng.normal(size=(40, 1))
    difficulty = rng.normal(size=(1, 600))
    ref = ScoreMatrix((rng.random((40, 600)) < 1 / (1 + np.exp(-(ability - difficulty)))).astype(float))
    fit = fit_hyperparameters(ref, n_pseudo=10, n_items=150)
    cal = calibrate(ref, fit, max_items=300)
    misses, z2 = 0, []
    for seed in range(12):
        truth = (np.random.default_rng(100 + seed).random(600) < 0.45).astype(float)
        method = BayesAME(ref, seed=seed, hyperparameters=fit, calibration=cal)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            run_until_stop(method, truth)
        est = method.estimate()
        z = (est.mean - truth.mean()) / max(est.std, 1e-12)
        z2.append(z * z)
        misses += abs(z) > 3
    assert misses == 0
    assert np.sqrt(np.mean(z2)) < 1.5  # standardised errors near 1, not the 8 half-widths of the paper's model


def test_prequential_terms_are_unbiased_given_the_past() -> None:
    """E[T | past] = R exactly: average T over every possible next item of a small population."""
    rng = np.random.default_rng(0)
    pop = rng.random(12)
    observed = [3, 7]
    unobs = [i for i in range(12) if i not in observed]
    pred = rng.random((12, 2))
    s_obs = float(pop[observed].sum())
    ybar = float(pop[observed].mean())
    b = np.array([0.7, -0.4])
    terms = []
    for i in unobs:
        p = Prequential(12, n_controls=2, b_prior=b)
        p.add(pop[i], s_obs, len(unobs), ybar, pred[i], pred[unobs].sum(0))
        terms.append(p.estimate(1.0)[0])
    assert np.mean(terms) == pytest.approx(pop.mean(), abs=1e-12)


def test_prequential_terms_with_known_probabilities_are_unbiased_given_the_past() -> None:
    """Unequal draw probabilities (inverse-probability weights): Σ_i q_i T_i = R exactly."""
    rng = np.random.default_rng(2)
    pop = rng.random(12)
    observed = [0, 5]
    unobs = [i for i in range(12) if i not in observed]
    q = rng.random(len(unobs)) + 0.1
    q /= q.sum()
    pred = rng.random((12, 2))
    s_obs, ybar = float(pop[observed].sum()), float(pop[observed].mean())
    total = 0.0
    for qi, i in zip(q, unobs):
        p = Prequential(12, n_controls=2, b_prior=np.array([0.5, 1.2]))
        p.add(pop[i], s_obs, len(unobs), ybar, pred[i], pred[unobs].sum(0), prob=qi)
        total += qi * p.estimate(1.0)[0]
    assert total == pytest.approx(pop.mean(), abs=1e-12)


def test_sampled_selection_draws_with_known_probabilities_and_replays_exactly() -> None:
    ref = binary_reference(10, 120, 3)
    truth = (np.random.default_rng(4).random(120) < 0.6).astype(float)
    method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="sampled", controls="model+ridge")
    assert method.regime == "design-based"
    for _ in range(30):  # the probabilities' bounds: tests/test_hybrid.py (both randomised selections)
        item = method.select()
        method.observe(item, float(truth[item]))
    est = method.estimate()
    assert any(note.startswith("design-based by design") for note in est.notes)
    replay = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="sampled", controls="model+ridge")
    for item, score in zip(method.observed_items, method.observed_scores):
        replay.observe(item, score)  # a session rebuilt from its journal: the probabilities are recomputed
    assert replay.estimate().mean == est.mean and replay.estimate().var == est.var
    first = method.select()
    more = method.select_batch(2, exclude=[first])  # batches and pending items: tests/test_hybrid.py
    assert first not in more and len(set(more)) == 2 and method._queue == [first, *more]


def test_prequential_without_controls_is_the_sample_mean() -> None:
    rng = np.random.default_rng(1)
    pop = (rng.random(50) < 0.4).astype(float)
    order = rng.permutation(50)
    p = Prequential(50, n_controls=0)
    total = 0.0
    for t, i in enumerate(order[:20]):
        p.add(pop[i], total, 50 - t, total / t if t else 0.5, np.zeros(0), np.zeros(0))
        total += pop[i]
        assert p.estimate(0.25)[0] == pytest.approx(total / (t + 1), abs=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"selection": "greedy"}, "selection must be 'auto', 'active', 'random', 'sampled' or 'hybrid'"),
        ({"extrapolation": "maybe"}, "extrapolation must be 'auto' or 'off'"),
        ({"n_pseudo": 0}, "n_pseudo must be an integer >= 1"),
        ({"switch_until": -1}, "switch_until must be a non-negative integer"),
        ({"scale_prior": 0}, "scale_prior must be a positive number"),
        ({"floor": "none"}, "floor must be 'wilson', 'effective' or 'split'"),
        ({"design_variance": "sample"}, "design_variance must be 'residuals' or 'increments'"),
        ({"switch_z": -1.0}, "switch_z must be a non-negative number, got -1.0"),
        ({"controls": "model+gp"}, r"controls must be 'none' or some of model, near, ridge joined by '\+'"),
        ({"calibration": 3}, "calibration must be 'auto', None, a Calibration or its dict"),
        ({"hyperparameters": {"alpha": 1.0, "beta": 1.0, "sigma2": 0.0, "tau0": 1.0, "tau1": 1.0}},
         "hyperparameters: sigma2 must be a positive number"),
        ({"hyperparameters": {"alpha": 1.0, "bogus": 1.0}}, r"unknown reference-fit field\(s\) \['bogus'\]"),
    ],
)
def test_bad_options_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        BayesAME(binary_reference(5, 20, 0), seed=0, **kwargs)


def test_bayesame_rs_refuses_a_selection() -> None:
    with pytest.raises(ConfigurationError, match="BayesAME-RS selects items at random"):
        BayesAMERS(binary_reference(5, 20, 0), selection="active")


def test_level_kernel_without_extras_is_eq1() -> None:
    rng = np.random.default_rng(0)
    phi = rng.random((6, 4))
    d2 = sq_dists(phi, phi)
    kernel = LevelKernel(alpha=0.3, beta=2.0)
    col = kernel.column(d2[2], phi - phi.mean(0), (phi - phi.mean(0))[2], phi.mean(1), 0.1)
    np.testing.assert_allclose(col, 0.3 * np.exp(-(2.0 / 4) * d2[2]))


@pytest.mark.parametrize("warmup", [0, 8])
def test_calibration_runs_equal_single_target_runs(warmup: int) -> None:
    """The shared-design pass of the calibration gives exactly what each pseudo-target gets when played alone
    (with a random start too: its first items random, then Eq. 6)."""
    from activeeval.methods.bayesame import _model_based_errors

    ref = continuous_reference(8, 40, 21)
    truths = continuous_reference(3, 40, 22).scores
    grid = [5, 12, 20]
    shared = _model_based_errors(ref, FIT, truths, 7, grid, warmup)
    for n, values in zip(grid, shared):
        alone = []
        for truth in truths:
            method = BayesAME(ref, seed=7, hyperparameters=FIT, calibration=None, warmup=warmup)
            run_fixed(method, truth, n)
            if method.mode == "model":
                est = method.estimate()
                alone.append((est.mean - truth.mean()) / est.std)
        np.testing.assert_allclose(values, alone, rtol=1e-9, atol=1e-12)  # same maths, different summation order


def test_calibration_drops_pseudo_targets_exactly_when_single_runs_switch() -> None:
    """A pseudo-target above every reference leaves the calibration count when its single run switches."""
    from activeeval.methods.bayesame import _model_based_errors

    rng = np.random.default_rng(5)
    ref = ScoreMatrix((rng.random((8, 80)) < 0.3).astype(float), kind="binary")
    truths = np.vstack([(rng.random(80) < 0.95).astype(float), ref.scores[0]])  # one far above, one inside
    grid = [5, 15, 30]
    shared = _model_based_errors(ref, FIT, truths, 3, grid)
    for n, values in zip(grid, shared):
        expected = []
        for truth in truths:
            method = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None)
            run_fixed(method, truth, n)
            if method.mode == "model":
                est = method.estimate()
                expected.append((est.mean - truth.mean()) / est.std)
        np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-12)
    assert all(len(v) == 1 for v in shared)  # the far target switched before n = 5, the other never


# ------------------------------------------------------------------ calibration by budget (issue 25)
def test_calibration_by_budget_is_measured_per_n_and_only_narrows_on_evidence() -> None:
    ref = binary_reference(20, 60, 2)
    fit = fit_hyperparameters(ref, n_pseudo=6, n_items=50)
    cal = calibrate(ref, fit, folds=4)
    assert len(cal.fractions) == len(cal.factors) >= 3
    assert list(cal.fractions) == sorted(cal.fractions) and 0 < cal.fractions[0] and cal.fractions[-1] <= 0.5
    assert all(0.5 <= f <= 3.0 for f in cal.factors)
    assert Calibration.from_dict(cal.to_dict()) == cal  # JSON lists read back as the same (hashable) calibration
    assert hash(Calibration.from_dict(cal.to_dict())) == hash(cal)


def test_factor_at_interpolates_in_log_n_and_holds_flat_beyond_the_ends() -> None:
    cal = Calibration(factor=1.4, fractions=(0.01, 0.1, 0.5), factors=(0.8, 1.0, 2.0))
    assert cal.factor_at(0.001) == 0.8 and cal.factor_at(0.9) == 2.0
    assert cal.factor_at(0.1) == pytest.approx(1.0)
    assert cal.factor_at(np.sqrt(0.01 * 0.1)) == pytest.approx(0.9)  # the log midpoint
    assert cal.factor_at(0.2, by="pooled") == 1.4
    assert Calibration(factor=1.3).factor_at(0.2) == 1.3  # a calibration stored before the factors by budget


@pytest.mark.parametrize("kwargs", [dict(fractions=(0.1,), factors=()), dict(fractions=(0.2, 0.1), factors=(1, 1)),
                                    dict(fractions=(0.1,), factors=(-1.0,)), dict(fractions=(1.5,), factors=(1.0,))])
def test_a_malformed_calibration_is_refused(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError, match="calibration"):
        Calibration(factor=1.0, **kwargs)


def test_the_factor_by_budget_scales_the_model_interval() -> None:
    ref = binary_reference(12, 40, 4)
    truth = binary_reference(1, 40, 5).scores[0]
    cal = Calibration(factor=1.5, fractions=(0.1, 0.5), factors=(0.7, 0.7))
    plain = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, extrapolation="off")
    budget = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=cal, extrapolation="off", calibrate_by="budget")
    pooled = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=cal, extrapolation="off", calibrate_by="pooled")
    for m in (plain, budget, pooled):
        run_fixed(m, truth, 12)
    assert budget.estimate().var == pytest.approx(0.49 * plain.estimate().var, rel=1e-12)
    assert pooled.estimate().var == pytest.approx(2.25 * plain.estimate().var, rel=1e-12)
    with pytest.raises(ConfigurationError, match="calibrate_by"):
        BayesAME(ref, hyperparameters=FIT, calibration=cal, calibrate_by="sometimes")


def test_the_capped_factor_is_the_budget_s_never_above_the_pooled_one() -> None:
    cal = Calibration(factor=1.2, fractions=(0.01, 0.1, 0.5), factors=(0.8, 1.0, 2.0))
    assert cal.factor_at(0.001, by="capped") == 0.8 and cal.factor_at(0.9, by="capped") == 1.2
    assert cal.factor_at(0.1, by="capped") == pytest.approx(1.0)
    assert Calibration(factor=1.3).factor_at(0.05, by="capped") == 1.3  # no factors by budget: the pooled one
    assert cal.factor_at(0.001, by="capped1") == 1.0 and cal.factor_at(0.9, by="capped1") == 1.2


@pytest.mark.parametrize("seed", range(4))
def test_a_capped_run_switches_where_the_pooled_one_does_and_only_its_interval_differs(seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = binary_reference(12, 60, 10 + seed)
    # a target far above every reference (switches) or one of the references' kind (may not)
    truth = ((rng.random(60) < 0.97) if seed % 2 else ref.scores[seed]).astype(float)
    cal = Calibration(factor=1.4, fractions=(0.05, 0.5), factors=(0.6, 2.0))
    runs = {by: BayesAME(ref, seed=seed, hyperparameters=FIT, calibration=cal, calibrate_by=by)
            for by in ("pooled", "capped", "capped1")}
    for n in range(1, 40):
        ests = {}
        for by, method in runs.items():
            item = method.select()
            method.observe(item, float(truth[item]))
            ests[by] = method.estimate()
        pooled = runs["pooled"]
        for by, floor in (("capped", 0.0), ("capped1", 1.0)):
            capped = runs[by]
            assert (capped.mode, capped.switched_at, capped.switch_test) == (pooled.mode, pooled.switched_at,
                                                                             pooled.switch_test)
            assert ests[by].mean == ests["pooled"].mean
            if capped.mode == "model":
                factor = max(floor, min(cal.factor_at(n / 60, "budget"), 1.4))
                assert capped.calibration_factor == factor
                assert ests[by].var == pytest.approx(ests["pooled"].var * (factor / 1.4) ** 2, rel=1e-9)
            else:  # design-based: the random items' interval (right after a switch, before any random item, the
                # capped model variance would apply, but the worst-case floor then dominates on these 0/1 scores)
                assert ests[by].var == ests["pooled"].var
    assert seed % 2 == 0 or runs["capped"].mode == "design"  # the far target did switch


def test_a_session_stored_before_issue_25_replays_with_the_defaults_it_was_made_with() -> None:
    from activeeval.session.base import method_options_of

    old = {"method": "bayesame", "method_kwargs": {"seed": 1, "hyperparameters": FIT.to_dict(),
                                                   "calibration": {"factor": 1.2}}}
    assert method_options_of(old)["calibrate_by"] == "pooled" and method_options_of(old)["warmup"] == 0
    assert method_options_of(old)["floor"] == "wilson"  # and the floor of before stop 39
    new = {"method": "bayesame", "method_kwargs": {**old["method_kwargs"], "calibrate_by": "budget", "warmup": 10}}
    assert method_options_of(new)["calibrate_by"] == "budget" and method_options_of(new)["warmup"] == 10
    assert method_options_of(new)["floor"] == "wilson"  # stored between issue 25 and stop 39: no floor stored
    newest = {"method": "bayesame", "method_kwargs": {**new["method_kwargs"], "floor": "effective"}}
    assert method_options_of(newest)["floor"] == "effective"
    ref = binary_reference(12, 40, 4)
    method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=Calibration(factor=1.0))
    assert method.floor == "effective"
    assert {"calibrate_by", "warmup", "floor", "interval", "switch_z"} <= set(method.frozen_options())  # all
    assert method_options_of(newest)["interval"] == "symmetric"  # stored before the option: its only shape
    assert method_options_of(newest)["switch_z"] == pytest.approx(1.959963984540054)  # stored before stop 46
    stored = {"method": "bayesame", "method_kwargs": {**newest["method_kwargs"], "interval": "sides"}}
    assert method_options_of(stored)["interval"] == "sides"


def test_the_split_floor_narrows_only_the_design_based_interval() -> None:
    """floor="split" gives the same estimates on the same items; its design-based interval is no wider."""
    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((10, 400)) < 0.3).astype(float), kind="binary")
    truth = (rng.random(400) < 0.9).astype(float)  # far above every reference: a switch
    runs = {}
    for floor in ("wilson", "split"):
        method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, floor=floor, interval="symmetric")
        run_fixed(method, truth, 40)
        assert method.mode == "design"
        runs[floor] = (method.observed_items, method.estimate())
    assert runs["wilson"][0] == runs["split"][0]
    assert runs["split"][1].mean == runs["wilson"][1].mean
    assert runs["split"][1].var < runs["wilson"][1].var


def test_the_two_sided_interval_floors_each_side_on_its_own_and_keeps_the_estimates() -> None:
    """interval="sides": the same items and estimates; after the switch, at every n, the symmetric interval
    is the asymmetric one's longer side on both sides (sd + |shift|); where Wilson's floor binds, the long side
    is Wilson's (divided by the variance reduction) and the short side at least Wilson's short side, scaled."""
    from activeeval.design import sampling_side_floors

    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((10, 400)) < 0.3).astype(float), kind="binary")
    truth = (rng.random(400) < 0.9).astype(float)  # far above every reference: a switch
    runs = {}
    for interval in ("symmetric", "sides", "wilson"):
        method = BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, interval=interval)
        run_fixed(method, truth, 60)
        assert method.mode == "design"
        runs[interval] = method
    sym, asym, whole = runs["symmetric"], runs["sides"], runs["wilson"]
    assert sym.observed_items == asym.observed_items
    shifted = 0
    for a, b, c in zip(sym.trajectory, asym.trajectory, whole.trajectory, strict=True):
        assert a.mean == b.mean == c.mean
        assert c.ci()[0] >= b.ci()[0] - 1e-12 and c.ci()[1] <= b.ci()[1] + 1e-12  # "wilson": inside "sides"
        assert a.std == pytest.approx(b.std + abs(b.shift), rel=1e-12, abs=1e-15)
        lo_a, hi_a = a.ci()
        lo_b, hi_b = b.ci()
        assert lo_a <= lo_b + 1e-12 and hi_b <= hi_a + 1e-12  # inside the symmetric interval
        shifted += b.shift != 0.0
    assert shifted > 10
    assert all(e.shift == 0.0 for e in asym.trajectory[: asym.switched_at - 1])  # model-based: symmetric
    # the last estimate's sides, by hand: Wilson's bounds of the random items' mean, scaled as the floor is
    d = asym._design
    pool = asym.n_items - asym.n_observed + d.count
    low, high = sampling_side_floors(d.mean_score, d.low_seen, d.high_seen, d.effective_count(1.0), pool, (0.0, 1.0),
                                     True)
    scale = (pool / asym.n_items) ** 2 / min(max(d.variance_reduction, 1.0), FLOOR_GAIN_MAX)
    est = asym.estimate()
    assert est.shift < 0.0  # 0/1 scores near 0.9 after 60 items: Wilson's floor binds, the long side below
    assert est.std - est.shift == pytest.approx(float(np.sqrt(low * scale)), rel=1e-9)
    assert est.std + est.shift >= float(np.sqrt(high * scale)) * (1 - 1e-9)
    last = whole.estimate()  # Wilson's interval as a whole: the short side Wilson's too
    assert last.std + last.shift == pytest.approx(float(np.sqrt(high * scale)), rel=1e-9)
    with pytest.raises(ConfigurationError, match="floor=split"):
        BayesAME(ref, hyperparameters=FIT, calibration=None, interval="sides", floor="split")
    # "sides" is the default (stop 46): floor=split alone is refused with the option that lets it through
    assert BayesAME(ref, hyperparameters=FIT, calibration=None).interval == "sides"
    with pytest.raises(ConfigurationError, match=r"add interval=symmetric.*bayesame\[floor=split,interval=symmetric\]"):
        BayesAME(ref, hyperparameters=FIT, calibration=None, floor="split")
    with pytest.raises(ConfigurationError, match="interval"):
        BayesAME(ref, hyperparameters=FIT, calibration=None, interval="lopsided")


# ------------------------------------------------------------------ the switch on the point estimate (issue 25)
def _just_above(seed: int = 0) -> tuple[ScoreMatrix, np.ndarray]:
    """References spread from 0.25 to 0.55; three targets a little above every one of them, one inside."""
    rng = np.random.default_rng(seed)
    p = np.linspace(0.25, 0.55, 8)
    ref = ScoreMatrix((rng.random((8, 120)) < p[:, None]).astype(float), kind="binary")
    truths = np.vstack([(rng.random(120) < q).astype(float) for q in (0.6, 0.65, 0.7, 0.4)])
    return ref, truths


def test_estimate_beyond_tests_the_point_estimate_from_n_10_only_below_the_interval_s_own_z() -> None:
    from activeeval.methods.bayesame import Z95, estimate_beyond

    mean, sd = np.array([0.62, 0.58, 0.2, 0.5]), np.array([0.05, 0.05, 0.05, 0.05])
    np.testing.assert_array_equal(estimate_beyond(10, mean, sd, 0.3, 0.6, 0.0), [True, False, True, False])
    np.testing.assert_array_equal(estimate_beyond(10, mean, sd, 0.3, 0.6, 1.0), [False, False, True, False])
    assert not estimate_beyond(9, mean, sd, 0.3, 0.6, 0.0).any()  # too few items: the paired test's own start
    assert not estimate_beyond(50, mean, sd, 0.3, 0.6, Z95).any()  # the 95 % interval's test covers it
    assert bool(estimate_beyond(10, 0.7, 0.01, 0.3, 0.6, 0.0))  # one target: a scalar answer


def test_switch_z_0_switches_once_the_point_estimate_is_beyond_every_reference() -> None:
    """A target a little above every reference: switch_z=0 switches it (reason "outside") when the 95 % interval's
    own test (switch_z=1.96, the default before stop 46) does not yet, and only from n = 10 on; up to its switch
    the two runs are the same."""
    from activeeval.methods.bayesame import Z95

    ref, truths = _just_above()
    truth = truths[1]
    default = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, switch_z=Z95)
    point = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, switch_z=0.0)
    run_fixed(default, truth, 20)
    run_fixed(point, truth, 20)
    assert default.mode == "model"
    assert point.mode == "design" and point.switch_reason == "outside" and 10 <= point.switched_at < 20
    assert point.switch_test == "switch_z" and default.switch_test is None  # which test switched it, and none yet
    k = point.switched_at
    assert default.observed_items[:k] == point.observed_items[:k]
    replay = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, switch_z=Z95)
    run_fixed(replay, truth, k)
    mean, _ = replay._model_estimate()
    lo, hi = replay.reference_range
    assert mean > hi or mean < lo  # what made it switch: the point estimate beyond the references' range
    assert any(note.startswith("design-based: the target looks to be outside")
               and "(its model-based estimate lay beyond it)" in note
               for note in point.estimate().notes)


@pytest.mark.parametrize("switch_z", [None, 0.0])
def test_calibration_switches_pseudo_targets_as_single_runs_do_under_switch_z(switch_z: float | None) -> None:
    """The calibration's shared pass drops a pseudo-target exactly when its single run (with the same switch_z)
    switches; switch_z=0 drops more of the targets just above the references than 1.96 (None: no test beyond the
    95 % interval's own)."""
    from activeeval.methods.bayesame import Z95, _model_based_errors

    ref, truths = _just_above()
    grid = [8, 15, 30]
    shared = _model_based_errors(ref, FIT, truths, 3, grid, switch_z=switch_z)
    for n, values in zip(grid, shared):
        expected = []
        for truth in truths:
            kw = {"switch_z": Z95 if switch_z is None else switch_z}
            method = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, **kw)
            run_fixed(method, truth, n)
            if method.mode == "model":
                est = method.estimate()
                expected.append((est.mean - truth.mean()) / est.std)
        np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-12)
    counts = [len(v) for v in shared]
    assert counts == ([1, 1, 0] if switch_z is None else [1, 0, 0])


def test_a_calibration_under_switch_z_is_its_own() -> None:
    """The calibration follows the switch its method makes: switch_z keys it apart from the default's (1 since
    stop 46), and 1.96 (no test beyond the 95 % interval's own) is the calibration without it."""
    from activeeval.methods.bayesame import SWITCH_Z, Z95

    ref = binary_reference(12, 60, 4)
    default = BayesAME(ref, seed=0, hyperparameters=FIT)
    point = BayesAME(ref, seed=0, hyperparameters=FIT, switch_z=0.0)
    plain = BayesAME(ref, seed=0, hyperparameters=FIT, switch_z=Z95)
    assert default.switch_z == SWITCH_Z == 1.0
    assert default.calibration_ == calibrate(ref, FIT, switch_z=SWITCH_Z)
    assert point.calibration_ == calibrate(ref, FIT, switch_z=0.0)
    assert plain.calibration_ == calibrate(ref, FIT)


def test_shared_fold_fits_calibrate_with_the_main_kernel_and_key_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """fold_fit="shared" (the default): the folds play with the main fit itself (no fold fit is made); "refit"
    (the earlier default) fits a kernel per fold; each calibration is keyed apart, in memory and as an option."""
    import activeeval.gp.prior as prior_module

    ref = binary_reference(12, 60, 6)
    refit = calibrate(ref, FIT, fold_fit="refit")
    made: list[object] = []
    real_fit = prior_module.fit_hyperparameters

    def counted(*args: object, **kwargs: object) -> ReferenceFit:
        made.append(args)
        return real_fit(*args, **kwargs)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(prior_module, "fit_hyperparameters", counted)
        shared = calibrate(ref, FIT)
        assert not made, "a fold fit was made"
        assert calibrate(ref, FIT, fold_fit="refit", seed=1) and len(made) == 5  # one kernel per fold
    assert shared == calibrate(ref, FIT, fold_fit="shared") and shared != refit
    from activeeval.methods.bayesame import Z95

    # (switch_z=1.96: the calibrations above, which take no switch_z; the default's is keyed with its own)
    assert BayesAME(ref, seed=0, hyperparameters=FIT, switch_z=Z95).calibration_ == shared
    assert BayesAME(ref, seed=0, hyperparameters=FIT, switch_z=Z95, fold_fit="refit").calibration_ == refit
    with pytest.raises(ConfigurationError, match="fold_fit"):
        BayesAME(ref, seed=0, hyperparameters=FIT, fold_fit="never")
