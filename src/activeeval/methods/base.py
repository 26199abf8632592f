"""The Method protocol and the bookkeeping every single-target method shares.

A method estimates the full-benchmark score of one target model from the
scores it has observed so far. Its state is a deterministic function of its
configuration and its observation history, so a session can rebuild it by
replaying a journal.

Differences from DESIGN.md, and why:

* ``select`` takes an optional ``rng``. Without one it draws from a generator
  seeded by ``(seed, n_observed)``, so ``select()`` is pure: asking twice gives
  the same item, and a rebuilt method asks exactly what the original would.
* ``observe`` accepts an item index or an item id, and validates both the
  item and the score before anything changes, so a bad call loses nothing.
* ``select_batch(k, exclude=...)`` returns several distinct items; for the
  Gaussian methods the batch is chosen greedily by conditioning the covariance
  on the items already chosen (the covariance does not depend on scores).
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from activeeval._cache import ReferenceCache
from activeeval._threads import numeric, numeric_methods
from activeeval.data.matrix import DropReport, ScoreMatrix
from activeeval.exceptions import (
    ConfigurationError,
    DuplicateObservationError,
    InvalidScoresError,
    MissingScoresWarning,
    SessionStateError,
)
from activeeval.methods.estimate import Estimate

__all__ = ["BaseMethod", "Estimate", "Method", "SeedLike", "prepare_reference", "random_order"]

SeedLike = int | np.random.Generator | None


@runtime_checkable
class Method(Protocol):
    """What the session, the ranker and the backtest engine rely on."""

    n_items: int

    def select(self, rng: np.random.Generator | None = None) -> int:
        """Index of the next item to evaluate. Does not change state."""
        ...

    def observe(self, item: int | str, score: float) -> None:
        """Record the target's score on ``item``: the only state change."""
        ...

    def estimate(self) -> Estimate: ...


def prepare_reference(reference: ScoreMatrix, *, missing: str = "models") -> tuple[ScoreMatrix, DropReport]:
    """Check a reference matrix and apply the missing-score policy.

    Missing entries are dropped with :meth:`ScoreMatrix.dropna` (``missing``
    gives the axis) and a :class:`MissingScoresWarning` says what went; pass
    a complete matrix to avoid it. At least 2 models and 2 items must remain.
    """
    if not isinstance(reference, ScoreMatrix):
        raise ConfigurationError(
            f"reference must be a ScoreMatrix, got {type(reference).__name__}; "
            "load one with activeeval.datasets.load(name) or activeeval.read_scores(path)"
        )
    reference, report = reference.dropna(missing)  # type: ignore[arg-type]
    if report.changed:
        warnings.warn(report.summary(), MissingScoresWarning, stacklevel=3)
    if reference.n_models < 2:
        raise InvalidScoresError(
            f"need at least 2 reference models, got {reference.n_models}; add reference models"
        )
    if reference.n_items < 2:
        raise InvalidScoresError(f"need at least 2 items, got {reference.n_items}")
    return reference, report


def _seed_int(seed: SeedLike) -> int | None:
    if seed is None or isinstance(seed, np.random.Generator):
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0:
        return int(seed)
    raise ConfigurationError(f"seed must be a non-negative int, a numpy Generator or None, got {seed!r}")


def random_order(seed: int, n_items: int) -> np.ndarray:
    """The order in which a randomly selecting method picks all ``n_items`` items.

    Exactly what :meth:`BaseMethod.select` does for the random-selection
    methods (RS-Mean, BayesAME-RS, Bayes-AIPW, Bayes-RS-Learn, ProEval, IRT)
    when called one item at a time with no ``rng`` and nothing excluded: step
    n draws uniformly from the unobserved items with ``default_rng([seed,
    n])``. The fast backtest replays use it so that they play the same items
    as the sequential methods.
    """
    return _random_order(int(seed), int(n_items)).copy()


_ORDERS: ReferenceCache[np.ndarray] = ReferenceCache("random item orders", 16)


def _random_order(seed: int, n_items: int) -> np.ndarray:
    # cached: in a backtest every random-selection method of a seed asks for the same order
    return _ORDERS.get_or_compute((seed, n_items), lambda: _draw_order(seed, n_items))


def _draw_order(seed: int, n_items: int) -> np.ndarray:
    order = np.empty(n_items, dtype=np.intp)
    remaining = list(range(n_items))
    for n in range(n_items):
        j = int(np.random.default_rng([seed, n]).choice(len(remaining), size=1, replace=False)[0])
        order[n] = remaining.pop(j)
    order.flags.writeable = False
    return order


class BaseMethod(ABC):
    """Observation bookkeeping, validation and the trajectory.

    Subclasses implement ``_update(item, score)`` and ``_current_estimate()``,
    and optionally ``_select(rng, k, exclude)`` (default: uniform random).
    A method does not decide when to stop: its driver does — the session,
    the backtest and :func:`~activeeval.experiments.simulate.run_until_stop`
    hold a :class:`~activeeval.stopping.StoppingRule` and ask
    :func:`~activeeval.stopping.stop_reason`; the ranker stops on its
    pairwise confidence and budget (:mod:`activeeval.ranking`).

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' scores (models x items); the target is scored on
        the same items.
    seed : int, Generator or None
        Seeds the default randomness of ``select``; kept as given. The base
        seed in use is ``seed_`` (the int, or one drawn once from the
        Generator or at random), following scikit-learn's convention that
        resolved values carry a trailing underscore.
    missing : {"models", "items", "auto"}
        Policy for missing reference scores (see :func:`prepare_reference`).
    """

    name = "base"

    def __init_subclass__(cls, **kwargs: object) -> None:
        # Building a method (its reference fit) and its steps run under activeeval's BLAS thread limit
        # (activeeval._threads), whoever calls them; the user's code between two calls keeps its own.
        super().__init_subclass__(**kwargs)
        numeric_methods(cls, ("__init__", "select", "select_batch", "observe"))

    @numeric
    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        seed: SeedLike = None,
        missing: str = "models",
    ) -> None:
        self.reference, self.dropped = prepare_reference(reference, missing=missing)
        self.n_items = self.reference.n_items
        self.item_ids = self.reference.item_ids
        self.seed = seed  # as given (a setting); the resolved base seed is seed_
        seed_ = _seed_int(seed)
        if seed_ is None:
            # An unseeded (or Generator-seeded) method still needs a fixed base
            # seed so that select() is pure; draw it once.
            gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng()
            seed_ = int(gen.integers(0, 2**63 - 1))
        self.seed_: int = seed_
        self._observed = np.zeros(self.n_items, dtype=bool)
        self._items: list[int] = []
        self._scores: list[float] = []
        self._trajectory: list[Estimate] = []

    # ---------------------------------------------------------------- public
    @property
    def n_observed(self) -> int:
        return len(self._items)

    @property
    def observed_items(self) -> tuple[int, ...]:
        return tuple(self._items)

    @property
    def observed_scores(self) -> tuple[float, ...]:
        return tuple(self._scores)

    @property
    def trajectory(self) -> tuple[Estimate, ...]:
        """The estimate after each observation, oldest first."""
        return tuple(self._trajectory)

    def default_rng(self) -> np.random.Generator:
        """The generator ``select`` uses when none is passed: seeded by (seed_, n_observed)."""
        return np.random.default_rng([self.seed_, self.n_observed])

    def select(self, rng: np.random.Generator | None = None) -> int:
        """Index of the next item to evaluate (pure when ``rng`` is None)."""
        return self.select_batch(1, rng=rng)[0]

    @numeric
    def select_batch(
        self, k: int, rng: np.random.Generator | None = None, exclude: Iterable[int | str] = ()
    ) -> list[int]:
        """``k`` distinct unobserved items, none of them in ``exclude``.

        ``exclude`` is for items already handed out and not yet scored (a
        session's pending items); methods whose selection depends on what is
        known treat them as if they were being observed.
        """
        if int(k) != k or k < 1:
            raise ConfigurationError(f"k must be a positive integer, got {k}")
        excl = sorted({self.reference.item_index(i) for i in exclude})
        available = self.n_items - self.n_observed - sum(1 for i in excl if not self._observed[i])
        if available <= 0:
            raise SessionStateError(
                "every item is already observed or pending; nothing left to select "
                "(the estimate is exact once all pending items are recorded)"
            )
        k = min(int(k), available)
        return [int(i) for i in self._select(rng if rng is not None else self.default_rng(), int(k), excl)]

    def item_id(self, item: int) -> str:
        return self.item_ids[item]

    def check_observation(self, item: int | str, score: float) -> tuple[int, float]:
        """Validate an observation without recording it: (index, score)."""
        idx = self.reference.item_index(item)
        value = self.reference.check_score(score, item=self.item_ids[idx])
        if self._observed[idx]:
            prev = self._scores[self._items.index(idx)]
            raise DuplicateObservationError(
                f"item {self.item_ids[idx]!r} was already observed (score {prev:g}); "
                "each item is observed once per target"
            )
        return idx, value

    @numeric
    def observe(self, item: int | str, score: float) -> None:
        """Record the target's ``score`` on ``item`` (index or id)."""
        idx, value = self.check_observation(item, score)
        self._update(idx, value)
        self._observed[idx] = True
        self._items.append(idx)
        self._scores.append(value)
        self._after_observe()
        self._trajectory.append(self._current_estimate())

    def observe_many(self, items: Sequence[int | str], scores: Sequence[float]) -> None:
        if len(items) != len(scores):
            raise InvalidScoresError(f"{len(items)} items but {len(scores)} scores")
        for item, score in zip(items, scores, strict=True):
            self.observe(item, score)

    def estimate(self) -> Estimate:
        """Current estimate of the full-benchmark score."""
        return self._trajectory[-1] if self._trajectory else self._first_estimate()

    @numeric
    def _first_estimate(self) -> Estimate:
        """The estimate before any item, under the thread limit as ``observe``'s are (its sums over the buckets
        are BLAS dot products, whose last bits depend on the number of BLAS threads)."""
        return self._current_estimate()

    @property
    def exhausted(self) -> bool:
        """Every item is observed: the estimate is the exact full-benchmark score."""
        return self.n_observed >= self.n_items

    def unobserved(self) -> np.ndarray:
        return np.flatnonzero(~self._observed)

    def frozen_options(self) -> dict:
        """Constructor options that rebuild what this method derived from the reference alone, without
        deriving it again (JSON-serialisable). A session stores them at creation; empty by default."""
        return {}

    # ------------------------------------------------------- for subclasses
    def _bounds(self) -> tuple[float, float] | None:
        return self.reference.score_range

    def _random_unobserved(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> np.ndarray:
        mask = ~self._observed
        mask[list(exclude)] = False
        return rng.choice(np.flatnonzero(mask), size=k, replace=False)

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int] | np.ndarray:
        return self._random_unobserved(rng, k, exclude)

    @abstractmethod
    def _update(self, item: int, score: float) -> None:
        """Fold one validated observation into the method's state."""

    def _after_observe(self) -> None:
        """Hook run after the observation is recorded (e.g. hyperparameter refits)."""

    @abstractmethod
    def _current_estimate(self) -> Estimate:
        """The estimate given everything observed so far."""
