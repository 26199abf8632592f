"""``selection="hybrid"``: items drawn with known probabilities, the model's estimate while the references vouch
for the target, and after a switch the design-based estimate of *every* item (issue 25, item 2)."""

from __future__ import annotations

import numpy as np
import pytest

from activeeval import BayesAME, ScoreMatrix
from activeeval.design import Prequential
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.simulate import run_fixed
from activeeval.gp.prior import ReferenceFit, calibrate
from activeeval.methods.bayesame import _model_based_errors

FIT = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.02, tau0=1.0, tau1=1.0, gamma=0.1)


def _reference(seed: int = 0) -> tuple[ScoreMatrix, np.ndarray]:
    """Fourteen references of a logistic (Rasch) benchmark with abilities −1 … 1; targets of ability 0.2 and
    0.5 (inside), 2.5 and 3.5 (above every reference)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=(1, 150))
    ability = np.concatenate([np.linspace(-1.0, 1.0, 14), [0.2, 0.5, 2.5, 3.5]])[:, None]
    scores = (rng.random((18, 150)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return ScoreMatrix(scores[:14], kind="binary"), scores[14:]


def _spy(monkeypatch) -> list[float | None]:
    """The probabilities each item entered the design-based estimate with."""
    seen: list[float | None] = []
    add = Prequential.add

    def spying(self, *args, **kwargs):
        seen.append(args[6] if len(args) > 6 else kwargs.get("prob"))
        return add(self, *args, **kwargs)

    monkeypatch.setattr(Prequential, "add", spying)
    return seen


@pytest.mark.parametrize("selection", ["sampled", "hybrid"])
def test_the_draw_probabilities_sum_to_one_over_the_unscored_items_with_half_the_uniform_share(selection) -> None:
    """``_sampling_probabilities`` of both randomised selections: 0 on the items scored, at least λ/U elsewhere."""
    ref, truths = _reference()
    method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection=selection)
    for _ in range(30):
        q = method._sampling_probabilities()
        free = ~method._observed
        assert q.sum() == pytest.approx(1.0) and np.all(q[~free] == 0.0)
        assert np.all(q[free] >= 0.5 * 0.5 / free.sum())  # at least half the uniform share
        item = method.select()
        method.observe(item, float(truths[0][item]))


def test_every_item_is_drawn_with_the_probability_the_design_based_estimate_weights_it_by(monkeypatch) -> None:
    ref, truths = _reference()
    truth = truths[0]
    method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="hybrid")
    default = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None)
    seen = _spy(monkeypatch)
    expected: list[float | None] = []
    for n in range(40):
        q = method._sampling_probabilities()
        item = method.select()
        expected.append(None if n < method.warmup else float(q[item]))  # the random start: uniform (1/U)
        method.observe(item, float(truth[item]))
    assert seen == expected
    run_fixed(default, truth, method.warmup)
    assert method.observed_items[:method.warmup] == default.observed_items  # the same random start
    greedy = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None)
    run_fixed(greedy, truth, 40)
    assert method.observed_items != greedy.observed_items  # drawn, not Eq. 6's argmax
    assert method._design.count == 40  # every item counts, switched or not
    est = method.estimate()
    replay = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="hybrid")
    for item, score in zip(method.observed_items, method.observed_scores, strict=True):
        replay.observe(item, score)  # a session rebuilt from its journal: the probabilities are recomputed
    assert (replay.estimate().mean, replay.estimate().var) == (est.mean, est.var)
    assert replay._design.estimate(1.0, "increments") == method._design.estimate(1.0, "increments")


def test_while_model_based_the_estimate_is_the_model_s_and_after_a_switch_it_rests_on_every_item() -> None:
    ref, truths = _reference()
    inside = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(inside, truths[1], 30)
    assert inside.mode == "model"
    assert (inside.estimate().mean, inside.estimate().var) == inside._model_estimate()
    above = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(above, truths[3], 30)
    assert above.mode == "design" and above.switch_reason == "outside" and above.switched_at < 30
    mean, var = above._design.estimate(above._worst_var, "weighted", earlier_weight=0.5)
    assert above.estimate().mean == pytest.approx(mean) and above.estimate().var >= var
    assert above._design.count == 30  # the items before the switch count as well as those after it
    # each item before the switch at half weight: between the estimate of every item at full weight and that of
    # the items after the switch alone
    full = above._design.estimate(above._worst_var, "weighted")[0]
    later = above._design.estimate(above._worst_var, "weighted", earlier_weight=1e-12)[0]
    assert min(full, later) <= mean <= max(full, later)
    assert above._design.effective_count(0.5) == pytest.approx(0.5 * above.switched_at + 30 - above.switched_at)
    at_switch = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(at_switch, truths[3], above.switched_at)  # the switch's own step: every item so far is "earlier"
    assert at_switch.mode == "design" and at_switch._design.effective_count(0.5) == 0.5 * above.switched_at
    note = next(n for n in above.estimate().notes if n.startswith("design-based: the target looks to be outside"))
    assert "rests on all 30 item(s), each drawn at random with a known probability" in note


def test_the_inverse_probability_estimate_is_unbiased_over_the_draws() -> None:
    """Over every possible next item of a hybrid run (each with its probability), the design-based estimate's
    next step averages to the benchmark score exactly, whatever the model."""
    ref, truths = _reference()
    truth = truths[2]
    method = BayesAME(ref, seed=1, hyperparameters=FIT, calibration=None, selection="hybrid", controls="model+near")
    run_fixed(method, truth, 12)
    q = method._sampling_probabilities()
    preds = method._control_predictions()
    free = ~method._observed
    n = method.n_observed
    s_obs = float(truth[method._observed].sum())
    total = 0.0
    for i in np.flatnonzero(free):
        p = Prequential(method.n_items, n_controls=2, b_prior=np.array([0.7, 0.4]))
        p.add(float(truth[i]), s_obs, method.n_items - n, s_obs / n, np.array([pr[i] for pr in preds]),
              np.array([float(pr[free].sum()) for pr in preds]), prob=float(q[i]))
        total += q[i] * p.estimate(1.0)[0]
    assert total == pytest.approx(truth.mean(), abs=1e-12)


def test_after_a_switch_uniform_draws_enter_with_equal_weights(monkeypatch) -> None:
    """``switch_draw="uniform"``: the items after a switch are the random order's (probability 1/U, entered
    without a weight); those before it are the hybrid draws, as with the default ``switch_draw``."""
    ref, truths = _reference()
    seen = _spy(monkeypatch)
    uniform = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid",
                       switch_draw="uniform")
    sampled = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(uniform, truths[3], 30)
    k = uniform.switched_at
    assert uniform.mode == "design" and k < 25
    assert all(p is not None for p in seen[:k]) and all(p is None for p in seen[k:])
    run_fixed(sampled, truths[3], 30)
    assert sampled.observed_items[:k] == uniform.observed_items[:k]
    assert sampled.observed_items[k:] != uniform.observed_items[k:]
    assert uniform._design.count == 30


@pytest.mark.parametrize("by", ["sd", "gain"])
def test_the_calibration_plays_the_hybrid_draws_as_single_runs_do(by: str) -> None:
    """The calibration's shared pass draws the items a single hybrid run draws (the probabilities do not depend on
    the scores), and drops a pseudo-target exactly when its single run switches."""
    ref, truths = _reference()
    grid = [8, 15, 30]
    shared = _model_based_errors(ref, FIT, truths, 3, grid, sampled=(by, 0.3))
    for n, values in zip(grid, shared, strict=True):
        expected = []
        for truth in truths:
            method = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, selection="hybrid",
                              sample_by=by, sample_uniform=0.3)
            run_fixed(method, truth, n)
            if method.mode == "model":
                est = method.estimate()
                expected.append((est.mean - truth.mean()) / est.std)
        np.testing.assert_allclose(values, expected, rtol=1e-9, atol=1e-12)
    assert len(shared[-1]) < len(truths)  # the targets above every reference left the count


def test_a_hybrid_method_is_calibrated_on_its_own_draws() -> None:
    ref, _ = _reference()
    default = BayesAME(ref, seed=0, hyperparameters=FIT)
    hybrid = BayesAME(ref, seed=0, hyperparameters=FIT, selection="hybrid")
    gain = BayesAME(ref, seed=0, hyperparameters=FIT, selection="hybrid", sample_by="gain")
    from activeeval.methods.bayesame import SWITCH_Z

    assert default.calibration_ == calibrate(ref, FIT, switch_z=SWITCH_Z)
    assert hybrid.calibration_ == calibrate(ref, FIT, switch_z=SWITCH_Z, sampled=("sd", 0.5))
    assert gain.calibration_ == calibrate(ref, FIT, switch_z=SWITCH_Z, sampled=("gain", 0.5))
    assert len({default.calibration_, hybrid.calibration_, gain.calibration_}) == 3


def test_gain_sampling_follows_the_information_the_greedy_choice_maximises() -> None:
    """``sample_by="gain"``: the item Eq. 6 would choose is the most probable draw."""
    ref, truths = _reference()
    method = BayesAME(ref, seed=4, hyperparameters=FIT, calibration=None, selection="hybrid", sample_by="gain",
                      sample_uniform=0.1)
    run_fixed(method, truths[0], 15)
    q = method._sampling_probabilities()
    ig = method.information_gains()[method.buckets.of_item]
    ig[method._observed] = -np.inf
    assert q[int(np.argmax(ig))] == pytest.approx(q.max())


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"sample_by": "ig"}, "sample_by must be 'sd' or 'gain'"),
    ({"sample_uniform": 0.0}, r"sample_uniform must be a number in \(0, 1\], got 0.0"),
    ({"sample_uniform": 1.5}, r"sample_uniform must be a number in \(0, 1\], got 1.5"),
    ({"switch_weight": 0}, r"switch_weight must be a number in \(0, 1\], got 0"),
    ({"selection": "mixed"}, "selection must be 'auto', 'active', 'random', 'sampled' or 'hybrid'"),
])
def test_bad_sampling_options_say_what_is_allowed(kwargs: dict, message: str) -> None:
    ref, _ = _reference()
    with pytest.raises(ConfigurationError, match=message):
        BayesAME(ref, seed=0, hyperparameters=FIT, calibration=None, **kwargs)


def test_the_floor_of_a_hybrid_run_is_that_of_plain_random_sampling_at_the_same_n() -> None:
    """Every item of a hybrid run was drawn at random from all N, so its floor is RS-Mean's at the same n (with
    no switch weighting: ``switch_weight=1``), not that shrunk by (1 − n/N)² a second time."""
    from activeeval.design import sampling_var_floor

    ref, _ = _reference()
    truth = np.ones(150)  # every score 1: the variances are 0, the floor is all there is
    method = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid", switch_weight=1.0,
                      interval="symmetric")  # the floor as one symmetric interval (the default keeps its two sides)
    run_fixed(method, truth, 60)
    assert method.mode == "design"
    floor = float(sampling_var_floor(1.0, 1.0, 1.0, 60, 150, (0.0, 1.0), True))
    assert method.estimate().var == pytest.approx(floor)
    weighted = BayesAME(ref, seed=2, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(weighted, truth, 150)  # everything scored, the items before the switch at half weight
    assert weighted.mode == "design" and (weighted.estimate().mean, weighted.estimate().var) == (1.0, 0.0)


def _small(seed: int = 0) -> tuple[ScoreMatrix, np.ndarray]:
    """Ten references and a target of a 16-item logistic benchmark (small enough to enumerate every pair)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(size=(1, 16))
    ability = np.concatenate([np.linspace(-1.0, 1.0, 10), [0.4]])[:, None]
    scores = (rng.random((11, 16)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return ScoreMatrix(scores[:10], kind="binary"), scores[10]


@pytest.mark.parametrize("selection", ["sampled", "hybrid"])
def test_a_batch_of_two_draws_is_unbiased_over_every_ordered_pair_whatever_order_the_scores_come_in(selection) -> None:
    """Two items drawn at once (the second with the first pending), their scores recorded in either order: over
    every ordered pair (i, j), weighted by q1(i) q2(j | i), each of the two new steps averages to R exactly, so
    the design-based estimate (the weighted mean of the steps) averages to what R in their place gives."""
    import copy

    ref, truth = _small()
    base = BayesAME(ref, seed=3, hyperparameters=FIT, calibration=None, selection=selection)
    run_fixed(base, truth, 4)
    q1 = base._sampling_probabilities()
    for order in ("drawn", "reversed"):
        total = 0.0
        for i in np.flatnonzero(q1):
            q2 = base._sampling_probabilities([int(i)])
            for j in np.flatnonzero(q2):
                m = copy.deepcopy(base)
                m.note_drawn(int(i))
                m.note_drawn(int(j), [int(i)])
                pair = [int(i), int(j)] if order == "drawn" else [int(j), int(i)]
                for item in pair:
                    m.observe(item, float(truth[item]))
                assert m._design.count == 6
                total += q1[i] * q2[j] * m._design.estimate(1.0)[0]
        w = 1.0 / (12 * 11) + 1.0 / (11 * 10)  # the two steps' weights, 1/(U(U − 1)) at U = 12 and 11
        expected = (base._design._swt + w * truth.mean()) / (base._design._sw + w)
        assert total == pytest.approx(expected, abs=1e-12)


def test_a_batch_is_drawn_as_one_draw_after_another_and_folded_in_the_order_drawn() -> None:
    """``select_batch(3)``: each item drawn with the earlier ones pending; a score recorded before those of the
    items drawn before it waits; the estimate is the same whatever order the scores come back in."""
    ref, truths = _reference()
    estimates = []
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="hybrid")
        run_fixed(method, truths[2], 10)
        batch = method.select_batch(3)
        assert len(set(batch)) == 3
        probs = [method._draws[i][0] for i in batch]
        assert probs == [float(method._sampling_probabilities(batch[:m])[batch[m]]) for m in range(3)]
        for step, m in enumerate(order):
            method.observe(batch[m], float(truths[2][batch[m]]))
            # folded: every draw up to the first one not yet scored
            done = {batch[k] for k in order[: step + 1]}
            first_missing = next((k for k in range(3) if batch[k] not in done), 3)
            assert method._design.count == 10 + first_missing
        estimates.append((method.estimate().mean, method.estimate().var, method._design.estimate(1.0)))
    assert estimates[0] == estimates[1] == estimates[2]


def test_a_draw_handed_out_and_never_kept_is_forgotten_and_items_scored_unasked_keep_their_place() -> None:
    ref, truths = _reference()
    truth = truths[1]
    method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(method, truth, 8)
    peek = method.select()
    assert method.select() == peek and method._queue == [peek]  # asked twice: one draw
    first, second = method.select_batch(2)
    assert method._queue == [first, second]  # the peek was not kept pending: forgotten
    other = int(next(i for i in range(150) if not method._observed[i] and i not in (first, second)))
    method.observe(other, float(truth[other]))  # scored unasked while two draws are pending: in S, not a draw
    assert method._queue == [first, second, other] and method._design.count == 8
    for item in (second, first):
        method.observe(item, float(truth[item]))
    assert method._design.count == 10 and not method._queue and method._folded == 11


def test_an_item_pending_without_a_draw_here_comes_before_the_draws_made_while_it_is_pending() -> None:
    """An item handed out otherwise (pending, never drawn by this method) is not free for the draws made while
    it is pending, so it is none of their U: it enters their S once scored, before them."""
    ref, truths = _reference()
    truth = truths[1]
    method = BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, selection="hybrid")
    run_fixed(method, truth, 8)
    outside = int(np.flatnonzero(~method._observed)[0])
    drawn = method.select_batch(2, exclude=[outside])
    assert method._queue == [outside, *drawn] and method._draws[outside] is None
    for item in drawn:
        method.observe(item, float(truth[item]))
    assert method._design.count == 8  # waiting for the item before them
    method.observe(outside, float(truth[outside]))
    assert method._design.count == 10 and method._folded == 11 and not method._queue
