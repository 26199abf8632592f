"""Seq-APW: sequential anchor points, weighted (BayesAME paper §5.1, baseline 2).

An adaptation of the anchor-points-weighted estimator of Vivek et al. (2024)
to sequential evaluation: the coreset C grows greedily so that it covers the
item space, items being represented by their reference-score vectors φ_i and
similarity being the Pearson correlation of those vectors. Every item is
assigned to its most similar anchor in C; an anchor's weight is the size of
its cluster over N, R̂ = Σ_{i∈C} w_i s_i and Var_R is Eq. 9.

Greedy covering is the facility-location rule: the next anchor j maximises
Σ_i max(0, sim_ij − best_i), best_i = max_{a∈C} sim_ia (−1, the lowest
possible correlation, while C is empty). The choice depends on the reference
scores only, so Seq-APW is deterministic up to ties (broken at random).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from activeeval.methods.base import BaseMethod
from activeeval.methods.baselines._common import prior_estimate, worst_case_var
from activeeval.methods.baselines.rs_mean import eq9_variance
from activeeval.methods.estimate import Estimate

__all__ = ["SeqAPW", "item_similarity", "covering_gain", "anchor_weights"]


def item_similarity(phi: np.ndarray) -> np.ndarray:
    """Pearson correlation between the items' reference-score vectors.

    Parameters
    ----------
    phi : ndarray of shape (n_items, n_models)
        φ_i, the reference models' scores on item i.

    Returns
    -------
    ndarray of shape (n_items, n_items)
        Correlations. A constant vector (zero variance; common with binary
        scores) has an undefined correlation: it counts as 0 with any other
        vector and as 1 with an identical vector (so identical items always
        share an anchor).
    """
    phi = np.asarray(phi, dtype=float)
    centred = phi - phi.mean(axis=1, keepdims=True)
    norm = np.linalg.norm(centred, axis=1)
    z = np.divide(centred, norm[:, None], out=np.zeros_like(centred), where=norm[:, None] > 0)
    sim = z @ z.T
    _, bucket = np.unique(phi, axis=0, return_inverse=True)
    bucket = bucket.ravel()
    sim[bucket[:, None] == bucket[None, :]] = 1.0
    np.clip(sim, -1.0, 1.0, out=sim)
    return sim


def covering_gain(sim: np.ndarray, best: np.ndarray) -> np.ndarray:
    """Facility-location gain of each candidate anchor: Σ_i max(0, sim_ij − best_i).

    Parameters
    ----------
    sim : ndarray of shape (n_items, n_items)
    best : ndarray of shape (n_items,)
        Similarity of each item to its nearest anchor so far.

    Returns
    -------
    ndarray of shape (n_items,)
    """
    return np.maximum(sim - best[:, None], 0.0).sum(axis=0)


def anchor_weights(sim: np.ndarray, anchors: Sequence[int]) -> np.ndarray:
    """APW weights: cluster size / N for each anchor, in the order of ``anchors``.

    Every anchor belongs to its own cluster; every other item joins its most
    similar anchor (ties: the earliest anchor).

    Returns
    -------
    ndarray of shape (len(anchors),), summing to 1.
    """
    anchors = np.asarray(anchors, dtype=int)
    n_items = sim.shape[0]
    nearest = np.argmax(sim[:, anchors], axis=1)
    nearest[anchors] = np.arange(anchors.size)
    return np.bincount(nearest, minlength=anchors.size) / n_items


class SeqAPW(BaseMethod):
    """Seq-APW: greedy covering selection, cluster-size weights, Eq. 9 variance.

    R̂ = R* once every item is observed (every cluster is a single item) and
    Var_R is then 0 (n_eff = N). Before any observation the estimate is the
    reference models' mean full-benchmark score.
    """

    name = "seq-apw"

    def __init__(self, reference, **kwargs) -> None:  # noqa: ANN001 - same signature as BaseMethod
        super().__init__(reference, **kwargs)
        self._sim = item_similarity(self.reference.scores.T)
        self._best = np.full(self.n_items, -1.0)

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        best = self._best.copy()
        for i in exclude:  # pending items are anchors-to-be
            best = np.maximum(best, self._sim[:, i])
        taken = self._observed.copy()
        taken[list(exclude)] = True
        chosen: list[int] = []
        for _ in range(k):
            gain = covering_gain(self._sim, best)
            gain[taken] = -np.inf
            # ties within round-off count as ties
            ties = np.flatnonzero(gain >= gain.max() - 1e-9 * max(1.0, abs(gain.max())))
            j = int(rng.choice(ties))
            chosen.append(j)
            taken[j] = True
            best = np.maximum(best, self._sim[:, j])
        return chosen

    def _update(self, item: int, score: float) -> None:
        self._best = np.maximum(self._best, self._sim[:, item])

    def _current_estimate(self) -> Estimate:
        scores = np.asarray(self._scores)
        if scores.size == 0:
            mean, var = prior_estimate(self.reference)
            return Estimate(mean, var, 0, self.n_items, self._bounds())
        weights = anchor_weights(self._sim, self._items)
        var = eq9_variance(scores, weights, self.n_items, worst_case_var(self.reference))
        return Estimate(float(weights @ scores), var, scores.size, self.n_items, self._bounds())
