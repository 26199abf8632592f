"""Batch selection in the drivers: the backtest (--batch-size, --batch-strategy, --myopic/--non-myopic), the
stopping window of batches, sessions' ask(k), and the CLI's errors.

Real data: the bundled IFEval matrix, cut to its first 120 items so a run of
a batch strategy to n = N takes seconds (still the unique regime).
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.metrics import stop_indices
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest
from activeeval.experiments.simulate import run_batches
from activeeval.experiments.tables import summarize
from activeeval.methods.registry import make_method

runner = CliRunner()


@pytest.fixture(scope="module")
def small_ifeval():
    full = datasets.load("ifeval")
    return full.select_items(list(full.item_ids)[:120])


def _config(**kw) -> BacktestConfig:
    return BacktestConfig(methods=("bayesame-paper", "rs-mean"), n_targets=2, n_seeds=1, **kw)


def test_default_is_unchanged_by_the_new_fields(small_ifeval) -> None:
    plain = run_backtest(small_ifeval, _config(), workers=1)
    explicit = run_backtest(small_ifeval, _config(batch_size=1, batch_strategy="greedy", myopic=True), workers=1)
    for m in plain.methods:
        np.testing.assert_array_equal(plain.means[m], explicit.means[m])  # the same code path: bit for bit
        np.testing.assert_array_equal(plain.vars[m], explicit.vars[m])
    assert plain.batch_sizes == {} == explicit.batch_sizes


def test_myopic_batches_are_played_as_select_batch_and_recorded_per_item(small_ifeval) -> None:
    res = run_backtest(small_ifeval, _config(batch_size=3, batch_strategy="pair"), workers=1)
    assert res.batch_sizes == {"bayesame-paper": 3}
    mu = res.means["bayesame-paper"]
    assert mu.shape == (2, 1, 120) and np.isfinite(mu).all()
    # the same run by hand: the runner's seed and references, select_batch(3), observe all three
    from activeeval.experiments.protocol import method_seed, sample_references

    refs = sample_references(res.split.pool, 0.5, 0, 0)
    target = res.split.targets[0]
    from threadpoolctl import threadpool_limits

    # one BLAS thread, as the runner plays every task: with several, BLAS sums in another order (CI sets no
    # OPENBLAS_NUM_THREADS; the hand-played run then differed in the last bit)
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        method = make_method("bayesame-paper", small_ifeval.select_models(refs), seed=method_seed(0, 0, 0),
                             batch_strategy="pair")
        run_batches(method, np.asarray(small_ifeval.model_scores(target), dtype=float), 3)
    np.testing.assert_array_equal([e.mean for e in method.trajectory], mu[0, 0])
    # the baseline is not batched: RS-Mean's runs are those of a plain backtest
    plain = run_backtest(small_ifeval, _config(), workers=1)
    np.testing.assert_array_equal(res.means["rs-mean"], plain.means["rs-mean"])


def test_myopic_stops_fall_at_the_ends_of_batches(small_ifeval) -> None:
    res = run_backtest(small_ifeval, _config(batch_size=4, batch_strategy="lars"), workers=1)
    summary = summarize(res, epsilon2=0.3)
    cfg = res.config
    stop = stop_indices(res.means["bayesame-paper"], res.vars["bayesame-paper"], cfg.epsilon1, 0.3, cfg.window,
                        cfg.level, batch_size=4)
    assert np.all((stop % 4 == 0) | (stop == res.n_items))
    assert summary["bayesame-paper"]["mean_fraction_at_stop"] == pytest.approx(stop.mean() / res.n_items)


def test_non_myopic_plays_one_item_per_step(small_ifeval) -> None:
    res = run_backtest(small_ifeval, _config(batch_size=2, batch_strategy="pair", myopic=False), workers=1)
    assert res.batch_sizes == {}  # one item per step: the window stays W
    assert np.isfinite(res.means["bayesame-paper"]).all()
    plain = run_backtest(small_ifeval, _config(), workers=1)
    assert not np.array_equal(res.means["bayesame-paper"], plain.means["bayesame-paper"])  # other items


def test_batched_stop_indices_equal_a_loop_over_batch_ends() -> None:
    rng = np.random.default_rng(0)
    n_items, k, window = 37, 4, 30
    means = 0.5 + np.cumsum(rng.normal(scale=0.002, size=(3, 2, n_items)), axis=-1)
    vars_ = np.broadcast_to(np.geomspace(1e-2, 1e-6, n_items), means.shape)
    got = stop_indices(means, vars_, 0.01, 0.05, window, batch_size=k)
    w = math.ceil(window / k)
    ends = list(range(k, n_items, k)) + [n_items]
    for idx in np.ndindex(means.shape[:-1]):
        expected = n_items
        for j, n in enumerate(ends):
            if j + 1 >= w:
                recent = [means[idx][e - 1] for e in ends[j + 1 - w: j + 1]]
                width = 2 * 1.959963984540054 * math.sqrt(vars_[idx][n - 1])
                if max(recent) - min(recent) <= 0.01 and width <= 0.05:
                    expected = n
                    break
        assert got[idx] == expected
    # batch_size 1 is the unbatched rule exactly
    np.testing.assert_array_equal(stop_indices(means, vars_, 0.01, 0.05, window, batch_size=1),
                                  stop_indices(means, vars_, 0.01, 0.05, window))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"batch_size": 0}, "batch_size= must be a positive integer, got 0"),
        ({"batch_strategy": "best"}, "batch_strategy= must be one of greedy, pair, lars, dpp, "
                                     "kmeans, got 'best'"),
        ({"myopic": "no"}, "myopic= must be True or False, got 'no'"),
    ],
)
def test_bad_batch_settings_are_refused(kw, message) -> None:
    with pytest.raises(ConfigurationError) as err:
        _config(**kw)
    assert message in str(err.value)


def test_batch_settings_need_a_bayesame_method_and_fit_the_benchmark(small_ifeval) -> None:
    cfg = BacktestConfig(methods=("rs-mean", "bayes-aipw"), n_targets=2, n_seeds=1, batch_size=2)
    with pytest.raises(ConfigurationError, match="apply to the BayesAME methods"):
        run_backtest(small_ifeval, cfg, workers=1)
    with pytest.raises(ConfigurationError, match="batch_size=121 is larger than the benchmark's 120 items"):
        run_backtest(small_ifeval, _config(batch_size=121), workers=1)


# ------------------------------------------------------------------ CLI
@pytest.fixture(scope="module")
def small_file(small_ifeval, tmp_path_factory):
    return str(write_scores(small_ifeval, tmp_path_factory.mktemp("batch") / "ifeval120.csv"))


BASE = ("backtest", "--targets", "2", "--seeds", "1", "--workers", "1", "--no-progress")


def test_cli_backtest_with_batches_end_to_end(small_file) -> None:
    for flags in (("--batch-size", "2", "--batch-strategy", "pair"),
                  ("--batch-size", "2", "--batch-strategy", "pair", "--non-myopic")):
        r = runner.invoke(app, [*BASE, "--dataset", small_file, "--methods", "bayesame-paper", *flags, "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.output[r.output.index("{"):])
        assert set(out["methods"]) == {"bayesame-paper", "rs-mean"}
        assert math.isfinite(out["methods"]["bayesame-paper"]["ew_irmse"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batch-size", "0"), "--batch-size must be a positive integer, got 0"),
        (("--batch-strategy", "best"), "--batch-strategy must be one of greedy, pair"),
        (("--batch-size", "500"), "--batch-size 500 is larger than the benchmark's 120 items"),
        (("--batch-size", "2", "--methods", "rs-mean"), "apply to the BayesAME methods"),
    ],
)
def test_cli_bad_batch_flags_exit_2_naming_the_flag(small_file, args, message) -> None:
    methods = () if "--methods" in args else ("--methods", "bayesame-paper")
    r = runner.invoke(app, [*BASE, "--dataset", small_file, *methods, *args])
    assert r.exit_code == 2, r.output
    assert message in " ".join(r.output.split())


# ------------------------------------------------------------------ sessions
def test_session_ask_uses_the_methods_batch_strategy(tmp_path) -> None:
    from activeeval.session.session import Session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        session = Session.create(tmp_path / "s.aeval", "ifeval", method="bayesame-paper[batch_strategy=pair]",
                                 seed=3)
        first = [a.index for a in session.ask(3)]
        second = [a.index for a in session.ask(2)]
        method = make_method("bayesame-paper", datasets.load("ifeval"), seed=3, batch_strategy="pair")
    assert first == method.select_batch(3)
    assert second == method.select_batch(2, exclude=first)  # conditioned on the pending items
    greedy = make_method("bayesame-paper", datasets.load("ifeval"), seed=3)
    assert first != greedy.select_batch(3)  # the strategy made a difference here
    session.close()
