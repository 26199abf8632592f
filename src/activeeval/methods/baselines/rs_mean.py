"""RS-Mean: random items, the sample mean, and the Eq. 9 variance with a rare-event floor.

Also the fast backtest :func:`replay` (every target at once) and the input
checks and running statistics that the other baselines' replays share.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.design import sampling_var_floor
from activeeval.exceptions import ConfigurationError, InvalidScoresError, ScoreOutOfRangeError
from activeeval.methods.base import BaseMethod, prepare_reference, random_order
from activeeval.methods.baselines._common import worst_case_var
from activeeval.methods.estimate import Estimate
from activeeval.stopping import default_rule

__all__ = ["RSMean", "eq9_variance", "replay", "replay_inputs", "running_mean_var"]

#: BaseMethod options that only steer the stopping rule: a replay of fixed length ignores them.
STOPPING_OPTIONS = ("epsilon1", "epsilon2", "window", "n_max", "stopping")


def eq9_variance(scores: np.ndarray, weights: np.ndarray, n_items: int, fallback_var: float) -> float:
    """Eq. 9: Var_R = s² (Σ w_i²) (N − n_eff) / N, n_eff = (Σ w_i)² / Σ w_i².

    Parameters
    ----------
    scores : ndarray (n,)
        Observed scores s_C.
    weights : ndarray (n,)
        Estimator weights w_i (RS-Mean: 1/n each).
    n_items : int
        N.
    fallback_var : float
        s² to use while fewer than 2 scores are known (s is undefined).
    """
    n = scores.size
    if n == 0:
        return fallback_var
    s2 = float(np.var(scores, ddof=1)) if n >= 2 else fallback_var
    sum_w2 = float(weights @ weights)
    n_eff = float(weights.sum()) ** 2 / sum_w2
    return max(s2 * sum_w2 * (n_items - n_eff) / n_items, 0.0)


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
    """

    name = "rs-mean"

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
        floor = sampling_var_floor(
            mean, scores.min(), scores.max(), n, self.n_items, self.reference.score_range,
            self.reference.kind == "binary",
        )
        return Estimate(mean, max(var, float(floor)), n, self.n_items, self._bounds())


# ----------------------------------------------------------------- replays
def replay_inputs(
    reference: ScoreMatrix,
    truths: np.ndarray,
    seed: int,
    options: Mapping[str, Any],
    *,
    missing: str = "models",
    caller: str = "replay",
) -> tuple[ScoreMatrix, np.ndarray]:
    """Checks shared by the baselines' replays: (prepared reference, truths as (T, N) floats).

    Applies :func:`~activeeval.methods.base.prepare_reference` exactly as
    :class:`BaseMethod` does, checks the stopping options the methods accept
    (``epsilon1``, ``epsilon2``, ``window``, ``n_max``, ``stopping``; they do
    not change a replay, which always runs to n = N) and rejects any other
    option with a ``TypeError`` as the class constructor would. Every target
    score is validated as :meth:`ScoreMatrix.check_score` validates one.
    """
    unknown = sorted(set(options) - set(STOPPING_OPTIONS))
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
    rule_args = {k: v for k, v in options.items() if k != "stopping"}
    if options.get("stopping") is None and rule_args:
        default_rule(**rule_args)  # the class builds (and so checks) this rule too
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigurationError(
            f"a replay needs a fixed non-negative int seed (the targets share its item order), got {seed!r}"
        )
    reference, _ = prepare_reference(reference, missing=missing)
    try:
        values = np.array(truths, dtype=float)
    except (TypeError, ValueError):
        raise InvalidScoresError("truths must be a numeric array of shape (targets, items)") from None
    if values.ndim != 2 or values.shape[1] != reference.n_items:
        raise InvalidScoresError(
            f"truths must have shape (targets, {reference.n_items}) (one full score row per target, "
            f"items as in the reference), got {values.shape}"
        )
    if not np.all(np.isfinite(values)):
        t, i = np.argwhere(~np.isfinite(values))[0]
        raise InvalidScoresError(
            f"target {t} has a missing or infinite score ({values[t, i]}) on item {reference.item_ids[i]!r}; "
            "a replay needs every target's full score row"
        )
    if reference.kind == "binary" and not np.all((values == 0.0) | (values == 1.0)):
        t, i = np.argwhere((values != 0.0) & (values != 1.0))[0]
        raise ScoreOutOfRangeError(
            f"target {t} scores {values[t, i]:g} on item {reference.item_ids[i]!r} but the reference is "
            "binary; scores must be 0 or 1"
        )
    if reference.score_range is not None:
        lo, hi = reference.score_range
        bad = (values < lo) | (values > hi)
        if bad.any():
            t, i = np.argwhere(bad)[0]
            raise ScoreOutOfRangeError(
                f"target {t} scores {values[t, i]:g} on item {reference.item_ids[i]!r}, outside the score "
                f"range [{lo:g}, {hi:g}]"
            )
    return reference, values


def running_mean_var(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample variance (ddof = 1) of every prefix of each row.

    Parameters
    ----------
    scores : ndarray of shape (T, n)

    Returns
    -------
    mean, var : ndarrays of shape (T, n)
        Column n − 1 describes ``scores[:, :n]``; ``var[:, 0]`` is NaN (undefined).

    Notes
    -----
    Cumulative sums of the scores shifted by each row's first score (the
    "shifted data" algorithm): the shift keeps Σ(x − x₁)² − (Σ(x − x₁))²/n
    free of the cancellation of the textbook formula as long as x₁ is within
    the data's range, and binary scores give integer sums, so a run of equal
    scores has variance exactly 0.
    """
    x = np.asarray(scores, dtype=float)
    n = np.arange(1, x.shape[1] + 1, dtype=float)
    mean = np.cumsum(x, axis=1) / n
    c = x - x[:, :1]
    s1 = np.cumsum(c, axis=1)
    s2 = np.cumsum(c * c, axis=1)
    var = np.full(x.shape, np.nan)
    var[:, 1:] = np.maximum(s2[:, 1:] - s1[:, 1:] ** 2 / n[1:], 0.0) / (n[1:] - 1.0)
    return mean, var


def replay(
    reference: ScoreMatrix, truths: np.ndarray, seed: int, *, missing: str = "models", **options: Any
) -> tuple[np.ndarray, np.ndarray]:
    """RS-Mean trajectories of every target played with method seed ``seed``.

    Equal (to round-off) to running :class:`RSMean` with ``seed`` on each
    target for n = 1..N items: all targets see the items in the order
    :func:`~activeeval.methods.base.random_order` gives.

    Parameters
    ----------
    reference : ScoreMatrix
        Reference scores (prepared as the class prepares them, see ``missing``).
    truths : ndarray of shape (T, N)
        Each target's full score row, items as in the reference.
    seed : int
        The method seed shared by all targets.
    missing : {"models", "items", "auto"}
        Missing-score policy, as for the class.
    **options
        The class's stopping options (ignored: a replay runs to n = N).

    Returns
    -------
    means, vars : ndarrays of shape (T, N)
        R̂ and Var_R after n = 1..N observed items (column n − 1).
    """
    reference, truths = replay_inputs(reference, truths, seed, options, missing=missing, caller="replay")
    n_items = reference.n_items
    order = random_order(int(seed), n_items)
    played = truths[:, order]
    mean, s2 = running_mean_var(played)
    s2[:, 0] = worst_case_var(reference)  # RSMean's stand-in while s is undefined
    n = np.arange(1, n_items + 1, dtype=float)
    # Eq. 9 with w_i = 1/n: Σ w² = 1/n, n_eff = n
    var = np.maximum(s2 / n * (n_items - n) / n_items, 0.0)
    floor = sampling_var_floor(
        mean, np.minimum.accumulate(played, axis=1), np.maximum.accumulate(played, axis=1), n, n_items,
        reference.score_range, reference.kind == "binary",
    )
    return mean, np.maximum(var, floor)
