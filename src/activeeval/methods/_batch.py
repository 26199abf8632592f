"""Batch selection options of the BayesAME methods (``batch_strategy``, ``batch_size``, ``myopic``; App. B.1).

The maths is :mod:`activeeval.batch`; this is the glue both BayesAME
classes share: which items a strategy picks given the method's posterior,
the items already observed and those pending, and the non-myopic
``select()`` (one random member of the best batch of ``batch_size`` items).

* ``select_batch(k)`` with k > 1 — a session's ``ask(k)``, ``run --jobs k``,
  a myopic backtest — asks ``batch_strategy`` for k items: ``"greedy"`` (the
  default, unchanged: condition on each chosen item, take the next argmax of
  Eq. 6), ``"pair"``, ``"lars"``, ``"dpp"`` or ``"kmeans"`` (see
  :func:`activeeval.batch.select_batch`). Pending items are conditioned on
  first, as the greedy path does.
* ``select()`` (k = 1) is Eq. 6's argmax, unless ``myopic=False`` and
  ``batch_size`` > 1: then it is a uniformly random member of the batch of
  ``batch_size`` items the strategy picks (the paper's non-myopic mode).

Where the method selects at random (the paper's non-unique regime, the
default's design-based mode, ``selection="random"``) batches are random too,
as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from activeeval.batch import check_strategy, select_batch
from activeeval.exceptions import ConfigurationError

__all__ = ["BatchSelection"]


class BatchSelection:
    """Mixin of the BayesAME methods (:class:`~activeeval.methods.bayesame.BayesAME`, ``BayesAMEPaper``).

    The host provides ``buckets``, ``_observed``, ``n_items`` and
    ``_batch_posterior()`` (its :class:`~activeeval.gaussian.BucketPosterior`).
    """

    batch_strategy: str
    batch_size: int
    myopic: bool
    # Provided by the host (declared for the type checker; no value here).
    n_items: int
    buckets: Any  # a BucketStructure
    _observed: np.ndarray

    def _init_batch(self, batch_strategy: str, batch_size: int, myopic: bool) -> None:
        check_strategy(batch_strategy)
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size < 1:
            raise ConfigurationError(
                f"batch_size must be a positive integer (the |A| of the non-myopic selection), got {batch_size!r}")
        if batch_size > self.n_items:
            raise ConfigurationError(
                f"batch_size {batch_size} is larger than the benchmark's {self.n_items} items; "
                "choose at most that many")
        if not isinstance(myopic, (bool, np.bool_)):
            raise ConfigurationError(f"myopic must be true or false, got {myopic!r}")
        self.batch_strategy = str(batch_strategy)
        self.batch_size = int(batch_size)
        self.myopic = bool(myopic)

    def _batch_posterior(self):
        """The host's bucket posterior; every host class (BayesAME, BayesAMEPaper) overrides this."""
        raise TypeError(f"{type(self).__name__} mixes in BatchSelection without defining _batch_posterior(), "
                        "which must return its BucketPosterior")

    def _batch_select(
        self,
        rng: np.random.Generator,
        k: int,
        exclude: Sequence[int],
        greedy: Callable[[np.random.Generator, int, Sequence[int]], list[int]],
    ) -> list[int]:
        """k items of the model-based selection: ``greedy`` or the strategy; non-myopic when k = 1 (see module)."""
        nonmyopic = k == 1 and not self.myopic and self.batch_size > 1
        size = k
        if nonmyopic:
            free = int((~self._observed).sum()) - sum(1 for i in exclude if not self._observed[i])
            size = min(self.batch_size, free)
        if self.batch_strategy == "greedy" or size == 1:
            chosen = greedy(rng, size, exclude)
        else:
            chosen = self._strategy_items(rng, size, exclude)
        if nonmyopic and len(chosen) > 1:
            return [chosen[int(rng.integers(len(chosen)))]]
        return chosen

    def _strategy_items(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> list[int]:
        """k distinct items by ``batch_strategy``, conditioned on the pending items ``exclude``."""
        buckets = self.buckets
        observed = self._observed
        available = ~observed
        available[list(exclude)] = False
        fantasy = self._batch_posterior().fantasy()
        for item in exclude:
            if not observed[item]:
                fantasy.condition(int(buckets.of_item[item]))
        per_bucket = np.bincount(buckets.of_item[available], minlength=buckets.n_buckets).astype(float)
        cov = fantasy.batch_covariance(per_bucket)
        if cov.scaled_var <= 0.0:  # nothing left to learn: random, as the greedy path does
            return [int(i) for i in rng.choice(np.flatnonzero(available), size=k, replace=False)]
        chosen_buckets = select_batch(cov, k, self.batch_strategy, rng, features=buckets.phi)
        chosen: list[int] = []
        for b in chosen_buckets:
            members = buckets.members[b]
            free = members[available[members]]
            item = int(free[rng.integers(free.size)]) if free.size > 1 else int(free[0])
            chosen.append(item)
            available[item] = False
        return chosen
