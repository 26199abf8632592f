"""The kernel base of activeeval.gp.kernels: declared hyperparameters, sums and products, kernels in the LMC."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from activeeval.exceptions import ConfigurationError
from activeeval.gp.kernels import (
    DEFAULT_BOUNDS,
    Given,
    Kernel,
    LevelKernel,
    Matern32,
    Product,
    SquaredExponential,
    Sum,
)
from activeeval.gp.lmc import LATENT_KERNELS, LMCParams, LMCPosterior, kernel_values, nlml
from activeeval.session.journal.snapshot import decode_state, encode_state


@dataclass(frozen=True)
class Exponential(Kernel):
    """A toy kernel, declared as a user would: k = α exp(−β d)."""

    alpha: float
    beta: float
    alpha_bounds: tuple[float, float] = DEFAULT_BOUNDS
    beta_bounds: tuple[float, float] = DEFAULT_BOUNDS
    hyperparameters = ("alpha", "beta")

    def value(self, d2):
        return self.alpha * np.exp(-self.beta * np.sqrt(d2))

    def gradient(self, d2, value):
        return np.stack([value, -self.beta * np.sqrt(d2) * value], axis=-1)


def _d2(seed: int = 0, n: int = 6, k: int = 4) -> np.ndarray:
    phi = np.random.default_rng(seed).random((n, k))
    return ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)


SE = SquaredExponential(0.7, 2.5, 4, alpha_bounds=(1e-3, 10.0), beta_bounds=(1e-2, 1e2))
MATERN = Matern32(1.3, 0.6)
TOY = Exponential(0.9, 1.7)
KERNELS = {
    "se": SE,
    "matern32": MATERN,
    "toy": TOY,
    "given": Given("fixed", 1.4),
    "sum": SE + MATERN,
    "product": SE * TOY,
    "nested": (SE + MATERN) * TOY + Matern32(0.2, 3.0),
    "level": LevelKernel(0.3, 2.0, gamma=0.2, tau0=0.5, tau1=0.0),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_theta_bounds_and_with_theta_round_trip_for_every_kernel(name: str) -> None:
    kernel = KERNELS[name]
    n = kernel.n_dims
    assert len(kernel.names) == n == kernel.theta.shape[0] and kernel.bounds.shape == (n, 2)
    np.testing.assert_array_equal(kernel.theta, np.log(kernel.values))
    np.testing.assert_array_equal(kernel.bounds, np.log(kernel.value_bounds))
    again = kernel.with_theta(kernel.theta)
    assert type(again) is type(kernel)
    np.testing.assert_allclose(again.values, kernel.values, rtol=1e-15)
    np.testing.assert_array_equal(again.value_bounds, kernel.value_bounds)
    assert kernel.with_values(kernel.values) == kernel  # exactly, in value space
    # the bounds clip, exactly at the bound (not exp(log(bound)))
    low, high = kernel.value_bounds.T
    np.testing.assert_array_equal(kernel.with_theta(np.full(n, -80.0)).values, low)
    np.testing.assert_array_equal(kernel.with_theta(np.full(n, 80.0)).values, high)
    with pytest.raises(ConfigurationError, match=rf"theta must have shape \({n},\)"):
        kernel.with_theta(np.zeros(n + 1))


def test_constants_survive_with_theta_and_are_checked() -> None:
    level = KERNELS["level"].with_theta(np.log([2.0, 3.0]))
    assert (level.gamma, level.tau0, level.tau1) == (0.2, 0.5, 0.0)
    assert SE.with_theta(np.zeros(2)).n_refs == 4
    assert Given("level", 2.0).with_theta(np.zeros(1)) == Given("level", 1.0)
    for bad, match in ((lambda: LevelKernel(0.3, 2.0, tau0=-1.0), "tau0 must be a non-negative"),
                       (lambda: LevelKernel(0.0, 2.0), "alpha must be a positive"),
                       (lambda: Exponential(1.0, -1.0), "beta must be a positive"),
                       (lambda: Exponential(1.0, 1.0, beta_bounds=(2.0, 1.0)), "beta_bounds must be"),
                       (lambda: Given(""), "source")):
        with pytest.raises(ConfigurationError, match=match):
            bad()
    with pytest.raises(TypeError):
        Kernel()  # type: ignore[abstract]


def _log_fd(kernel, d2: np.ndarray, h: float = 1e-6) -> np.ndarray:
    out = []
    for i in range(kernel.n_dims):
        step = np.zeros(kernel.n_dims)
        step[i] = h
        out.append((kernel.with_theta(kernel.theta + step)(d2) - kernel.with_theta(kernel.theta - step)(d2)) / (2 * h))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("name", ["se", "matern32", "toy", "given", "sum", "product", "nested"])
def test_gradients_match_finite_differences(name: str) -> None:
    kernel = KERNELS[name]
    d2 = _d2(1) + 0.05  # away from d = 0, where the toy's √d² has no derivative in d
    value, grad = kernel(d2, eval_gradient=True)
    assert grad.shape == d2.shape + (kernel.n_dims,)
    np.testing.assert_array_equal(value, kernel(d2))
    np.testing.assert_allclose(grad, _log_fd(kernel, d2), rtol=1e-6, atol=1e-9)
    # the value-space gradient (what the LMC steps on) is the chain rule's
    v2, gv = kernel.value_gradient(d2)
    np.testing.assert_array_equal(v2, value)
    np.testing.assert_allclose(gv * kernel.values, grad, rtol=1e-12, atol=1e-14)


def test_sum_and_product_are_the_sum_and_product_of_their_parts() -> None:
    d2 = _d2(2)
    np.testing.assert_array_equal((SE + MATERN)(d2), SE(d2) + MATERN(d2))
    np.testing.assert_array_equal((SE * TOY)(d2), SE(d2) * TOY(d2))
    assert isinstance(SE + MATERN, Sum) and isinstance(SE * TOY, Product)
    s = SE + MATERN
    np.testing.assert_array_equal(s.theta, np.concatenate([SE.theta, MATERN.theta]))
    assert s.names == ("left.alpha", "left.beta", "right.alpha", "right.beta")
    moved = s.with_theta(np.log([0.5, 1.5, 2.5, 3.5]))
    np.testing.assert_allclose([moved.left.alpha, moved.left.beta, moved.right.alpha, moved.right.beta],
                               [0.5, 1.5, 2.5, 3.5], rtol=1e-15)
    assert moved.left.n_refs == 4 and moved.left.alpha_bounds == SE.alpha_bounds
    np.testing.assert_array_equal(s.diag(3), np.full(3, 0.7 + 1.3))
    with pytest.raises(ConfigurationError, match="only with kernels"):
        Sum(SE, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        SE + 1.0  # the operator refuses


def test_the_kernels_keep_their_old_addresses() -> None:
    import activeeval.gaussian as gaussian
    import activeeval.gp.kernels as home
    import activeeval.kernels as old

    assert old.SquaredExponential is home.SquaredExponential and old.Matern32 is home.Matern32
    assert old.kernel_sums is home.kernel_sums and gaussian.LevelKernel is home.LevelKernel
    d2 = _d2(3)
    np.testing.assert_array_equal(gaussian.se_kernel(d2, 0.7, 2.5, 4), SE(d2))


# ------------------------------------------------------------------ kernels in the LMC
def test_a_kernel_declared_in_a_few_lines_works_in_the_lmc() -> None:
    rng = np.random.default_rng(5)
    n_t, n_b, n_refs = 2, 6, 3
    phi = rng.random((n_b, n_refs))
    d2 = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)
    counts = rng.integers(1, 4, n_b).astype(float)
    w = rng.normal(size=(n_t, 2))
    params = LMCParams((0.8, 1.2), (1.5, 0.7), (TOY, "se"), tuple(tuple(r) for r in w), 0.05)
    assert params.kernel(0) == Exponential(0.8, 1.5) and params.kinds == ("Exponential", "se")
    np.testing.assert_array_equal(kernel_values(params, 0, d2, n_refs), Exponential(0.8, 1.5)(d2))
    np.testing.assert_allclose(kernel_values(params, 1, d2, n_refs), SquaredExponential(1.2, 0.7, n_refs)(d2),
                               rtol=1e-14)
    # the posterior against the dense formulas
    mu = phi.mean(1)
    post = LMCPosterior(params, counts, mu, lambda b: d2[b], n_refs, n_t)
    obs = [(int(rng.integers(n_t)), int(rng.integers(n_b)), float(rng.uniform())) for _ in range(7)]
    for t, b, s in obs:
        post.observe(t, b, s)
    sigma = sum(np.kron(np.outer(params.W[:, l], params.W[:, l]), kernel_values(params, l, d2, n_refs))
                for l in range(2))  # noqa: E741
    rows = [t * n_b + b for t, b, _ in obs]
    gram = sigma[np.ix_(rows, rows)] + np.diag([params.sigma2 * counts[b] for _, b, _ in obs])
    gain = sigma[:, rows] @ np.linalg.inv(gram)
    mean = np.tile(mu, n_t) + gain @ np.array([s - mu[b] for _, b, s in obs])
    cov = sigma - gain @ sigma[rows, :]
    for t in range(n_t):
        np.testing.assert_allclose(post.bucket_mean(t), mean[t * n_b:(t + 1) * n_b], atol=1e-10)
        np.testing.assert_allclose(post.diag[t], np.diag(cov)[t * n_b:(t + 1) * n_b], atol=1e-10)
    # the NLML's gradient in the toy's β (value space, the chain rule of its log-space gradient) by differences
    targets = np.array([o[0] for o in obs])
    buckets = np.array([o[1] for o in obs])
    resid = np.array([o[2] for o in obs])
    _, grad = nlml(params, targets, buckets, resid, counts[buckets], d2, n_refs)
    vec, h = params.to_vector(), 1e-6
    for i in (0, 2):  # α and β of the toy latent
        up, down = vec.copy(), vec.copy()
        up[i] += h
        down[i] -= h
        fd = (nlml(params.with_vector(up), targets, buckets, resid, counts[buckets], d2, n_refs, gradient=False)
              - nlml(params.with_vector(down), targets, buckets, resid, counts[buckets], d2, n_refs,
                     gradient=False)) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # a kernel without a stored name runs, but is not written to a session file
    with pytest.raises(ConfigurationError, match="can be stored"):
        params.to_dict()


def test_the_lmc_refuses_kernels_it_cannot_fit() -> None:
    w = ((1.0,),)
    with pytest.raises(ConfigurationError, match="kinds must be among"):
        LMCParams((1.0,), (1.0,), ("rbf",), w, 0.1)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="hyperparameters"):
        LMCParams((1.0,), (1.0,), (SE + MATERN,), w, 0.1)
    with pytest.raises(ConfigurationError, match="n_refs=1"):
        LMCParams((1.0,), (1.0,), (SquaredExponential(1.0, 1.0, 4),), w, 0.1)
    with pytest.raises(ConfigurationError, match="needs its values"):
        kernel_values(LMCParams((1.0,), (1.0,), ("level",), w, 0.1), 0, _d2(), 4)


# A session file's LMC hyperparameters as the code before kernel objects wrote them (LMCParams.to_dict, json).
WRITTEN_BEFORE = ('{"alpha": [1.5, 0.25, 2.0, 0.7], "beta": [1.0, 3.0, 0.5, 1.0], "kinds": ["fixed", "se", '
                  '"matern32", "level"], "weights": [[0.1, -0.2, 0.3, 1.0], [0.3333333333333333, 0.0, -0.001, 0.5]], '
                  '"sigma2": 0.01}')


def test_lmc_params_stored_form_reads_both_ways() -> None:
    old = LMCParams.from_dict(json.loads(WRITTEN_BEFORE))
    assert old.kernels == (Given("fixed", 1.5, LATENT_KERNELS["fixed"].alpha_bounds),
                           SquaredExponential(0.25, 3.0, 1, LATENT_KERNELS["se"].alpha_bounds,
                                              LATENT_KERNELS["se"].beta_bounds),
                           Matern32(2.0, 0.5, LATENT_KERNELS["matern32"].alpha_bounds,
                                    LATENT_KERNELS["matern32"].beta_bounds),
                           Given("level", 0.7, LATENT_KERNELS["level"].alpha_bounds))
    assert old.kinds == ("fixed", "se", "matern32", "level")
    # what is written now is the same text, and reads back to the same parameters exactly
    assert json.dumps(old.to_dict()) == WRITTEN_BEFORE
    assert LMCParams.from_dict(json.loads(json.dumps(old.to_dict()))) == old
    # strings and objects are the same parameters
    objects = LMCParams(old.alpha, old.beta, tuple(LATENT_KERNELS[k] for k in old.kinds), old.weights, old.sigma2)
    assert objects == old and objects.to_dict() == old.to_dict()
    moved = old.with_vector(old.to_vector() * 1.1)
    assert LMCParams.from_dict(json.loads(json.dumps(moved.to_dict()))) == moved
    assert moved.kernel(1).alpha == moved.alpha[1] and moved.kernel(2).beta == moved.beta[2]
    # a session snapshot holds the kernel objects
    graph, arrays = encode_state(moved, {})
    assert decode_state(json.loads(json.dumps(graph)), tuple(arrays), {}) == moved
