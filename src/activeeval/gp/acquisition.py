"""Acquisition for the bucket posterior: Eq. 6's information gain and the batch selector (App. B.1).

BoTorch's shape: an acquisition is given a model (here a
:class:`~activeeval.gp.posterior.BucketPosterior`) and the points already
chosen but not yet scored (``X_pending``; here ``pending`` items), and returns
what to evaluate next. It holds no method state: a method passes its posterior,
its buckets, which items are still unobserved and which are pending.

* :func:`information_gain` — Eq. 6, the expected information gain about R of
  one item of each bucket (:func:`expected_gain` is its last step, shared with
  :meth:`BucketPosterior.information_gain <activeeval.gp.posterior.BucketPosterior.information_gain>`);
* :func:`greedy_items` — k items by Eq. 6 greedily: condition on each chosen
  (and pending) item through the posterior's fantasy, take the next argmax;
  :func:`pick_item` is one argmax (ties and the bucket's item at random);
* :func:`strategy_items` — k items by a batch strategy of :mod:`activeeval.batch`
  (``"pair"``, ``"lars"``, ``"dpp"``, ``"kmeans"``; the maths lives there);
* :class:`BatchSelector` — the selection options of the BayesAME methods
  (``batch_strategy``, ``batch_size``, ``myopic``) as one value, whose
  :meth:`~BatchSelector.select` picks k items (k = 1 and ``myopic=False``: one
  random member of the best batch of ``batch_size`` items, the paper's
  non-myopic mode).

Both BayesAME methods hold a :class:`BatchSelector` (``method.selector``) and
call it with their posterior while their selection is model-based.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from activeeval.batch import check_strategy, select_batch
from activeeval.exceptions import ConfigurationError
from activeeval.settings import Flag, Integer, Settings, setting

if TYPE_CHECKING:
    from activeeval.gaussian import Buckets
    from activeeval.gp.posterior import BucketPosterior

__all__ = [
    "BatchSelector",
    "SelectorOption",
    "expected_gain",
    "greedy_items",
    "information_gain",
    "pick_item",
    "strategy_items",
]

#: ``gain(state)`` → Eq. 6 per bucket (B,), for the posterior or its fantasy (both have ``remaining``,
#: ``cov_u``, ``diag``); the default is the state's own ``information_gain()``.
Gain = Callable[[Any], np.ndarray]


def expected_gain(c: np.ndarray, v: np.ndarray, scaled_var: float) -> np.ndarray:
    """Eq. 6 from its parts: IG_b = −½ log(1 − c_b² / (N² Var(R) v_b)), 0 everywhere if N² Var(R) ≤ 0.

    ``c`` (B,) is the covariance of one item of bucket b with the remaining total, ``v`` (B,) its predictive
    variance and ``scaled_var`` N² Var(R | s_C).
    """
    if scaled_var <= 0.0:
        return np.zeros_like(c)
    rho2 = np.clip(c * c / (scaled_var * v), 0.0, 1.0 - 1e-15)
    return -0.5 * np.log1p(-rho2)


def information_gain(
    cov_u: np.ndarray, post_diag: np.ndarray, counts: np.ndarray, sigma2: float, scaled_var: float
) -> np.ndarray:
    """Eq. 6: expected information gain about R of evaluating one item of each bucket.

    Parameters
    ----------
    cov_u : ndarray (B,)
        Σ|C u.
    post_diag : ndarray (B,)
        diag(Σ|C).
    counts : ndarray (B,)
        N_b.
    sigma2 : float
        σ².
    scaled_var : float
        N² Var(R | s_C).

    Returns
    -------
    ndarray (B,)
        IG_b = −½ log(1 − c_b² / (N² Var(R) v_b)) ≥ 0, with
        c_b = (Σ|C u)_b + σ² N_b and v_b = Σ|C_bb + σ² N_b.
    """
    noise = sigma2 * counts
    return expected_gain(cov_u + noise, np.maximum(post_diag, 0.0) + noise, scaled_var)


def pick_item(ig: np.ndarray, available: np.ndarray, buckets: Buckets, rng: np.random.Generator) -> int:
    """The argmax bucket of ``ig`` (ties at random) and a random ``available`` item of it; random if ig ≤ 0.

    ``available`` (N,) marks the candidate items (unobserved, not pending, not chosen yet).
    """
    best = float(ig.max())
    if not np.isfinite(best) or best <= 0.0:  # nothing left to learn (e.g. Var R = 0): a random item
        return int(rng.choice(np.flatnonzero(available)))
    ties = np.flatnonzero(ig >= best - 1e-12 * abs(best))
    b = int(ties[rng.integers(ties.size)]) if ties.size > 1 else int(ties[0])
    members = buckets.members[b]
    free = members[available[members]]
    return int(free[rng.integers(free.size)]) if free.size > 1 else int(free[0])


def _candidates(unobserved: np.ndarray, pending: Sequence[int]) -> np.ndarray:
    """The items a batch may take: unobserved and not pending (a new mask)."""
    available = np.array(unobserved, dtype=bool)
    available[list(pending)] = False
    return available


def _fantasy_of(posterior: BucketPosterior, buckets: Buckets, unobserved: np.ndarray, pending: Sequence[int]):
    """The posterior's fantasy conditioned on the pending items that are not observed yet."""
    fantasy = posterior.fantasy()
    for item in pending:
        if unobserved[item]:
            fantasy.condition(int(buckets.of_item[item]))
    return fantasy


def greedy_items(
    posterior: BucketPosterior,
    buckets: Buckets,
    unobserved: np.ndarray,
    pending: Sequence[int],
    k: int,
    rng: np.random.Generator,
    gain: Gain | None = None,
) -> list[int]:
    """k items greedily: condition on each pending and chosen item, take the next argmax of Eq. 6.

    Parameters
    ----------
    posterior : BucketPosterior
        The method's posterior (read, never changed: conditioning happens on its fantasy).
    buckets : Buckets
        The items' buckets (``of_item``, ``members``).
    unobserved : ndarray of bool, shape (N,)
        Items not scored yet (pending items included).
    pending : sequence of int
        Items asked for and not scored yet (BoTorch's ``X_pending``): conditioned on, never chosen.
    k : int
        How many items.
    rng : numpy Generator
        Ties, the item within a bucket, and the random fallback when nothing is left to learn.
    gain : callable, optional
        ``gain(state)`` → Eq. 6 per bucket; default the state's ``information_gain()``.
    """
    available = _candidates(unobserved, pending)
    state: Any  # the posterior itself (read only: one item, so never conditioned) or its fantasy
    if k == 1 and not len(pending):  # one item, nothing pending: the posterior as it is (read, not copied)
        state, avail_per_bucket = posterior, posterior.remaining
    else:
        state = _fantasy_of(posterior, buckets, unobserved, pending)
        avail_per_bucket = np.bincount(buckets.of_item[available], minlength=buckets.n_buckets).astype(float)
    chosen: list[int] = []
    for _ in range(k):
        ig = state.information_gain() if gain is None else gain(state)
        ig[avail_per_bucket <= 0] = -np.inf
        item = pick_item(ig, available, buckets, rng)
        chosen.append(item)
        available[item] = False
        if len(chosen) < k:
            b_item = int(buckets.of_item[item])
            avail_per_bucket[b_item] -= 1.0
            state.condition(b_item)
    return chosen


def strategy_items(
    posterior: BucketPosterior,
    buckets: Buckets,
    unobserved: np.ndarray,
    pending: Sequence[int],
    k: int,
    strategy: str,
    rng: np.random.Generator,
) -> list[int]:
    """k distinct items by the batch ``strategy`` (:func:`activeeval.batch.select_batch`), given the pending items.

    The pending items are conditioned on first; the strategy picks buckets (one
    entry per item) and each becomes a random available item of its bucket.
    Where nothing is left to learn (N² Var R = 0) the items are random, as the
    greedy path's are.
    """
    available = _candidates(unobserved, pending)
    fantasy = _fantasy_of(posterior, buckets, unobserved, pending)
    per_bucket = np.bincount(buckets.of_item[available], minlength=buckets.n_buckets).astype(float)
    cov = fantasy.batch_covariance(per_bucket)
    if cov.scaled_var <= 0.0:
        return [int(i) for i in rng.choice(np.flatnonzero(available), size=k, replace=False)]
    chosen_buckets = select_batch(cov, k, strategy, rng, features=buckets.phi)
    chosen: list[int] = []
    for b in chosen_buckets:
        members = buckets.members[b]
        free = members[available[members]]
        item = int(free[rng.integers(free.size)]) if free.size > 1 else int(free[0])
        chosen.append(item)
        available[item] = False
    return chosen


class SelectorOption:
    """A method's read-only view of one option of the selector it holds (``self.selector``)::

        batch_strategy = SelectorOption("strategy", "The selector's strategy (the ``batch_strategy`` option).")

    Setting it raises, as for a property: a method's selector is fixed when it is built.
    """

    def __init__(self, field: str, doc: str = "") -> None:
        self.field, self.__doc__ = field, doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self if obj is None else getattr(obj.selector, self.field)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{self.name} is the selector's: build the method with {self.name}= instead")


def _strategy(name: str, value: Any) -> str:
    check_strategy(value)
    return str(value)


@dataclass(frozen=True)
class BatchSettings(Settings):
    """How a Gaussian-process method picks its items from the posterior: a method's ``batch`` group
    (:class:`BatchSelector` is made from it)."""

    about: ClassVar[str] = "batch selection"

    batch_strategy: str = setting("greedy", _strategy, "how k > 1 items are picked (greedy, pair, lars, dpp, kmeans)")
    batch_size: int = setting(1, Integer(1, phrase="a positive integer (the |A| of the non-myopic selection)"),
                              "|A| of the non-myopic selection")
    myopic: bool = setting(True, Flag(), "one item is Eq. 6's argmax (false: a random member of a batch of |A|)")


@dataclass(frozen=True)
class BatchSelector:
    """How a BayesAME method picks its items from the posterior while selection is model-based (App. B.1).

    Parameters
    ----------
    strategy : {"greedy", "pair", "lars", "dpp", "kmeans"}
        How k > 1 items are picked: ``"greedy"`` (condition on each chosen
        item, take the next argmax of Eq. 6) or a strategy of
        :func:`activeeval.batch.select_batch`. A method's ``batch_strategy``.
    batch_size : int
        |A| of the non-myopic selection: with ``myopic=False``, one item
        (k = 1) is a uniformly random member of the batch of ``batch_size``
        items the strategy picks.
    myopic : bool
        True: one item is Eq. 6's argmax.

    A method holds one (``method.selector``) and calls :meth:`select` with its
    posterior; nothing here reads a method. :meth:`check_items` checks
    ``batch_size`` against a benchmark's size.
    """

    strategy: str = "greedy"
    batch_size: int = 1
    myopic: bool = True

    def __post_init__(self) -> None:
        checked = BatchSettings(self.strategy, self.batch_size, self.myopic)  # the constraints are declared there
        object.__setattr__(self, "strategy", checked.batch_strategy)
        object.__setattr__(self, "batch_size", checked.batch_size)
        object.__setattr__(self, "myopic", checked.myopic)

    @classmethod
    def of(cls, settings: BatchSettings) -> BatchSelector:
        """The selector of a method's ``batch`` settings."""
        return cls(settings.batch_strategy, settings.batch_size, settings.myopic)

    def check_items(self, n_items: int) -> BatchSelector:
        """This selector, if ``batch_size`` is at most ``n_items`` (the benchmark's items); else ConfigurationError."""
        if self.batch_size > n_items:
            raise ConfigurationError(
                f"batch_size {self.batch_size} is larger than the benchmark's {n_items} items; "
                "choose at most that many")
        return self

    def select(
        self,
        posterior: BucketPosterior,
        buckets: Buckets,
        unobserved: np.ndarray,
        pending: Sequence[int],
        k: int,
        rng: np.random.Generator,
        gain: Gain | None = None,
    ) -> list[int]:
        """k items to evaluate next, given the posterior and the pending items.

        Parameters are those of :func:`greedy_items` (``gain`` is used by the
        greedy path). k > 1 (or ``myopic=False``) asks the strategy; k = 1 with
        ``myopic=False`` and ``batch_size`` > 1 returns one uniformly random
        member of the strategy's batch of ``batch_size`` items (fewer if fewer
        are free).
        """
        def greedy(rng: np.random.Generator, size: int, pending: Sequence[int]) -> list[int]:
            return greedy_items(posterior, buckets, unobserved, pending, size, rng, gain)

        def batch(rng: np.random.Generator, size: int, pending: Sequence[int]) -> list[int]:
            return strategy_items(posterior, buckets, unobserved, pending, size, self.strategy, rng)

        return self.choose(unobserved, pending, k, rng, greedy, batch)

    def choose(
        self,
        unobserved: np.ndarray,
        pending: Sequence[int],
        k: int,
        rng: np.random.Generator,
        greedy: Callable[[np.random.Generator, int, Sequence[int]], list[int]],
        batch: Callable[[np.random.Generator, int, Sequence[int]], list[int]],
    ) -> list[int]:
        """The selector's rule with the two pickers given: ``greedy(rng, size, pending)`` and ``batch(...)``.

        How many items to ask for (``batch_size`` when non-myopic), which picker
        (``greedy`` for the greedy strategy and for one item), and the random
        member of a non-myopic batch. :meth:`select` passes the pickers of
        this module.
        """
        nonmyopic = k == 1 and not self.myopic and self.batch_size > 1
        size = k
        if nonmyopic:
            free = int(unobserved.sum()) - sum(1 for i in pending if unobserved[i])
            size = min(self.batch_size, free)
        if self.strategy == "greedy" or size == 1:
            chosen = greedy(rng, size, pending)
        else:
            chosen = batch(rng, size, pending)
        if nonmyopic and len(chosen) > 1:
            return [chosen[int(rng.integers(len(chosen)))]]
        return chosen
