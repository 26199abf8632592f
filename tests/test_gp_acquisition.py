"""gp/acquisition.py: the batch selector given a posterior and pending items alone, and the methods that hold it.

BoTorch's shape (an acquisition given a model and ``X_pending``): nothing here
builds a method for the selector tests; the method tests check that both
BayesAME classes hold a selector (no mixin) and select what it selects.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import activeeval.gaussian as gaussian
import activeeval.gp.acquisition as acquisition
import activeeval.gp.posterior as posterior_module
from activeeval import datasets
from activeeval.batch import BucketCovariance
from activeeval.exceptions import ConfigurationError
from activeeval.gaussian import bucketize
from activeeval.gp.acquisition import BatchSelector, greedy_items, information_gain, strategy_items
from activeeval.gp.kernels import SquaredExponential
from activeeval.gp.posterior import BucketPosterior
from activeeval.methods._batch import BatchSelection
from activeeval.methods.bayesame import BayesAME, BayesAMERS
from activeeval.methods.bayesame_paper import BayesAMEPaper

STRATEGIES = ("greedy", "pair", "lars", "dpp", "kmeans")


def _posterior(seed: int = 0, n_items: int = 120, n_refs: int = 5, observed: int = 10):
    """A bucket posterior over binary reference scores (buckets of several items), ``observed`` items scored."""
    rng = np.random.default_rng(seed)
    phi_items = (rng.random((n_items, n_refs)) < 0.5).astype(float)
    buckets = bucketize(phi_items)
    kernel = SquaredExponential(0.05, 1.0, n_refs)
    d2 = gaussian.sq_dists(buckets.phi, buckets.phi)
    prior = kernel(d2)
    noise = 0.2 * buckets.counts
    post = BucketPosterior(np.full(buckets.n_buckets, 0.5), lambda b: prior[:, b].copy(), np.diag(prior).copy(),
                           prior @ buckets.counts, buckets.counts, noise)
    unobserved = np.ones(n_items, dtype=bool)
    for item in rng.choice(n_items, size=observed, replace=False):
        post.observe(int(buckets.of_item[item]), float(rng.random() < 0.5))
        unobserved[item] = False
    return post, buckets, unobserved


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_selector_needs_only_a_posterior_and_pending_items(strategy: str) -> None:
    post, buckets, unobserved = _posterior()
    pending = [int(i) for i in np.flatnonzero(unobserved)[:3]]
    selector = BatchSelector(strategy)
    before = (post.mean.copy(), post.diag.copy(), post.cov_u.copy(), post.remaining.copy(), post.rows)
    for k in (1, 2, 5):
        chosen = selector.select(post, buckets, unobserved, pending, k, np.random.default_rng(3))
        assert len(chosen) == k == len(set(chosen))
        assert all(unobserved[i] for i in chosen) and not set(chosen) & set(pending)
        assert chosen == selector.select(post, buckets, unobserved, pending, k, np.random.default_rng(3))
    after = (post.mean, post.diag, post.cov_u, post.remaining, post.rows)
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)  # the posterior is read, never conditioned


def test_greedy_selector_is_eq6_conditioned_on_pending_and_chosen() -> None:
    post, buckets, unobserved = _posterior(seed=1)
    pending = [int(i) for i in np.flatnonzero(unobserved)[:2]]
    chosen = BatchSelector().select(post, buckets, unobserved, pending, 4, np.random.default_rng(0))
    # the batch module's view of the same problem: condition on the pending items, then on each pick
    fantasy = post.fantasy()
    for i in pending:
        fantasy.condition(int(buckets.of_item[i]))
    available = unobserved.copy()
    available[pending] = False
    cov = fantasy.batch_covariance(np.bincount(buckets.of_item[available], minlength=buckets.n_buckets))
    assert isinstance(cov, BucketCovariance)
    expected = []
    for _ in range(4):
        b = int(np.argmax(cov.single_beta()))
        expected.append(b)
        cov = cov.condition(b)
    assert [int(buckets.of_item[i]) for i in chosen] == expected


def test_pending_items_change_the_choice_as_if_observed() -> None:
    post, buckets, unobserved = _posterior(seed=2)
    (first,) = greedy_items(post, buckets, unobserved, (), 1, np.random.default_rng(0))
    # pending `first` is conditioned on: the next greedy pick is the second item of a two-item greedy batch
    two = greedy_items(post, buckets, unobserved, (), 2, np.random.default_rng(0))
    (after,) = greedy_items(post, buckets, unobserved, [first], 1, np.random.default_rng(0))
    assert two[0] == first and after != first
    assert int(buckets.of_item[after]) == int(buckets.of_item[two[1]])


def test_non_myopic_selection_is_a_member_of_the_strategy_batch() -> None:
    post, buckets, unobserved = _posterior(seed=3)
    batch = strategy_items(post, buckets, unobserved, (), 6, "pair", np.random.default_rng(5))
    selector = BatchSelector("pair", batch_size=6, myopic=False)
    (one,) = selector.select(post, buckets, unobserved, (), 1, np.random.default_rng(5))
    assert one in batch
    myopic = BatchSelector("pair", batch_size=6, myopic=True)
    assert myopic.select(post, buckets, unobserved, (), 1, np.random.default_rng(5)) == greedy_items(
        post, buckets, unobserved, (), 1, np.random.default_rng(5))


def test_selector_checks_its_options() -> None:
    with pytest.raises(ConfigurationError, match="batch_strategy"):
        BatchSelector("best")
    for size in (0, 2.5, True):
        with pytest.raises(ConfigurationError, match="batch_size must be a positive integer"):
            BatchSelector("pair", batch_size=size)
    with pytest.raises(ConfigurationError, match="myopic must be true or false"):
        BatchSelector(myopic="no")
    with pytest.raises(ConfigurationError, match="larger than the benchmark's 4 items"):
        BatchSelector("dpp", batch_size=5).check_items(4)
    assert BatchSelector("dpp", batch_size=4).check_items(4) == BatchSelector("dpp", 4, True)


def test_gaussian_keeps_the_moved_names() -> None:
    for name in ("BucketPosterior", "chol", "condition_covariance", "var_r"):
        assert getattr(gaussian, name) is getattr(posterior_module, name)
        assert name in gaussian.__all__
    assert gaussian.information_gain is acquisition.information_gain is information_gain
    assert "information_gain" in gaussian.__all__


@pytest.fixture(scope="module")
def ifeval_ref():
    full = datasets.load("ifeval")
    ref = full.select_models([m for k, m in enumerate(full.model_ids) if k % 2 == 0])
    return ref, np.asarray(full.model_scores(full.model_ids[1]), dtype=float)


@pytest.mark.parametrize("cls", [BayesAME, BayesAMEPaper, BayesAMERS])
def test_methods_hold_a_selector_not_a_mixin(cls) -> None:
    assert BatchSelection not in cls.__mro__
    assert not any(klass.__module__ == "activeeval.methods._batch" for klass in cls.__mro__)


@pytest.mark.parametrize("cls", [BayesAME, BayesAMEPaper])
@pytest.mark.parametrize("strategy", ["greedy", "dpp"])
def test_a_method_selects_what_its_selector_selects(ifeval_ref, cls, strategy) -> None:
    ref, truth = ifeval_ref
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method = cls(ref, seed=4, batch_strategy=strategy, batch_size=3, myopic=False,
                     **({"warmup": 0} if cls is BayesAME else {}))
    for item in range(0, 60, 5):
        method.observe(item, float(truth[item]))
    assert method.selector == BatchSelector(strategy, 3, False)
    assert (method.batch_strategy, method.batch_size, method.myopic) == (strategy, 3, False)
    post = method.bucket_posterior
    assert post is (method.posterior if cls is BayesAME else method._post)
    # the paper's method computes Eq. 6's Var(R) by Eq. 2 (var_r): its own gain; the default's is the posterior's
    gain = None if cls is BayesAME else method._gain
    pending = method.select_batch(2)
    rng = method.default_rng
    for k in (1, 4):
        picked = method.select_batch(k, exclude=pending)
        assert picked == method.selector.select(post, method.buckets, ~method._observed, sorted(pending), k, rng(),
                                                gain)


def test_information_gain_of_the_posterior_is_eq6() -> None:
    post, _, _ = _posterior(seed=4)
    ig = post.information_gain()
    noise_scale = post.noise / post.counts  # σ² per item: noise = σ² N_b
    expected = information_gain(post.cov_u, post.diag, post.counts, float(noise_scale[0]), post.var_r_scaled())
    ok = post.remaining > 0
    np.testing.assert_allclose(ig[ok], expected[ok], rtol=1e-12)
    assert np.all(ig[~ok] == -np.inf)


def test_the_old_mixin_still_serves_a_user_subclass() -> None:
    post, buckets, unobserved = _posterior(seed=5)

    class Host(BatchSelection):
        def __init__(self) -> None:
            self.n_items, self.buckets, self._observed = unobserved.size, buckets, ~unobserved
            self._init_batch("lars", 4, False)

        def _batch_posterior(self):
            return post

        def greedy(self, rng, k, exclude):
            return greedy_items(post, buckets, unobserved, exclude, k, rng)

    host = Host()
    assert (host.batch_strategy, host.batch_size, host.myopic) == ("lars", 4, False)
    pending = [int(np.flatnonzero(unobserved)[0])]
    for k in (1, 3):
        assert host._batch_select(np.random.default_rng(2), k, pending, host.greedy) == BatchSelector(
            "lars", 4, False).select(post, buckets, unobserved, pending, k, np.random.default_rng(2))
    with pytest.raises(ConfigurationError, match="larger than the benchmark"):
        host._init_batch("pair", unobserved.size + 1, True)
