"""Batch selection (paper App. B.1, activeeval.batch) against brute-force formulas, and its method integration.

The maths tests use small synthetic references (binary scores of few models,
so that buckets hold several items: two items of one bucket are candidates
too); the method and driver tests use the bundled IFEval matrix.
"""

from __future__ import annotations

import dataclasses
import itertools
import warnings

import numpy as np
import pytest
from dense_formulas import batch_beta_dense, item_covariance
from hypothesis import given, settings
from hypothesis import strategies as st

from activeeval import ScoreMatrix, datasets
from activeeval.batch import (
    BucketCovariance,
    batch_beta,
    batch_information_gain,
    best_pair,
    candidate_pool,
    kmeans_batches,
    lars_batch,
    local_search,
    pair_batch,
    pair_beta,
    sample_kdpp,
    select_batch,
    smc_search,
    swap_betas,
    woodbury_swap,
)
from activeeval.exceptions import ConfigurationError
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.bayesame_paper import BayesAMEPaper

# Relative tolerance of β against the dense formulas: the incremental posterior (rank-one updates) and a
# dense solve differ by round-off, ~1e-12 relative on these well-conditioned problems; 1e-8 leaves room
# and is far below any difference between two candidate batches that matters.
RTOL = 1e-8


def binary_reference(n_models: int = 5, n_items: int = 60, seed: int = 0) -> ScoreMatrix:
    """Few binary reference models: many items share a reference vector (buckets of several items)."""
    rng = np.random.default_rng(seed)
    ability = rng.normal(size=(n_models, 1))
    difficulty = rng.normal(size=(1, n_items))
    scores = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(-(ability - difficulty)))).astype(float)
    return ScoreMatrix(scores, kind="binary")


def problem(seed: int = 0, n_observed: int = 7, pending: int = 0):
    """A paper BayesAME (active selection forced) after some observations; its batch problem and dense truth."""
    ref = binary_reference(seed=seed)
    method = BayesAMEPaper(ref, seed=seed, selection="active", refit_every=None)
    rng = np.random.default_rng(seed)
    truth = (rng.random(ref.n_items) < 0.6).astype(float)
    for item in rng.choice(ref.n_items, size=n_observed, replace=False):
        method.observe(int(item), float(truth[item]))
    free = method.unobserved()
    exclude = [int(i) for i in free[:pending]]
    fantasy = method._post.fantasy()
    for item in exclude:
        fantasy.condition(int(method.buckets.of_item[item]))
    available = ~method._observed
    available[exclude] = False
    per_bucket = np.bincount(method.buckets.of_item[available], minlength=method.n_buckets).astype(float)
    cov = fantasy.batch_covariance(per_bucket)
    return method, cov, available, exclude


def dense_truth(method: BayesAMEPaper, exclude=()):
    """Dense item covariance given C and the pending items, and the unevaluated mask U (pending not in U)."""
    sigma = method.posterior_cov()
    noise = method.sigma2_ * method.buckets.counts
    pend = list(exclude)
    if pend:  # condition the dense Σθ on the pending items as well (score-free, Eq. 7's covariance)
        obs_b = method.buckets.of_item[pend]
        gram = sigma[np.ix_(obs_b, obs_b)] + np.diag(noise[obs_b])
        sigma = sigma - sigma[:, obs_b] @ np.linalg.solve(gram, sigma[obs_b, :])
    dense = item_covariance(sigma, method.buckets.of_item, noise)
    unevaluated = ~method._observed
    unevaluated[pend] = False
    return dense, unevaluated


@pytest.mark.parametrize("pending", [0, 3])
def test_beta_equals_the_dense_formula(pending) -> None:
    method, cov, available, exclude = problem(pending=pending)
    dense, unevaluated = dense_truth(method, exclude)
    rng = np.random.default_rng(1)
    free = np.flatnonzero(available)
    for size in (1, 2, 3, 5):
        items = rng.choice(free, size=size, replace=False)
        buckets = method.buckets.of_item[items]
        assert batch_beta(cov, buckets) == pytest.approx(batch_beta_dense(dense, unevaluated, items), rel=RTOL)
    assert cov.scaled_var == pytest.approx(dense[np.ix_(unevaluated, unevaluated)].sum(), rel=RTOL)


def test_single_item_beta_is_the_ratio_of_eq6() -> None:
    method, cov, _available, _ = problem()
    post = method._post
    c = post.cov_u + method.sigma2_ * method.buckets.counts
    v = np.maximum(post.diag, 0.0) + method.sigma2_ * method.buckets.counts
    ok = cov.available > 0
    single = cov.single_beta()
    np.testing.assert_allclose(single[ok], (c * c / v)[ok], rtol=1e-12)  # the same arithmetic, reordered
    for b in np.flatnonzero(ok):
        assert batch_beta(cov, [b]) == pytest.approx(single[b], rel=RTOL)
        assert batch_information_gain(single[b], cov.scaled_var) == pytest.approx(
            method.information_gains()[b], rel=1e-10)  # log1p of the same ratio
    assert np.all(np.isneginf(single[~ok]))


def test_pair_closed_form_equals_brute_force_over_every_pair() -> None:
    method, cov, available, _ = problem()
    dense, unevaluated = dense_truth(method)
    buckets = method.buckets
    free = np.flatnonzero(available)
    assert (cov.available >= 2).any(), "the fixture must have a bucket with two candidate items"
    t = dense[:, unevaluated].sum(1)
    best_dense = -np.inf
    for i, j in itertools.combinations(free, 2):
        closed = pair_beta(t[i], t[j], dense[i, i], dense[j, j], dense[i, j])
        brute = batch_beta_dense(dense, unevaluated, [i, j])
        assert closed == pytest.approx(brute, rel=RTOL)
        best_dense = max(best_dense, brute)
    for block in (1, 3, 256):
        a, b, value = best_pair(cov, block=block)
        assert value == pytest.approx(best_dense, rel=RTOL)
        assert batch_beta(cov, [a, b]) == pytest.approx(value, rel=RTOL)
        assert cov.available[a] >= (2 if a == b else 1) and cov.available[b] >= 1
    # two items of one bucket: the only candidates left are two items of bucket b
    for b in [b for b in range(buckets.n_buckets) if cov.available[b] >= 2]:
        two = [int(i) for i in buckets.members[b][available[buckets.members[b]]][:2]]
        only = np.zeros_like(cov.available)
        only[b] = 2.0
        a, b2, value = best_pair(dataclasses.replace(cov, available=only))
        assert (a, b2) == (b, b)
        assert value == pytest.approx(batch_beta_dense(dense, unevaluated, two), rel=RTOL)
        assert batch_beta(cov, [b, b]) == pytest.approx(value, rel=RTOL)


def test_conditioning_equals_the_methods_fantasy() -> None:
    method, cov, _, _ = problem()
    b = int(np.flatnonzero(cov.available > 0)[0])
    mine = cov.condition(b)
    fantasy = method._post.fantasy()
    fantasy.condition(b)
    cols = np.arange(cov.n_buckets)
    np.testing.assert_allclose(mine.diag, fantasy.diag, rtol=0, atol=1e-12)  # same rank-one update
    np.testing.assert_allclose(mine.cov_u, fantasy.cov_u, rtol=0, atol=1e-10)
    np.testing.assert_allclose(mine.cov_cols(cols), fantasy.cov_cols(cols), rtol=0, atol=1e-12)
    assert mine.available[b] == cov.available[b] - 1 and mine.remaining[b] == cov.remaining[b] - 1


def _random_pd(k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(k + 3, k))
    return x.T @ x + 0.1 * np.eye(k)


@pytest.mark.parametrize("pos", [0, 2, 4])
def test_rank_two_woodbury_swap_equals_a_fresh_inverse(pos) -> None:
    big = _random_pd(8, 3)
    batch = np.array([0, 1, 2, 3, 4])
    new = batch.copy()
    new[pos] = 6
    m_old = big[np.ix_(batch, batch)]
    m_new = big[np.ix_(new, new)]
    d = big[new, 6] - big[batch, batch[pos]]
    updated = woodbury_swap(np.linalg.inv(m_old), pos, d)
    np.testing.assert_allclose(updated, np.linalg.inv(m_new), rtol=1e-9, atol=1e-12)  # round-off of a 5 × 5 solve


def test_swap_betas_equal_beta_of_every_neighbour() -> None:
    gram = _random_pd(12, 5)
    v = np.random.default_rng(6).normal(size=12)
    batch = np.array([3, 7, 1, 10])
    scores = swap_betas(gram, v, batch, np.linalg.inv(gram[np.ix_(batch, batch)]))
    for p in range(batch.size):
        for c in range(12):
            if c in batch:
                assert np.isneginf(scores[p, c])
                continue
            new = batch.copy()
            new[p] = c
            direct = v[new] @ np.linalg.solve(gram[np.ix_(new, new)], v[new])
            assert scores[p, c] == pytest.approx(direct, rel=1e-9)  # Woodbury vs a fresh solve: round-off


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6))
def test_local_search_never_decreases_beta(seed, k) -> None:
    gram = _random_pd(15, seed)
    v = np.random.default_rng(seed + 1).normal(size=15)
    start = np.random.default_rng(seed + 2).choice(15, size=k, replace=False)
    before = v[start] @ np.linalg.solve(gram[np.ix_(start, start)], v[start])
    batch, beta = local_search(gram, v, start)
    assert len(set(batch.tolist())) == k
    assert beta >= before * (1 - 1e-12)  # relative round-off of the Cholesky solves only
    assert beta == pytest.approx(v[batch] @ np.linalg.solve(gram[np.ix_(batch, batch)], v[batch]), rel=1e-9)
    # no single swap improves the result (a local optimum)
    scores = swap_betas(gram, v, batch, np.linalg.inv(gram[np.ix_(batch, batch)]))
    assert scores.max() <= beta * (1 + 1e-9)


def test_smc_is_never_worse_than_its_best_warm_start_and_finds_the_optimum_here() -> None:
    gram = _random_pd(14, 9)
    v = np.random.default_rng(10).normal(size=14)
    rng = np.random.default_rng(11)
    starts = [rng.choice(14, size=3, replace=False) for _ in range(4)]
    start_best = max(v[s] @ np.linalg.solve(gram[np.ix_(s, s)], v[s]) for s in starts)
    _batch, beta = smc_search(gram, v, starts, np.random.default_rng(12))
    assert beta >= start_best * (1 - 1e-12)
    brute = max(v[list(a)] @ np.linalg.solve(gram[np.ix_(a, a)], v[list(a)])
                for a in itertools.combinations(range(14), 3))
    assert beta == pytest.approx(brute, rel=1e-9)  # 364 subsets: the search reaches the exact optimum


def test_lars_on_a_diagonal_covariance_enters_by_correlation() -> None:
    # Σ diagonal: the lasso path is separable, item i enters when λ = |v_i|, so the order is by |v|
    v = np.array([0.3, -2.0, 1.0, 0.5, -1.5, 0.1])
    picked = lars_batch(np.diag(np.full(6, 2.0)), v, 3)
    assert picked.tolist() == [1, 4, 2]


def test_kdpp_draws_follow_det_of_the_kernel() -> None:
    kernel = _random_pd(4, 13)
    rng = np.random.default_rng(14)
    eig = np.linalg.eigh(kernel)
    draws = [tuple(sorted(sample_kdpp(kernel, 2, rng, eig).tolist())) for _ in range(4000)]
    subsets = list(itertools.combinations(range(4), 2))
    dets = np.array([np.linalg.det(kernel[np.ix_(s, s)]) for s in subsets])
    expected = dets / dets.sum()
    observed = np.array([draws.count(s) for s in subsets]) / len(draws)
    # 4000 draws: each frequency has sd ≤ 0.008; 0.035 is over 4 sd, and far below the gaps between subsets
    np.testing.assert_allclose(observed, expected, atol=0.035)


def test_kmeans_batches_take_one_item_per_cluster() -> None:
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    x = np.vstack([c + 0.1 * rng.normal(size=(5, 2)) for c in centres])
    for batch in kmeans_batches(x, 3, 6, np.random.default_rng(1)):
        assert sorted(int(i) // 5 for i in batch) == [0, 1, 2]


def test_candidate_pool_orders_by_single_item_beta_with_copies() -> None:
    _, cov, _, _ = problem()
    pool = candidate_pool(cov, 3, size=20)
    single = cov.single_beta()
    assert np.all(np.diff(single[pool]) <= 0)
    counts = np.bincount(pool, minlength=cov.n_buckets)
    assert np.all(counts <= np.minimum(cov.available, 3))


# ------------------------------------------------------------------ methods
@pytest.fixture(scope="module")
def ifeval_split():
    full = datasets.load("ifeval")
    target = full.model_ids[1]
    ref = full.select_models([m for k, m in enumerate(full.model_ids) if k % 2 == 0])
    return ref, np.asarray(full.model_scores(target), dtype=float)


def _played(cls, ref, truth, n=12, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        method = cls(ref, seed=4, **options)
    for item in range(0, 5 * n, 5):  # the same fixed items for every strategy
        method.observe(item, float(truth[item]))
    return method


@pytest.mark.parametrize("cls", [BayesAMEPaper, BayesAME])
@pytest.mark.parametrize("strategy", ["pair", "lars", "dpp", "kmeans"])
def test_strategies_return_k_distinct_unevaluated_items(ifeval_split, cls, strategy) -> None:
    ref, truth = ifeval_split
    method = _played(cls, ref, truth, batch_strategy=strategy)
    pending = method.select_batch(2)
    for k in (3, 5):
        batch = method.select_batch(k, exclude=pending)
        assert len(batch) == k and len(set(batch)) == k
        assert not any(method._observed[i] for i in batch) and not set(batch) & set(pending)
        assert batch == method.select_batch(k, exclude=pending)  # select does not change state


@pytest.mark.parametrize("cls", [BayesAMEPaper, BayesAME])
def test_greedy_strategy_is_unchanged(ifeval_split, cls) -> None:
    ref, truth = ifeval_split
    default = _played(cls, ref, truth)
    greedy = _played(cls, ref, truth, batch_strategy="greedy", batch_size=1, myopic=True)
    batch = default.select_batch(6)
    assert batch == greedy.select_batch(6)
    # the same batch by the batch module: condition on each pick, take the next argmax of Eq. 6
    fantasy = default.bucket_posterior.fantasy()
    available = ~default._observed
    cov = fantasy.batch_covariance(np.bincount(default.buckets.of_item[available], minlength=default.n_buckets))
    expected = []
    for _ in range(6):
        b = int(np.argmax(cov.single_beta()))
        expected.append(b)
        cov = cov.condition(b)
    assert [int(default.buckets.of_item[i]) for i in batch] == expected


def test_pair_is_at_least_as_good_as_greedy_at_two(ifeval_split) -> None:
    ref, truth = ifeval_split
    method = _played(BayesAMEPaper, ref, truth, batch_strategy="pair")
    fantasy = method._post.fantasy()
    cov = fantasy.batch_covariance(np.bincount(method.buckets.of_item[~method._observed],
                                               minlength=method.n_buckets))
    pair = [int(method.buckets.of_item[i]) for i in method.select_batch(2)]
    greedy = [int(method.buckets.of_item[i]) for i in _played(BayesAMEPaper, ref, truth).select_batch(2)]
    assert batch_beta(cov, pair) >= batch_beta(cov, greedy) * (1 - 1e-12)  # the exact optimum at |A| = 2
    assert pair == pair_batch(cov, 2)


@pytest.mark.parametrize("strategy", ["lars", "dpp", "kmeans"])
def test_strategy_batches_beat_their_warm_starts_on_ifeval(ifeval_split, strategy) -> None:
    ref, truth = ifeval_split
    method = _played(BayesAMEPaper, ref, truth)
    fantasy = method._post.fantasy()
    cov = fantasy.batch_covariance(np.bincount(method.buckets.of_item[~method._observed],
                                               minlength=method.n_buckets))
    rng = np.random.default_rng(0)
    chosen = select_batch(cov, 5, strategy, np.random.default_rng(0), features=method.buckets.phi)
    pool = candidate_pool(cov, 5)
    gram, v = cov.gram(pool), cov.v[pool]
    if strategy == "lars":
        starts = [lars_batch(gram, v, 5)]
    elif strategy == "dpp":
        eig = np.linalg.eigh(gram)
        starts = [sample_kdpp(gram, 5, rng, eig) for _ in range(8)]
    else:
        starts = kmeans_batches(method.buckets.phi[pool], 5, 8, rng)
    best_start = max(batch_beta(cov, pool[s]) for s in starts)
    assert batch_beta(cov, chosen) >= best_start * (1 - 1e-12)


def test_non_myopic_select_is_a_member_of_the_best_batch(ifeval_split) -> None:
    ref, truth = ifeval_split
    nonmyopic = _played(BayesAMEPaper, ref, truth, batch_strategy="pair", batch_size=4, myopic=False)
    myopic = _played(BayesAMEPaper, ref, truth, batch_strategy="pair")
    item = nonmyopic.select()
    assert item == nonmyopic.select()  # pure
    assert item in myopic.select_batch(4)  # the same generator draws the same batch
    single = _played(BayesAMEPaper, ref, truth)
    assert single.select() == myopic.select()  # myopic select() stays Eq. 6's argmax


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"batch_strategy": "best"}, "batch_strategy= must be one of greedy, pair, lars, dpp, kmeans, got 'best'"),
        ({"batch_size": 0}, "batch_size must be a positive integer (the |A| of the non-myopic selection), got 0"),
        ({"batch_size": 10_000}, "batch_size 10000 is larger than the benchmark's 541 items; choose at most that"),
        ({"myopic": "yes"}, "myopic must be true or false, got 'yes'"),
    ],
)
@pytest.mark.parametrize("cls", [BayesAMEPaper, BayesAME])
def test_bad_batch_options_are_refused(ifeval_split, cls, options, message) -> None:
    ref, _ = ifeval_split
    with pytest.raises(ConfigurationError) as err:
        cls(ref, seed=0, **options)
    assert message in str(err.value)


def test_select_batch_refuses_a_non_positive_k(ifeval_split) -> None:
    ref, truth = ifeval_split
    method = _played(BayesAMEPaper, ref, truth, batch_strategy="lars")
    with pytest.raises(ConfigurationError, match="k must be a positive integer, got 0"):
        method.select_batch(0)


def test_select_batch_of_the_module_refuses_bad_values() -> None:
    _, cov, _, _ = problem()
    rng = np.random.default_rng(0)
    with pytest.raises(ConfigurationError, match="batch_strategy= must be one of"):
        select_batch(cov, 2, "nope", rng)
    with pytest.raises(ConfigurationError, match="the batch size must be a positive integer, got 0"):
        select_batch(cov, 0, "pair", rng)
    left = int(cov.available.sum())
    with pytest.raises(ConfigurationError, match=f"a batch of {left + 1} items needs {left + 1} candidate items; "
                                                 f"only {left} left"):
        select_batch(cov, left + 1, "pair", rng)


def test_bucket_covariance_is_the_documented_object() -> None:
    _, cov, _, _ = problem()
    assert isinstance(cov, BucketCovariance)
    np.testing.assert_array_equal(cov.v, cov.cov_u + cov.noise)


@pytest.mark.parametrize("cls", [BayesAMEPaper, BayesAME])
def test_block_prior_columns_equal_the_column_by_column_ones(ifeval_split, cls) -> None:
    ref, truth = ifeval_split
    method = _played(cls, ref, truth)
    post = method.bucket_posterior
    bs = np.array([0, 7, 100, 3])
    block = post.cov_cols(bs)
    post.prior_cols, saved = None, post.prior_cols
    try:
        np.testing.assert_allclose(block, post.cov_cols(bs), rtol=0, atol=1e-12)  # the same kernel, vectorised
    finally:
        post.prior_cols = saved
    np.testing.assert_allclose(block[:, 1], post.cov_col(7), rtol=0, atol=1e-12)
