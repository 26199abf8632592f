"""The kernel objects, the one rank-one update of the posterior state, and the dense references.

Unit tests of the maths on synthetic data (the methods that use them are
tested in test_bayesame_maths.py and test_bayesame_default.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from dense_formulas import nlml_dense
from hypothesis import given, settings
from hypothesis import strategies as st

from activeeval._threads import limit_threads
from activeeval.exceptions import ConfigurationError
from activeeval.gaussian import (
    BucketNLML,
    BucketPosterior,
    condition_covariance,
    kernel_matvec,
    se_kernel,
    sq_dists,
)
from activeeval.gp.kernels import LevelKernel, SquaredExponential, _integer_points, kernel_sums

ATOL = 1e-8  # incremental against dense round-off on small, well-conditioned problems


# ----------------------------------------------------------------- kernels
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), alpha=st.floats(1e-3, 1e3), beta=st.floats(1e-3, 1e3), k=st.integers(1, 12))
def test_squared_exponential_is_eq1_to_the_bit(seed: int, alpha: float, beta: float, k: int) -> None:
    phi = np.random.default_rng(seed).random((7, k))
    d2 = sq_dists(phi, phi)
    kernel = SquaredExponential(alpha, beta, k)
    np.testing.assert_array_equal(kernel(d2), alpha * np.exp(-(beta / k) * d2))
    np.testing.assert_array_equal(kernel(d2), se_kernel(d2, alpha, beta, k))
    np.testing.assert_array_equal(kernel(d2, eval_gradient=True)[0], kernel(d2))
    np.testing.assert_array_equal(kernel.diag(7), kernel(np.zeros(7)))  # k(0) = α


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), log_alpha=st.floats(-4, 3), log_beta=st.floats(-4, 3))
def test_squared_exponential_gradient_matches_finite_differences(seed: int, log_alpha: float, log_beta: float) -> None:
    phi = np.random.default_rng(seed).random((6, 5))
    d2 = sq_dists(phi, phi)
    kernel = SquaredExponential(1.0, 1.0, 5).with_theta(np.array([log_alpha, log_beta]))
    _value, grad = kernel(d2, eval_gradient=True)
    assert grad.shape == d2.shape + (2,)
    h = 1e-5  # central differences in log space: O(h²) error, far inside the tolerance
    for i in range(2):
        step = np.zeros(2)
        step[i] = h
        numeric = (kernel.with_theta(kernel.theta + step)(d2) - kernel.with_theta(kernel.theta - step)(d2)) / (2 * h)
        np.testing.assert_allclose(grad[..., i], numeric, rtol=1e-6, atol=1e-9 * max(kernel.alpha, 1.0))


def test_squared_exponential_theta_and_bounds_are_in_log_space() -> None:
    kernel = SquaredExponential(0.3, 4.0, 9, alpha_bounds=(1e-3, 10.0), beta_bounds=(1e-2, 1e2))
    np.testing.assert_allclose(kernel.theta, np.log([0.3, 4.0]))
    np.testing.assert_allclose(kernel.bounds, np.log([[1e-3, 10.0], [1e-2, 1e2]]))
    assert kernel.n_dims == len(kernel.hyperparameters) == 2
    again = kernel.with_theta(kernel.theta)
    assert again.alpha == pytest.approx(0.3, rel=1e-15) and again.beta == pytest.approx(4.0, rel=1e-15)
    assert (again.alpha_bounds, again.beta_bounds, again.n_refs) == (kernel.alpha_bounds, kernel.beta_bounds, 9)


def test_with_theta_respects_the_bounds() -> None:
    kernel = SquaredExponential(1.0, 1.0, 3, alpha_bounds=(1e-3, 10.0), beta_bounds=(1e-2, 1e2))
    low, high = kernel.bounds.T
    for theta in (np.array([-50.0, 50.0]), np.array([50.0, -50.0]), low, high):
        clipped = kernel.with_theta(theta)
        assert 1e-3 <= clipped.alpha <= 10.0 and 1e-2 <= clipped.beta <= 1e2
    at_corner = kernel.with_theta(np.array([-50.0, 50.0]))
    assert (at_corner.alpha, at_corner.beta) == (1e-3, 1e2)  # exactly the bounds, not exp(log(bound))
    inside = kernel.with_theta(np.log([0.5, 2.0]))
    assert inside.alpha == pytest.approx(0.5) and inside.beta == pytest.approx(2.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0.0}, "alpha must be a positive number"),
        ({"beta": float("nan")}, "beta must be a positive number"),
        ({"n_refs": 0}, "n_refs must be a positive integer"),
        ({"alpha_bounds": (1.0, 0.5)}, "alpha_bounds must be"),
    ],
)
def test_squared_exponential_refuses_bad_values(kwargs: dict, message: str) -> None:
    args = {"alpha": 1.0, "beta": 1.0, "n_refs": 3, **kwargs}
    with pytest.raises(ConfigurationError, match=message):
        SquaredExponential(**args)
    with pytest.raises(ConfigurationError, match="theta must have shape"):
        SquaredExponential(1.0, 1.0, 3).with_theta(np.zeros(3))


@pytest.mark.parametrize("n_buckets", [1, 300, 700])
def test_kernel_matvec_is_the_kernel_objects(n_buckets: int) -> None:
    rng = np.random.default_rng(n_buckets)
    phi = rng.random((n_buckets, 6))
    vec = rng.normal(size=n_buckets)
    kernel = SquaredExponential(0.7, 3.0, 6)
    np.testing.assert_array_equal(kernel.matvec(phi, vec, block=256), kernel_matvec(phi, vec, 0.7, 3.0, block=256))
    d2 = sq_dists(phi, phi)
    np.testing.assert_array_equal(kernel.matvec(phi, vec, d2), kernel(d2) @ vec)
    np.testing.assert_allclose(kernel.matvec(phi, vec, block=256), kernel(d2) @ vec, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 90), k=st.integers(1, 9), block=st.integers(1, 40),
       alpha=st.floats(1e-3, 1e3), beta=st.floats(1e-3, 1e2), binary=st.booleans(), columns=st.integers(0, 2))
def test_kernel_sums_equal_the_dense_product(seed: int, n: int, k: int, block: int, alpha: float, beta: float,
                                             binary: bool, columns: int) -> None:
    """Σ·vec by tiles of the upper triangle (float32 distances and a table for integer points) is the dense Σ @ vec."""
    rng = np.random.default_rng(seed)
    phi = (rng.random((n, k)) < 0.4).astype(float) if binary else rng.random((n, k))
    vec = rng.normal(size=(n,) if columns == 0 else (n, columns))
    kernel = SquaredExponential(alpha, beta, k)
    dense = kernel(sq_dists(phi, phi)) @ vec
    scale = np.abs(kernel(sq_dists(phi, phi))) @ np.abs(vec)  # the size of the terms summed
    got = kernel.matvec(phi, vec, block=block)
    assert got.shape == dense.shape
    np.testing.assert_array_less(np.abs(got - dense), 1e-13 * scale + 1e-300)


def test_kernel_sums_take_the_exact_integer_path_only_where_float32_is_exact() -> None:
    rng = np.random.default_rng(0)
    binary = (rng.random((50, 30)) < 0.5).astype(float)
    assert _integer_points(binary) == 30  # d² is a Hamming distance: at most K
    assert _integer_points(binary * 3.0 - 1.0) == 30 * 9  # any integers, span 3
    assert _integer_points(binary + 0.5) is None  # not integers
    assert _integer_points(binary * 1000.0) is None  # integers whose products float32 cannot hold exactly
    phi = binary * 3.0 - 1.0
    vec = rng.normal(size=50)
    np.testing.assert_allclose(kernel_sums(phi, vec, -0.05, block=7),
                               np.exp(-0.05 * sq_dists(phi, phi)) @ vec, rtol=1e-13)


@pytest.mark.parametrize("binary", [False, True])
def test_kernel_sums_are_the_same_bits_on_any_number_of_threads(binary: bool) -> None:
    rng = np.random.default_rng(3)
    phi = (rng.random((700, 12)) < 0.5).astype(float) if binary else rng.random((700, 12))
    vec = rng.normal(size=700)
    one = kernel_sums(phi, vec, -0.3, block=64, threads=1)
    for threads in (2, 3, 8):
        np.testing.assert_array_equal(kernel_sums(phi, vec, -0.3, block=64, threads=threads), one)
    with limit_threads(2):  # the default: activeeval's thread limit
        np.testing.assert_array_equal(kernel_sums(phi, vec, -0.3, block=64), one)


def test_level_kernel_uses_the_squared_exponential() -> None:
    rng = np.random.default_rng(1)
    phi = rng.random((8, 4))
    d2 = sq_dists(phi, phi)
    psi, m = phi - phi.mean(0), phi.mean(1) - phi.mean()
    kernel = LevelKernel(alpha=0.3, beta=2.0, gamma=0.2, tau0=0.5, tau1=0.7)
    col = kernel.column(d2[3], psi, psi[3], m, float(m[3]))
    se = SquaredExponential(0.3, 2.0, 4)
    np.testing.assert_allclose(col, se(d2[3]) + 0.5 + 0.7 * m[3] * m + (0.2 / 4) * (psi @ psi[3]), rtol=1e-14)
    dense = se(d2) + 0.5 + 0.7 * np.outer(m, m) + (0.2 / 4) * (psi @ psi.T)
    vec = rng.normal(size=8)
    np.testing.assert_allclose(kernel.matvec(phi, psi, m, vec), dense @ vec, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------- posterior state
def small_problem(seed: int, n_buckets: int = 9):
    rng = np.random.default_rng(seed)
    phi = rng.random((n_buckets, 4))
    sigma = SquaredExponential(0.5, 2.0, 4)(sq_dists(phi, phi))
    counts = rng.integers(1, 4, size=n_buckets).astype(float)
    noise = 0.05 * counts
    mu = phi.mean(1)
    return rng, sigma, counts, noise, mu


def make_posterior(
    sigma: np.ndarray, counts: np.ndarray, noise: np.ndarray, mu: np.ndarray, **kwargs: object
) -> BucketPosterior:
    """A posterior with the dense prior Σ read column by column."""
    return BucketPosterior(mu, lambda b: sigma[:, b].copy(), np.diag(sigma).copy(), sigma @ counts, counts, noise,
                           **kwargs)


def test_condition_covariance_is_the_dense_rank_one_update() -> None:
    _, sigma, counts, noise, _ = small_problem(0)
    remaining, diag, cov_u = counts.copy(), np.diag(sigma).copy(), sigma @ counts
    b = 4
    col = sigma[:, b].copy()
    d, row = condition_covariance(col, noise[b], b, remaining, diag, cov_u)
    after = sigma - np.outer(col, col) / (col[b] + noise[b])
    u = counts.copy()
    u[b] -= 1.0
    assert d == col[b] + noise[b]
    np.testing.assert_array_equal(remaining, u)
    np.testing.assert_allclose(diag, np.diag(after), atol=1e-14)
    np.testing.assert_allclose(cov_u, after @ u, atol=1e-13)
    np.testing.assert_allclose(np.outer(row, row), sigma - after, atol=1e-14)


def test_a_pending_item_conditions_the_covariance_as_an_observed_one_to_the_bit() -> None:
    """The fantasy (score unknown) and a real observation share the one rank-one update."""
    rng, sigma, counts, noise, mu = small_problem(1)
    post = make_posterior(sigma, counts, noise, mu)
    for b in (2, 5, 2):
        post.observe(b, float(rng.random()))
    fantasy = post.fantasy()
    observed = make_posterior(sigma, counts, noise, mu)
    for b in (2, 5, 2):
        observed.observe(b, 0.0)
    for step, b in enumerate((7, 5, 7)):
        fantasy.condition(b)
        observed.observe(b, float(rng.random()))  # scores change the mean, never the covariance
        np.testing.assert_array_equal(fantasy.remaining, observed.remaining)
        if step == 0:  # the same column, to the bit
            np.testing.assert_array_equal(fantasy.diag, observed.diag)
            np.testing.assert_array_equal(fantasy.cov_u, observed.cov_u)
        else:  # the fantasy's rows are read apart from V's (VᵀV + EᵀE): round-off only
            np.testing.assert_allclose(fantasy.diag, observed.diag, rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(fantasy.cov_u, observed.cov_u, rtol=1e-13, atol=1e-14)
    np.testing.assert_array_equal(post.remaining, counts - [0, 0, 2, 0, 0, 1, 0, 0, 0])  # the fantasy left it alone


def test_rebuild_with_a_new_prior_equals_a_fresh_posterior_on_the_same_items() -> None:
    rng, sigma, counts, noise, mu = small_problem(2)
    phi = rng.random((counts.size, 4))
    items = [(1, 0.3), (4, 0.9), (1, 0.5), (6, 0.1)]
    current = {"sigma": sigma}
    post = BucketPosterior(mu, lambda b: current["sigma"][:, b].copy(), np.diag(sigma).copy(), sigma @ counts,
                           counts, noise, auto_compress=False)
    for b, s in items:
        post.observe(b, s)
    assert post.rows == 4
    post.rebuild()  # same prior: back to one row per observed bucket, same posterior
    assert post.rows == 3
    fresh = make_posterior(sigma, counts, noise, mu)
    for b, s in items:
        fresh.observe(b, s)
    for name in ("mean", "diag", "cov_u"):
        np.testing.assert_allclose(getattr(post, name), getattr(fresh, name), atol=ATOL)
    np.testing.assert_allclose(post.v.T @ post.v, fresh.v.T @ fresh.v, atol=ATOL)
    # new hyperparameters: the prior's pieces are passed in, the observations kept
    current["sigma"] = new = SquaredExponential(0.8, 0.5, 4)(sq_dists(phi, phi))
    post.rebuild(prior_diag=np.diag(new).copy(), prior_cov_counts=new @ counts, noise=2 * noise)
    fresh = make_posterior(new, counts, 2 * noise, mu)
    for b, s in items:
        fresh.observe(b, s)
    for name in ("mean", "diag", "cov_u", "remaining", "n_obs", "sum_obs"):
        np.testing.assert_allclose(getattr(post, name), getattr(fresh, name), atol=ATOL)


def test_auto_compress_can_be_left_to_the_caller() -> None:
    _, sigma, counts, noise, mu = small_problem(3, n_buckets=3)
    counts = np.full(3, 200.0)
    auto = make_posterior(sigma, counts, noise, mu)
    manual = make_posterior(sigma, counts, noise, mu, auto_compress=False)
    for i in range(80):
        auto.observe(i % 2, 0.5)
        manual.observe(i % 2, 0.5)
    assert auto.rows < 2 * 2 + 64 + 1 and not auto.crowded
    assert manual.rows == 80 and manual.crowded
    manual.rebuild()
    assert manual.rows == 2 and not manual.crowded
    np.testing.assert_allclose(manual.cov_u, auto.cov_u, atol=ATOL)


# ------------------------------------------------------- dense references
@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), log_params=st.tuples(st.floats(-3, 1.5), st.floats(-3, 1.5), st.floats(-6, -1)))
def test_bucket_nlml_equals_the_dense_formula(seed: int, log_params: tuple[float, float, float]) -> None:
    rng = np.random.default_rng(seed)
    phi = rng.random((10, 4))
    d2 = sq_dists(phi, phi)
    resid = rng.normal(scale=0.3, size=10)
    scale = rng.integers(1, 4, size=10).astype(float)
    theta = np.array(log_params)
    params = np.exp(theta)
    value, grad = BucketNLML(d2, resid, scale, 4)(params)
    ref_value, ref_grad = nlml_dense(theta, d2, resid, scale, 4)
    assert value == pytest.approx(ref_value, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(grad * params, ref_grad, rtol=1e-6, atol=1e-8)  # ∂/∂log p = p ∂/∂p


def test_nlml_is_inf_where_the_gram_matrix_is_not_positive_definite_and_counts_it():
    from activeeval.gaussian import BucketNLML

    d2 = np.array([[0.0, 1.0], [1.0, 0.0]])
    nlml = BucketNLML(d2, np.array([0.1, -0.2]), np.array([1.0, 1.0]), n_refs=2)
    value, grad = nlml(np.array([1.0, 1.0, 0.1]))
    assert np.isfinite(value) and nlml.failures == 0
    value, grad = nlml(np.array([1.0, 1.0, -5.0]))  # a negative noise: K is indefinite
    assert value == np.inf and np.all(grad == 0) and nlml.failures == 1
