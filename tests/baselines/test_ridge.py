"""The eigenbasis Bayesian ridge (methods/baselines/_ridge.py) against scikit-learn and the explicit formulas.

scikit-learn is the oracle here only: the methods do not import it.
"""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from sklearn.linear_model import BayesianRidge

from activeeval.methods.baselines import _ridge
from activeeval.methods.baselines._ridge import (
    GramEigen,
    GramTracker,
    fit_bayesian_ridge,
    fit_eigen,
    fit_many,
    rank_one_update,
)

# scikit-learn ≥ 1.7 takes the full SVD when n_samples < n_features (PR #31094), so its sigma_ is
# the proper posterior covariance in every regime; before, it dropped most of the null space of X
SKLEARN_FULL_SIGMA = tuple(int(v) for v in sklearn.__version__.split(".")[:2]) >= (1, 7)


def _binary(n: int, p: int, seed: int) -> np.ndarray:
    return (np.random.default_rng(seed).random((n, p)) < 0.5).astype(float)


def _rank_deficient(n: int, p: int, seed: int) -> np.ndarray:
    """Binary design with a duplicated column, a constant-1 and a constant-0 column."""
    x = _binary(n, p, seed)
    x[:, 3] = x[:, 1]
    x[:, 5] = 1.0
    x[:, 6] = 0.0
    return x


def _cases() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(0)
    cases = []
    for n, p in [(50, 10), (30, 30), (31, 30), (12, 40), (200, 150), (120, 150), (2, 5), (5, 1), (1, 3)]:
        cases.append((f"binary {n}x{p}", _binary(n, p, n + p), (rng.random(n) < 0.5).astype(float)))
        x = rng.normal(size=(n, p))
        cases.append((f"gaussian {n}x{p}", x, x @ rng.normal(size=p) + 0.3 * rng.normal(size=n)))
    for n, p in [(40, 12), (8, 12)]:  # n > p and n ≤ p, both rank-deficient
        x = _rank_deficient(n, p, 7)
        cases.append((f"rank-deficient {n}x{p}", x, x @ rng.normal(size=p) + 0.1 * rng.normal(size=n)))
        cases.append((f"constant y {n}x{p}", x, np.full(n, 0.7)))
    x = rng.normal(size=(60, 20))  # y exactly linear in X, on a large scale: near interpolation in the primal
    cases.append(("exact linear 60x20", 100 * x, 100 * x @ rng.normal(size=20) + 50))
    x = rng.normal(size=(15, 40))
    cases.append(("exact linear 15x40", x, x @ rng.normal(size=40)))
    return cases


CASES = _cases()
IDS = [c[0] for c in CASES]


def _assert_same_fit(fit, model, label: str) -> None:
    scale = max(np.abs(model.coef_).max(), 1e-300)
    np.testing.assert_allclose(fit.coef[0], model.coef_, rtol=0, atol=1e-8 * scale, err_msg=f"{label} coef_")
    y_scale = max(abs(model.intercept_), np.abs(model.coef_ @ model.X_offset_), 1.0)
    assert abs(fit.intercept[0] - model.intercept_) <= 1e-8 * y_scale, f"{label} intercept_"
    np.testing.assert_allclose(fit.alpha[0], model.alpha_, rtol=1e-8, err_msg=f"{label} alpha_")
    np.testing.assert_allclose(fit.lambda_[0], model.lambda_, rtol=1e-8, err_msg=f"{label} lambda_")
    assert fit.n_iter[0] == model.n_iter_, f"{label} n_iter_"


# ------------------------------------------------- (a) the fit itself
@pytest.mark.parametrize(("label", "x", "y"), CASES, ids=IDS)
def test_fit_equals_sklearn(label: str, x: np.ndarray, y: np.ndarray) -> None:
    fit = fit_bayesian_ridge(x, y)
    assert fit.eigen.dual == (x.shape[0] <= x.shape[1])  # scikit-learn's own switch
    _assert_same_fit(fit, BayesianRidge().fit(x, y), label)


@pytest.mark.parametrize(
    "settings",
    [{"max_iter": 1}, {"max_iter": 2}, {"max_iter": 7}, {"tol": 1e-14}, {"tol": 10.0}, {"tol": 1e-6},
     {"alpha_1": 1.0, "lambda_2": 3.0}, {"alpha_2": 0.5, "lambda_1": 2.0}],
)  # fmt: skip
@pytest.mark.parametrize("shape", [(40, 15), (15, 40)])
def test_fit_equals_sklearn_with_other_settings(settings: dict, shape: tuple[int, int]) -> None:
    # max_iter/tol exercise where the loop stops (including never): the round-by-round history
    x = _binary(*shape, seed=3)
    y = x @ np.linspace(-1, 1, shape[1]) + np.random.default_rng(4).normal(size=shape[0])
    _assert_same_fit(fit_bayesian_ridge(x, y, **settings), BayesianRidge(**settings).fit(x, y), str(settings))


@pytest.mark.parametrize("seed", range(4))
def test_near_interpolation_in_the_primal_takes_sse_from_the_residual(seed: int) -> None:
    # y exactly linear in X, n > p, on a large scale: ‖y‖² − Σ c²(e + 2r) cancels to round-off of ‖y‖²
    # (~1e-7 here), far above the true sse and comparable to the 2·alpha_2 = 2e-6 it is added to
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(60, 20))
    y = 1e3 * (x @ rng.normal(size=20)) + 5e3
    _assert_same_fit(fit_bayesian_ridge(x, y), BayesianRidge().fit(x, y), f"seed {seed}")


def test_unknown_setting_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        fit_bayesian_ridge(np.eye(3), np.arange(3.0), fit_intercept=False)


def test_many_targets_each_stop_as_their_own_fit() -> None:
    x = _binary(60, 25, seed=5)
    rng = np.random.default_rng(6)
    ys = np.stack([x @ rng.normal(size=25) * s + rng.normal(size=60) for s in (0.0, 0.1, 1.0, 10.0)])
    fit = fit_bayesian_ridge(x, ys)
    assert len(set(fit.n_iter.tolist())) > 1  # the targets stop at different rounds
    for t, y in enumerate(ys):
        model = BayesianRidge().fit(x, y)
        np.testing.assert_allclose(fit.coef[t], model.coef_, atol=1e-8 * np.abs(model.coef_).max())
        np.testing.assert_allclose([fit.alpha[t], fit.lambda_[t]], [model.alpha_, model.lambda_], rtol=1e-8)
        assert fit.n_iter[t] == model.n_iter_


def test_fit_many_equals_separate_fits() -> None:
    rng = np.random.default_rng(8)
    designs = [_binary(n, 30, seed=n) for n in (5, 20, 30, 31, 45, 90)]  # dual and primal, mixed widths
    ys = [rng.normal(size=(3, x.shape[0])) + x[:, :1].T for x in designs]
    eigens = [GramEigen.from_design(x) for x in designs]
    together = fit_many(eigens, ys)
    for eigen, y, fit in zip(eigens, ys, together, strict=True):
        alone = fit_eigen(eigen, y)
        np.testing.assert_array_equal(fit.n_iter, alone.n_iter)
        np.testing.assert_allclose(fit.alpha, alone.alpha, rtol=1e-12)
        np.testing.assert_allclose(fit.lambda_, alone.lambda_, rtol=1e-12)
        np.testing.assert_allclose(fit.coef, alone.coef, rtol=1e-12, atol=1e-14)


def test_dual_and_primal_give_the_same_fit() -> None:
    for x in (_binary(12, 30, seed=9), _rank_deficient(9, 12, seed=10)):
        y = x[:, 0] - x[:, 2] + 0.2 * np.random.default_rng(11).normal(size=x.shape[0])
        dual, primal = (fit_eigen(GramEigen.from_design(x, dual=flag), y) for flag in (True, False))
        assert dual.eigen.dual and not primal.eigen.dual
        np.testing.assert_allclose(dual.coef, primal.coef, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose([dual.alpha, dual.lambda_], [primal.alpha, primal.lambda_], rtol=1e-9)
        np.testing.assert_array_equal(dual.n_iter, primal.n_iter)
        d = np.random.default_rng(12).normal(size=(4, x.shape[1]))
        np.testing.assert_allclose(
            dual.quad(dual.eigen.project_features(d), (d * d).sum(axis=1)),
            primal.quad(primal.eigen.project_features(d)),
            rtol=1e-9,
        )


# ------------------------------------------ (b), (c) posterior covariance
def _explicit_sigma(x: np.ndarray, alpha: float, lam: float) -> tuple[np.ndarray, float]:
    """(α X_cᵀX_c + λ I)⁻¹ by an explicit inverse, and the relative accuracy to expect of it."""
    xc = x - x.mean(axis=0)
    a = alpha * xc.T @ xc + lam * np.eye(x.shape[1])
    return np.linalg.inv(a), 100 * np.finfo(float).eps * np.linalg.cond(a)


@pytest.mark.parametrize(("label", "x", "y"), CASES, ids=IDS)
def test_sigma_is_the_proper_posterior_covariance(label: str, x: np.ndarray, y: np.ndarray) -> None:
    fit = fit_bayesian_ridge(x, y)
    expected, rel = _explicit_sigma(x, fit.alpha[0], fit.lambda_[0])
    scale = np.abs(expected).max()
    np.testing.assert_allclose(fit.sigma(), expected, rtol=0, atol=max(rel, 1e-12) * scale, err_msg=label)
    d = np.random.default_rng(13).normal(size=(5, x.shape[1]))
    quad = fit.quad(fit.eigen.project_features(d), (d * d).sum(axis=1))[0]
    np.testing.assert_allclose(quad, np.einsum("ij,jk,ik->i", d, expected, d), rtol=max(rel, 1e-12), atol=0)
    if x.shape[0] < x.shape[1]:  # the null space of X keeps the prior variance 1/λ
        null = np.linalg.svd(x - x.mean(axis=0))[2][-1]
        assert null @ fit.sigma() @ null == pytest.approx(1 / fit.lambda_[0], rel=1e-9)


@pytest.mark.parametrize(("label", "x", "y"), CASES, ids=IDS)
def test_sigma_equals_sklearn_where_it_is_the_proper_one(label: str, x: np.ndarray, y: np.ndarray) -> None:
    n, p = x.shape
    model = BayesianRidge().fit(x, y)
    fit = fit_bayesian_ridge(x, y)
    scale = np.abs(model.sigma_).max()
    full_rank = np.linalg.matrix_rank(x - x.mean(axis=0)) == p
    if (n > p and full_rank) or SKLEARN_FULL_SIGMA:
        np.testing.assert_allclose(fit.sigma(), model.sigma_, rtol=0, atol=1e-8 * scale, err_msg=label)
    elif n - 1 < p:  # old scikit-learn: at most n directions, so 0 instead of 1/λ on the rest of the null space
        assert np.linalg.matrix_rank(model.sigma_) <= n < p


def test_sklearn_sigma_without_the_full_svd_misses_the_null_space() -> None:
    # what scikit-learn < 1.7 computed when n_samples < n_features: the reduced SVD's n directions only
    x = _binary(6, 20, seed=14)
    y = x[:, 0] + 0.1 * np.arange(6)
    fit = fit_bayesian_ridge(x, y)
    _, s, vh = np.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    reduced = (vh.T / (fit.alpha[0] * s**2 + fit.lambda_[0])) @ vh
    assert np.linalg.matrix_rank(reduced) == 6 and np.linalg.matrix_rank(fit.sigma()) == 20
    null = np.linalg.svd(x - x.mean(axis=0))[2][-1]  # a direction of the null space outside vh's rows
    assert null @ reduced @ null == pytest.approx(0.0, abs=1e-12)
    assert null @ fit.sigma() @ null == pytest.approx(1 / fit.lambda_[0], rel=1e-9)


# ------------------------------------------------------- (d) predictions
@pytest.mark.parametrize(("label", "x", "y"), CASES, ids=IDS)
def test_predict_equals_sklearn_return_std(label: str, x: np.ndarray, y: np.ndarray) -> None:
    n, p = x.shape
    model = BayesianRidge().fit(x, y)
    fit = fit_bayesian_ridge(x, y)
    new = np.random.default_rng(15).random((4, p)).round()
    mean, var = fit.predict(new)
    sk_mean, sk_std = model.predict(new, return_std=True)
    y_scale = max(np.abs(y).max(), 1.0)
    np.testing.assert_allclose(mean[0], sk_mean, rtol=0, atol=1e-8 * y_scale, err_msg=label)
    full_rank = np.linalg.matrix_rank(x - x.mean(axis=0)) == p
    if (n > p and full_rank) or SKLEARN_FULL_SIGMA:
        np.testing.assert_allclose(var[0], sk_std**2, rtol=1e-8, err_msg=label)
    # the variance is (x − x̄)ᵀ Σ_β (x − x̄) + 1/α: centred by the training features' means
    expected, rel = _explicit_sigma(x, fit.alpha[0], fit.lambda_[0])
    d = new - x.mean(axis=0)
    np.testing.assert_allclose(var[0], np.einsum("ij,jk,ik->i", d, expected, d) + 1 / fit.alpha[0],
                               rtol=max(rel, 1e-12))  # fmt: skip


def test_aipw_quantities_equal_sklearn() -> None:
    # Bayes-AIPW needs dᵀβ (μ̄_U − μ̄_C) and dᵀΣ_β d for d = φ̄_U − φ̄_C, in both regimes
    phi = _binary(90, 30, seed=16)
    y = phi @ np.linspace(0, 0.05, 30) + (np.random.default_rng(17).random(90) < 0.3)
    for n in (10, 30, 31, 60):
        model = BayesianRidge().fit(phi[:n], y[:n])
        fit = fit_bayesian_ridge(phi[:n], y[:n])
        d = phi[n:].mean(axis=0) - phi[:n].mean(axis=0)
        g = fit.eigen.project_features(d[None, :])
        mu = model.predict(phi)
        assert fit.linear(g)[0, 0] == pytest.approx(mu[n:].mean() - mu[:n].mean(), rel=1e-9, abs=1e-12)
        if n > 30 or SKLEARN_FULL_SIGMA:
            assert fit.quad(g, np.array([d @ d]))[0, 0] == pytest.approx(d @ model.sigma_ @ d, rel=1e-8)


# ------------------------------------------------------ rank-one updates
def _check_decomposition(values: np.ndarray, vectors: np.ndarray, gram: np.ndarray) -> None:
    scale = max(np.abs(gram).max(), 1.0)
    assert np.all(np.diff(values) >= 0)
    np.testing.assert_allclose(vectors.T @ vectors, np.eye(len(values)), atol=1e-12)
    np.testing.assert_allclose((vectors * values) @ vectors.T, gram, atol=1e-12 * scale)
    np.testing.assert_allclose(values, np.linalg.eigvalsh(gram), atol=1e-12 * scale)


@pytest.mark.parametrize(
    "start",
    ["generic", "ties", "zero", "one", "two"],
)
def test_rank_one_update_equals_a_new_decomposition(start: str) -> None:
    rng = np.random.default_rng(18)
    p = {"one": 1, "two": 2}.get(start, 12)
    if start == "generic":
        a = rng.normal(size=(20, p))
        gram = a.T @ a
    elif start == "ties":  # exactly tied eigenvalues with non-negligible components: rotated away
        q = np.linalg.qr(rng.normal(size=(p, p)))[0]
        gram = (q * np.array([0, 0, 0, 1, 1, 1, 1, 2, 3, 3, 5, 8.0])) @ q.T
    elif start == "zero":  # all eigenvalues 0, as a Gram matrix before any observation
        gram = np.zeros((p, p))
    else:
        gram = np.diag(rng.random(p) + 0.5)
    values, vectors = np.linalg.eigh(gram)
    for rho in (1.0, 0.25, 3.0):
        delta = rng.normal(size=p)
        updated = rank_one_update(values, vectors, delta, rho)
        assert updated is not None
        gram = gram + rho * np.outer(delta, delta)
        values, vectors = updated
        _check_decomposition(values, vectors, gram)


def test_rank_one_update_deflates_components_in_the_null_space() -> None:
    x = _rank_deficient(30, 12, seed=19)  # duplicated and constant columns: δ never leaves the row space
    tracker = GramTracker(np.zeros((12, 12)), refresh=1000)
    mean = x[0]
    for n in range(2, 31):
        delta = x[n - 1] - mean
        tracker.add(delta, (n - 1) / n)
        mean = mean + delta / n
    xc = x - x.mean(axis=0)
    _check_decomposition(tracker.values, tracker.vectors, xc.T @ xc)
    eigen = GramEigen.from_eigen(xc, x.mean(axis=0), tracker.values, tracker.vectors, dual=False)
    assert eigen.null.sum() == 3  # duplicate, constant 1, constant 0: exactly zero after thresholding


def test_gram_tracker_follows_many_updates_and_refreshes() -> None:
    x = _binary(400, 40, seed=20)
    for refresh in (1000, 50):
        tracker = GramTracker(np.outer(x[0], x[0]), refresh=refresh)
        for row in x[1:]:
            tracker.add(row)
        _check_decomposition(tracker.values, tracker.vectors, x.T @ x)
        np.testing.assert_array_equal(tracker.gram, np.asarray(x.T @ x))  # integer sums: exact


def test_gram_tracker_falls_back_to_eigh_without_lapack(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ridge, "_dlaed9", lambda: None)
    assert _ridge._secular(np.array([0.0, 1.0]), np.array([0.6, 0.8]), 1.0) is None
    x = _binary(50, 10, seed=21)
    tracker = GramTracker(np.zeros((10, 10)))
    for row in x:
        tracker.add(row, 0.5)
    _check_decomposition(tracker.values, tracker.vectors, 0.5 * x.T @ x)


def test_eigenvalues_below_the_round_off_of_the_gram_product_are_zero() -> None:
    x = _rank_deficient(40, 12, seed=22)
    eigen = GramEigen.from_design(x)
    assert not eigen.dual and eigen.null.sum() == 3 and np.all(eigen.values >= 0)
    raw = np.linalg.eigvalsh((x - x.mean(axis=0)).T @ (x - x.mean(axis=0)))
    assert np.sum(np.abs(raw) < 1e-10) == 3 and raw.min() != 0.0  # round-off, not exact zeros, before
