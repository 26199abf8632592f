"""Continuous CAT (activeeval.methods.cat): posterior, selection, estimates, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, MissingScoresWarning
from activeeval.irt import continuous as irt
from activeeval.methods.cat import ContinuousCAT
from activeeval.methods.registry import make_method


def synthetic(n_models=30, n_items=200, k=0.2, seed=0, binary=False):
    """Scores drawn from the heteroskedastic normal model (clipped to [0, 1]) or Bernoulli."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 1, n_models)
    b = rng.normal(0, 1.5, n_items)
    mu = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    if binary:
        y = (rng.random(mu.shape) < mu).astype(float)
    else:
        y = np.clip(mu + rng.normal(0, 1, mu.shape) * np.sqrt(k * mu * (1 - mu)), 0, 1)
    return ScoreMatrix(y, [f"m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)])


@pytest.fixture(scope="module")
def ref():
    return synthetic()


def play(cat, truth, n):
    for _ in range(n):
        i = cat.select()
        cat.observe(i, truth[i])


def test_calibration_is_the_irt_one(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    cal = irt.calibrate(ref.drop_models(["m0"]).scores, response="2pl")
    np.testing.assert_array_equal(cat.calibration_.b, cal.b)
    np.testing.assert_array_equal(cat.calibration_.slopes, cal.slopes)
    assert cat.noise_factor_ == cal.k


@pytest.mark.parametrize("likelihood", ["quasi", "normal"])
def test_sequential_posterior_equals_brute_force_grid(ref, likelihood):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, likelihood=likelihood, response="rasch")
    truth = ref.model_scores("m0")
    play(cat, truth, 25)
    items = np.array(cat.observed_items)
    # Brute force: the batch posterior on a 10x finer grid, built independently from the formulas.
    fine = np.linspace(-12, 12, 9601)
    w = irt.grid_posterior(fine, cat.prior_mean_, cat.prior_sd_, cat.calibration_.b[items], truth[items], cat.noise_factor_,
                           likelihood)
    mean, var = irt.posterior_moments(fine, w)
    # Grid spacing 0.025 vs 0.0025: discretisation error of the moments is far below 1e-4 here.
    assert cat.theta == pytest.approx(mean, abs=1e-4)
    assert cat.se == pytest.approx(np.sqrt(var), abs=1e-4)


def test_quasi_posterior_is_close_to_the_gaussian_fisher_se(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    play(cat, ref.model_scores("m0"), 60)
    # Laplace approximation SE = 1/√(prior precision + ΣĨ): within a few % after 60 items.
    assert cat.se == pytest.approx(cat.fisher_se(), rel=0.05)


def test_selection_is_argmax_information_over_unused_pool(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    truth = ref.model_scores("m0")
    pool = cat.calibration_.pool
    for _ in range(40):
        info = cat.item_information()
        info[~pool] = -np.inf
        info[list(cat.observed_items)] = -np.inf
        i = cat.select()
        assert info[i] == pytest.approx(info.max(), rel=1e-12)  # ties in information are equal to round-off
        cat.observe(i, truth[i])


def test_full_information_selection_below_sqrt2_takes_the_tails():
    ref = synthetic(seed=1, binary=True)  # Bernoulli scores: k ≈ 1, so a < √2
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, information="full", response="rasch")
    assert cat.calibration_.a < np.sqrt(2)
    truth = ref.model_scores("m0")
    for _ in range(10):
        info = cat.item_information()
        info[~cat.calibration_.pool] = -np.inf
        info[list(cat.observed_items)] = -np.inf
        i = cat.select()
        assert info[i] == pytest.approx(info.max(), rel=1e-12)  # round-off only
        cat.observe(i, truth[i])


def test_tilde_and_full_administer_identical_items_above_sqrt2(ref):
    # App. E / Table 9: with a > √2 the two criteria give bit-identical runs.
    truth = ref.model_scores("m0")
    runs = []
    for information in ("tilde", "full"):
        cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, information=information, response="rasch")
        assert cat.calibration_.a > np.sqrt(2)
        play(cat, truth, 40)
        runs.append((cat.observed_items, cat.theta))
    assert runs[0] == runs[1]


def test_select_is_pure_and_batch_respects_exclude(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    assert cat.select() == cat.select()
    batch = cat.select_batch(5)
    assert len(set(batch)) == 5 and batch[0] == cat.select()
    again = cat.select_batch(3, exclude=batch[:2])
    assert not set(again) & set(batch[:2])
    assert again[0] == batch[2]


def test_pool_exhaustion_falls_back_to_remaining_items():
    ref = synthetic(n_items=12)
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    truth = ref.model_scores("m0")
    play(cat, truth, 12)
    e = cat.estimate()
    assert sorted(cat.observed_items) == list(range(12))
    assert e.mean == pytest.approx(truth.mean(), abs=1e-12) and e.var == 0.0  # exact once everything is seen


def test_estimate_on_score_scale_is_sane(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, error_model=False)
    truth = ref.model_scores("m0")
    play(cat, truth, 50)
    e = cat.estimate()
    # The model is well specified here: the score estimate lies within 3 sd (+ a 0.02 misfit allowance).
    assert abs(e.mean - truth.mean()) < 3 * e.std + 0.02
    assert cat.ability().var == pytest.approx(cat.se**2)
    assert cat.ability().bounds is None


def test_all_zero_one_items_and_binary_scores():
    ref = synthetic(binary=True, seed=3)
    y = ref.scores.copy()
    y[:, 0] = 0.0
    y[:, 1] = 1.0
    ref = ScoreMatrix(y, ref.model_ids, ref.item_ids)
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0)
    assert np.all(np.isfinite(cat.calibration_.b))
    play(cat, ref.model_scores("m0"), 30)
    assert np.isfinite(cat.theta) and np.isfinite(cat.estimate().mean)


def test_missing_reference_scores_drop_models_with_warning(ref):
    y = ref.scores.copy()
    y[3, 5] = np.nan
    r = ScoreMatrix(y, ref.model_ids, ref.item_ids)
    with pytest.warns(MissingScoresWarning):
        cat = ContinuousCAT(r, seed=0)
    assert "m3" not in cat.reference.model_ids and cat.n_items == ref.n_items


def test_minmax_scaled_metric_round_trip():
    ref = synthetic(seed=4)
    raw = ScoreMatrix(ref.scores * 40 + 10, ref.model_ids, ref.item_ids, score_range=None)
    cat = ContinuousCAT(raw.drop_models(["m0"]), seed=0)
    assert cat.calibration_.scaled
    truth = raw.model_scores("m0")
    play(cat, truth, 30)
    e = cat.estimate()
    assert 10 <= e.mean <= 50  # reported on the raw metric scale


def test_registry_builds_cat(ref):
    m = make_method("cat", ref, seed=0)
    assert isinstance(m, ContinuousCAT)


def test_error_messages(ref):
    with pytest.raises(ConfigurationError, match=r"information must be 'tilde' or 'full', got 'max'"):
        ContinuousCAT(ref, information="max")
    with pytest.raises(ConfigurationError, match=r"likelihood must be 'quasi' or 'normal', got 'beta'"):
        ContinuousCAT(ref, likelihood="beta")
    with pytest.raises(ConfigurationError, match=r"prior_sd must be a positive number, got -1"):
        ContinuousCAT(ref, prior_sd=-1)
    with pytest.raises(ConfigurationError, match=r"prior_mean must be a finite number, got nan"):
        ContinuousCAT(ref, prior_mean=float("nan"))
    small = irt.calibrate(synthetic(n_items=10).scores)
    with pytest.raises(ConfigurationError, match=r"calibration must be 'consistent', 'paper' or an irt.Calibration "
                                                 r"for the reference's 200 items, got 10"):
        ContinuousCAT(ref, calibration=small)


def test_method_contract_and_replay(ref):
    from activeeval.exceptions import DuplicateObservationError, ScoreOutOfRangeError
    from activeeval.methods.base import Method

    cat = ContinuousCAT(ref, seed=0)
    assert isinstance(cat, Method)
    cat.observe("i3", 0.4)
    cat.observe(5, 0.9)
    before = (cat.observed_items, cat.estimate(), cat.theta)
    with pytest.raises(DuplicateObservationError, match=r"item 'i3' was already observed"):
        cat.observe("i3", 0.1)
    with pytest.raises(ScoreOutOfRangeError, match=r"outside the score range \[0, 1\]"):
        cat.observe("i4", 1.5)
    assert (cat.observed_items, cat.estimate(), cat.theta) == before  # a bad call loses nothing
    play(cat, ref.model_scores("m1"), 20)
    # State is a function of configuration + history: replaying gives the same method.
    replay = ContinuousCAT(ref, seed=0)
    replay.observe_many(cat.observed_items, cat.observed_scores)
    assert replay.estimate() == cat.estimate() and replay.theta == cat.theta and replay.select() == cat.select()


@pytest.mark.parametrize("farthest", [False, True])
def test_sorted_pool_matches_brute_force(farthest):
    from activeeval.methods.cat import _SortedPool

    rng = np.random.default_rng(5)
    b = np.round(rng.normal(0, 2, 300), 1)  # rounded: many exact ties in b
    items = np.flatnonzero(rng.random(300) < 0.8)
    pool = _SortedPool(items, b)
    free = set(items.tolist())
    for _ in range(200):
        theta = float(rng.normal(0, 2))
        skip = set(rng.choice(items, size=5).tolist())
        got = pool.nearest(theta, 3, skip, farthest=farthest)
        cand = [i for i in free if i not in skip]
        dist = sorted((abs(b[i] - theta) for i in cand), reverse=farthest)[: len(got)]
        assert len(got) == min(3, len(cand))
        np.testing.assert_allclose([abs(b[i] - theta) for i in got], dist, rtol=0, atol=1e-12)  # same distances
        gone = int(rng.choice(sorted(free)))
        pool.remove(gone)
        free.discard(gone)


# ------------------------------------------------ calibration and error model
def test_default_is_the_consistent_calibration_with_a_learned_error_model(ref):
    from activeeval.methods.cat import learn_error_model

    r = ref.drop_models(["m0"])
    cat = ContinuousCAT(r, seed=0)
    cal = cat.calibration_
    assert cal.method == "consistent"
    c, tau2, _ = learn_error_model(r.scores)
    assert (cal.error_scale, cal.error_floor) == (c, tau2)
    # the paper's calibration, unchanged: its formulas, no error model
    paper = ContinuousCAT(r, calibration="paper", seed=0)
    assert paper.noise_factor_ == irt.calibrate(r.scores, method="paper").k
    assert (paper.calibration_.error_scale, paper.calibration_.error_floor) == (1.0, 0.0)


def test_ability_variance_follows_the_error_model(ref):
    r = ref.drop_models(["m0"])
    cat = ContinuousCAT(r, calibration="paper", error_scale=2.5, error_floor=0.04, seed=0)
    play(cat, ref.model_scores("m0"), 20)
    n, big_n = cat.n_observed, cat.n_items
    assert cat.ability().var == pytest.approx(2.5 * cat.se**2 + 0.04 * (big_n - n) / big_n, rel=1e-12)
    # the score-scale estimate's θ part is inflated by the same ratio; its item-noise part is not
    plain = ContinuousCAT(r, calibration="paper", seed=0)
    plain.observe_many(cat.observed_items, cat.observed_scores)
    assert plain.theta == cat.theta and plain.estimate().mean == pytest.approx(cat.estimate().mean, rel=1e-12)
    assert plain.estimate().var < cat.estimate().var < plain.estimate().var * cat.ability().var / plain.ability().var
    # every item seen: the floor is gone
    full = ContinuousCAT(r, calibration="paper", error_scale=1.0, error_floor=0.04, seed=0)
    full.observe_many(list(range(big_n)), ref.model_scores("m0"))
    assert full.ability().var == pytest.approx(full.se**2, rel=1e-12)


def test_fit_error_model_recovers_a_known_error_variance():
    from activeeval.methods.cat import fit_error_model

    rng = np.random.default_rng(0)
    errors = {}
    for n, v in ((10, 0.3), (20, 0.15), (40, 0.08)):
        var = np.full(4000, v)
        errors[n] = (rng.normal(0, np.sqrt(2.0 * v + 0.02), 4000), var)
    c, tau2 = fit_error_model(errors)
    assert c == pytest.approx(2.0, rel=0.1) and tau2 == pytest.approx(0.02, abs=0.015)
    # honest model SEs: c = 1 and no floor
    honest = {n: (rng.normal(0, np.sqrt(v), 4000), np.full(4000, v)) for n, v in ((10, 0.3), (20, 0.15))}
    c, tau2 = fit_error_model(honest)
    assert c == 1.0 and tau2 < 0.01


def test_pseudo_target_runs_are_the_methods_own_runs(ref):
    # The error model's runs use AbilityPosterior, as ContinuousCAT does: same items, same θ̂ and SE.
    from activeeval.methods.cat import AbilityPosterior, default_prior

    r = ref.drop_models(["m0"])
    cal = irt.calibrate(r.scores)
    mean0, sd0 = default_prior(cal)
    post = AbilityPosterior(cal, mean0, sd0)
    cat = ContinuousCAT(r, calibration=cal, seed=0)
    truth = ref.model_scores("m0")
    for _ in range(15):
        item = post.nearest(1, set())[0]
        assert cat.select() == item
        post.update(item, float(truth[item]))
        cat.observe(item, truth[item])
        assert cat.theta == post.mean and cat.se**2 == pytest.approx(post.var, rel=1e-12)  # sqrt then square


def test_error_model_is_learned_on_the_references_only(ref, monkeypatch):
    from activeeval.experiments import ranking_eval
    from activeeval.methods import cat as cat_module

    seen = []
    real = cat_module.fit_calibration

    def spy(scores, **kw):
        seen.append(np.array(scores))
        return real(scores, **kw)

    monkeypatch.setattr(cat_module, "fit_calibration", spy)
    held = ["m0", "m1", "m2"]
    rec = ranking_eval.simulate_ranking(ref, held, budget_per_model=12, min_items=5, baselines=False)
    assert rec.adaptive.n_items_used > 0 and seen
    reference = ref.drop_models(held).scores
    for scores in seen:
        np.testing.assert_array_equal(scores, reference)  # never a held-out model's row


def test_frozen_error_model_rebuilds_the_same_method(ref):
    r = ref.drop_models(["m0"])
    learned = ContinuousCAT(r, seed=0)
    frozen = learned.frozen_options()
    assert set(frozen) == {"error_scale", "error_floor", "interval_calibration"}
    again = ContinuousCAT(r, seed=0, **frozen)  # given: not learned again
    assert again.calibration_.error_scale == learned.calibration_.error_scale
    assert again.calibration_.error_floor == learned.calibration_.error_floor
    play(learned, ref.model_scores("m0"), 12)
    again.observe_many(learned.observed_items, learned.observed_scores)
    assert again.ability() == learned.ability() and again.estimate() == learned.estimate()
    paper = ContinuousCAT(r, calibration="paper", seed=0).frozen_options()
    assert (paper["error_scale"], paper["error_floor"]) == (1.0, 0.0)


# ------------------------------------------------------------ 2PL items (default)
def test_2pl_sequential_posterior_equals_brute_force(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, error_model=False)
    cal = cat.calibration_
    assert cal.response == "2pl"
    truth = ref.model_scores("m0")
    play(cat, truth, 25)
    items = np.array(cat.observed_items)
    fine = np.linspace(-12, 12, 9601)
    logp = -0.5 * ((fine - cat.prior_mean_) / cat.prior_sd_) ** 2
    for i in items:  # Gaussian likelihood with the item's own mean curve and noise, written out
        mu = 1.0 / (1.0 + np.exp(-cal.slopes[i] * (fine - cal.b[i])))
        logp += -0.5 * (truth[i] - mu) ** 2 / cal.noise[i]
    w = np.exp(logp - logp.max())
    w /= w.sum()
    mean, var = irt.posterior_moments(fine, w)
    assert cat.theta == pytest.approx(mean, abs=1e-4)
    assert cat.se == pytest.approx(np.sqrt(var), abs=1e-4)


def test_2pl_selection_is_argmax_information_over_unused_pool(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, error_model=False)
    truth = ref.model_scores("m0")
    pool = cat.calibration_.pool
    for _ in range(30):
        info = cat.item_information()
        info[~pool] = -np.inf
        info[list(cat.observed_items)] = -np.inf
        i = cat.select()
        assert info[i] == info.max()
        cat.observe(i, truth[i])


def test_2pl_estimate_is_exact_when_every_item_is_seen(ref):
    cat = ContinuousCAT(ref.drop_models(["m0"]), seed=0, error_model=False)
    truth = ref.model_scores("m0")
    cat.observe_many(list(range(cat.n_items)), truth)
    est = cat.estimate()
    assert est.mean == pytest.approx(truth.mean(), rel=1e-12) and est.var == 0.0


def test_2pl_refuses_the_rasch_only_options(ref):
    with pytest.raises(ConfigurationError, match="use response='rasch' for them"):
        ContinuousCAT(ref, information="full", error_model=False)
    ContinuousCAT(ref, information="full", response="rasch", error_model=False)  # fine on the Rasch model


# ------------------------------------------------ the references' local error
def test_local_error_runs_every_reference_through_the_targets_posterior(ref):
    from activeeval.methods.cat import AbilityPosterior

    r = ref.drop_models(["m0"])
    cat = ContinuousCAT(r, seed=0, error_model=False)
    assert cat.local_error_ is True  # the default with the consistent calibration
    play(cat, ref.model_scores("m0"), 12)
    cal = cat.calibration_
    est = cat._local.estimates()
    for j in (0, 7, 28):
        post = AbilityPosterior(cal, cat.prior_mean_, cat.prior_sd_)
        for i in cat.observed_items:
            post.update(i, float(cal.scale(r.scores[j, i], i)))
        assert est[j] == pytest.approx(post.mean, abs=1e-9)
    # the references' truths are their abilities on every item, on the target's scale
    np.testing.assert_allclose(cat._local.truth, np.ravel(cal.true_ability(cal.scale(r.scores))), atol=1e-6)


@pytest.mark.parametrize("response", ["2pl", "rasch"])
def test_local_error_adds_the_items_taken_since_the_last_read_in_one_product(ref, response):
    # the items' rank-one terms wait until the estimates are read, then enter in one matrix product: the same
    # log posteriors as adding each item's outer product at once, read after any number of items
    r = ref.drop_models(["m0"])
    cat = ContinuousCAT(r, seed=0, response=response, error_model=False)
    local, cal, grid = cat._local, cat.calibration_, cat.grid
    own = np.zeros_like(local.own)
    for n, item in enumerate(np.random.default_rng(3).permutation(r.n_items)[:23], start=1):
        local.update(int(item))
        y = np.asarray(cal.scale(r.scores[:, item], item), dtype=float)
        if cal.slopes is not None:
            own += np.outer(y / float(cal.noise[item]), cal.item_mean(grid, int(item)))
        else:
            own += np.outer(y / float(cal.k), grid - float(cal.b[item]))
        if n in (1, 2, 7, 8, 23):  # reads after one item, after several, twice in a row
            lp = own + local.common
            w = np.exp(np.maximum(lp - lp.max(axis=1, keepdims=True), -60.0))
            np.testing.assert_allclose(local.estimates(), (w @ grid) / w.sum(axis=1), rtol=0, atol=1e-10)
            np.testing.assert_allclose(local.own, own, rtol=1e-12, atol=1e-9)
    assert (cal.slopes is not None) == (response == "2pl")  # both forms of the rank-one term were checked


@pytest.mark.parametrize("response", ["2pl", "rasch"])
def test_local_error_is_the_shrunk_weighted_mse_and_never_lowers_the_variance(ref, response):
    from activeeval.methods.cat import LOCAL_ERROR_SHRINK

    r = ref.drop_models(["m0"])
    on = ContinuousCAT(r, seed=0, response=response, error_scale=1.0, error_floor=0.01)
    off = ContinuousCAT(r, seed=0, response=response, error_scale=1.0, error_floor=0.01, local_error=False)
    truth = ref.model_scores("m0")
    raised = 0
    for _ in range(25):
        i = on.select()
        on.observe(i, truth[i])
        off.observe(i, truth[i])
        v = off.ability().var
        assert v == pytest.approx(on.se**2 + 0.01 * (on.n_items - on.n_observed) / on.n_items, rel=1e-12)
        est, t = on._local.estimates(), on._local.truth
        w = np.exp(-0.5 * (est - on.theta) ** 2 / v)
        ess = w.sum() ** 2 / (w**2).sum()
        v_local = (w * (t - est) ** 2).sum() / w.sum()
        expect = max(v, (ess * v_local + LOCAL_ERROR_SHRINK * v) / (ess + LOCAL_ERROR_SHRINK))
        assert on.ability().var == pytest.approx(expect, rel=1e-10)
        assert on.ability().var >= v and on.theta == off.theta  # the estimate itself is unchanged
        raised += on.ability().var > v
    assert raised > 0  # the check can bite
    assert ContinuousCAT(r, calibration="paper", seed=0).local_error_ is False
    with pytest.raises(ConfigurationError, match="local_error must be True, False or None"):
        ContinuousCAT(r, seed=0, error_model=False, local_error="yes")


def test_local_error_barely_moves_a_model_that_fits(ref):
    # Scores drawn from the model itself: the references that answer like the target have its ability.
    r = ref.drop_models([f"m{j}" for j in range(6)])
    ratios = []
    for j in range(6):
        on = ContinuousCAT(r, seed=0, error_model=False)
        off = ContinuousCAT(r, seed=0, error_model=False, local_error=False)
        play(on, ref.model_scores(f"m{j}"), 20)
        off.observe_many(on.observed_items, on.observed_scores)
        ratios.append(on.ability().var / off.ability().var)
    assert np.median(ratios) < 1.6


def test_local_error_catches_musr_near_chance_models_whose_items_misled_them():
    # Real data (the issue-11 investigation): SmolLM2-135M guesses, so the first items CAT asks it (one
    # sub-task, two options) make it look far weaker than it is on the benchmark; the references that
    # answer those items alike have abilities spread far wider than its posterior says.
    from activeeval import datasets

    m = datasets.load("musr")
    held = ["HuggingFaceTB/SmolLM2-135M", "Qwen/Qwen2.5-32B", "databricks/dolly-v2-3b",
            "cognitivecomputations/Dolphin3.0-Llama3.1-8B"]
    r = m.drop_models(held)
    opts = dict(error_scale=1.0, error_floor=0.0586, seed=0)  # the error model learned on these references
    on = ContinuousCAT(r, **opts)
    off = ContinuousCAT(r, calibration=on.calibration_, local_error=False, **opts)
    row = m.scores[m.model_index(held[0])]
    play(on, row, 20)
    off.observe_many(on.observed_items, on.observed_scores)
    truth = float(np.ravel(on.calibration_.true_ability(on.calibration_.scale(row[None])))[0])
    z_off = (on.theta - truth) / np.sqrt(off.ability().var)
    z_on = (on.theta - truth) / np.sqrt(on.ability().var)
    assert abs(z_off) > 3 and abs(z_on) < 2.5 and on.ability().var > 2.5 * off.ability().var


def test_local_error_stays_finite_for_a_target_far_from_every_reference(ref):
    # Found by the robustness backtest: weights ~1e-170 whose squares underflow to 0 (ZeroDivisionError).
    r = ref.drop_models(["m0"])
    cat = ContinuousCAT(r, seed=0, error_model=False)
    play(cat, ref.model_scores("m0"), 10)
    est = cat._local.estimates()
    v = 0.01
    far = float(est.min()) - 28.0 * np.sqrt(v)  # exp(−28²/2) ≈ 1e-170 for the nearest reference
    got = cat._local.variance(far, v)
    assert np.isfinite(got) and got >= v


# ------------------------------------------------------- the score interval (issue 25)
def test_interval_factor_is_the_conformal_rank_or_the_t_bound():
    from scipy.stats import t as student_t

    z = np.arange(1.0, 100.0)  # 99 runs: the ⌈100·0.95⌉ = 95th smallest |z|
    assert irt.interval_factor(-z) == pytest.approx(95.0 / irt.Z95)
    # a brute-force check of the conformal guarantee: over many draws a new z falls inside f·Z95 ≥ 95 %
    rng = np.random.default_rng(0)
    hits = [abs(rng.standard_t(3)) <= irt.interval_factor(rng.standard_t(3, 30)) * irt.Z95 for _ in range(4000)]
    assert 0.945 <= np.mean(hits) <= 0.985
    few = np.array([0.5, -1.5, 2.0])  # below 19 runs: √(mean z²)·t_{n, 0.975}
    assert irt.interval_factor(few) == pytest.approx(np.sqrt(np.mean(few**2)) * student_t.ppf(0.975, 3) / irt.Z95)
    assert np.isnan(irt.interval_factor(np.array([np.nan])))


def test_score_interval_calibration_interpolates_in_log_n_and_round_trips():
    cal = irt.ScoreIntervalCalibration((10, 40, 80), (1.0, 2.0, 3.0), (4.0, None, 5.0), (None, None, None), (9, 3, 0))
    assert cal.factor(5) == 1.0 and cal.factor(10) == 1.0 and cal.factor(500) == 3.0
    assert cal.factor(20) == pytest.approx(1.5)  # halfway between 10 and 40 in log n
    assert cal.factor(20, "above") is None and cal.factor(90, "above") == 5.0 and cal.factor(20, "below") is None
    again = irt.ScoreIntervalCalibration.from_dict(cal.to_dict())
    assert again == cal
    with pytest.raises(ConfigurationError, match="interval_calibration"):
        irt.ScoreIntervalCalibration.from_dict({"checkpoints": [10, 5], "within": [1, 1], "above": [1, 1],
                                                "below": [1, 1]})
    with pytest.raises(ConfigurationError, match="drop it"):
        irt.ScoreIntervalCalibration.from_dict({"within": []})


def test_score_moments_slope_is_the_ratio_or_the_derivative_for_a_collapsed_posterior():
    from activeeval.methods.cat import score_moments

    grid = irt.default_grid()
    r = 0.3 + 0.4 / (1 + np.exp(-grid))  # a smooth predicted score
    t2 = np.full_like(grid, 2.0)
    post = np.exp(-0.5 * (grid - 0.5) ** 2 / 0.2**2)
    post /= post.sum()
    mean, var_r, slope2, noise = score_moments(post, grid, r, t2, 10)
    assert mean == pytest.approx(post @ r) and noise == pytest.approx(2.0 / 100)
    var_t = post @ (grid - post @ grid) ** 2
    assert slope2 == pytest.approx(var_r / var_t)
    spike = np.zeros_like(grid)
    spike[500] = 1.0  # all mass on one grid point: Var θ = 0, the ratio is 0/0
    _, var_r, slope2, _ = score_moments(spike, grid, r, t2, 10)
    s = 1 / (1 + np.exp(-grid[500]))
    assert var_r == 0.0 and slope2 == pytest.approx((0.4 * s * (1 - s)) ** 2, rel=1e-3)


def test_calibrated_interval_is_the_factor_times_the_models_sd(ref):
    r = ref.drop_models(["m0", "m1"])
    cat = ContinuousCAT(r, seed=0)
    cal = cat.calibration_.interval
    assert cal is not None and cal.runs[0] == r.n_models and min(cal.runs[1:]) >= 5
    model = ContinuousCAT(r, seed=0, interval="model", **{k: v for k, v in cat.frozen_options().items()
                                                            if k != "interval_calibration"})
    play(cat, ref.model_scores("m0"), 12)
    model.observe_many(cat.observed_items, cat.observed_scores)
    est, old = cat.estimate(), model.estimate()
    assert est.mean == pytest.approx(old.mean, abs=1e-12)
    low, high = cat._reference_range
    case = "above" if est.mean > high else "below" if est.mean < low else "within"
    f = cal.factor(12, "within") if case == "within" else max(cal.factor(12, "within"), cal.factor(12, case))
    # the model's variance, recomputed by brute force from the posterior on the grid
    grid, post = cat.posterior()
    mu = cat.calibration_.item_mean(grid[:, None])
    unseen = np.ones(r.n_items, bool)
    unseen[list(cat.observed_items)] = False
    pred = (np.sum(cat.observed_scores) + mu[:, unseen].sum(axis=1)) / r.n_items
    var_r = post @ (pred - post @ pred) ** 2
    noise = post @ cat.calibration_.item_var(mu[:, unseen], np.flatnonzero(unseen)).sum(axis=1) / r.n_items**2
    assert est.var == pytest.approx(f * f * (cat.ability().var * var_r / cat.se**2 + noise), rel=1e-9)
    assert old.var == pytest.approx(cat.ability().var * var_r / cat.se**2 + noise, rel=1e-9)


def test_a_target_above_every_reference_gets_the_edge_factor_or_no_interval(ref):
    r = ref.drop_models(["m0"])
    best = r.model_ids[int(np.argmax(r.scores.mean(axis=1)))]
    top = np.clip(r.model_scores(best) + 0.25, 0, 1)  # better than every reference on every item
    cat = ContinuousCAT(r, seed=0)
    play(cat, top, 20)
    est = cat.estimate()
    cal = cat.calibration_.interval
    assert est.mean > r.scores.mean(axis=1).max()
    f = max(cal.factor(20, "within"), cal.factor(20, "above"))
    assert np.isfinite(est.var) and any("above every reference" in note for note in est.notes)
    assert f"x{f:.2f}" in est.notes[0]
    # the larger of the factors measured inside the references and for models above the rest, on the model's sd,
    # raised in proportion to how far beyond the references the target lies over how far the edge runs reached
    items = list(cat.observed_items)
    margin = max(est.mean - r.scores.mean(axis=1).max(), (top[items].sum() - r.scores[:, items].sum(axis=1).max()) / 20)
    reach = cal.reach(20, "above")
    assert reach is not None and margin > reach > 0  # this target lies further out than any edge run
    assert len(est.notes) == 2 and f"widened in proportion, x{margin / reach:.2f}" in est.notes[1]
    model = ContinuousCAT(r, seed=0, interval="model", **{k: v for k, v in cat.frozen_options().items()
                                                            if k != "interval_calibration"})
    model.observe_many(cat.observed_items, cat.observed_scores)
    assert est.var == pytest.approx((f * margin / reach) ** 2 * model.estimate().var, rel=1e-9)
    # a calibration stored before the reach (an older session's): the factor as measured, no widening
    old = {k: v for k, v in cal.to_dict().items() if not k.endswith("_reach")}
    cat_old = ContinuousCAT(r, seed=0, interval_calibration=old,
                            **{k: v for k, v in cat.frozen_options().items() if k != "interval_calibration"})
    cat_old.observe_many(cat.observed_items, cat.observed_scores)
    assert cat_old.calibration_.interval.above_reach is None
    assert cat_old.estimate().var == pytest.approx(f * f * model.estimate().var, rel=1e-9)
    assert len(cat_old.estimate().notes) == 1
    # no edge run lay beyond the others at all: how far off such an estimate is was never measured -> no interval
    never = dataclasses.replace(cal, above_reach=(0.0,) * len(cal.checkpoints))
    cat0 = ContinuousCAT(r, seed=0, interval_calibration=never.to_dict(),
                         **{k: v for k, v in cat.frozen_options().items() if k != "interval_calibration"})
    cat0.observe_many(cat.observed_items, cat.observed_scores)
    est0 = cat0.estimate()
    assert est0.var == float("inf") and est0.notes[0].startswith("no interval: the target lies")
    # within the edge runs' reach: the measured factor alone
    far = dataclasses.replace(cal, above_reach=(2 * margin,) * len(cal.checkpoints))
    cat_far = ContinuousCAT(r, seed=0, interval_calibration=far.to_dict(),
                            **{k: v for k, v in cat.frozen_options().items() if k != "interval_calibration"})
    cat_far.observe_many(cat.observed_items, cat.observed_scores)
    assert cat_far.estimate().var == pytest.approx(f * f * model.estimate().var, rel=1e-9)
    # unmeasured: too few references above the others -> no interval, and a note saying why
    blind = dataclasses.replace(cal, above=(None,) * len(cal.checkpoints))
    cat2 = ContinuousCAT(r, seed=0, interval_calibration=blind.to_dict(),
                         **{k: v for k, v in cat.frozen_options().items() if k != "interval_calibration"})
    cat2.observe_many(cat.observed_items, cat.observed_scores)
    est2 = cat2.estimate()
    assert est2.mean == est.mean and est2.var == float("inf")
    assert est2.notes and est2.notes[0].startswith("no interval") and "above every reference" in est2.notes[0]


def test_calibrated_interval_stays_finite_when_the_posterior_collapses():
    # Nearly noiseless continuous scores: after many items the θ posterior sits on one grid point, where the
    # model interval's Var r / Var θ ratio was 0/0 (NaN variances on AlpacaEval 2 extrapolation).
    rng = np.random.default_rng(3)
    theta, b = rng.normal(0, 1, 25), rng.normal(0, 1, 300)
    y = np.clip(1 / (1 + np.exp(-(theta[:, None] - b[None, :]))) + rng.normal(0, 1e-4, (25, 300)), 0, 1)
    m = ScoreMatrix(y, [f"m{j}" for j in range(25)], [f"i{i}" for i in range(300)])
    cat = ContinuousCAT(m.drop_models(["m0"]), seed=0)
    play(cat, y[0], 250)
    est = cat.estimate()
    assert np.isfinite(est.mean) and np.isfinite(est.var) and est.var >= 0


def test_interval_pseudo_runs_are_the_methods_own_score_estimates(ref):
    # The runs the interval is calibrated on are ContinuousCAT's own runs on a held-out reference: the same score
    # error and the same model sd (local error check included), so the factor applies to what estimate() reports.
    from activeeval.methods import cat as cat_module

    y = ref.scores
    held = cat_module._fold_groups(y.shape[0], 5)[0]
    train = np.setdiff1d(np.arange(y.shape[0]), held)
    runs = cat_module._pseudo_runs(y, [(held, train)], [7, 20], score=True, method="consistent",
                                   irt=cat_module.IRTSettings(response="2pl"), local_error=True)
    c, tau2, n_items = 2.0, 0.05, y.shape[1]
    train_ref = ref.select_models([ref.model_ids[i] for i in train])
    for j, h in enumerate(held[:3]):
        cat = ContinuousCAT(train_ref, interval="model", error_scale=c, error_floor=tau2, seed=0)
        for n in range(1, 21):
            i = cat.select()
            cat.observe(i, y[h, i])
            if n in (7, 20):
                rec, est = runs[n], cat.estimate()
                theta, refs_est, truth = rec["local"][j]
                ability = cat_module.local_variance(refs_est, truth, theta, c * rec["se2"][j] + tau2 * (n_items - n)
                                                    / n_items)
                assert rec["score_error"][j] == pytest.approx(est.mean - y[h].mean(), abs=1e-12)
                assert ability == pytest.approx(cat.ability().var, rel=1e-12)
                assert ability * rec["slope2"][j] + rec["noise"][j] == pytest.approx(est.var, rel=1e-9)


def test_a_target_beating_every_reference_on_its_items_is_outside_whatever_its_estimate(ref):
    # The guard also looks at the items taken: an estimate can be pulled into the references' range (prior,
    # response model) for a model far above them, but its scores on the items it took cannot.
    r = ref.drop_models(["m0"])
    means = r.scores.mean(axis=1)
    inside = float(np.median(means))
    middle = r.scores[int(np.argsort(means)[len(means) // 2])]
    for target, case in ((r.scores.max(axis=0), "above"), (r.scores.min(axis=0), "below"), (middle, "within")):
        cat = ContinuousCAT(r, seed=0)
        play(cat, target, 15)
        items = list(cat.observed_items)
        seen = r.scores[:, items].sum(axis=1)  # brute force: every reference's score on the same items
        mine = target[items].sum()
        expected = "above" if mine > seen.max() else "below" if mine < seen.min() else "within"
        assert cat._outside(inside) == expected == case


def test_outside_margin_is_the_lead_over_the_best_or_worst_reference():
    from activeeval.methods.cat import outside_margin

    seen = np.array([3.0, 5.0, 4.0])  # the references' score sums on the 10 items taken
    # the lead on the items taken (7 − 5)/10 beats the estimate's 0.62 − 0.6
    assert outside_margin(0.62, 7.0, seen, 10, 0.2, 0.6) == pytest.approx((0.2, 0.0))
    assert outside_margin(0.9, 5.5, seen, 10, 0.2, 0.6) == pytest.approx((0.3, 0.0))  # the estimate's lead
    assert outside_margin(0.1, 1.0, seen, 10, 0.2, 0.6) == pytest.approx((0.0, 0.2))  # below: (3 − 1)/10
    assert outside_margin(0.4, 4.0, seen, 10, 0.2, 0.6) == (0.0, 0.0)  # inside
    assert outside_margin(0.4, 0.0, np.zeros(3), 0, 0.2, 0.6) == (0.0, 0.0)  # nothing taken yet


def test_edge_reach_is_the_furthest_any_edge_run_lay_beyond_its_references(ref):
    from activeeval.methods import cat as cat_module

    y = ref.scores
    c, tau2, runs = cat_module._reference_runs(y, error=None, method="consistent", irt=cat_module.IRTSettings(),
                                               local_error=True, folds=5)
    _, _, cal = cat_module.learn_reference_errors(y)
    for case, side in (("above", 0), ("below", 1)):
        reach = getattr(cal, f"{case}_reach")
        for n, value, factor in zip(cal.checkpoints, reach, getattr(cal, case), strict=True):
            assert (value is None) == (factor is None)
            if value is not None:
                assert value == max(m[side] for m in runs[case][n]["margin"]) >= 0
    # the edge runs' margins against their own references, by brute force for one run
    held, train = cat_module._edge_groups(y.mean(axis=1))["above"]
    cat = ContinuousCAT(ref.select_models([ref.model_ids[i] for i in train]), seed=0, interval="model",
                        error_scale=c, error_floor=tau2)
    play(cat, y[held[0]], 20)
    assert runs["above"][20]["margin"][0] == pytest.approx(cat._margin(cat.estimate().mean), abs=1e-12)
    assert runs["above"][20]["case"][0] == cat._outside(cat.estimate().mean)  # classed as the CAT classes itself


def test_a_fold_run_is_classed_as_a_real_target_among_every_other_reference_would_be(ref):
    # A fold run's estimate comes from the fold's references (80 % of them), but a real target is classed against
    # every reference: so is the fold run, against every reference but itself (else a narrower range classes more
    # fold runs outside than real targets, and the within factor, measured on the rest, comes out too small).
    from activeeval.methods import cat as cat_module

    y = ref.scores
    c, tau2, runs = cat_module._reference_runs(y, error=None, method="consistent", irt=cat_module.IRTSettings(),
                                               local_error=True, folds=5)
    held = cat_module._fold_groups(y.shape[0], 5)[0]
    train = np.setdiff1d(np.arange(y.shape[0]), held)
    others = np.setdiff1d(np.arange(y.shape[0]), held[:1])
    for n in (5, 20):
        cat = ContinuousCAT(ref.select_models([ref.model_ids[i] for i in train]), seed=0, interval="model",
                            error_scale=c, error_floor=tau2)
        play(cat, y[held[0]], n)
        items = list(cat.observed_items)
        means = y[others].mean(axis=1)
        expected = cat_module.outside_case(cat.estimate().mean, float(y[held[0], items].sum()),
                                           y[others][:, items].sum(axis=1), n, float(means.min()), float(means.max()))
        assert runs["within"][n]["case"][0] == expected
    classed = {case for n in runs["within"] for case in runs["within"][n]["case"]}
    assert classed - {"within"}  # some fold runs are classed outside even so: the test is not vacuous


@pytest.mark.parametrize("classed_min", [None, 5])
def test_each_interval_factor_is_measured_on_the_runs_it_is_applied_to(ref, monkeypatch, classed_min):
    # A CAT classed within gets the within factor, one classed above (below) max(within, that edge factor): the
    # within factor comes from every run (fold or edge) classed within -- or, with fewer than WITHIN_CLASSED_MIN
    # of them, from every fold run --, the above (below) factor from that case's edge runs plus the fold runs
    # classed above (below); the runs counts still count fold and edge runs.
    from activeeval.methods import cat as cat_module

    if classed_min is not None:
        monkeypatch.setattr(cat_module, "WITHIN_CLASSED_MIN", classed_min)
    y = ref.scores
    c, tau2, runs = cat_module._reference_runs(y, error=None, method="consistent", irt=cat_module.IRTSettings(),
                                               local_error=True, folds=5)
    _, _, cal = cat_module._learn_reference_errors(y, None, "consistent", cat_module.IRTSettings(), True, 5)
    assert cal.runs == tuple(len(runs[case][cal.checkpoints[0]]["score_error"]) for case in cal.CASES)
    classed = set()
    for j, n in enumerate(cal.checkpoints):
        z = {src: cat_module._standardised(runs[src][n], n, y.shape[1], c, tau2, True) for src in runs}
        case = {src: np.asarray(runs[src][n]["case"]) for src in runs}
        classed |= set(case["within"])
        within = np.concatenate([z[src][case[src] == "within"] for src in runs])
        if within.size < cat_module.WITHIN_CLASSED_MIN:
            within = z["within"]
        pools = {"within": within,
                 **{edge: np.concatenate([z[edge], z["within"][case["within"] == edge]]) for edge in ("above", "below")}}
        for name, pool in pools.items():
            assert getattr(cal, name)[j] == pytest.approx(irt.interval_factor(pool), rel=1e-12)
    assert classed - {"within"}  # some fold runs are classed outside: the split is not vacuous here


def test_fewer_than_ten_references_show_no_interval():
    small = synthetic(n_models=10, n_items=80, seed=4)
    cat = ContinuousCAT(small.drop_models(["m0"]), seed=0)  # 9 references: 9 pseudo-targets inside them
    assert cat.calibration_.interval.runs[0] == 9 and set(cat.calibration_.interval.within) == {None}
    play(cat, small.model_scores("m0"), 10)
    est = cat.estimate()
    assert np.isfinite(est.mean) and est.var == float("inf")
    assert est.notes[0].startswith("no interval: too few references to measure how far off CAT's estimates are")


def test_score_interval_calibration_survives_a_json_round_trip_exactly():
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    factor = st.one_of(st.none(), st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))

    reach = st.one_of(st.none(), st.floats(min_value=0, max_value=1e6, allow_nan=False))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.integers(1, 10_000), min_size=1, max_size=8, unique=True).flatmap(
        lambda cps: st.tuples(st.just(sorted(cps)), *(st.lists(factor, min_size=len(cps), max_size=len(cps))
                                                      for _ in range(3)), st.booleans(),
                              *(st.one_of(st.none(), st.lists(reach, min_size=len(cps), max_size=len(cps)))
                                for _ in range(2)))))
    def check(args):
        cps, within, above, below, local, above_reach, below_reach = args
        cal = irt.ScoreIntervalCalibration(tuple(cps), tuple(within), tuple(above), tuple(below), (3, 2, 1), local,
                                           None if above_reach is None else tuple(above_reach),
                                           None if below_reach is None else tuple(below_reach))
        assert irt.ScoreIntervalCalibration.from_dict(json.loads(json.dumps(cal.to_dict()))) == cal

    check()


def test_a_score_interval_calibration_stored_before_the_reach_loads_without_it():
    old = {"checkpoints": [10, 40], "within": [1.2, 1.4], "above": [1.6, None], "below": [None, 2.0],
           "runs": [20, 5, 5], "local_error": True}
    cal = irt.ScoreIntervalCalibration.from_dict(old)
    assert cal.above_reach is None and cal.below_reach is None and cal.reach(20, "above") is None
    assert cal.to_dict() == old  # written back unchanged: no new keys
    new = irt.ScoreIntervalCalibration.from_dict({**old, "above_reach": [0.1, 0.3], "below_reach": [None, 0.0]})
    assert new.reach(10, "above") == 0.1 and new.reach(80, "above") == 0.3 and new.reach(10, "below") is None
    assert new.reach(20, "above") == pytest.approx(0.1 + 0.2 * np.log(2) / np.log(4))
    for bad in ([0.1], [-0.1, 0.2], [0.1, float("nan")]):
        with pytest.raises(ConfigurationError, match="above_reach"):
            irt.ScoreIntervalCalibration.from_dict({**old, "above_reach": bad})
