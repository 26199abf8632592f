"""Helpers shared by the replay tests: a real-data subset and the step-by-step reference run."""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.registry import make_method


def subset(
    matrix: ScoreMatrix, n_refs: int = 40, n_targets: int = 3, n_items: int = 80, seed: int = 1
) -> tuple[ScoreMatrix, np.ndarray]:
    """A reference matrix (n_refs × n_items) and the full rows of n_targets other models."""
    items = np.sort(np.random.default_rng(seed).choice(matrix.n_items, n_items, replace=False))
    sub = matrix.select_items(items.tolist())
    ids = list(sub.model_ids)
    reference = sub.select_models(ids[:n_refs])
    truths = np.stack([sub.model_scores(t) for t in ids[n_refs : n_refs + n_targets]])
    return reference, truths


def step_by_step(name: str, reference: ScoreMatrix, truth: np.ndarray, seed: int, **options) -> tuple:
    """Play ``name`` item by item to n = N: (means, variances, observed items)."""
    method = make_method(name, reference, seed=seed, **options)
    run_fixed(method, truth, reference.n_items)
    traj = method.trajectory
    return np.array([e.mean for e in traj]), np.array([e.var for e in traj]), list(method.observed_items)
