"""Real-data fixtures shared by the replay tests."""

from __future__ import annotations

import numpy as np
import pytest
from replay_support import subset

from activeeval.data.matrix import ScoreMatrix
from activeeval.datasets import load


@pytest.fixture(scope="session")
def binary_data() -> tuple[ScoreMatrix, np.ndarray]:
    return subset(load("ifeval"))


@pytest.fixture(scope="session")
def continuous_data() -> tuple[ScoreMatrix, np.ndarray]:
    complete, _ = load("alpacaeval2").dropna("models")  # a few models have missing scores
    return subset(complete)
