"""The efficiency table's statistics (benchmarks/efficiency.py) against brute-force formulas."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "efficiency.py"


@pytest.fixture(scope="module")
def efficiency():
    spec = importlib.util.spec_from_file_location("efficiency_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["efficiency_bench"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("covered", "runs"), [(181, 200), (190, 200), (199, 200), (0, 10), (10, 10), (108, 120)])
def test_tails_are_the_binomial_cdf_and_survival(efficiency, covered: int, runs: int) -> None:
    from scipy.stats import binom

    low, high = efficiency._tails(covered, runs)
    assert low == pytest.approx(binom.cdf(covered, runs, 0.95), rel=1e-9, abs=1e-300)
    assert high == pytest.approx(binom.sf(covered - 1, runs, 0.95), rel=1e-9, abs=1e-300)
    assert low + high == pytest.approx(1 + binom.pmf(covered, runs, 0.95), rel=1e-12)


def test_a_cell_is_surely_below_only_well_below_95_percent(efficiency) -> None:
    """With 200 runs: 0.905 is surely below 95 % (p < 0.01), 0.910 (outside the band) is not; 0.985 is surely
    above, 0.980 is not."""
    assert efficiency._tails(181, 200)[0] < efficiency.SURELY < efficiency._tails(182, 200)[0]
    assert efficiency._tails(197, 200)[1] < efficiency.SURELY < efficiency._tails(196, 200)[1]
