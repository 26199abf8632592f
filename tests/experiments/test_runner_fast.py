"""The runner's fast paths give exactly the step-by-step results.

* every registered fast replay, called through the runner, equals playing
  the method target by target with the same seed;
* the paper's BayesAME-RS copied from its BayesAME (where that selects at random)
  equals BayesAME-RS actually run;
* ``shared_order=False`` gives every target its own seed (and item order).
"""

from __future__ import annotations

import numpy as np
import pytest

from activeeval.datasets import load
from activeeval.experiments.protocol import BacktestConfig, make_split, method_seed, sample_references
from activeeval.experiments.runner import run_backtest, run_task
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.registry import make_method, method_names, resolve_replay

REPLAYS = [name for name in method_names() if resolve_replay(name) is not None]  # the classes with a fast path


@pytest.mark.parametrize("method", sorted(REPLAYS))
def test_runner_fast_replay_equals_step_by_step(small_ifeval, method: str) -> None:
    assert resolve_replay(method) is not None
    config = BacktestConfig(methods=(method,), n_targets=3, n_seeds=1)
    split = make_split(small_ifeval, "interpolation", 3)
    _, _, means, vars_ = run_task(small_ifeval, config, split, method, seed_index=1)
    reference = small_ifeval.select_models(sample_references(split.pool, 0.5, 1))
    seed = method_seed(0, 1, 0)
    for t, target in enumerate(split.targets):
        m = make_method(method, reference, seed=seed)
        run_fixed(m, small_ifeval.model_scores(target), small_ifeval.n_items)
        np.testing.assert_allclose(means[t], [e.mean for e in m.trajectory], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(vars_[t], [e.var for e in m.trajectory], rtol=1e-9, atol=1e-12)


def _random_selecting_bayesame_matrix():
    """A MuSR subset on which BayesAME's bucket count puts it in the random-selection regime."""
    m = load("musr")
    rng = np.random.default_rng(0)
    models = [m.model_ids[i] for i in sorted(rng.choice(m.n_models, 40, replace=False))]
    sub = m.select_models(models).select_items(m.item_ids[:70])
    return sub


def test_bayesame_rs_copy_equals_running_it() -> None:
    matrix = _random_selecting_bayesame_matrix()
    config = BacktestConfig(methods=("bayesame-paper", "bayesame-paper-rs"), n_targets=2, n_seeds=2, gap=0.1)
    split = make_split(matrix, "interpolation", 2)
    ref = matrix.select_models(sample_references(split.pool, 0.5, 0))
    assert not make_method("bayesame-paper", ref).active, "the fixture must put BayesAME in its random regime"
    both = run_backtest(matrix, config, workers=1)
    alone = run_backtest(matrix, BacktestConfig(methods=("bayesame-paper-rs",), n_targets=2, n_seeds=2), workers=1)
    np.testing.assert_array_equal(both.means["bayesame-paper-rs"], alone.means["bayesame-paper-rs"])
    np.testing.assert_array_equal(both.vars["bayesame-paper-rs"], alone.vars["bayesame-paper-rs"])
    np.testing.assert_array_equal(both.means["bayesame-paper"], alone.means["bayesame-paper-rs"])


def test_active_bayesame_is_not_copied() -> None:
    m = load("ifeval")
    matrix = m.select_items(m.item_ids[:60])  # 429 models: every item its own bucket, so BayesAME is active
    split = make_split(matrix, "interpolation", 2)
    ref = matrix.select_models(sample_references(split.pool, 0.5, 0))
    assert make_method("bayesame-paper", ref).active
    result = run_backtest(matrix, BacktestConfig(methods=("bayesame-paper", "bayesame-paper-rs"), n_targets=2, n_seeds=1),
                          workers=1)
    assert not np.array_equal(result.means["bayesame-paper"], result.means["bayesame-paper-rs"])


def test_independent_orders_give_each_target_its_own_seed(small_ifeval) -> None:
    shared = BacktestConfig(methods=("rs-mean",), n_targets=3, n_seeds=1)
    independent = BacktestConfig(methods=("rs-mean",), n_targets=3, n_seeds=1, shared_order=False)
    split = make_split(small_ifeval, "interpolation", 3)
    a = run_task(small_ifeval, shared, split, "rs-mean", 0)
    b = run_task(small_ifeval, independent, split, "rs-mean", 0)
    # target 0 has the same seed either way; the others differ
    np.testing.assert_allclose(a[2][0], b[2][0], rtol=1e-12)
    assert not np.allclose(a[2][1], b[2][1])
    reference = small_ifeval.select_models(sample_references(split.pool, 0.5, 0))
    m = make_method("rs-mean", reference, seed=method_seed(0, 0, 2))
    run_fixed(m, small_ifeval.model_scores(split.targets[2]), small_ifeval.n_items)
    np.testing.assert_allclose(b[2][2], [e.mean for e in m.trajectory], rtol=1e-12)
