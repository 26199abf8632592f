"""The result every method reports: a mean, a variance and an interval."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from activeeval.exceptions import ConfigurationError

__all__ = ["Estimate"]


@dataclass(frozen=True)
class Estimate:
    """Estimate of the full-benchmark score R = (1/N) Σ_i s_i.

    Attributes
    ----------
    mean : float
        R̂, the point estimate.
    var : float
        Posterior (or sampling) variance of R given the observations.
    n_observed : int
        Items observed so far.
    n_items : int
        Items in the benchmark (N).
    bounds : (float, float) or None
        Range R can take (the score range); intervals are clipped to it.
    notes : tuple of str
        When to doubt the interval: what the method found about how much it
        rests on (e.g. the target lies outside the references' range, or the
        references predict it poorly). Empty when nothing was found.
    shift : float
        Where the interval's centre lies from ``mean`` per unit of z (in the
        units of ``std``): the interval is mean + z·shift ± z·sd, its lower side
        z·(sd − shift) and its upper side z·(sd + shift) long (0: symmetric,
        the default). A method whose interval has two sides of different
        lengths (Wilson's near 0 or 1) reports ``var`` as the variance of the
        symmetric interval of the same width, so that ``width`` and ``std``
        keep their meaning.
    """

    mean: float
    var: float
    n_observed: int
    n_items: int
    bounds: tuple[float, float] | None = None
    notes: tuple[str, ...] = ()
    shift: float = 0.0

    @property
    def std(self) -> float:
        return math.sqrt(max(self.var, 0.0))

    @property
    def fraction_observed(self) -> float:
        return self.n_observed / self.n_items if self.n_items else float("nan")

    def width(self, level: float = 0.95) -> float:
        """Width 2·z·sd of the central ``level`` normal interval (before clipping)."""
        if not 0 < level < 1:
            raise ConfigurationError(f"level must be in (0, 1), got {level}")
        return 2.0 * NormalDist().inv_cdf(0.5 + level / 2.0) * self.std

    def ci(self, level: float = 0.95) -> tuple[float, float]:
        """The ``level`` interval mean + z·shift ± z·sd (mean ± z·sd when symmetric), clipped to ``bounds``."""
        half = self.width(level) / 2.0
        centre = self.mean + half * self.shift / self.std if self.shift and self.std > 0 else self.mean
        lo, hi = centre - half, centre + half
        if self.bounds is not None:
            lo, hi = max(lo, self.bounds[0]), min(hi, self.bounds[1])
        return (lo, hi)

    def to_dict(self, level: float = 0.95) -> dict[str, Any]:
        """Plain data: ``ci_low`` / ``ci_high`` the ``level`` interval as :meth:`ci` gives it, ``shift`` its centre's
        offset from ``estimate`` per unit of z (0 when symmetric), so ``estimate + z·(shift ± std)`` rebuilds it
        at any level before clipping."""
        lo, hi = self.ci(level)
        return {
            "estimate": self.mean,
            "var": self.var,
            "std": self.std,
            "ci_low": lo,
            "ci_high": hi,
            "shift": self.shift,
            "n_used": self.n_observed,
            "n_items": self.n_items,
            "notes": list(self.notes),
        }
