"""RS-Mean: random items, the sample mean, and the Eq. 9 variance with a rare-event floor.

:meth:`RSMean.replay` plays every target of a backtest at once.
"""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.design import INTERVALS, sampling_side_floors, sampling_var_floor, two_sided
from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import eq9_variance, fast_replay, running_mean_var, worst_case_var
from activeeval.methods.estimate import Estimate

__all__ = ["RSMean"]


class RSMean(BaseMethod):
    """Random sampling with the sample mean (the paper's RS-Mean baseline).

    Before any score is seen the estimate is the reference models' mean
    full-benchmark score. While fewer than 2 scores are known the sample
    variance is undefined; the largest variance a score in the benchmark's
    range can have, ((high − low) / 2)², stands in for it (conservative, and
    it never claims precision it does not have).

    The variance is Eq. 9, but never below :func:`~activeeval.design.sampling_var_floor`
    (Wilson's interval for 0/1 scores, its rare-event bound on the unseen part of the
    range for bounded continuous ones): with a run of equal scores (the first
    40 items of a benchmark a weak model almost never solves are all 0, say)
    Eq. 9 alone gives a zero-width interval. Not in the paper.

    ``interval`` is the interval's shape: "symmetric" (default) as wide as
    the floor's longer side on both sides; the other two keep the floor's two
    sides (:func:`~activeeval.design.sampling_side_floors`,
    :func:`~activeeval.design.two_sided`) and the estimate carries the
    interval's :attr:`~activeeval.methods.estimate.Estimate.shift`: "sides"
    floors each side on its own against Eq. 9's sd, "wilson" takes the
    floor's interval as a whole for 0/1 scores (Wilson's, at the effective
    sample size) wherever its longer side is longer than Eq. 9's, and is
    "sides" for continuous scores (whose floor on a side the scores have
    reached is 0).
    """

    name = "rs-mean"

    def __init__(self, reference: ScoreMatrix, *, interval: str = "symmetric", **kwargs: object) -> None:
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]
        self.interval = _check_interval(interval)

    def _update(self, item: int, score: float) -> None:
        pass  # the observed scores, kept by BaseMethod, are the whole state

    def _worst_case_var(self) -> float:
        return worst_case_var(self.reference)

    def _current_estimate(self) -> Estimate:
        scores = np.asarray(self._scores)
        n = scores.size
        if n == 0:
            prior = self.reference.mean_scores()
            return Estimate(float(prior.mean()), float(prior.var(ddof=1)), 0, self.n_items, self._bounds())
        mean = float(scores.mean())
        var = eq9_variance(scores, np.full(n, 1.0 / n), self.n_items, self._worst_case_var())
        var, shift = _floored(var, (mean, scores.min(), scores.max(), n, self.n_items, self.reference.score_range,
                                    self.reference.kind == "binary"), self.interval)
        return Estimate(mean, float(var), n, self.n_items, self._bounds(), shift=0.0 if shift is None else float(shift))

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int, *, interval: str = "symmetric"
               ) -> tuple[np.ndarray, ...]:
        """RS-Mean trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`
        (with ``interval`` "sides" or "wilson" also the intervals' shifts, a third array).

        All targets see the items in the order
        :func:`~activeeval.methods.base.random_order` gives: running means and
        variances of the reordered rows give every n at once.
        """
        n_items = reference.n_items
        order = random_order(seed, n_items)
        played = truths[:, order]
        mean, s2 = running_mean_var(played)
        s2[:, 0] = worst_case_var(reference)  # RSMean's stand-in while s is undefined
        n = np.arange(1, n_items + 1, dtype=float)
        # Eq. 9 with w_i = 1/n: Σ w² = 1/n, n_eff = n
        var = np.maximum(s2 / n * (n_items - n) / n_items, 0.0)
        seen = (mean, np.minimum.accumulate(played, axis=1), np.maximum.accumulate(played, axis=1), n, n_items,
                reference.score_range, reference.kind == "binary")
        var, shift = _floored(var, seen, _check_interval(interval))
        return (mean, var) if shift is None else (mean, var, shift)


def _floored(var, seen: tuple, interval: str):
    """(variance, shift) of RS-Mean's interval: Eq. 9's ``var`` floored by the plain mean's floor at ``seen``
    (:func:`~activeeval.design.sampling_var_floor`'s arguments) in the shape ``interval``; the shift is None
    (symmetric) for "symmetric". The class and its replay both read it."""
    if interval == "symmetric":
        return np.maximum(var, sampling_var_floor(*seen)), None
    return two_sided(var, *sampling_side_floors(*seen), whole=interval == "wilson" and seen[-1])


def _check_interval(interval: object) -> str:
    if interval not in INTERVALS:
        raise ConfigurationError(
            f"the method option interval must be 'symmetric', 'sides' or 'wilson', got {interval!r}")
    return str(interval)
