"""Replaying a method on a model whose full per-item scores are known.

This is how the demo, the integration tests and the backtests play the
evaluation loop: the held-out model's true scores stand in for the harness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from activeeval._threads import numeric
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, InvalidScoresError, option
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import MultiTargetMethod
from activeeval.stopping import StoppingRule, default_rule, stop_reason

__all__ = [
    "HoldOut",
    "hold_out",
    "run_batches",
    "run_fixed",
    "run_multi_to_end",
    "run_multi_until_stop",
    "run_until_stop",
]


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


@numeric  # one thread-limit scope for the whole loop (activeeval._threads)
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


@numeric
def run_fixed(method: BaseMethod, truth: np.ndarray, n: int, rng: np.random.Generator | None = None) -> Estimate:
    """Observe exactly ``n`` items (ignoring the stopping rule); the final estimate."""
    for _ in range(n - method.n_observed):
        item = method.select(rng)
        method.observe(item, float(truth[item]))
    return method.estimate()


@numeric
def run_batches(method: BaseMethod, truth: np.ndarray, k: int, n: int | None = None,
                rng: np.random.Generator | None = None) -> Estimate:
    """Myopic batches: ask ``select_batch(k)``, observe all k true scores, repeat until ``n`` items (default N).

    The last batch is smaller when k does not divide what is left. The
    trajectory keeps one estimate per observed item, in the batch's order.
    """
    if int(k) != k or k < 1:
        raise ConfigurationError(f"{option('k', key='batch_size')} must be a positive integer, got {k}")
    target = method.n_items if n is None else int(n)
    while method.n_observed < target:
        for item in method.select_batch(min(int(k), target - method.n_observed), rng=rng):
            method.observe(item, float(truth[item]))
    return method.estimate()


def _check_truths(method: MultiTargetMethod, truths: np.ndarray) -> np.ndarray:
    truths = np.asarray(truths, dtype=float)
    if truths.shape != (method.n_targets, method.n_items):
        raise ConfigurationError(
            f"truths must hold every target's score on every item, shape ({method.n_targets}, {method.n_items}); "
            f"got {truths.shape}")
    return truths


@numeric
def run_multi_to_end(method: MultiTargetMethod, truths: np.ndarray, rng: np.random.Generator | None = None) -> None:
    """Select a (target, item) pair, observe its true score, until every target has observed every item.

    ``truths`` (T, N): each target's true per-item scores. Each target's
    ``method.trajectory(t)`` then holds its estimate after each of its own
    N observations.
    """
    truths = _check_truths(method, truths)
    while not method.all_exhausted:
        t, item = method.select(rng)
        method.observe(t, item, float(truths[t, item]))


@numeric
def run_multi_until_stop(
    method: MultiTargetMethod,
    truths: np.ndarray,
    rule: StoppingRule | None = None,
    *,
    rng: np.random.Generator | None = None,
) -> list[str]:
    """A live multi-target run: each target is dropped from the rotation as soon as ``rule`` stops it.

    Returns each target's stop reason. Unlike :func:`run_multi_to_end`, what a
    target observes after another one stopped can differ from the full run
    (a joint method's estimates depend on every target's observations).
    """
    truths = _check_truths(method, truths)
    rule = default_rule() if rule is None else rule
    # a target's stop depends only on its own trajectory: check it again only after its own observation
    reasons = [stop_reason(rule, method.view(t)) for t in range(method.n_targets)]
    while active := [t for t, r in enumerate(reasons) if r is None]:
        t, item = method.select(rng, active=active)
        method.observe(t, item, float(truths[t, item]))
        reasons[t] = stop_reason(rule, method.view(t))
    return [str(r) for r in reasons]
