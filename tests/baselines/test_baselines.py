"""Baselines of the BayesAME paper: hand-computed values on tiny matrices and properties by construction."""

from __future__ import annotations

import builtins

import numpy as np
import pytest
from scipy.optimize import check_grad

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.irt.baseline import (
    ItemParams,
    _beta_terms,
    _neg_log_post_2pl,
    _neg_log_post_beta,
    ability_grid,
    fit_2pl,
    grid_loglik,
    item_moments,
    posterior_R,
)
from activeeval.methods.base import Method
from activeeval.methods.baselines import BayesAIPW, BayesRSLearn, IRTBaseline, ProEval, SeqAPW
from activeeval.methods.baselines.bayes_aipw import bayes_aipw_estimate
from activeeval.methods.baselines.bayes_rs_learn import bayes_rs_learn_estimate
from activeeval.methods.baselines.proeval import proeval_factor, proeval_posterior
from activeeval.methods.baselines.seq_apw import anchor_weights, covering_gain, item_similarity
from activeeval.methods.registry import make_method

TINY = ScoreMatrix(
    # models x items; item vectors φ_0=(1,1,0), φ_1=(0,1,1), φ_2=(1,0,1), φ_3=(0,0,0)
    np.array([[1, 0, 1, 0], [1, 1, 0, 0], [0, 1, 1, 0]], dtype=float),
    ["m1", "m2", "m3"],
    ["i0", "i1", "i2", "i3"],
    kind="binary",
)


def _random_binary(n_models: int, n_items: int, seed: int) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=n_models)
    difficulty = rng.normal(size=n_items)
    p = 1 / (1 + np.exp(-(ability[:, None] - difficulty[None, :])))
    scores = (rng.random((n_models, n_items)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)], kind="binary")


# ------------------------------------------------------------------ Seq-APW
def test_item_similarity_hand_values() -> None:
    sim = item_similarity(TINY.scores.T)
    # centred φ_0 = (1/3, 1/3, −2/3), φ_1 = (−2/3, 1/3, 1/3): corr = (−3/9)/(6/9) = −0.5
    expected = np.array(
        [[1, -0.5, -0.5, 0], [-0.5, 1, -0.5, 0], [-0.5, -0.5, 1, 0], [0, 0, 0, 1]], dtype=float
    )
    np.testing.assert_allclose(sim, expected, atol=1e-12)  # round-off of a 3-vector dot product


def test_seq_apw_greedy_choice_weights_and_eq9_by_hand() -> None:
    sim = item_similarity(TINY.scores.T)
    # empty coreset (best = −1): gain_j = Σ_i (sim_ij + 1) = 4 for items 0..2 and 5 for item 3
    np.testing.assert_allclose(covering_gain(sim, np.full(4, -1.0)), [4, 4, 4, 5], atol=1e-12)
    method = SeqAPW(TINY, seed=0)
    assert method.select() == 3
    method.observe(3, 0.0)
    assert method.select() in (0, 1, 2)  # a three-way tie (gain 1 each)
    method.observe(0, 1.0)
    # items 1 and 2 are nearer anchor 3 (sim 0) than anchor 0 (sim −0.5)
    np.testing.assert_allclose(anchor_weights(sim, [3, 0]), [0.75, 0.25])
    est = method.estimate()
    assert est.mean == pytest.approx(0.25)
    # Eq. 9: s² = 0.5, Σw² = 0.625, n_eff = 1.6 → 0.5 · 0.625 · (4 − 1.6)/4 = 0.1875
    assert est.var == pytest.approx(0.1875)


# ----------------------------------------------------------- Bayes-AIPW
def _ridge_posterior(x: np.ndarray, y: np.ndarray, alpha: float, lam: float) -> tuple[np.ndarray, float, np.ndarray]:
    """Bayesian ridge with intercept, written out: coef, intercept, Σ_β = (λI + α XcᵀXc)⁻¹."""
    xm, ym = x.mean(axis=0), y.mean()
    xc = x - xm
    sigma = np.linalg.inv(lam * np.eye(x.shape[1]) + alpha * xc.T @ xc)
    coef = alpha * sigma @ xc.T @ (y - ym)
    return coef, ym - xm @ coef, sigma


def test_bayes_aipw_matches_the_formula_written_out() -> None:
    rng = np.random.default_rng(1)
    phi = rng.normal(size=(30, 3))  # N = 30 items, K = 3 reference models
    scores_all = phi @ np.array([0.3, -0.2, 0.5]) + 0.1 * rng.normal(size=30)
    observed = np.arange(12)
    from sklearn.linear_model import BayesianRidge

    model = BayesianRidge().fit(phi[observed], scores_all[observed])
    coef, intercept, sigma = _ridge_posterior(phi[observed], scores_all[observed], model.alpha_, model.lambda_)
    mu = phi @ coef + intercept
    n, n_items = 12, 30
    frac = (n_items - n) / n_items
    expected = scores_all[:12].mean() + frac * (mu[12:].mean() - mu[:12].mean())
    d = phi[12:].mean(axis=0) - phi[:12].mean(axis=0)
    expected_var = frac**2 * (d @ sigma @ d + (1 / model.alpha_) * (1 / n + 1 / (n_items - n)))
    mean, var = bayes_aipw_estimate(phi, observed, scores_all[observed])
    assert mean == pytest.approx(expected, rel=1e-9)  # same fit; only round-off differs
    assert var == pytest.approx(expected_var, rel=1e-6)  # explicit inverse vs sklearn's SVD form


# ------------------------------------------------------- Bayes-RS-Learn
def test_bayes_rs_learn_matches_the_formula_written_out() -> None:
    ref = _random_binary(40, 25, seed=2)
    observed = np.array([0, 3, 7, 11, 19])
    target = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    from sklearn.linear_model import BayesianRidge

    x, y = ref.scores[:, observed], ref.scores.mean(axis=1)
    model = BayesianRidge().fit(x, y)
    coef, intercept, sigma = _ridge_posterior(x, y, model.alpha_, model.lambda_)
    mean, var = bayes_rs_learn_estimate(ref.scores, observed, target)
    assert mean == pytest.approx(target @ coef + intercept, rel=1e-9)  # round-off only
    # Var_R = s̃ᵀ Σ_β s̃ + α̂⁻¹ with s̃ = s_C − x̄ (the feature means): the centred form that
    # goes with the intercept (sklearn's predict); the paper writes s_Cᵀ Σ_β s_C without one
    centred = target - x.mean(axis=0)
    assert var == pytest.approx(centred @ sigma @ centred + 1 / model.alpha_, rel=1e-6)


# --------------------------------------------------------------- ProEval
def test_proeval_low_rank_posterior_equals_the_gp_formula() -> None:
    ref = _random_binary(8, 15, seed=3)
    m, a = proeval_factor(ref.scores)
    cov = np.cov(ref.scores, rowvar=False)
    np.testing.assert_allclose(a @ a.T, cov, atol=1e-12)  # A Aᵀ is the empirical covariance
    observed = np.array([1, 4, 5, 9, 13])
    s = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    noise = 0.05
    k_cc = cov[np.ix_(observed, observed)] + noise * np.eye(5)
    one = np.ones(15) / 15
    k_rc = one @ cov[:, observed]
    expected_mean = m.mean() + k_rc @ np.linalg.solve(k_cc, s - m[observed])
    expected_var = one @ cov @ one - k_rc @ np.linalg.solve(k_cc, k_rc)
    mean, var = proeval_posterior(m, a, observed, s, noise)
    assert mean == pytest.approx(expected_mean, abs=1e-12)  # Woodbury identity, round-off only
    assert var == pytest.approx(expected_var, abs=1e-12)


def test_proeval_prior_and_no_exactness_at_full_coverage() -> None:
    ref = _random_binary(8, 15, seed=4)
    method = ProEval(ref, noise_var=0.05, seed=0)
    est = method.estimate()
    assert est.mean == pytest.approx(ref.scores.mean())
    cov = np.cov(ref.scores, rowvar=False)
    assert est.var == pytest.approx(cov.sum() / 15**2)
    truth = (np.arange(15) % 2).astype(float)
    method.observe_many(list(range(15)), list(truth))
    # R = mean θ, not mean s: the paper notes R̂ ≠ R* and Var_R > 0 even at n = N
    assert method.estimate().var > 0


def test_proeval_rejects_bad_noise() -> None:
    with pytest.raises(ConfigurationError, match=r"noise_var must be a positive number, got 0.0; try 0.3"):
        ProEval(TINY, noise_var=0.0)


# ------------------------------------------------------------------- IRT
def test_irt_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(5)
    y = (rng.random((6, 5)) < 0.5).astype(float)
    x = rng.normal(size=6 + 2 * 5)
    err = check_grad(lambda v: _neg_log_post_2pl(v, y)[0], lambda v: _neg_log_post_2pl(v, y)[1], x)
    assert err < 1e-5  # central error of forward differences at step ~1.5e-8
    yc = rng.random((6, 5))
    logs = _beta_terms(yc)
    xb = np.concatenate([rng.normal(size=6 + 10), np.full(5, 1.5)])
    err_b = check_grad(lambda v: _neg_log_post_beta(v, yc, logs)[0], lambda v: _neg_log_post_beta(v, yc, logs)[1], xb)
    assert err_b < 1e-4  # the Beta terms are larger in magnitude; same relative FD error


def test_posterior_R_by_hand_on_a_two_point_grid() -> None:
    # equal weights on two abilities: Σ_U μ = (1, 3), Σ_U Var = (0.5, 0.5), Σ_C s = 2, N = 10
    mean, var = posterior_R(np.zeros(2), 2.0, np.array([1.0, 3.0]), np.array([0.5, 0.5]), 10)
    assert mean == pytest.approx((2 + 2) / 10)
    assert var == pytest.approx((1.0 + 0.5) / 100)  # Var_θ = 1, E Var = 0.5


def test_irt_method_equals_brute_force_quadrature() -> None:
    params = ItemParams(a=np.array([1.0, 2.0, 0.5]), b=np.array([0.0, 1.0, -1.0]))
    grid, log_prior = ability_grid(401)
    observed, s = [0, 1], [1.0, 0.0]
    mu, var = item_moments(params, grid)
    lik = mu[:, 0] * (1 - mu[:, 1])
    w = np.exp(log_prior) * lik
    w /= w.sum()
    expected_mean = (1.0 + w @ mu[:, 2]) / 3
    expected_var = (w @ (mu[:, 2] - w @ mu[:, 2]) ** 2 + w @ var[:, 2]) / 9
    log_post = log_prior + grid_loglik(params, grid, 0, 1.0) + grid_loglik(params, grid, 1, 0.0)
    mean, v = posterior_R(log_post, sum(s), mu[:, 2], var[:, 2], 3)
    assert mean == pytest.approx(expected_mean, rel=1e-10)  # same quadrature, round-off only
    assert v == pytest.approx(expected_var, rel=1e-10)
    assert observed == [0, 1]


def test_2pl_fit_recovers_abilities() -> None:
    rng = np.random.default_rng(6)
    ability = rng.normal(size=60)
    a = rng.uniform(0.5, 2.0, size=80)
    b = rng.normal(size=80)
    y = (rng.random((60, 80)) < 1 / (1 + np.exp(-(ability[:, None] * a - b)))).astype(float)
    params = fit_2pl(y)
    # 80 items per model: the MAP ability is noisy but strongly correlated with the truth
    assert np.corrcoef(params.abilities, ability)[0, 1] > 0.9


def test_irt_errors_are_pinned() -> None:
    with pytest.raises(ConfigurationError, match=r"model must be 'auto', '2pl' or 'beta', got 'rasch'"):
        IRTBaseline(TINY, model="rasch")
    with pytest.raises(ConfigurationError, match=r"grid_points must be an integer >= 11, got 3"):
        IRTBaseline(TINY, grid_points=3)


def test_beta_irt_runs_on_continuous_scores() -> None:
    rng = np.random.default_rng(7)
    scores = rng.beta(2, 3, size=(20, 12))
    ref = ScoreMatrix(scores, [f"m{j}" for j in range(20)], [f"i{i}" for i in range(12)], kind="continuous")
    method = IRTBaseline(ref, seed=0)
    assert method.params.kind == "continuous"
    truth = rng.beta(2, 3, size=12)
    method.observe_many(list(range(6)), list(truth[:6]))
    est = method.estimate()
    assert 0 < est.mean < 1 and est.var > 0
    method.observe_many(list(range(6, 12)), list(truth[6:]))
    assert method.estimate().mean == pytest.approx(truth.mean())
    assert method.estimate().var == 0.0


# --------------------------------------------------- shared properties
EXACT_AT_N = ["rs-mean", "seq-apw", "bayes-aipw", "irt", "bayesame", "bayesame-rs"]


@pytest.mark.parametrize("name", EXACT_AT_N)
def test_exact_at_full_coverage(name: str) -> None:
    ref = _random_binary(12, 20, seed=8)
    truth = (np.random.default_rng(9).random(20) < 0.6).astype(float)
    method = make_method(name, ref, seed=3)
    assert isinstance(method, Method)
    while method.n_observed < 20:
        item = method.select()
        assert method.select() == item  # select() is pure
        method.observe(item, float(truth[item]))
    est = method.estimate()
    assert est.mean == pytest.approx(truth.mean(), abs=1e-9)  # R̂ = R* by construction
    assert est.var == pytest.approx(0.0, abs=1e-12)  # Eq. 9 / posterior variance → 0


@pytest.mark.parametrize("name", ["bayes-rs-learn", "proeval"])
def test_non_exact_methods_still_run_to_the_end(name: str) -> None:
    ref = _random_binary(12, 20, seed=10)
    truth = (np.random.default_rng(11).random(20) < 0.6).astype(float)
    method = make_method(name, ref, seed=3)
    for _ in range(20):
        item = method.select()
        method.observe(item, float(truth[item]))
    est = method.estimate()
    assert np.isfinite(est.mean) and est.var >= 0


def test_eq9_variance_of_seq_apw_decreases_to_zero() -> None:
    ref = _random_binary(12, 30, seed=12)
    truth = (np.random.default_rng(13).random(30) < 0.5).astype(float)
    method = SeqAPW(ref, seed=0)
    for _ in range(30):
        item = method.select()
        method.observe(item, float(truth[item]))
    assert method.trajectory[-1].var == 0.0
    assert method.trajectory[-2].var > 0.0


def test_bayesian_ridge_methods_run_without_sklearn(monkeypatch: pytest.MonkeyPatch) -> None:
    # the ridge is reimplemented (methods/baselines/_ridge.py); scikit-learn is only a test oracle
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("no sklearn")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError):
        import sklearn.linear_model  # noqa: F401 - the block works
    for cls in (BayesAIPW, BayesRSLearn):
        method = cls(_random_binary(6, 8, seed=14), seed=0)
        method.observe_many([0, 1, 2], [1.0, 0.0, 1.0])
        assert np.isfinite(method.estimate().mean) and method.estimate().var > 0
