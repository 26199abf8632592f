"""Batch selection options of the BayesAME methods — kept importable; the selector is :mod:`activeeval.gp.acquisition`.

The BayesAME methods no longer mix this in: each holds a
:class:`~activeeval.gp.acquisition.BatchSelector` (``method.selector``, built
from its ``batch_strategy``, ``batch_size`` and ``myopic``) and calls it with
its posterior, its unobserved items and the pending ones. :class:`BatchSelection`
stays for code that subclassed it: a thin adapter onto that selector whose host
still provides ``buckets``, ``_observed``, ``n_items`` and ``_batch_posterior()``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from activeeval.gp.acquisition import BatchSelector, SelectorOption, strategy_items

__all__ = ["BatchSelection", "BatchSelector"]


class BatchSelection:
    """Former mixin of the BayesAME methods, now an adapter onto :class:`~activeeval.gp.acquisition.BatchSelector`.

    Kept for user subclasses; the package's methods hold a selector instead.
    The host provides ``buckets``, ``_observed``, ``n_items`` and
    ``_batch_posterior()`` (its :class:`~activeeval.gp.posterior.BucketPosterior`).
    """

    selector: BatchSelector
    # Provided by the host (declared for the type checker; no value here).
    n_items: int
    buckets: Any  # a Buckets
    _observed: np.ndarray

    batch_strategy = SelectorOption("strategy", "The selector's strategy (the ``batch_strategy`` option).")
    batch_size = SelectorOption("batch_size", "The selector's |A| of the non-myopic selection (``batch_size``).")
    myopic = SelectorOption("myopic", "Whether ``select()`` is Eq. 6's argmax (the ``myopic`` option).")

    def _init_batch(self, batch_strategy: str, batch_size: int, myopic: bool) -> None:
        self.selector = BatchSelector(batch_strategy, batch_size, myopic).check_items(self.n_items)

    def _batch_posterior(self):
        """The host's bucket posterior; a host class must override this."""
        raise TypeError(f"{type(self).__name__} mixes in BatchSelection without defining _batch_posterior(), "
                        "which must return its BucketPosterior")

    def _batch_select(
        self,
        rng: np.random.Generator,
        k: int,
        exclude: Sequence[int],
        greedy: Callable[[np.random.Generator, int, Sequence[int]], list[int]],
    ) -> list[int]:
        """k items of the model-based selection: ``greedy`` or the strategy (see :meth:`BatchSelector.choose`)."""
        return self.selector.choose(~self._observed, exclude, k, rng, greedy, self._strategy_items)

    def _strategy_items(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> list[int]:
        """k distinct items by ``batch_strategy``, conditioned on the pending items ``exclude``."""
        return strategy_items(self._batch_posterior(), self.buckets, ~self._observed, exclude, k,
                              self.selector.strategy, rng)
