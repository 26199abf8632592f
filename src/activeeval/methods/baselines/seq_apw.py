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

Because of that, :meth:`SeqAPW.replay` plays every target of a backtest at
once: the anchor order (:func:`covering_order`) and the weights after every n
(:func:`anchor_weight_path`) are computed once per seed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod
from activeeval.methods.baselines._common import (
    eq9_variance,
    fast_replay,
    prior_estimate,
    running_mean_var,
    worst_case_var,
)
from activeeval.methods.estimate import Estimate

__all__ = [
    "SeqAPW",
    "anchor_weight_path",
    "anchor_weights",
    "covering_gain",
    "covering_order",
    "item_similarity",
]

_TIE_RTOL = 1e-9  # gains within this relative distance of the best one count as ties


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


def anchor_weights(sim: np.ndarray, anchors: Sequence[int] | np.ndarray) -> np.ndarray:
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


def covering_order(sim: np.ndarray, seed: int, *, dense_fraction: float = 0.25) -> np.ndarray:
    """The order in which :class:`SeqAPW` with ``seed`` picks all the items.

    Step n takes the unobserved item of largest :func:`covering_gain`, ties
    (within a relative 1e-9) broken by ``default_rng([seed, n]).choice``,
    exactly as ``SeqAPW.select()`` does with no ``rng`` and nothing pending.

    Parameters
    ----------
    sim : ndarray of shape (n_items, n_items)
        :func:`item_similarity` of the items.
    seed : int
        The method seed.
    dense_fraction : float
        Switch from the dense gain to the sparse one once at most this
        fraction of the N² (item, candidate) pairs can still gain.

    Returns
    -------
    ndarray of int, shape (n_items,)

    Notes
    -----
    The gain Σ_i max(0, sim_ij − best_i) only has terms where sim_ij > best_i,
    and those pairs only disappear as anchors are added (best_i grows). After
    the first steps (computed densely with :func:`covering_gain`) the
    remaining pairs are kept in row-major order and the gain is their
    ``np.bincount`` by column. Both add the terms of a column one at a time
    in increasing i, the zeros skipped adding exactly nothing, so the gains
    and hence the choices are bit-for-bit those of the method (tested), at a
    cost proportional to the pairs left instead of N² per step.
    """
    n_items = sim.shape[0]
    best = np.full(n_items, -1.0)
    taken = np.zeros(n_items, dtype=bool)
    order = np.empty(n_items, dtype=np.intp)
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # rows, cols, sim values
    for n in range(n_items):
        if pairs is None:
            gain = covering_gain(sim, best)
        else:
            rows, cols, vals = pairs
            # (an empty bincount is integer-typed; every gain is then 0.0, as in the dense sum)
            gain = np.bincount(cols, weights=vals - best[rows], minlength=n_items).astype(float, copy=False)
        gain[taken] = -np.inf
        top = gain.max()
        ties = np.flatnonzero(gain >= top - _TIE_RTOL * max(1.0, abs(top)))
        j = int(ties[0]) if ties.size == 1 else int(np.random.default_rng([seed, n]).choice(ties))
        order[n] = j
        taken[j] = True
        best = np.maximum(best, sim[:, j])
        if pairs is None:
            live = sim > best[:, None]
            live[:, taken] = False
            if np.count_nonzero(live) <= dense_fraction * n_items**2:
                rows, cols = np.nonzero(live)  # row-major: a column's terms in increasing i
                pairs = (rows, cols, sim[rows, cols])
        else:
            keep = (vals > best[rows]) & ~taken[cols]
            pairs = (rows[keep], cols[keep], vals[keep])
    return order


def anchor_weight_path(sim: np.ndarray, order: Sequence[int] | np.ndarray) -> Iterator[np.ndarray]:
    """:func:`anchor_weights` of every prefix of ``order``: yields the weights for n = 1, 2, ...

    The nearest-anchor assignment is kept up to date instead of recomputed:
    a new anchor j takes over the items strictly more similar to j than to
    their current anchor (ties keep the earlier anchor, as ``np.argmax`` does
    in :func:`anchor_weights`), and always owns itself. O(N) per step.
    """
    order = np.asarray(order, dtype=np.intp)
    n_items = sim.shape[0]
    owner = np.full(n_items, -1, dtype=np.intp)  # position in ``order`` of each item's anchor
    nearest = np.full(n_items, -np.inf)  # similarity to that anchor (+inf for the anchors)
    counts = np.zeros(order.size, dtype=np.intp)
    for n, j in enumerate(order):
        col = sim[:, j]
        moved = col > nearest
        moved[j] = True
        idx = np.flatnonzero(moved)
        prev = owner[idx]
        counts -= np.bincount(prev[prev >= 0], minlength=order.size)
        counts[n] = idx.size
        owner[idx] = n
        nearest[idx] = col[idx]
        nearest[j] = np.inf
        yield counts[: n + 1] / n_items


class SeqAPW(BaseMethod):
    """Seq-APW: greedy covering selection, cluster-size weights, Eq. 9 variance.

    R̂ = R* once every item is observed (every cluster is a single item) and
    Var_R is then 0 (n_eff = N). Before any observation the estimate is the
    reference models' mean full-benchmark score.
    """

    name = "seq-apw"

    def __init__(self, reference, **kwargs) -> None:
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
            ties = np.flatnonzero(gain >= gain.max() - _TIE_RTOL * max(1.0, abs(gain.max())))
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

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Seq-APW trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`.

        The selection depends on the references and the seed only, so the
        anchor order and the weights after each n are computed once and serve
        every target; Var_R is Eq. 9.
        """
        n_items = reference.n_items
        sim = item_similarity(reference.scores.T)
        order = covering_order(sim, seed)
        observed = truths[:, order]
        means = np.empty_like(observed)
        sum_w = np.empty(n_items)
        sum_w2 = np.empty(n_items)
        for n, weights in enumerate(anchor_weight_path(sim, order)):
            means[:, n] = observed[:, : n + 1] @ weights
            sum_w[n] = weights.sum()
            sum_w2[n] = weights @ weights
        _, s2 = running_mean_var(observed)
        s2[:, 0] = worst_case_var(reference)  # Eq. 9's stand-in while s is undefined, as in the class
        n_eff = sum_w**2 / sum_w2
        var = np.maximum(s2 * sum_w2 * (n_items - n_eff) / n_items, 0.0)
        return means, var
