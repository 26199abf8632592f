"""Crash test: SIGKILL `activeeval run` at random moments, resume, and lose nothing.

A scorer backed by a real dataset (the held-out model of the bundled HELM-Lite
MATH matrix) is driven by ``python -m activeeval run``; the run is killed with
SIGKILL 20 times at random moments (during start-up, journal replay or
scoring), resumed each time, and then run to completion. After every kill the
journal must still hold every score recorded before, unchanged, with no item
twice; at the end the journal must equal an uninterrupted run with the same
seed exactly, and the estimates to 1e-6 relative (vectorised floating-point
sums differ in the last bits between processes, and the reference fit and
its calibration, made in different processes, inherit that). The experiment is
``benchmarks/bench_crash.py`` (which does it 100 times); this test runs it
with 20 kills and a 200-item budget (about 30-60 s).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_crash.py"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uses SIGKILL and process groups (POSIX)")


def _bench():
    spec = importlib.util.spec_from_file_location("bench_crash", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_crash"] = module  # dataclasses need the module registered
    spec.loader.exec_module(module)
    return module


def test_sigkill_at_random_moments_loses_nothing(tmp_path) -> None:
    bench = _bench()
    # The budget leaves room for 20 kills even when start-up is fast (~0.6 s): a
    # random-moment kill lets a run score at most ~1 s worth of items.
    counts = bench.crash_trial(tmp_path, kills=20, max_items=200, seed=3, jobs=2, random_delay=1.0, rng_seed=2024)
    assert counts.problems == []
    assert counts.kills == 20
    assert (counts.lost, counts.altered, counts.duplicated) == (0, 0, 0)
    # Some kills must land after new scores were recorded, or nothing was tested.
    assert counts.recorded_during_kills >= 10
    assert counts.journal_matches
    assert counts.estimate_matches
    assert counts.final_estimate == pytest.approx(counts.expected_estimate, rel=1e-6)
