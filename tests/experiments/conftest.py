"""Fixtures shared by the experiment tests."""

from __future__ import annotations

import numpy as np
import pytest

from activeeval.datasets import load


@pytest.fixture(scope="module")
def small_ifeval():
    """A real IFEval subset: 40 models x 60 items, drawn with a fixed seed."""
    m = load("ifeval")
    rng = np.random.default_rng(3)
    items = sorted(rng.choice(m.n_items, 60, replace=False))
    models = [m.model_ids[i] for i in sorted(rng.choice(m.n_models, 40, replace=False))]
    return m.select_models(models).select_items([m.item_ids[i] for i in items])
