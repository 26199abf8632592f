"""Continuous IRT maths (activeeval.irt.continuous) against hand-computed values and brute force."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from activeeval.exceptions import ConfigurationError, InvalidScoresError
from activeeval.irt import continuous as irt

# A 3-model x 4-item matrix small enough to calibrate by hand.
Y = np.array(
    [
        [1.0, 0.5, 0.0, 0.2],
        [1.0, 0.7, 0.0, 0.4],
        [1.0, 0.9, 0.0, 0.9],
    ]
)


def test_difficulty_hand_values():
    b = irt.item_difficulty(Y, clip=1e-3)
    # p̂ = (1, 0.7, 0, 0.5): b = log((1−p)/p), all-1 and all-0 items clipped to p = 1 − 1e-3 / 1e-3.
    expected = [math.log(1e-3 / (1 - 1e-3)), math.log(0.3 / 0.7), math.log((1 - 1e-3) / 1e-3), 0.0]
    np.testing.assert_allclose(b, expected, rtol=1e-12)  # closed form: round-off only
    assert np.all(np.isfinite(b))


def test_ability_and_k_hand_values():
    theta = irt.model_ability(Y)
    ybar = Y.mean(axis=1)  # (0.425, 0.525, 0.7)
    np.testing.assert_allclose(theta, np.log(ybar / (1 - ybar)), rtol=1e-12)  # round-off only
    b = irt.item_difficulty(Y)
    k = irt.noise_factor(Y, theta, b)
    # Hand formula written out with explicit loops.
    num = den = 0.0
    for j in range(3):
        for i in range(4):
            mu = 1.0 / (1.0 + math.exp(-(theta[j] - b[i])))
            num += (Y[j, i] - mu) ** 2
            den += mu * (1 - mu)
    assert k == pytest.approx(num / den, rel=1e-12)  # round-off only
    assert irt.discrimination(k) == pytest.approx(1 / math.sqrt(k), rel=1e-15)


def test_all_zero_and_all_one_items_never_nan():
    y = np.zeros((5, 3))
    y[:, 1] = 1.0
    cal = irt.calibrate(y)
    for arr in (cal.b, cal.theta_ref, cal.correlation):
        assert np.all(np.isfinite(arr))
    assert math.isfinite(cal.k) and cal.k > 0


def test_negative_discrimination_filter():
    y = np.array([[0.1, 0.9, 0.2], [0.5, 0.5, 0.5], [0.9, 0.1, 0.8]])
    cal = irt.calibrate(y)
    # Item 1 goes down as ability goes up: out of the pool; the others stay.
    assert cal.pool.tolist() == [True, False, True]
    assert cal.correlation[1] < 0
    assert irt.calibrate(y, filter_negative=False).pool.all()


def test_minmax_scaling_for_metrics_outside_unit_interval():
    x = np.array([[10.0, 3.0, 5.0], [20.0, 3.0, 7.0], [30.0, 3.0, 6.0]])
    cal = irt.calibrate(x)
    assert cal.scaled
    np.testing.assert_allclose(cal.low, [10, 3, 5])
    np.testing.assert_allclose(cal.width, [20, 1, 2])  # constant item gets width 1
    np.testing.assert_allclose(cal.scale(25.0, 0), 0.75)
    np.testing.assert_allclose(cal.scale(99.0, 0), 1.0)  # outside the calibration range: clipped
    assert not irt.calibrate(Y).scaled


@pytest.mark.parametrize("k", [0.05, 0.3, 0.5, 1.0, 2.0])
def test_fisher_information_forms(k):
    theta, b = 0.7, np.linspace(-4, 4, 41)
    mu = 1 / (1 + np.exp(-(theta - b)))
    np.testing.assert_allclose(irt.fisher_information(theta, b, k), mu * (1 - mu) / k, rtol=1e-12)
    full = irt.fisher_information(theta, b, k, full=True)
    np.testing.assert_allclose(full, mu * (1 - mu) / k + (1 - 2 * mu) ** 2 / 2, rtol=1e-12)
    # App. E: I = ½ + u(a² − 2).
    np.testing.assert_allclose(full, 0.5 + mu * (1 - mu) * (1 / k - 2), rtol=1e-12)


def test_full_information_matches_numerical_fisher():
    # I(θ) = E[(∂/∂θ log N(X; μ, kμ(1−μ)))²], by quadrature over X.
    k, b, theta = 0.4, 0.3, -0.5
    mu = 1 / (1 + math.exp(-(theta - b)))
    sd = math.sqrt(k * mu * (1 - mu))
    x = np.linspace(mu - 10 * sd, mu + 10 * sd, 20001)
    h = 1e-5

    def logpdf(t):
        m = 1 / (1 + np.exp(-(t - b)))
        return norm.logpdf(x, m, np.sqrt(k * m * (1 - m)))

    score = (logpdf(theta + h) - logpdf(theta - h)) / (2 * h)
    info = np.trapezoid(score**2 * norm.pdf(x, mu, sd), x)
    exact = float(irt.fisher_information(theta, b, k, full=True))
    assert info == pytest.approx(exact, rel=1e-5)  # finite differences (h=1e-5) + quadrature error


@pytest.mark.parametrize("a", [1.5, 2.0, 3.0, 4.7])
def test_tilde_and_full_order_items_identically_above_sqrt2(a):
    k = 1 / a**2
    rng = np.random.default_rng(0)
    b = rng.normal(0, 2, 200)
    for theta in (-2.0, 0.0, 1.3):
        tilde = irt.fisher_information(theta, b, k)
        full = irt.fisher_information(theta, b, k, full=True)
        assert np.array_equal(np.argsort(-tilde, kind="stable"), np.argsort(-full, kind="stable"))
    assert irt.full_minus_tilde_slope(k) > 0


def test_full_order_reverses_below_sqrt2():
    k = 1 / 1.2**2  # a = 1.2 < √2
    b = np.array([-3.0, 0.0, 3.5])
    full = irt.fisher_information(0.0, b, k, full=True)
    assert int(np.argmax(full)) == 2  # farthest item wins
    assert int(np.argmax(irt.fisher_information(0.0, b, k))) == 1


def test_quasi_likelihood_score_and_information():
    # d/dθ of the quasi log-likelihood is (x − μ)/k; minus its second derivative is Ĩ.
    k, b, x, theta, h = 0.3, 0.2, 0.8, -0.4, 1e-4
    ll = lambda t: float(irt.log_likelihood(np.array([t]), b, x, k)[0])  # noqa: E731
    mu = 1 / (1 + math.exp(-(theta - b)))
    assert (ll(theta + h) - ll(theta - h)) / (2 * h) == pytest.approx((x - mu) / k, rel=1e-7)  # O(h²) FD error
    second = (ll(theta + h) - 2 * ll(theta) + ll(theta - h)) / h**2
    assert -second == pytest.approx(mu * (1 - mu) / k, rel=1e-5)  # O(h²) FD error, cancellation ~1e-8/h²


def test_normal_likelihood_is_the_density():
    k, b, x = 0.3, 0.2, 0.8
    t = np.array([-1.0, 0.5])
    mu = 1 / (1 + np.exp(-(t - b)))
    np.testing.assert_allclose(irt.log_likelihood(t, b, x, k, "normal"),
                               norm.logpdf(x, mu, np.sqrt(k * mu * (1 - mu))), rtol=1e-12)


def test_corrected_item_total_correlation():
    y = np.array([[0.1, 0.2, 0.9], [0.5, 0.4, 0.1], [0.9, 0.8, 0.5]])
    r = irt.corrected_item_total_correlation(y)
    for i in range(3):
        rest = np.delete(y, i, axis=1).sum(axis=1)
        assert r[i] == pytest.approx(np.corrcoef(y[:, i], rest)[0, 1], rel=1e-12)  # round-off only


def test_error_messages():
    with pytest.raises(InvalidScoresError, match=r"scores contain NaN or inf; drop incomplete models or items first"):
        irt.item_difficulty(np.array([[0.1, np.nan], [0.2, 0.3]]))
    with pytest.raises(InvalidScoresError, match=r"scores must lie in \[0, 1\], got range \[0, 2\]; min-max scale"):
        irt.item_difficulty(np.array([[0.0, 2.0], [0.2, 0.3]]))
    with pytest.raises(InvalidScoresError, match=r"calibration needs at least 2 reference models and 2 items"):
        irt.calibrate(np.ones((1, 5)))
    with pytest.raises(InvalidScoresError, match=r"calibration scores contain NaN or inf"):
        irt.calibrate(np.array([[0.1, np.nan], [0.2, 0.3]]))
    with pytest.raises(InvalidScoresError, match=r"outside \[0, 1\], and scale='none'; use scale='minmax'"):
        irt.calibrate(np.array([[0.0, 2.0], [0.2, 0.3]]), scale="none")
    with pytest.raises(ConfigurationError, match=r"scale must be 'auto', 'minmax' or 'none', got 'log'"):
        irt.calibrate(Y, scale="log")
    with pytest.raises(ConfigurationError, match=r"clip must be in \(0, 0.5\)"):
        irt.calibrate(Y, clip=0.7)
    with pytest.raises(ConfigurationError, match=r"k must be a positive number, got -1"):
        irt.fisher_information(0.0, 0.0, -1)
    with pytest.raises(ConfigurationError, match=r"k must be a positive number, got 0"):
        irt.discrimination(0)
    with pytest.raises(ConfigurationError, match=r"likelihood must be 'quasi' or 'normal', got 'beta'"):
        irt.log_likelihood(np.zeros(3), 0.0, 0.5, 1.0, "beta")
    with pytest.raises(ConfigurationError, match=r"theta must have shape \(3,\) and b shape \(4,\)"):
        irt.noise_factor(Y, np.zeros(2), np.zeros(4))
    with pytest.raises(ConfigurationError, match=r"n_points must be an integer >= 3"):
        irt.default_grid(n_points=2)
    with pytest.raises(InvalidScoresError, match=r"complete 2-D array"):
        irt.minmax_params(np.array([1.0, 2.0]))


# ------------------------------------------------------ consistent calibration
def simulate_model(n_models=60, n_items=500, k=0.1, seed=1, level=0.0):
    """Scores from the response model: Beta with mean μ = σ(θ − b) and variance k·μ(1−μ); mean θ = ``level``."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.5, n_models)
    theta += level - theta.mean()
    b = rng.normal(0.0, 1.5, n_items)
    mu = 1.0 / (1.0 + np.exp(-(theta[:, None] - b[None, :])))
    conc = 1.0 / k - 1.0  # Beta(μc, (1−μ)c) has variance μ(1−μ)/(c + 1) = k·μ(1−μ)
    return rng.beta(mu * conc, (1.0 - mu) * conc), theta, b


def test_fit_abilities_solves_its_estimating_equation():
    y, _, b = simulate_model(n_models=20, n_items=300)
    theta = irt.fit_abilities(y, b)
    mu = 1.0 / (1.0 + np.exp(-(theta[:, None] - b[None, :])))
    # Σ_i (y_ji − σ(θ_j − b_i)) = 0 to the solver's tolerance (relative 1e-10 in θ).
    np.testing.assert_allclose((y - mu).sum(axis=1), 0.0, atol=1e-6)
    # The root increases with the total: the abilities rank the models exactly as their mean score.
    assert list(np.argsort(theta)) == list(np.argsort(y.mean(axis=1)))


def test_fit_abilities_clips_all_zero_and_all_one_models():
    y = np.vstack([np.zeros(4), np.ones(4), Y[0]])
    b = irt.item_difficulty(Y)
    theta = irt.fit_abilities(y, b)
    assert np.all(np.isfinite(theta)) and theta[0] < theta[2] < theta[1]


def test_joint_fit_solves_both_estimating_equations():
    y, _, _ = simulate_model(n_models=30, n_items=200, seed=3)
    theta, b, n_iter = irt.joint_fit(y, tol=1e-10)
    mu = 1.0 / (1.0 + np.exp(-(theta[:, None] - b[None, :])))
    np.testing.assert_allclose((y - mu).sum(axis=1), 0.0, atol=1e-6)  # every model
    np.testing.assert_allclose((y - mu).sum(axis=0), 0.0, atol=1e-6)  # every item
    assert abs(theta.mean()) < 1e-12 and n_iter < 1000  # origin fixed, converged


def test_consistent_calibration_recovers_the_simulated_model():
    # Models mostly below the items (as on AlpacaEval 2), so the paper's two scales disagree.
    y, theta, b = simulate_model(n_models=60, n_items=500, k=0.1, seed=1, level=-1.5)
    cal = irt.calibrate(y)
    assert cal.method == "consistent"
    # The fit's origin is mean θ = 0: compare on it. Errors are sampling noise
    # (sd of θ̂ ≈ √(k / Σ_i μ(1−μ)) ≈ 0.03, of b̂ ≈ 0.1).
    assert np.max(np.abs(cal.theta_ref - (theta + 1.5))) < 0.25
    assert np.sqrt(np.mean((cal.b - (b + 1.5)) ** 2)) < 0.2
    assert cal.k == pytest.approx(0.1, rel=0.05)
    # The paper's formulas on the same data: b on another scale, k biased upwards (residuals off-centre).
    paper = irt.calibrate(y, method="paper")
    assert paper.method == "paper" and paper.k > 1.5 * cal.k


def test_paper_calibration_is_the_papers_formulas():
    cal = irt.calibrate(Y, method="paper")
    np.testing.assert_array_equal(cal.b, irt.item_difficulty(Y))
    np.testing.assert_array_equal(cal.theta_ref, irt.model_ability(Y))
    assert cal.k == irt.noise_factor(Y, irt.model_ability(Y), irt.item_difficulty(Y))
    assert (cal.k_factor, cal.error_scale, cal.error_floor) == (1.0, 1.0, 0.0)


def test_noise_factor_degrees_of_freedom():
    theta, b = irt.model_ability(Y), irt.item_difficulty(Y)
    k0 = irt.noise_factor(Y, theta, b)
    assert irt.noise_factor(Y, theta, b, n_params=6) == pytest.approx(k0 * 12 / 6, rel=1e-12)
    with pytest.raises(ConfigurationError, match="n_params must be an integer in"):
        irt.noise_factor(Y, theta, b, n_params=12)


def test_calibration_method_is_checked():
    with pytest.raises(ConfigurationError, match="calibration method must be 'consistent' or 'paper', got 'jml'"):
        irt.calibrate(Y, method="jml")


def test_calibration_error_model_and_k_factor():
    cal = irt.calibrate(Y)
    assert cal.ability_var(0.2) == 0.2
    em = cal.with_error_model(2.0, 0.01)
    assert em.ability_var(0.2) == pytest.approx(0.41, rel=1e-12) and em.k == cal.k
    kf = cal.with_k_factor(3.0)
    assert kf.k == pytest.approx(3 * cal.k, rel=1e-12) and kf.k_fit == pytest.approx(cal.k, rel=1e-12)
    with pytest.raises(ConfigurationError, match="error_floor must be a non-negative number"):
        cal.with_error_model(1.0, -1.0)
    with pytest.raises(ConfigurationError, match="k_factor must be a positive number"):
        cal.with_k_factor(0.0)


# --------------------------------------------------------- two-parameter items
def simulate_2pl(n_models=80, n_items=300, seed=4):
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 1.0, n_models)
    a = np.exp(rng.normal(0.0, 0.4, n_items))
    b = rng.normal(0.0, 1.5, n_items)
    noise = rng.uniform(0.005, 0.03, n_items)
    mu = irt.response_mean_2pl(theta[:, None], a[None, :], b[None, :])
    y = np.clip(mu + rng.normal(0.0, 1.0, mu.shape) * np.sqrt(noise), 0.0, 1.0)
    return y, theta, a, b, noise


def test_fit_item_slopes_solves_the_penalised_estimating_equations():
    y, theta, _, _, _ = simulate_2pl()
    b0 = np.zeros(y.shape[1])
    k, slope_sd = 0.05, 0.5
    a, b = irt.fit_item_slopes(y, theta, b0, k, slope_sd=slope_sd)
    eta = a[None, :] * (theta[:, None] - b[None, :])
    r = y - 1.0 / (1.0 + np.exp(-eta))
    # score of (log a, b) for each item: Σ_j r·η − (k/sd²)·log a = 0 and Σ_j r = 0
    np.testing.assert_allclose((r * eta).sum(axis=0) - k / slope_sd**2 * np.log(a), 0.0, atol=1e-6)
    np.testing.assert_allclose(r.sum(axis=0), 0.0, atol=1e-6)


def test_each_item_and_each_model_is_solved_on_its_own():
    """The solvers iterate only on the items (models) not yet converged: an item's fit must not depend on which
    other items are fitted with it, nor a model's ability on the other models."""
    y, theta, _, _, _ = simulate_2pl(n_models=60, n_items=120, seed=7)
    b0 = np.zeros(y.shape[1])
    a, b = irt.fit_item_slopes(y, theta, b0, 0.05)
    some = np.array([3, 17, 40, 41, 99])
    a_some, b_some = irt.fit_item_slopes(y[:, some], theta, b0[some], 0.05)
    np.testing.assert_allclose(a_some, a[some], rtol=1e-13, atol=0)
    np.testing.assert_allclose(b_some, b[some], rtol=1e-13, atol=1e-15)
    diff = irt.item_difficulty(y)
    abilities = irt.fit_abilities(y, diff)
    rows = np.array([0, 5, 59])
    np.testing.assert_allclose(irt.fit_abilities(y[rows], diff), abilities[rows], rtol=1e-13, atol=1e-15)


def test_two_parameter_items_are_recovered_on_a_fixed_ability_scale():
    y, theta, a, b, noise = simulate_2pl()
    a_hat, b_hat = irt.fit_item_slopes(y, theta, np.zeros(y.shape[1]), 0.02, slope_sd=2.0)
    # Items inside the models' range; one far outside it (every model near 0 or 1) has no identifiable slope.
    inside = np.abs(b) < 1.5
    assert np.corrcoef(np.log(a[inside]), np.log(a_hat[inside]))[0, 1] > 0.9
    assert np.sqrt(np.mean((b[inside] - b_hat[inside]) ** 2)) < 0.2
    s2 = irt.item_noise(y, theta, a_hat, b_hat, shrink=0.0)[inside]
    # 78 residual degrees of freedom per item: each s² is within about ±16 % of its noise
    # (a little less on average: scores clipped to [0, 1] lose some of their spread)
    assert np.corrcoef(noise[inside], s2)[0, 1] > 0.75
    assert np.median(s2 / noise[inside]) == pytest.approx(1.0, abs=0.15)
    info = irt.information_2pl(0.3, a_hat[inside], b_hat[inside], s2)
    assert np.all(info >= 0)


def test_2pl_calibration_keeps_the_consistent_ability_scale():
    y, _, _, _, _ = simulate_2pl(n_models=40, n_items=200)
    rasch = irt.calibrate(y)
    two = irt.calibrate(y, response="2pl")
    assert rasch.response == "rasch" and two.response == "2pl"
    np.testing.assert_array_equal(two.theta_ref, rasch.theta_ref)  # the same abilities
    np.testing.assert_array_equal(two.b_scale, rasch.b)
    # the true ability of a model is its consistent (mean-score-ranking) ability under both models
    np.testing.assert_array_equal(two.true_ability(y[:3]), rasch.true_ability(y[:3]))
    with pytest.raises(ConfigurationError, match="response='2pl' needs the consistent calibration"):
        irt.calibrate(y, method="paper", response="2pl")
    with pytest.raises(ConfigurationError, match="response must be 'rasch' or '2pl', got '3pl'"):
        irt.calibrate(y, response="3pl")
