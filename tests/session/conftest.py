"""Shared fixtures of the session tests: small real and synthetic references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from activeeval import datasets
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix

HELD_OUT = 0  # row of the bundled dataset used as the target model


@pytest.fixture(scope="session")
def math_split() -> tuple[ScoreMatrix, dict[str, float]]:
    """Bundled HELM-Lite MATH (83 x 437, binary): references without one model, and that model's scores."""
    full = datasets.load("math")
    target = full.model_ids[HELD_OUT]
    scores = dict(zip(full.item_ids, map(float, full.model_scores(target))))
    return full.drop_models([target]), scores


@pytest.fixture()
def math_ref_file(tmp_path: Path, math_split) -> Path:
    """The references as a wide CSV, so sessions reload them from a file."""
    return write_scores(math_split[0], tmp_path / "math_ref.csv")


@pytest.fixture(scope="session")
def continuous_split() -> tuple[ScoreMatrix, dict[str, float]]:
    """A small continuous matrix (unique regime: BayesAME selects by information gain)."""
    rng = np.random.default_rng(7)
    ability = rng.normal(size=(31, 1))
    difficulty = rng.normal(size=(1, 60))
    scores = 1 / (1 + np.exp(-(ability - difficulty + 0.3 * rng.normal(size=(31, 60)))))
    m = ScoreMatrix(np.round(scores, 4), [f"m{j}" for j in range(31)], [f"q{i:02d}" for i in range(60)], name="synth")
    return m.drop_models(["m0"]), dict(zip(m.item_ids, map(float, m.scores[0])))


@pytest.fixture()
def continuous_ref_file(tmp_path: Path, continuous_split) -> Path:
    return write_scores(continuous_split[0], tmp_path / "synth_ref.csv")
