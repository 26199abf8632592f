"""The public peers aipw-ridge and rs-learn (issue 25): equal to scikit-learn's Ridge / RidgeCV, and their fast
replays equal to playing the classes step by step."""

from __future__ import annotations

import numpy as np
import pytest
from replay_support import step_by_step
from sklearn.linear_model import Ridge, RidgeCV

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import random_order
from activeeval.methods.baselines.peers import AIPW_ALPHA, RS_LEARN_ALPHAS, AIPWRidge, RSLearn


def matrix(kind: str, seed: int = 0, n_models: int = 14, n_items: int = 70) -> tuple[ScoreMatrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n_models + 3, 1)) - rng.normal(size=(1, n_items))
    p = 1 / (1 + np.exp(-logits))
    scores = (rng.random(p.shape) < p).astype(float) if kind == "binary" else p
    return ScoreMatrix(scores[:n_models], kind=kind), scores[n_models:]


@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.parametrize("cls", [AIPWRidge, RSLearn])
def test_replay_equals_the_class_step_by_step(kind: str, cls: type) -> None:
    ref, truths = matrix(kind)
    means, vars_ = cls.replay(ref, truths, 3)
    for t in range(truths.shape[0]):
        mu, var, _ = step_by_step(cls.name, ref, truths[t], 3)
        np.testing.assert_allclose(means[t], mu, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(vars_[t], var, rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("n", [5, 20, 60])
def test_aipw_ridge_is_benchmark_predictions_ridge_with_the_residual_correction(n: int) -> None:
    ref, truths = matrix("continuous", 1)
    order = random_order(2, ref.n_items)[:n]
    rest = np.setdiff1d(np.arange(ref.n_items), order)
    x, y = ref.scores.T, truths[0]
    model = Ridge(alpha=AIPW_ALPHA).fit(x[order], y[order])
    expected = (y[order].sum() + model.predict(x[rest]).sum()
                + rest.size * (y[order] - model.predict(x[order])).mean()) / ref.n_items
    means, _ = AIPWRidge.replay(ref, truths, 2)
    assert means[0, n - 1] == pytest.approx(np.clip(expected, 0, 1), abs=1e-10)


@pytest.mark.parametrize("n", [3, 20, 60])
def test_rs_learn_is_ridgecv_on_the_references(n: int) -> None:
    ref, truths = matrix("binary", 2)
    order = random_order(4, ref.n_items)[:n]
    model = RidgeCV(alphas=RS_LEARN_ALPHAS).fit(ref.scores[:, order], ref.scores.mean(1))
    means, vars_ = RSLearn.replay(ref, truths, 4)
    assert means[:, n - 1] == pytest.approx(np.clip(model.predict(truths[:, order]), 0, 1), abs=1e-10)
    assert np.all(vars_[:, n - 1] > 0)  # a prediction error over models: never zero, even at n = N


def test_aipw_ridge_is_exact_with_every_item() -> None:
    ref, truths = matrix("binary", 3)
    means, vars_ = AIPWRidge.replay(ref, truths, 0)
    np.testing.assert_allclose(means[:, -1], truths.mean(1), atol=1e-12)
    assert np.all(vars_[:, -1] == 0)
