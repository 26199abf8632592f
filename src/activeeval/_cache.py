"""Small caches of what is derived from a reference matrix alone, each owned by one object.

A backtest builds a method for every (target, seed) on the same reference
sample, and a session rebuilds its method on every open: what a method derives
from the reference alone (BayesAME's kernel fit and calibration, the IRT
baseline's item parameters) is worth computing once per process. Each such
memo is a :class:`ReferenceCache` with a name and a size bound, instead of a
bare module dict; :func:`clear_caches` empties them all (for memory, or for a
test that must see the cold path).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["ReferenceCache", "clear_caches"]

V = TypeVar("V")
_ALL: weakref.WeakSet[ReferenceCache] = weakref.WeakSet()


class ReferenceCache(Generic[V]):
    """At most ``maxsize`` values by key (a reference fingerprint and settings); the oldest entry goes first."""

    def __init__(self, name: str, maxsize: int) -> None:
        if int(maxsize) != maxsize or maxsize < 1:
            raise ValueError(f"maxsize must be a positive integer, got {maxsize!r}")
        self.name = name
        self.maxsize = int(maxsize)
        self._data: dict[Hashable, V] = {}
        _ALL.add(self)

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value stored under ``key``, computing and storing it the first time."""
        if key in self._data:
            return self._data[key]
        value = compute()
        if len(self._data) >= self.maxsize:
            self._data.pop(next(iter(self._data)))
        self._data[key] = value
        return value

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        self._data.clear()

    def __repr__(self) -> str:
        return f"ReferenceCache({self.name!r}, {len(self)}/{self.maxsize})"


def clear_caches() -> None:
    """Empty every :class:`ReferenceCache` of the process."""
    for cache in list(_ALL):
        cache.clear()
