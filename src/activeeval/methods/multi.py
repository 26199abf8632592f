"""Several target models evaluated together: the multi-target protocol and its bookkeeping.

A multi-target method estimates the full-benchmark score of each of T
target models from the scores observed so far on all of them. It chooses a
(target, item) pair at a time and, like a single-target method, its state is
a deterministic function of its settings and its observation history, so a
session rebuilds it by replaying its journal.

The protocol (what the backtest, the multi-target session and the ranker rely on):

* ``select(rng=None, *, active=None) -> (target index, item index)``, pure
  when ``rng`` is None (seeded by ``(seed_, total observations)``);
  ``active`` names the targets still being evaluated (the driver's stopping
  rule decides; default: every target with items left).
* ``select_batch(k, rng=None, exclude=(), active=None)`` for ``k`` distinct
  pairs, none of them in ``exclude`` (pairs handed out and not yet scored).
* ``observe(target, item, score)`` — the only state change, validated first.
* ``estimate(target)``, ``estimates()`` and ``covariance()`` (the T×T joint
  posterior covariance of the full-benchmark scores, for the ranker).
* ``view(target)``: one target's ``n_observed``, ``n_items`` and
  ``trajectory`` (its estimate after each of its own observations), which
  :func:`activeeval.stopping.stop_reason` reads — so the driver holds one
  stopping rule and applies it to each target.

The targets are visited in turn (round robin, resuming after the target of
the last observation); the item for a target is the target's own choice.
``warm_start`` > 0 first evaluates every target on the same random fraction
of the items (item by item), the start of the paper's multi-target
BayesAME (§3.2).

:class:`Independent` runs any single-target method once per target: the
baseline that ignores what the targets share, with the same protocol.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from activeeval._threads import numeric, numeric_methods
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DuplicateObservationError, SessionStateError
from activeeval.methods.base import BaseMethod, SeedLike, _seed_int, prepare_reference
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate

__all__ = ["Independent", "MultiTargetMethod", "TargetView", "target_names"]

Pair = tuple[int, int]


def target_names(targets: int | Sequence[str]) -> tuple[str, ...]:
    """Target names from a count (``target-1``, …) or a sequence of distinct, non-empty names."""
    if isinstance(targets, (int, np.integer)) and not isinstance(targets, bool):
        if targets < 1:
            raise ConfigurationError(f"need at least one target, got {targets}")
        return tuple(f"target-{i + 1}" for i in range(int(targets)))
    if isinstance(targets, str):
        raise ConfigurationError(f"targets must be a list of names or a count, got the string {targets!r}")
    if isinstance(targets, bool):  # not a count (True is not 1 target): before, iterating it raised a TypeError
        raise ConfigurationError(f"targets must be a list of names or a count, got {targets!r}")
    names = tuple(str(t) for t in targets)
    if not names:
        raise ConfigurationError("need at least one target; name the target models")
    if any(not n.strip() for n in names):
        raise ConfigurationError("target names must be non-empty")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ConfigurationError(f"target names must be distinct; repeated: {dup}")
    return names


class TargetView:
    """One target of a multi-target method, as a stopping rule sees it (``n_observed``, ``n_items``, ``trajectory``)."""

    def __init__(self, method: MultiTargetMethod, target: int) -> None:
        self._method = method
        self.target = target
        self.name = method.targets[target]
        self.n_items = method.n_items

    @property
    def n_observed(self) -> int:
        return self._method.n_observed_of(self.target)

    @property
    def trajectory(self) -> tuple[Estimate, ...]:
        return self._method.trajectory(self.target)

    @property
    def exhausted(self) -> bool:
        return self.n_observed >= self.n_items

    def estimate(self) -> Estimate:
        return self._method.estimate(self.target)


class MultiTargetMethod(ABC):
    """Observation bookkeeping, validation, the round robin and the warm start of a multi-target method.

    Subclasses implement ``_update(target, item, score)``,
    ``_current_estimate(target)`` and, if they choose items,
    ``_select_item(target, rng, exclude)`` (default: uniform random over the
    target's unobserved items); ``covariance()`` defaults to the diagonal of
    the estimates' variances.

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' scores (models × items); every target is scored on these items.
    targets : int or sequence of str
        The target models' names (or how many; they are then ``target-1``, …).
    seed : int, Generator or None
        Base seed of the default randomness (``seed_`` is the one in use).
    missing : {"models", "items", "auto"}
        Policy for missing reference scores.
    warm_start : float
        Fraction of the items (rounded, at least 1 if > 0) on which every
        target is evaluated first, drawn at random once from ``seed_``.
    """

    name = "multi"
    #: one method on every target (activeeval.methods.capabilities); the ranker ranks on its joint posterior
    capabilities = Capabilities(multi_target=True, ranks=True)

    def __init_subclass__(cls, **kwargs: object) -> None:
        # As BaseMethod's: building and the steps run under activeeval's BLAS thread limit (activeeval._threads).
        super().__init_subclass__(**kwargs)
        numeric_methods(cls, ("__init__", "select", "select_batch", "observe", "estimate", "covariance"))

    @numeric
    def __init__(
        self,
        reference: ScoreMatrix,
        targets: int | Sequence[str],
        *,
        seed: SeedLike = None,
        missing: str = "models",
        warm_start: float = 0.0,
    ) -> None:
        self.reference, self.dropped = prepare_reference(reference, missing=missing)
        self.targets = target_names(targets)
        self.n_targets = len(self.targets)
        self._index = {name: i for i, name in enumerate(self.targets)}
        self.n_items = self.reference.n_items
        self.item_ids = self.reference.item_ids
        self.seed = seed
        seed_ = _seed_int(seed)
        if seed_ is None:
            gen = seed if isinstance(seed, np.random.Generator) else np.random.default_rng()
            seed_ = int(gen.integers(0, 2**63 - 1))
        self.seed_: int = seed_
        if not (isinstance(warm_start, (int, float)) and 0.0 <= float(warm_start) <= 1.0):
            raise ConfigurationError(f"warm_start must be a fraction of the items in [0, 1], got {warm_start!r}")
        self.warm_start = float(warm_start)
        n_warm = 0 if self.warm_start == 0 else max(1, int(round(self.warm_start * self.n_items)))
        rng = np.random.default_rng(np.random.SeedSequence([int(self.seed_), 0x3A7]))
        self.warm_items_ = np.sort(rng.choice(self.n_items, size=n_warm, replace=False)) if n_warm else np.zeros(
            0, dtype=np.intp)
        t, n = self.n_targets, self.n_items
        self._observed = np.zeros((t, n), dtype=bool)
        self._items: list[list[int]] = [[] for _ in range(t)]
        self._scores: list[list[float]] = [[] for _ in range(t)]
        self._trajectory: list[list[Estimate]] = [[] for _ in range(t)]
        self._history: list[tuple[int, int, float]] = []
        self._cache: dict[int, Estimate] = {}
        self._cache_at = -1

    # ---------------------------------------------------------------- public
    def target_index(self, target: int | str) -> int:
        """Index of ``target`` (its name or its index)."""
        if isinstance(target, (int, np.integer)) and not isinstance(target, bool):
            if 0 <= int(target) < self.n_targets:
                return int(target)
            raise ConfigurationError(f"target index {target} is out of range (0..{self.n_targets - 1})")
        name = str(target)
        if name not in self._index:
            raise ConfigurationError(
                f"unknown target {name!r}; the targets are {', '.join(self.targets)}")
        return self._index[name]

    @property
    def n_observed(self) -> int:
        """Observations over all targets."""
        return len(self._history)

    def n_observed_of(self, target: int | str) -> int:
        return len(self._items[self.target_index(target)])

    def observed_items(self, target: int | str) -> tuple[int, ...]:
        return tuple(self._items[self.target_index(target)])

    def observed_scores(self, target: int | str) -> tuple[float, ...]:
        return tuple(self._scores[self.target_index(target)])

    @property
    def history(self) -> tuple[tuple[int, int, float], ...]:
        """Every observation in order: (target index, item index, score)."""
        return tuple(self._history)

    def trajectory(self, target: int | str) -> tuple[Estimate, ...]:
        """The target's estimate right after each of its own observations, oldest first."""
        return tuple(self._trajectory[self.target_index(target)])

    def view(self, target: int | str) -> TargetView:
        return TargetView(self, self.target_index(target))

    def exhausted(self, target: int | str) -> bool:
        return self.n_observed_of(target) >= self.n_items

    @property
    def all_exhausted(self) -> bool:
        return bool(self._observed.all())

    def item_id(self, item: int) -> str:
        return self.item_ids[item]

    def default_rng(self) -> np.random.Generator:
        return np.random.default_rng([int(self.seed_), self.n_observed])

    def select(self, rng: np.random.Generator | None = None, *, active: Iterable[int | str] | None = None) -> Pair:
        """The next (target, item) pair to evaluate (pure when ``rng`` is None)."""
        return self.select_batch(1, rng=rng, active=active)[0]

    @numeric
    def select_batch(
        self,
        k: int,
        rng: np.random.Generator | None = None,
        exclude: Iterable[tuple[int | str, int | str]] = (),
        active: Iterable[int | str] | None = None,
    ) -> list[Pair]:
        """``k`` distinct unobserved (target, item) pairs of active targets, none of them in ``exclude``.

        The warm-start pairs come first (item by item, every active target);
        then the active targets in turn, from the one after the target of the
        last observation, each with its own choice of item given the pairs
        already chosen or pending.
        """
        if int(k) != k or k < 1:
            raise ConfigurationError(f"k must be a positive integer, got {k}")
        act = self._active(active)
        taken = np.zeros_like(self._observed)
        for t, i in exclude:
            taken[self.target_index(t), self.reference.item_index(i)] = True
        free = ~self._observed & ~taken
        free[[t for t in range(self.n_targets) if t not in act]] = False
        if not free.any():
            raise SessionStateError(
                "every item of the active targets is already observed or pending; nothing left to select")
        given = rng is not None
        if rng is None:
            rng = self.default_rng()
        out: list[Pair] = []
        for i in self.warm_items_:
            for t in act:
                if len(out) < k and free[t, i]:
                    out.append((t, int(i)))
                    free[t, i] = False
                    taken[t, i] = True
        if len(out) < k:
            out.extend(self._next_pairs(k - len(out), rng, given, free, taken, act))
        return out

    def _next_pairs(self, k: int, rng: np.random.Generator, given: bool, free: np.ndarray, taken: np.ndarray,
                    act: Sequence[int]) -> list[Pair]:
        """After the warm start: up to ``k`` pairs, the active targets in turn, each choosing its item.

        ``free`` (T, N) marks the pairs that may still be chosen and ``taken``
        those observed, pending or chosen; both are updated in place.
        """
        out: list[Pair] = []
        order = self._turns(act)
        pos = 0
        while len(out) < k and free.any():
            t = order[pos % len(order)]
            pos += 1
            if not free[t].any():
                continue
            item = int(self._select_item(t, rng, np.flatnonzero(taken[t] & ~self._observed[t]), given))
            out.append((t, item))
            free[t, item] = False
            taken[t, item] = True
        return out

    def check_observation(self, target: int | str, item: int | str, score: float) -> tuple[int, int, float]:
        """Validate an observation without recording it: (target index, item index, score)."""
        t = self.target_index(target)
        idx = self.reference.item_index(item)
        value = self.reference.check_score(score, item=self.item_ids[idx])
        if self._observed[t, idx]:
            prev = self._scores[t][self._items[t].index(idx)]
            raise DuplicateObservationError(
                f"item {self.item_ids[idx]!r} was already observed for target {self.targets[t]!r} "
                f"(score {prev:g}); each item is observed once per target")
        return t, idx, value

    @numeric
    def observe(self, target: int | str, item: int | str, score: float) -> None:
        """Record ``score`` of ``target`` on ``item``: the only state change."""
        t, idx, value = self.check_observation(target, item, score)
        self._update(t, idx, value)
        self._observed[t, idx] = True
        self._items[t].append(idx)
        self._scores[t].append(value)
        self._history.append((t, idx, value))
        self._after_observe(t)
        self._trajectory[t].append(self.estimate(t))

    @numeric
    def estimate(self, target: int | str) -> Estimate:
        """The target's current estimate, given every target's observations so far."""
        t = self.target_index(target)
        if self._cache_at != self.n_observed:
            self._cache, self._cache_at = {}, self.n_observed
        if t not in self._cache:
            self._cache[t] = self._current_estimate(t)
        return self._cache[t]

    def estimates(self) -> list[Estimate]:
        return [self.estimate(t) for t in range(self.n_targets)]

    @numeric
    def covariance(self) -> np.ndarray:
        """T×T posterior covariance of the targets' full-benchmark scores (here: independent, diagonal)."""
        return np.diag([e.var for e in self.estimates()])

    def frozen_options(self) -> dict:
        """Options that rebuild what was derived from the reference alone (see BaseMethod.frozen_options)."""
        return {}

    # ------------------------------------------------------- for subclasses
    def _active(self, active: Iterable[int | str] | None) -> list[int]:
        if active is None:
            return [t for t in range(self.n_targets) if not self._observed[t].all()]
        out = sorted({self.target_index(t) for t in active})
        if not out:
            raise SessionStateError("no active target: every target has stopped")
        return out

    def _turns(self, act: Sequence[int]) -> list[int]:
        """The active targets in turn, from the one after the target of the last observation."""
        last = self._history[-1][0] if self._history else -1
        after = [t for t in act if t > last]
        return after + [t for t in act if t <= last]

    def _select_item(self, target: int, rng: np.random.Generator, exclude: np.ndarray, given: bool) -> int:
        """The item for ``target``, none of ``exclude``; ``given``: ``rng`` is the caller's, not the default."""
        mask = ~self._observed[target]
        mask[exclude] = False
        return int(rng.choice(np.flatnonzero(mask)))

    @abstractmethod
    def _update(self, target: int, item: int, score: float) -> None:
        """Fold one validated observation into the state."""

    def _after_observe(self, target: int) -> None:
        """Hook after an observation is recorded (e.g. hyperparameter refits)."""

    @abstractmethod
    def _current_estimate(self, target: int) -> Estimate:
        """The target's estimate given everything observed."""


class Independent(MultiTargetMethod):
    """Any single-target method, run once per target: the baseline that shares nothing between targets.

    Parameters
    ----------
    reference, targets, seed, missing, warm_start
        As :class:`MultiTargetMethod` (``warm_start`` defaults to 0: no shared start).
    method : str
        Registry name of the single-target method (default "bayesame").
    **options
        Its constructor options. Each target's method gets its own seed,
        drawn from ``seed_``; what it derives from the reference alone (a
        kernel fit, a calibration) is derived once and shared.
    """

    name = "independent"
    capabilities = Capabilities(multi_target=True, ranks=True)

    def __init__(
        self,
        reference: ScoreMatrix,
        targets: int | Sequence[str],
        *,
        method: str = "bayesame",
        seed: SeedLike = None,
        missing: str = "models",
        warm_start: float = 0.0,
        **options: Any,
    ) -> None:
        super().__init__(reference, targets, seed=seed, missing=missing, warm_start=warm_start)
        from activeeval.methods.registry import sharing_factory

        if "seed" in options:
            raise ConfigurationError("pass seed= to the multi-target method, not as an option of its method")
        self.method = str(method)
        self.options = dict(options)
        make = sharing_factory(self.method, self.reference, missing=missing, **options)
        seeds = np.random.SeedSequence([int(self.seed_), 0x1D]).generate_state(self.n_targets, dtype=np.uint64)
        self.methods_: list[BaseMethod] = [make(seed=int(s) >> 1) for s in seeds]

    def _select_item(self, target: int, rng: np.random.Generator, exclude: np.ndarray, given: bool) -> int:
        # the target's own method chooses; without the caller's rng, with its own pure default randomness
        m = self.methods_[target]
        return int(m.select_batch(1, rng=rng if given else None, exclude=[int(i) for i in exclude])[0])

    def _update(self, target: int, item: int, score: float) -> None:
        self.methods_[target].observe(item, score)

    def _current_estimate(self, target: int) -> Estimate:
        return self.methods_[target].estimate()

    def frozen_options(self) -> dict:
        return self.methods_[0].frozen_options() if self.methods_ else {}


def pairwise_probability(means: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """P(R_i > R_j) for every pair from a joint Gaussian posterior: Φ((m_i − m_j) / √(C_ii + C_jj − 2 C_ij))."""
    from scipy.special import ndtr

    m = np.asarray(means, dtype=float)
    c = np.asarray(cov, dtype=float)
    d = np.diag(c)
    var = np.maximum(d[:, None] + d[None, :] - 2.0 * c, 0.0)
    diff = m[:, None] - m[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, diff / np.sqrt(np.where(var > 0, var, 1.0)), np.sign(diff) * math.inf)
    p = np.where(np.isnan(z), 0.5, ndtr(z))  # equal means known exactly: even
    np.fill_diagonal(p, 0.5)
    return p
