"""The runner: identical results whatever the number of workers or the backend."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest
from activeeval.experiments.tables import cost_accuracy_frame, curves_frame, runs_frame, stops_frame, summarize


def toy_matrix(n_models: int, n_items: int, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability = np.sort(rng.normal(size=n_models))
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(size=n_items)[None, :])))
    scores = (rng.random((n_models, n_items)) < p).astype(float)
    return ScoreMatrix(scores, [f"m{j:02d}" for j in range(n_models)], [f"i{i}" for i in range(n_items)],
                       kind="binary", name="toy")

METHODS = ("rs-mean", "seq-apw", "bayes-aipw", "irt", "proeval", "bayes-rs-learn", "bayesame-rs")
CONFIG = BacktestConfig(methods=METHODS, n_targets=3, n_seeds=3, ref_fraction=0.5)


@pytest.fixture(scope="module")
def matrix():
    return toy_matrix(n_models=24, n_items=30)


@pytest.fixture(scope="module")
def serial(matrix):
    return run_backtest(matrix, CONFIG, workers=1)


def _same(a, b) -> None:
    assert a.split == b.split
    for name in METHODS:
        np.testing.assert_array_equal(a.means[name], b.means[name])  # bit-identical, no tolerance
        np.testing.assert_array_equal(a.vars[name], b.vars[name])


def test_two_workers_give_identical_results(matrix, serial) -> None:
    calls = []
    parallel = run_backtest(matrix, CONFIG, workers=2, progress=lambda done, total: calls.append((done, total)))
    _same(serial, parallel)
    assert calls[-1] == (len(METHODS) * 3, len(METHODS) * 3)


def test_results_are_complete_and_exact_methods_end_at_truth(serial) -> None:
    for name in METHODS:
        assert not np.isnan(serial.means[name]).any()
    for name in ("rs-mean", "seq-apw", "bayes-aipw", "irt", "bayesame-rs"):
        # R̂ = R* at n = N for every target and seed; round-off of a sum of 30 scores
        np.testing.assert_allclose(serial.means[name][:, :, -1], serial.truth[:, None] * np.ones((1, 3)), atol=1e-12)


def test_tables_have_the_documented_shape(serial) -> None:
    summary = summarize(serial)
    assert set(summary) == set(METHODS)
    assert summary["rs-mean"]["gain_db"] == {"5": 0.0, "10": 0.0, "25": 0.0}
    runs = runs_frame(serial)
    assert len(runs) == len(METHODS) * 3 * 3 * 30  # N = 30 ≤ 100: every n
    assert list(runs.columns) == ["method", "target", "seed", "n", "estimate", "var", "shift", "truth", "error",
                                   "covered"]
    assert len(stops_frame(serial)) == len(METHODS) * 3 * 3 * len(CONFIG.epsilon2)
    assert len(curves_frame(serial)) == len(METHODS) * 30
    assert len(cost_accuracy_frame(serial)) == len(METHODS) * len(CONFIG.epsilon2)


def test_bad_backend_and_method_are_pinned(matrix) -> None:
    with pytest.raises(ConfigurationError, match=r"backend must be one of local, ray, dask, got 'spark'"):
        run_backtest(matrix, CONFIG, backend="spark")
    with pytest.raises(ConfigurationError, match=r"unknown method 'rs-man' \(did you mean 'rs-mean'\?\)"):
        run_backtest(matrix, BacktestConfig(methods=("rs-man",)), workers=1)


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="dask[distributed] not installed")
def test_dask_local_cluster_gives_identical_results(matrix, serial) -> None:
    _same(serial, run_backtest(matrix, CONFIG, workers=2, backend="dask"))


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray not installed (pip install 'activeeval[ray]')")
def test_ray_local_cluster_gives_identical_results(matrix, serial) -> None:  # pragma: no cover - optional
    _same(serial, run_backtest(matrix, CONFIG, workers=2, backend="ray"))


def test_the_frames_shift_column_rebuilds_each_runs_interval(matrix) -> None:
    """A two-sided interval's runs: estimate + z·(shift ± √var) from the frame's own columns gives its covered."""
    result = run_backtest(matrix, BacktestConfig(methods=("rs-mean", "rs-mean[interval=wilson]"), n_targets=3,
                                                 n_seeds=2, ref_fraction=0.5), workers=1)
    z = 1.959963984540054
    runs = runs_frame(result)
    assert (runs.loc[runs["method"] == "rs-mean[interval=wilson]", "shift"] != 0.0).any()
    for frame in (runs, stops_frame(result)):  # (on 30 items the stops are at n = N: no shift left there)
        assert (frame.loc[frame["method"] == "rs-mean", "shift"] == 0.0).all()
        wilson = frame[frame["method"] == "rs-mean[interval=wilson]"]
        centre = wilson["estimate"] + z * wilson["shift"]
        half = z * np.sqrt(wilson["var"])
        rebuilt = (centre - half <= wilson["truth"]) & (wilson["truth"] <= centre + half)
        assert (rebuilt == wilson["covered"]).all()
