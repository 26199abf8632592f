"""How surely a coverage cell is off 95 % (``coverage_tails``, the efficiency and robustness tables' lens) against
SciPy's binomial distribution."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from activeeval.experiments.metrics import chance_flagged, coverage_tails

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

    low, high = coverage_tails(covered, runs)
    assert low == pytest.approx(binom.cdf(covered, runs, 0.95), rel=1e-9, abs=1e-300)
    assert high == pytest.approx(binom.sf(covered - 1, runs, 0.95), rel=1e-9, abs=1e-300)
    assert low + high == pytest.approx(1 + binom.pmf(covered, runs, 0.95), rel=1e-12)


def test_a_cell_is_surely_below_only_well_below_95_percent(efficiency) -> None:
    """With 200 runs: 0.905 is surely below 95 % (p < 0.01), 0.910 (outside the band) is not; 0.985 is surely
    above, 0.980 is not."""
    assert coverage_tails(181, 200)[0] < efficiency.SURELY < coverage_tails(182, 200)[0]
    assert coverage_tails(197, 200)[1] < efficiency.SURELY < coverage_tails(196, 200)[1]


def test_coverage_tails_refuses_impossible_counts_and_levels() -> None:
    for covered, runs in ((5, 4), (-1, 4), (0, 0)):
        with pytest.raises(ValueError, match="covered must lie in"):
            coverage_tails(covered, runs)
    with pytest.raises(ValueError, match="level must lie"):
        coverage_tails(3, 3, level=1.5)
    with pytest.raises(TypeError):
        coverage_tails(2.5, 4)  # type: ignore[arg-type]  # a count, not a share


def test_coverage_tails_holds_for_cells_pooled_over_many_draws() -> None:
    """1 200 runs (six draws of 200 pooled): no overflow, and the tails still sum to 1 + P(X = covered)."""
    from scipy.stats import binom

    low, high = coverage_tails(1120, 1200)
    assert low == pytest.approx(binom.cdf(1120, 1200, 0.95), rel=1e-9)
    assert high == pytest.approx(binom.sf(1119, 1200, 0.95), rel=1e-9)


def test_chance_flagged_is_the_largest_tail_below_alpha() -> None:
    """With 200 runs a cell is flagged below at 181 or fewer covered (P = 0.0058) and above at 197 or more (0.0090);
    with 120, above only at 120 of 120 (0.0021)."""
    from scipy.stats import binom

    below, above = chance_flagged(200, 0.01)
    assert below == pytest.approx(binom.cdf(181, 200, 0.95), rel=1e-9)
    assert above == pytest.approx(binom.sf(196, 200, 0.95), rel=1e-9)
    assert chance_flagged(120, 0.01)[1] == pytest.approx(0.95**120, rel=1e-9)


def test_outside_by_chance_is_the_binomial_mass_outside_the_band(efficiency) -> None:
    """The header's share of cells an exact 95 % interval puts outside 93–97 % by chance (14 % at 200 runs), also
    for cells pooled over many draws."""
    from scipy.stats import binom

    for runs in (120, 200, 1200):
        ks = [k for k in range(runs + 1) if not 0.93 <= k / runs <= 0.97]
        assert efficiency._outside_by_chance(runs, 0.93, 0.97) == pytest.approx(
            sum(binom.pmf(k, runs, 0.95) for k in ks), rel=1e-9)
