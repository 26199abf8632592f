"""The logit-normal BayesAME variants (``bayesame-paper[likelihood=logit]``, paper App. B.3) against brute force.

Synthetic reference matrices: unit tests of the maths (docs/MATHS.md,
"Logit-normal variants"). The real-data check is the backtest in the report.
"""

from __future__ import annotations

import numpy as np
import pytest
from dense_formulas import posterior_item_form
from scipy.special import expit

from activeeval import ScoreMatrix
from activeeval.exceptions import ConfigurationError, ScoreOutOfRangeError
from activeeval.gaussian import information_gain
from activeeval.logit import (
    bernoulli_working_response,
    linearised_information_gain,
    linearised_var_r,
    logit,
    moderated_mean,
    moderated_slope,
)
from activeeval.methods.bayesame_paper import BayesAMEPaper, weights_from_mapping


def continuous_reference(center: float, spread: float, n_models: int = 6, n_items: int = 40,
                         seed: int = 0) -> ScoreMatrix:
    """Scores in center ± spread (unique reference vectors: the unique regime)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)) + 0.5 * rng.normal(size=(n_models, n_items))
    return ScoreMatrix(center + spread * np.tanh(z), kind="continuous")


def binary_reference(n_models: int = 8, n_items: int = 60, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    p = expit(rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)))
    return ScoreMatrix((rng.random((n_models, n_items)) < p).astype(float), kind="binary")


# ------------------------------------------------------------------ pure maths
def test_probit_approximation_against_monte_carlo() -> None:
    rng = np.random.default_rng(0)
    z = rng.standard_normal(400_000)
    for m in np.linspace(-4, 4, 9):
        for v in (0.01, 0.5, 2.0, 8.0):
            f = m + np.sqrt(v) * z
            s = expit(f)
            # 0.01: MacKay's approximation is off by at most ~0.007 over this grid (probit vs logistic tails);
            # the Monte Carlo standard error is below 0.5/sqrt(4e5) < 1e-3
            assert moderated_mean(np.array([m]), np.array([v]))[0] == pytest.approx(s.mean(), abs=0.01)
            # the slope E[σ'(f)] = ∂E[σ(f)]/∂m (Stein), same approximation, same bound
            assert moderated_slope(np.array([m]), np.array([v]))[0] == pytest.approx((s * (1 - s)).mean(), abs=0.01)


def test_probit_approximation_is_exact_at_zero_variance() -> None:
    m = np.linspace(-5, 5, 11)
    np.testing.assert_allclose(moderated_mean(m, np.zeros_like(m)), expit(m), rtol=0, atol=1e-15)
    np.testing.assert_allclose(moderated_slope(m, np.zeros_like(m)), expit(m) * (1 - expit(m)), rtol=0, atol=1e-15)


def test_linearised_formulas_reduce_to_eq2_and_eq6() -> None:
    rng = np.random.default_rng(1)
    b = 7
    a = rng.normal(size=(b, b))
    cov = a @ a.T / b
    remaining = rng.integers(0, 4, size=b).astype(float)
    counts = remaining + rng.integers(1, 3, size=b)
    sigma2 = 0.03
    ones = np.ones(b)
    cov_u = cov @ remaining
    scaled = linearised_var_r(remaining, ones, cov_u, ones, sigma2 * counts, 1)
    assert scaled == pytest.approx(sigma2 * remaining @ counts + remaining @ cov_u, rel=1e-14)  # round-off
    ig = linearised_information_gain(cov_u, np.diag(cov), ones, sigma2 * counts, scaled)
    np.testing.assert_allclose(ig, information_gain(cov_u, np.diag(cov), counts, sigma2, scaled), rtol=1e-13)


def test_bernoulli_working_response() -> None:
    p0 = np.array([0.5, 0.2, 0.9, 1.0])
    n_obs = np.array([2.0, 1.0, 0.0, 1.0])
    sums = np.array([1.0, 1.0, 0.0, 1.0])
    f0, z_sum, noise = bernoulli_working_response(p0, n_obs, sums, eps=1e-3)
    p = np.clip(p0, 1e-3, 1 - 1e-3)
    np.testing.assert_allclose(f0, np.log(p / (1 - p)), rtol=1e-12)
    np.testing.assert_allclose(noise, 1 / (p * (1 - p)), rtol=1e-12)
    # z = f0 + (s − p0)/g0 per item, summed over the bucket's items
    np.testing.assert_allclose(z_sum, n_obs * f0 + (sums - n_obs * p) / (p * (1 - p)), rtol=1e-12)
    assert z_sum[0] == pytest.approx(0.0, abs=1e-12)  # one 0 and one 1 at p0 = 0.5 cancel


# ------------------------------------------------- the Gaussian limit (continuous)
def _pair(spread: float) -> tuple[BayesAMEPaper, BayesAMEPaper]:
    """The Gaussian model (α, σ²) and the logit one with (16 α, 16 σ²), both fed the same scores near 0.5.

    Near 0.5, logit(x) ≈ 4 (x − 0.5): the logit model's prior mean, covariance
    and noise are the Gaussian's times 4, 16, 16, so f|C = 4 (θ|C − 0.5) and
    σ(f) ≈ 0.5 + f/4 maps it back; with σ'(0) = 1/4 the linearised Var(R) is
    (1/4)² · 16 · the Gaussian's and Eq. 6's correlation is unchanged.
    """
    ref = continuous_reference(0.5, spread)
    truth = 0.5 + spread * np.tanh(np.random.default_rng(5).normal(size=ref.n_items))
    alpha, sigma2 = 1e-3, 1e-4
    gauss = BayesAMEPaper(ref, seed=0, alpha=alpha, sigma2=sigma2, refit_every=0, estimator="bayes")
    lgt = BayesAMEPaper(ref, seed=0, alpha=16 * alpha, sigma2=16 * sigma2, refit_every=0, estimator="bayes",
                        likelihood="logit")
    for i in range(0, ref.n_items, 3):
        gauss.observe(i, truth[i])
        lgt.observe(i, truth[i])
    return gauss, lgt


def _errors(spread: float) -> tuple[float, float, float]:
    gauss, lgt = _pair(spread)
    eg, el = gauss.estimate(), lgt.estimate()
    ig_g, ig_l = gauss.information_gains(), lgt.information_gains()
    return abs(eg.mean - el.mean), abs(el.var / eg.var - 1), float(np.abs(ig_l - ig_g).max() / ig_g.max())


def test_continuous_logit_recovers_the_gaussian_model_near_one_half() -> None:
    mean_err, var_err, ig_err = _errors(0.02)
    # scores within 0.5 ± 0.02: logit is linear up to a relative (4/3)·0.02² ≈ 5e-4 (its cubic term), so the
    # estimates agree to ~1e-8 (the cubic errors cancel in the mean) and Var(R), IG to ~1e-3 relative
    assert mean_err < 1e-6
    assert var_err < 2e-3
    assert ig_err < 3e-3
    # and the gap is the nonlinearity: it shrinks about 4-fold when the spread is halved (quadratic)
    wide = _errors(0.08)
    mid = _errors(0.04)
    assert wide[1] > 2.5 * mid[1] > 2.5 * 2.5 * var_err
    assert wide[2] > 2.5 * mid[2] > 2.5 * 2.5 * ig_err


# ------------------------------------------------------ the Gaussian limit (binary)
def test_bernoulli_logit_at_one_half_is_a_gaussian_model_with_bernoulli_noise() -> None:
    """With reference points at 0.5 the linearised Bernoulli is Gaussian: θ = 0.5 + f/4, item noise 1/4.

    Every reference vector has mean 1/2 (two of four models right), so the
    prior mean is logit(1/2) = 0; the auxiliary model's huge noise keeps its
    posterior mean, the reference point, at 1/2 (to ~1e-6). Then
    z = 4 (s − 1/2) observes f with noise 4: in score space the Gaussian
    model with prior N(1/2, Σ_f/16) and noise σ'(0) = 1/4 per item, which
    the batch formula computes.
    """
    rows = [(1, 1, 0, 0), (1, 0, 1, 0), (1, 0, 0, 1), (0, 1, 1, 0), (0, 1, 0, 1), (0, 0, 1, 1)]
    phi = np.array([rows[k % 6] for k in range(30)], dtype=float).T  # 4 models x 30 items, 6 buckets
    ref = ScoreMatrix(phi, kind="binary")
    alpha = 0.04  # prior sd of f 0.2: σ is nearly linear there and κ = 1 − π v/16 ≈ 0.99
    method = BayesAMEPaper(ref, seed=0, alpha=alpha, sigma2=1e6, refit_every=0, estimator="bayes",
                           likelihood="logit")
    assert method.logit_model_ == "bernoulli"
    truth = (np.random.default_rng(2).random(30) < 0.5).astype(float)
    items = [0, 1, 2, 3, 7, 9, 13, 20]
    for i in items:
        method.observe(i, truth[i])
    sigma_f = method._f_kernel()(np.vstack([method._d2_row(b) for b in range(method.n_buckets)]))
    b_of = method.buckets.of_item[items]
    mean, cov = posterior_item_form(np.full(6, 0.5), sigma_f / 16, b_of, truth[items], np.full(len(items), 0.25))
    np.testing.assert_allclose(method.reference_point_, 0.0, atol=1e-6)  # σ(f0) = 1/2: the aux moves ~1e-8
    assert np.abs(mean - 0.5).max() > 5e-3  # the data move θ|C: the comparison below is not prior against prior
    # θ|C: σ's curvature over f within ±0.1 and κ < 1 give errors of 6e-5 (measured); 2e-4 allows 3x that
    np.testing.assert_allclose(method.theta_mean(), mean, atol=2e-4)
    u = method.buckets.counts - np.bincount(b_of, minlength=6)
    var = (u @ cov @ u + 0.25 * u.sum()) / 30**2
    est = method.estimate()
    assert est.var == pytest.approx(var, rel=5e-3)  # the same approximations: 1.8e-3 relative (measured)
    assert est.mean == pytest.approx((truth[items].sum() + u @ mean) / 30, abs=2e-4)


# ---------------------------------------------------------------- exactness
@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_sequential_equals_batch(kind: str) -> None:
    """The posterior of f after n observations equals the batch formula (Eq. 7) on the transformed scores."""
    if kind == "continuous":
        ref = continuous_reference(0.4, 0.35, n_items=50)
        truth = np.clip(0.4 + 0.35 * np.tanh(np.random.default_rng(3).normal(size=50)), 0, 1)
    else:
        ref = binary_reference()
        truth = (np.random.default_rng(3).random(ref.n_items) < 0.6).astype(float)
    method = BayesAMEPaper(ref, seed=1, likelihood="logit", refit_every=0)
    for _ in range(25):
        i = method.select()
        method.observe(i, truth[i])
    items = np.array(method.observed_items)
    b_of = method.buckets.of_item[items]
    d2 = np.vstack([method._d2_row(b) for b in range(method.n_buckets)])
    sigma = method._f_kernel()(d2)
    if kind == "continuous":
        mu, _ = method.prior()
        y = logit(truth[items], method.logit_eps)
        noise = method.sigma2_ * method.buckets.counts[b_of]
    else:
        mu = method._mu_f
        f0 = method.reference_point_[b_of]
        p0 = expit(f0)
        y = f0 + (truth[items] - p0) / (p0 * (1 - p0))
        noise = 1 / (p0 * (1 - p0))
    mean, cov = posterior_item_form(mu, sigma, b_of, y, noise)
    m_f, v_f = method.logit_posterior()
    # round-off of the Kalman (continuous) or bucket-form (binary) solves against the dense item form;
    # logit scores reach ±6.9, so 1e-7 absolute
    np.testing.assert_allclose(m_f, mean, atol=1e-7)
    np.testing.assert_allclose(v_f, np.diag(cov), atol=1e-7)
    # E[θ] is the probit approximation of that posterior
    np.testing.assert_allclose(method.theta_mean(), moderated_mean(mean, np.diag(cov)), atol=1e-7)


@pytest.mark.parametrize("kind", ["continuous", "binary"])
@pytest.mark.parametrize("estimator", ["bayes", "cv"])
def test_everything_observed_gives_the_exact_score_and_zero_variance(kind: str, estimator: str) -> None:
    ref = continuous_reference(0.5, 0.45, n_items=30) if kind == "continuous" else binary_reference(n_items=30)
    rng = np.random.default_rng(4)
    truth = rng.random(30) if kind == "continuous" else (rng.random(30) < 0.5).astype(float)
    method = BayesAMEPaper(ref, seed=0, likelihood="logit", estimator=estimator)
    for _ in range(30):
        i = method.select()
        method.observe(i, truth[i])
    est = method.estimate()
    assert est.mean == pytest.approx(truth.mean(), abs=1e-12)  # round-off of the sums
    assert est.var == 0.0


def test_var_r_against_monte_carlo() -> None:
    """The linearised Var(R) against sampling f from its posterior and pushing it through σ."""
    ref = continuous_reference(0.5, 0.45, n_items=40)
    truth = 0.5 + 0.45 * np.tanh(np.random.default_rng(6).normal(size=40))
    method = BayesAMEPaper(ref, seed=0, likelihood="logit", refit_every=0, alpha=4.0)
    for i in range(0, 40, 10):
        method.observe(i, truth[i])
    cov = method.posterior_cov()  # Σ|C of f (logit space)
    mean, _ = method.logit_posterior()
    u = method._post.remaining
    rng = np.random.default_rng(7)
    f = rng.multivariate_normal(mean, cov, size=200_000, method="cholesky")
    r_mc = expit(f) @ u / 40  # σ² = 1e-4: the item noise adds < 1e-6 relative, left out of the sample
    est = method.estimate()
    assert np.sqrt(method.logit_posterior()[1]).max() > 0.8  # posterior sd of f up to 0.8: σ is not linear there
    # the linearisation drops the curvature of σ: here 2 % of Var(R) (measured); 5 % leaves room for the Monte
    # Carlo error of a variance from 2e5 draws (~0.3 %)
    assert est.var == pytest.approx(r_mc.var(), rel=0.05)
    # the probit approximation of E[R]: within a tenth of a posterior sd
    assert (est.mean - (truth[list(method.observed_items)].sum() / 40 + r_mc.mean())) == pytest.approx(
        0.0, abs=0.1 * r_mc.std())


# ------------------------------------------------------------------ selection
@pytest.mark.parametrize("kind", ["continuous", "binary"])
def test_logit_select_is_pure_and_batches_are_distinct(kind: str) -> None:
    ref = continuous_reference(0.5, 0.4) if kind == "continuous" else binary_reference()
    method = BayesAMEPaper(ref, seed=3, likelihood="logit")
    assert method.active  # unique reference vectors: information-gain selection
    for score in (0.3, 0.9, 0.6) if kind == "continuous" else (0.0, 1.0, 1.0):
        method.observe(method.select(), score)
    first = method.select()
    assert method.select() == first and method.n_observed == 3
    batch = method.select_batch(5, exclude=[first])
    assert len(set(batch)) == 5 and first not in batch
    ig = method.information_gains()
    assert np.all(ig >= 0) and int(method.buckets.of_item[first]) == int(np.argmax(ig))


# --------------------------------------------------------------------- errors
def test_bad_input() -> None:
    ref = continuous_reference(0.5, 0.4)
    with pytest.raises(ConfigurationError, match=r"likelihood must be 'gaussian' or 'logit', got 'probit'"):
        BayesAMEPaper(ref, likelihood="probit")
    with pytest.raises(ConfigurationError, match=r"logit_eps must be a number in \(0, 0.5\), got 0.5; e.g. 1e-3"):
        BayesAMEPaper(ref, likelihood="logit", logit_eps=0.5)
    method = BayesAMEPaper(ref, likelihood="logit")
    with pytest.raises(ScoreOutOfRangeError, match=r"outside the score range \[0, 1\]"):
        method.observe(0, 1.5)
    assert method.n_observed == 0  # nothing recorded
    unbounded = ScoreMatrix(ref.scores * 50, kind="continuous", score_range=None)
    with pytest.raises(ConfigurationError, match=r"likelihood='logit' needs bounded scores.*score_range=\(low, high\)"):
        BayesAMEPaper(unbounded, likelihood="logit")


def test_continuous_scores_on_another_range_are_rescaled() -> None:
    ref = continuous_reference(0.5, 0.4)
    scaled = ScoreMatrix(ref.scores * 100, kind="continuous", score_range=(0, 100))
    truth = 0.5 + 0.4 * np.tanh(np.random.default_rng(8).normal(size=ref.n_items))
    a = BayesAMEPaper(ref, seed=0, likelihood="logit", refit_every=0, tolerance=1e-3)
    # the kernel's distances are on the raw reference scores, 100² times larger: β / 100² is the same kernel
    b = BayesAMEPaper(scaled, seed=0, likelihood="logit", refit_every=0, tolerance=1e-1, beta=1e-4)
    for i in range(0, ref.n_items, 2):
        a.observe(i, truth[i])
        b.observe(i, 100 * truth[i])
    # the same model in logit space, reported on the 0-100 scale; round-off of the rescaling
    assert b.estimate().mean == pytest.approx(100 * a.estimate().mean, rel=1e-9)


# ----------------------------------------------------------- metadata weights
def test_weights_by_model_id_equal_weights_by_position() -> None:
    ref = binary_reference()
    w = np.arange(1, ref.n_models + 1, dtype=float)
    by_id = dict(zip(reversed(ref.model_ids), reversed(w.tolist())))
    a = BayesAMEPaper(ref, seed=0, weights=w)
    b = BayesAMEPaper(ref, seed=0, weights=by_id)
    np.testing.assert_array_equal(a.prior()[0], b.prior()[0])
    np.testing.assert_array_equal(a.prior()[1], b.prior()[1])


def test_weights_mapping_errors() -> None:
    ids = ["m0", "m1", "m2"]
    with pytest.raises(ConfigurationError, match=r"no weight for 1 reference model\(s\): m2; give exactly one weight "
                                                  r"per reference model \(3 models"):
        weights_from_mapping({"m0": 1, "m1": 1}, ids)
    with pytest.raises(ConfigurationError, match=r"1 model\(s\) that are not reference models: x"):
        weights_from_mapping({"m0": 1, "m1": 1, "m2": 1, "x": 1}, ids)
    with pytest.raises(ConfigurationError, match=r"the weight of 'm1' must be a number, got 'a'"):
        weights_from_mapping({"m0": 1, "m1": "a", "m2": 1}, ids)
