"""Replaying a method on a model whose full per-item scores are known.

This is how the demo, the integration tests and the backtests play the
evaluation loop: the held-out model's true scores stand in for the harness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, InvalidScoresError
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate
from activeeval.stopping import StoppingRule, default_rule, stop_reason

__all__ = ["HoldOut", "hold_out", "run_until_stop", "run_fixed"]


@dataclass(frozen=True)
class HoldOut:
    """One target model held out of a score matrix.

    Attributes
    ----------
    target : str
        Model id of the target.
    truth : ndarray of shape (n_items,)
        The target's scores on every item (complete).
    reference : ScoreMatrix
        Every other model.
    """

    target: str
    truth: np.ndarray
    reference: ScoreMatrix

    @property
    def true_score(self) -> float:
        """R*, the target's full-benchmark score."""
        return float(self.truth.mean())


def hold_out(matrix: ScoreMatrix, target: str | None = None, seed: int | np.random.Generator | None = 0) -> HoldOut:
    """Hold out ``target`` (or a random model with no missing score) as the target.

    Raises :class:`InvalidScoresError` if the target has missing scores: its
    full-benchmark score would be undefined.
    """
    complete = ~np.isnan(matrix.scores).any(axis=1)
    if target is None:
        candidates = np.flatnonzero(complete)
        if candidates.size == 0:
            raise InvalidScoresError("no model has a score on every item; cannot pick a target")
        target = matrix.model_ids[int(np.random.default_rng(seed).choice(candidates))]
    row = matrix.model_index(target)
    if not complete[row]:
        raise InvalidScoresError(
            f"target {target!r} has {int(np.isnan(matrix.scores[row]).sum())} missing score(s), so its "
            "full-benchmark score is unknown; choose a model with complete scores"
        )
    return HoldOut(target=target, truth=np.array(matrix.scores[row]), reference=matrix.drop_models([target]))


def run_until_stop(
    method: BaseMethod,
    truth: np.ndarray,
    rule: StoppingRule | None = None,
    *,
    rng: np.random.Generator | None = None,
    on_step: Callable[[BaseMethod, int, float], None] | None = None,
) -> str:
    """Select, observe the true score, repeat until ``rule`` fires (default: Algorithm 1's, :func:`default_rule`).

    Returns the stop reason ("precision", "budget" or "exhausted").
    """
    rule = default_rule() if rule is None else rule
    if not callable(getattr(rule, "check", None)):
        raise ConfigurationError(
            f"rule must be a stopping rule (activeeval.stopping, e.g. default_rule(epsilon2=0.03)), got "
            f"{type(rule).__name__}; pass a generator as rng="
        )
    while (reason := stop_reason(rule, method)) is None:
        item = method.select(rng)
        method.observe(item, float(truth[item]))
        if on_step is not None:
            on_step(method, item, float(truth[item]))
    return reason


def run_fixed(method: BaseMethod, truth: np.ndarray, n: int, rng: np.random.Generator | None = None) -> Estimate:
    """Observe exactly ``n`` items (ignoring the stopping rule); the final estimate."""
    for _ in range(n - method.n_observed):
        item = method.select(rng)
        method.observe(item, float(truth[item]))
    return method.estimate()
