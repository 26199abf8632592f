"""Real-data backtests (slow; run with ``pytest -m slow``)."""

from __future__ import annotations

import pytest

from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest
from activeeval.experiments.tables import summarize

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(("regime", "low", "high"), [("interpolation", 71.5, 74.5), ("extrapolation", 63.3, 66.3)])
def test_rs_mean_ifeval_scale_check(regime: str, low: float, high: float) -> None:
    # SPEC §5: RS-Mean on IFEval, 50 % refs, 200 seeds ≈ 72–73 (paper 72.45 / 64.54). We measured
    # 73.04 / 64.74 (one item order per seed, shared by the targets); the band is ±3 standard
    # errors over seeds (bootstrap SE ≈ 2.1 at 10 seeds,
    # so ≈ 0.5 at 200).
    result = run_backtest(datasets.load("ifeval"), BacktestConfig(methods=("rs-mean",), regime=regime, n_seeds=200),
                          workers=2)
    assert low <= summarize(result)["rs-mean"]["ew_irmse"] <= high


def test_every_method_runs_on_musr_extrapolation() -> None:
    methods = ("bayesame", "bayesame-rs", "rs-mean", "seq-apw", "bayes-aipw", "bayes-rs-learn", "proeval", "irt")
    result = run_backtest(datasets.load("musr"),
                          BacktestConfig(methods=methods, regime="extrapolation", n_targets=2, n_seeds=1), workers=2)
    summary = summarize(result)
    assert set(summary) == set(methods)
    assert all(s["ew_irmse"] > 0 for s in summary.values())
