"""Multi-target BayesAME (issue 13): the LMC maths against brute force, the method against single-target BayesAME."""

from __future__ import annotations

import numpy as np
import pytest

from activeeval.exceptions import ConfigurationError, DuplicateObservationError
from activeeval.gp.kernels import Matern32
from activeeval.gp.lmc import (
    LMCParams,
    LMCPosterior,
    coupled,
    fit_correlations,
    icm_nlml,
    initial_params,
    kernel_values,
    nlml,
)
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.bayesame_multi import BayesAMEMulti, BayesAMEMultiPaper
from activeeval.methods.bayesame_paper import BayesAMEPaper
from activeeval.methods.multi import Independent, pairwise_probability
from activeeval.methods.registry import is_multi_target
from activeeval.stopping import default_rule, stop_reason


# ----------------------------------------------------------------------- maths vs brute force
def _toy(n_targets=3, n_buckets=7, n_refs=4, seed=0, kinds=("se", "matern32", "se")):
    rng = np.random.default_rng(seed)
    phi = rng.uniform(size=(n_buckets, n_refs))
    counts = rng.integers(1, 4, size=n_buckets).astype(float)
    w = rng.normal(size=(n_targets, len(kinds)))
    params = LMCParams(tuple(rng.uniform(0.5, 2.0, len(kinds))), tuple(rng.uniform(0.5, 3.0, len(kinds))), kinds,
                       tuple(tuple(r) for r in w), 0.05)
    d2 = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)
    return phi, counts, params, d2


def _dense_prior(params, d2, n_refs):
    w = params.W
    return sum(np.kron(np.outer(w[:, l], w[:, l]), kernel_values(params, l, d2, n_refs))
               for l in range(params.n_latents))  # noqa: E741


@pytest.mark.parametrize("shared", [False, True, "level", "mixed"])
def test_joint_posterior_equals_dense_brute_force(shared):
    phi, counts, params, d2 = _toy()
    n_t, n_b = params.W.shape[0], phi.shape[0]
    mu = phi.mean(1)
    fixed = level = None
    rng7 = np.random.default_rng(7)
    a = rng7.normal(size=(n_b, 3))
    kmat = a @ a.T + 0.3 * np.eye(n_b)
    f = rng7.normal(size=(n_b, 2))
    klev = f @ f.T  # rank 2, as the default's level and slope terms
    if shared is True:  # one "fixed" kernel for every latent (the default's model), per-item noise
        params = LMCParams((1.5,) * 3, (1.0,) * 3, ("fixed",) * 3, params.weights, params.sigma2)
        fixed = lambda b: kmat[b]  # noqa: E731
    elif shared == "level":  # level="separate": B ⊗ K_rest + I ⊗ K_level (W = [chol(B) | I])
        w = np.hstack([params.W, np.eye(n_t)])
        params = LMCParams((1.5,) * 3 + (0.7,) * 3, (1.0,) * 6, ("fixed",) * 3 + ("level",) * 3,
                           tuple(tuple(r) for r in w), params.sigma2)
        fixed, level = (lambda b: kmat[b]), (lambda b: klev[b])
    elif shared == "mixed":  # a caller's kernel beside two of the paper's latents
        w = np.hstack([params.W, rng7.normal(size=(n_t, 1))])
        params = LMCParams(params.alpha + (0.9,), params.beta + (1.0,), params.kinds + ("fixed",),
                           tuple(tuple(r) for r in w), params.sigma2)
        fixed = lambda b: kmat[b]  # noqa: E731
    post = LMCPosterior(params, counts, mu, lambda b: d2[b], phi.shape[1], n_t, fixed_row=fixed, level_row=level)
    rng = np.random.default_rng(1)
    obs = [(int(rng.integers(n_t)), int(rng.integers(n_b)), float(rng.uniform())) for _ in range(9)]
    unobserved = np.repeat(counts[:, None], n_t, axis=1)
    for t, b, s in obs:
        post.observe(t, b, s)
        unobserved[b, t] -= 1
    assert (unobserved >= 0).all()
    sigma = sum(np.kron(np.outer(params.W[:, l], params.W[:, l]),  # index t·B + b
                        kernel_values(params, l, d2, phi.shape[1], fixed=kmat, level=klev))
                for l in range(params.n_latents))  # noqa: E741
    if shared is True:
        np.testing.assert_allclose(sigma, np.kron(params.W @ params.W.T, 1.5 * kmat))
    rows = [t * n_b + b for t, b, _ in obs]
    noise = np.diag([params.sigma2 * counts[b] for _, b, _ in obs])
    gram = sigma[np.ix_(rows, rows)] + noise
    resid = np.array([s - mu[b] for _, b, s in obs])
    gain = sigma[:, rows] @ np.linalg.inv(gram)
    mean = np.tile(mu, n_t) + gain @ resid
    cov = sigma - gain @ sigma[rows, :]
    for t in range(n_t):
        np.testing.assert_allclose(post.bucket_mean(t), mean[t * n_b:(t + 1) * n_b], atol=1e-10)
        np.testing.assert_allclose(post.diag[t], np.diag(cov)[t * n_b:(t + 1) * n_b], atol=1e-10)
    u = np.zeros((n_t, n_t * n_b))
    for t in range(n_t):
        u[t, t * n_b:(t + 1) * n_b] = unobserved[:, t]
    np.testing.assert_allclose(post.sum_cov(), u @ cov @ u.T, atol=1e-9)
    mean_u, _ = post.weighted_means()
    np.testing.assert_allclose(mean_u, u @ mean, atol=1e-10)
    # information gain of target 0, brute force: mutual information of N·R^0 and a new item of each bucket
    t = 0
    var_nr = float(u[t] @ cov @ u[t]) + params.sigma2 * float(counts @ unobserved[:, t])
    for b in range(n_b):
        c = float(cov[t * n_b + b] @ u[t]) + params.sigma2 * counts[b]
        v = cov[t * n_b + b, t * n_b + b] + params.sigma2 * counts[b]
        expected = -0.5 * np.log(1 - c * c / (var_nr * v))
        assert post.information_gain(t)[b] == pytest.approx(expected, abs=1e-10)
        assert post.information_gain(t)[b] >= 0
    # a rebuild (what a refit does) gives the same state as the incremental updates
    before = (post.bucket_mean(1).copy(), post.diag.copy(), post.sum_cov().copy())
    post.set_params(params)
    np.testing.assert_allclose(post.bucket_mean(1), before[0], atol=1e-10)
    np.testing.assert_allclose(post.diag, before[1], atol=1e-10)
    np.testing.assert_allclose(post.sum_cov(), before[2], atol=1e-9)


def test_nlml_value_and_gradient_against_dense_and_finite_differences():
    phi, counts, params, d2 = _toy(seed=3)
    rng = np.random.default_rng(4)
    t_obs = rng.integers(3, size=12)
    b_obs = rng.integers(phi.shape[0], size=12)
    resid = rng.normal(size=12)
    units = counts[b_obs]
    value, grad = nlml(params, t_obs, b_obs, resid, units, d2, phi.shape[1])
    sigma = _dense_prior(params, d2, phi.shape[1])
    rows = t_obs * phi.shape[0] + b_obs
    gram = sigma[np.ix_(rows, rows)] + np.diag(params.sigma2 * units)
    _sign, logdet = np.linalg.slogdet(gram)
    dense = 0.5 * resid @ np.linalg.solve(gram, resid) + 0.5 * logdet + 0.5 * resid.size * np.log(2 * np.pi)
    assert value == pytest.approx(dense, rel=1e-10)
    x = params.to_vector()
    for i in range(x.size):
        h = 1e-6 * max(1.0, abs(x[i]))
        up, down = x.copy(), x.copy()
        up[i] += h
        down[i] -= h
        fd = (nlml(params.with_vector(up), t_obs, b_obs, resid, units, d2, phi.shape[1], gradient=False)
              - nlml(params.with_vector(down), t_obs, b_obs, resid, units, d2, phi.shape[1], gradient=False)) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=1e-5, abs=1e-7), i


def test_icm_nlml_gradient_against_finite_differences_and_lmc():
    rng = np.random.default_rng(5)
    n_t, n_b = 3, 6
    a = rng.normal(size=(n_b, 3))
    kfixed = a @ a.T + 0.5 * np.eye(n_b)
    u = rng.normal(size=(n_t, n_t))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    bmat = coupled(u, 0.7)
    np.testing.assert_allclose(np.diag(bmat), 1.0)
    t_obs = rng.integers(n_t, size=10)
    b_obs = rng.integers(n_b, size=10)
    resid = rng.normal(size=10)
    units = np.ones(10)
    value, g_b = icm_nlml(bmat, t_obs, b_obs, resid, units, kfixed, 0.1)
    for s in range(n_t):
        for t in range(s, n_t):
            e = np.zeros((n_t, n_t))
            e[s, t] = e[t, s] = 1e-6
            fd = (icm_nlml(bmat + e, t_obs, b_obs, resid, units, kfixed, 0.1)[0]
                  - icm_nlml(bmat - e, t_obs, b_obs, resid, units, kfixed, 0.1)[0]) / 2e-6
            expected = g_b[s, t] + (g_b[t, s] if s != t else 0.0)
            assert expected == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # the same model written as an LMC with "fixed" latents and W = chol(B)
    w = np.linalg.cholesky(bmat)
    params = LMCParams((1.0,) * n_t, (1.0,) * n_t, ("fixed",) * n_t, tuple(tuple(r) for r in w), 0.1)
    lmc_value = nlml(params, t_obs, b_obs, resid, units, np.zeros((n_b, n_b)), 1, gradient=False, fixed=kfixed)
    assert value == pytest.approx(lmc_value, rel=1e-12)
    # with an uncoupled kernel (level="separate"): I ⊗ K_level + B ⊗ K, against the LMC with W = [chol(B) | I]
    f = rng.normal(size=(n_b, 2))
    klevel = f @ f.T
    value2, g_b2 = icm_nlml(bmat, t_obs, b_obs, resid, units, kfixed, 0.1, klevel)
    params2 = LMCParams((1.0,) * 2 * n_t, (1.0,) * 2 * n_t, ("fixed",) * n_t + ("level",) * n_t,
                        tuple(tuple(r) for r in np.hstack([w, np.eye(n_t)])), 0.1)
    assert value2 == pytest.approx(nlml(params2, t_obs, b_obs, resid, units, np.zeros((n_b, n_b)), 1, gradient=False,
                                        fixed=kfixed, level=klevel), rel=1e-12)
    assert value2 != pytest.approx(value, rel=1e-6)
    for s in range(n_t):
        for t in range(s, n_t):
            e = np.zeros((n_t, n_t))
            e[s, t] = e[t, s] = 1e-6
            fd = (icm_nlml(bmat + e, t_obs, b_obs, resid, units, kfixed, 0.1, klevel)[0]
                  - icm_nlml(bmat - e, t_obs, b_obs, resid, units, kfixed, 0.1, klevel)[0]) / 2e-6
            assert g_b2[s, t] + (g_b2[t, s] if s != t else 0.0) == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # the correlation fit lowers the NLML and keeps a unit diagonal
    best, start, end, _ = fit_correlations(np.eye(n_t), lambda b: icm_nlml(b, t_obs, b_obs, resid, units, kfixed,
                                                                          0.1), 0.7)
    assert end <= start
    np.testing.assert_allclose(np.linalg.norm(best, axis=1), 1.0)


def test_matern32_kernel_gradient_against_finite_differences():
    kern = Matern32(1.3, 0.7)
    d2 = np.array([0.0, 0.3, 1.0, 4.0])
    value, grad = kern(d2, eval_gradient=True)
    assert value[0] == pytest.approx(1.3)
    for i in range(2):
        h = np.zeros(2)
        h[i] = 1e-6
        fd = (kern.with_theta(kern.theta + h)(d2) - kern.with_theta(kern.theta - h)(d2)) / 2e-6
        np.testing.assert_allclose(grad[:, i], fd, rtol=1e-6, atol=1e-10)
    params = LMCParams((1.3,), (0.7,), ("matern32",), ((1.0,),), 0.1)
    np.testing.assert_allclose(kernel_values(params, 0, d2, 5), value)


# ----------------------------------------------------------------------- the method
def _play(method, truth, steps):
    for _ in range(steps):
        t, i = method.select()
        method.observe(t, i, float(truth[t, i]))


def test_one_target_equals_the_single_target_default(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    single = BayesAME(ref, seed=3, selection="active", extrapolation="off")
    multi = BayesAMEMulti(ref, targets[:1], seed=3, warm_start=0, refit_every=None)
    for _ in range(30):
        i = single.select()
        t, j = multi.select()
        assert (t, j) == (0, i)
        single.observe(i, float(truth[0, i]))
        multi.observe(0, j, float(truth[0, j]))
        a, b = single.estimate(), multi.estimate(0)
        assert b.mean == pytest.approx(a.mean, abs=1e-10)
        assert b.var == pytest.approx(a.var, rel=1e-9)
    assert multi.scales()[0] == pytest.approx(single.scale, rel=1e-9)


@pytest.mark.parametrize("level", ["coupled", "separate"])
def test_uncoupled_targets_with_the_default_start_are_independent_single_target_runs(ifeval_3_targets, level):
    """coupling=0 and the default (no) warm start: every target is single-target BayesAME, refits and all."""
    ref, targets, truth = ifeval_3_targets
    multi = BayesAMEMulti(ref, targets, seed=4, coupling=0.0, refit_every=10, level=level)
    assert multi.warm_start == 0.0 and multi.warm_items_.size == 0
    singles = [BayesAME(ref, seed=4, selection="active", extrapolation="off") for _ in targets]
    for _ in range(20 * len(targets)):  # four refits, at 10, 20, ... observations of any target
        t, j = multi.select()
        left = np.bincount(multi.buckets.of_item[~multi._observed[t]], minlength=multi.n_buckets) > 0
        # buckets with an item left for t (a used-up bucket's gain is 0 for the single-target method, unused here)
        np.testing.assert_allclose(multi.information_gains(t)[left], singles[t].information_gains()[left], rtol=1e-9,
                                   atol=1e-14)
        multi.observe(t, j, float(truth[t, j]))
        singles[t].observe(j, float(truth[t, j]))
        a, b = singles[t].estimate(), multi.estimate(t)
        assert b.mean == pytest.approx(a.mean, abs=1e-10)  # round-off of two orders of summation
        assert b.var == pytest.approx(a.var, rel=1e-9)
    assert len(multi.fits) >= 4
    np.testing.assert_allclose(multi.correlations(), np.eye(len(targets)), atol=1e-12)


def test_one_target_one_latent_equals_the_papers_single_target(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    paper = BayesAMEPaper(ref, seed=2, alpha=0.7, beta=2.0, sigma2=1e-3, refit_every=None, selection="active",
                          estimator="bayes")
    params = LMCParams((0.7,), (2.0,), ("se",), ((1.0,),), 1e-3)
    multi = BayesAMEMultiPaper(ref, targets[:1], seed=2, warm_start=0, refit_every=None, hyperparameters=params,
                               estimator="bayes")
    assert multi.active_
    for _ in range(25):
        i = paper.select()
        t, j = multi.select()
        assert (t, j) == (0, i)
        paper.observe(i, float(truth[0, i]))
        multi.observe(0, j, float(truth[0, j]))
        assert multi.estimate(0).mean == pytest.approx(paper.estimate().mean, abs=1e-10)
        assert multi.estimate(0).var == pytest.approx(paper.estimate().var, rel=1e-8)


def test_exact_when_every_item_is_observed_and_the_state_replays(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    small = ref.select_items(list(ref.item_ids[:25]))
    tr = truth[:, :25]
    m = BayesAMEMulti(small, targets, seed=0, refit_every=20, warm_start=0.1)
    assert m.warm_items_.size == 2
    _play(m, tr, 3 * 25)
    for t in range(3):
        e = m.estimate(t)
        assert e.var == 0.0 and e.mean == pytest.approx(tr[t].mean())
        assert m.view(t).n_observed == 25 and stop_reason(default_rule(), m.view(t)) == "exhausted"
    assert m.fits, "the schedule refits"
    np.testing.assert_allclose(m.covariance(), 0.0)
    # replaying the history rebuilds the identical state (what a session does)
    again = BayesAMEMulti(small, targets, seed=0, refit_every=20)
    half = m.history[:40]
    for t, i, s in half:
        again.observe(t, i, s)
    fresh = BayesAMEMulti(small, targets, seed=0, refit_every=20)
    for t, i, s in half:
        fresh.observe(t, i, s)
    assert again.select() == fresh.select() == again.select()  # pure
    assert [e.mean for e in again.estimates()] == [e.mean for e in fresh.estimates()]


def test_warm_start_round_robin_and_active_targets(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    m = BayesAMEMulti(ref, targets, seed=1, warm_start=0.05)
    warm = set(m.warm_items_.tolist())
    assert len(warm) == 4
    pairs = []
    for _ in range(12):
        t, i = m.select()
        pairs.append((t, i))
        m.observe(t, i, float(truth[t, i]))
    assert {i for _, i in pairs} == warm and len(set(pairs)) == 12  # every target on the warm items first
    after = []
    for _ in range(6):
        t, i = m.select()
        after.append(t)
        m.observe(t, i, float(truth[t, i]))
    assert after == [0, 1, 2, 0, 1, 2]
    t, _ = m.select(active=[f"{targets[2]}"])
    assert t == 2
    batch = m.select_batch(4, active=[0, 1])
    assert len(set(batch)) == 4 and {t for t, _ in batch} == {0, 1}
    with pytest.raises(DuplicateObservationError, match="already observed for target"):
        m.observe(pairs[0][0], pairs[0][1], 1.0)
    with pytest.raises(ConfigurationError, match="unknown target"):
        m.observe("nope", 0, 1.0)


def test_average_information_gain_and_random_selection(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    for selection in ("average", "random"):
        m = BayesAMEMulti(ref, targets, seed=1, warm_start=0.0, selection=selection, refit_every=None)
        seen = set()
        for _ in range(9):
            t, i = m.select()
            assert (t, i) not in seen
            seen.add((t, i))
            m.observe(t, i, float(truth[t, i]))
        assert all(np.isfinite(e.mean) for e in m.estimates())


def test_joint_covariance_is_a_covariance_and_gives_pairwise_probabilities(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    m = BayesAMEMulti(ref, targets, seed=0, refit_every=30, warm_start=0.1)
    _play(m, truth, 60)
    cov = m.covariance()
    np.testing.assert_allclose(cov, cov.T, atol=1e-15)
    assert np.linalg.eigvalsh(cov).min() > -1e-12
    np.testing.assert_allclose(np.diag(cov), [e.var for e in m.estimates()], rtol=1e-10)
    p = pairwise_probability(np.array([e.mean for e in m.estimates()]), cov)
    np.testing.assert_allclose(p + p.T, 1.0, atol=1e-12)
    corr = m.correlations()
    np.testing.assert_allclose(np.diag(corr), 1.0)


def test_paper_prior_learns_all_hyperparameters(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    m = BayesAMEMultiPaper(ref, targets, seed=0, refit_every=20, fit_steps=30, min_fit_steps=5)
    start = m.params_
    _play(m, truth, 45)
    assert m.fits and m.params_ != start
    assert min(m.params_.alpha + m.params_.beta + (m.params_.sigma2,)) >= 1e-4
    assert m.params_.kinds[:2] == ("se", "se") and m.params_.kinds[-1] == "matern32"
    assert all(f.nlml_end <= f.nlml_start for f in m.fits)


def test_initial_params_follow_the_paper():
    p = initial_params(4, 4, 0.1, seed=0)
    assert p.alpha == (1.0,) * 4 and p.beta == (1.0,) * 4 and p.sigma2 == 0.1
    assert p.kinds == ("se", "se", "matern32", "matern32")
    assert np.abs(p.W).max() < 0.5


def test_options_are_checked_and_registered(ifeval_3_targets):
    ref, targets, _ = ifeval_3_targets
    assert is_multi_target("bayesame-multi") and is_multi_target("bayesame-multi-paper")
    assert not is_multi_target("bayesame")
    for kwargs, match in (({"selection": "greedy"}, "selection"), ({"coupling": 2.0}, "coupling"),
                          ({"warm_start": 1.5}, "warm_start"), ({"latents": 2}, "latents"),
                          ({"fit_max": 1}, "fit_max"), ({"interval": "wide"}, "interval"),
                          ({"level": "shared"}, "level"), ({"level": "separate", "prior": "paper"}, "level")):
        with pytest.raises(ConfigurationError, match=match):
            BayesAMEMulti(ref, targets, **kwargs)
    with pytest.raises(ConfigurationError, match="distinct"):
        BayesAMEMulti(ref, ["a", "a"])
    with pytest.raises(ConfigurationError, match="prior"):
        BayesAMEMultiPaper(ref, targets, prior="reference")


def test_separate_level_keeps_each_targets_prior_and_couples_the_rest(ifeval_3_targets):
    """level="separate": every target's prior is the single-target kernel, the targets share only K − K_level."""
    ref, targets, truth = ifeval_3_targets
    sep = BayesAMEMulti(ref, targets, seed=2, level="separate", refit_every=10)
    single = sep.bucket_prior_  # the single-target kernel on this reference (gp.prior.BucketPrior)
    np.testing.assert_allclose(sep.posterior.prior_diag[0], [single.column(b)[b] for b in range(sep.n_buckets)],
                               rtol=1e-12)
    _play(sep, truth, 40)
    assert len(sep.fits) >= 1
    corr = sep.correlations()
    np.testing.assert_allclose(np.diag(corr), 1.0)
    # the cross-target prior covariance of two buckets is B_st (K − K_level), not B_st K
    post = sep.posterior
    b0, b1 = 0, 1
    k_rest = single.column(b0)[b1] - post.level_row(b0)[b1]
    coupling_part = post._B[post._keys.index("fixed")]
    assert coupling_part[0, 1] * k_rest == pytest.approx(
        sum(post._B[g][0, 1] * post._group_rows(b0)[g][b1] for g in range(len(post._keys))), rel=1e-12)
    assert post._B[post._keys.index("level")][0, 1] == 0.0
    # rebuilding at the same parameters gives the incremental state
    before = post.diag.copy(), post.sum_cov().copy()
    post.set_params(post.params)
    np.testing.assert_allclose(post.diag, before[0], atol=1e-10)
    np.testing.assert_allclose(post.sum_cov(), before[1], atol=1e-9)


def test_independent_runs_each_target_as_its_own_method(ifeval_3_targets):
    ref, targets, truth = ifeval_3_targets
    ind = Independent(ref, targets, method="bayesame", seed=4)
    _play(ind, truth, 12)
    for t in range(3):
        solo = ind.methods_[t]
        assert ind.estimate(t) == solo.estimate()
        assert ind.n_observed_of(t) == 4
    np.testing.assert_allclose(ind.covariance(), np.diag([e.var for e in ind.estimates()]))
