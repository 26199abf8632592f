"""What the baselines share: the prior estimate, the worst-case variance, Eq. 9, and the fast replays' frame.

A baseline is one module: its :class:`~activeeval.methods.base.BaseMethod`
class and, if it has one, the class's fast backtest replay, declared with
:func:`fast_replay`::

    class MyMethod(BaseMethod):
        name = "my-method"
        ...

        @fast_replay
        def replay(reference, truths, seed, *, my_option=1.0):
            ...  # every target of a backtest at once
            return means, variances

The registry (:func:`activeeval.methods.registry.resolve_replay`) finds the
replay on the class; the runner uses it when every target of a seed shares
the method seed. :func:`fast_replay` gives every replay the same frame (the
input checks, the options the class accepts but a replay does not need, the
missing-score policy), so the module only writes the computation.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, InvalidScoresError, ScoreOutOfRangeError
from activeeval.methods.base import prepare_reference

__all__ = [
    "eq9_variance",
    "fast_replay",
    "prior_estimate",
    "replay_inputs",
    "running_mean_var",
    "worst_case_var",
]


Replay = Callable[..., tuple[np.ndarray, ...]]


# ------------------------------------------------------------ estimates
def worst_case_var(reference: ScoreMatrix) -> float:
    """Largest variance a score in the benchmark's range can have, ((high − low)/2)².

    Stands in for a sample variance that is undefined (fewer than 2 scores),
    as :class:`~activeeval.methods.baselines.RSMean` does.
    """
    if reference.score_range is None:
        return float(np.var(reference.scores, ddof=1))
    lo, hi = reference.score_range
    return ((hi - lo) / 2.0) ** 2


def prior_estimate(reference: ScoreMatrix) -> tuple[float, float]:
    """(mean, var) of the reference models' full-benchmark scores: the estimate before any observation."""
    full = reference.mean_scores()
    return float(full.mean()), float(full.var(ddof=1))


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


# -------------------------------------------------------------- replays
def fast_replay(compute: Replay) -> staticmethod:
    """Declare ``compute`` as its class's fast backtest replay (a static method ``Cls.replay``).

    ``compute(reference, truths, seed, *, <method options>) -> (means, vars)``
    receives the prepared reference, the truths as checked (T, N) floats and
    the seed as an int; its keyword-only parameters are the class's own
    options, with the class's defaults. The replay it becomes is

        ``Cls.replay(reference, truths, seed, *, missing="models", **options) -> (means, vars)``

    Parameters
    ----------
    reference : ScoreMatrix
        Reference scores, prepared as the class prepares them (see ``missing``).
    truths : ndarray of shape (T, N)
        Each target's full score row, items as in the reference.
    seed : int
        The method seed shared by all targets.
    missing : {"models", "items", "auto"}
        Missing-score policy, as for the class.
    **options
        The method's own options, as for the class (a replay runs to n = N;
        neither it nor the class takes a stopping option).

    Returns
    -------
    means, vars : ndarrays of shape (T, N)
        R̂ and Var_R after n = 1..N observed items (column n − 1): for each
        target, what playing the class with ``seed`` on it to n = N gives, to
        round-off (tested per method). A method whose intervals may have two
        sides of different lengths returns a third array, their
        :attr:`~activeeval.methods.estimate.Estimate.shift`.
    """
    own = [p.name for p in inspect.signature(compute).parameters.values() if p.kind == p.KEYWORD_ONLY]

    @functools.wraps(compute)
    def replay(
        reference: ScoreMatrix, truths: np.ndarray, seed: int, *, missing: str = "models", **options: Any
    ) -> tuple[np.ndarray, ...]:
        method_options = {k: options.pop(k) for k in own if k in options}
        reference, values = replay_inputs(reference, truths, seed, options, missing=missing, caller="replay")
        return compute(reference, values, int(seed), **method_options)

    del replay.__wrapped__  # its signature is the wrapper's (with missing and **options), not compute's
    return staticmethod(replay)


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
    :class:`BaseMethod` does, and rejects any option the computation does not
    take with a ``TypeError``, as the class constructor would (stopping options
    included: neither takes one; a replay always runs to n = N). Every target
    score is validated as :meth:`ScoreMatrix.check_score` validates one.
    """
    _check_options(options, caller)
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise ConfigurationError(
            f"a replay needs a fixed non-negative int seed (the targets share its item order), got {seed!r}"
        )
    reference, _ = prepare_reference(reference, missing=missing)
    try:
        values = np.array(truths, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InvalidScoresError("truths must be a numeric array of shape (targets, items)") from exc
    if values.ndim != 2 or values.shape[1] != reference.n_items:
        raise InvalidScoresError(
            f"truths must have shape (targets, {reference.n_items}) (one full score row per target, "
            f"items as in the reference), got {values.shape}"
        )
    _check_truths(reference, values)
    return reference, values


def _check_options(options: Mapping[str, Any], caller: str) -> None:
    """Anything the wrapped computation does not take is refused as the class constructor refuses it."""
    if options:
        raise TypeError(f"{caller}() got an unexpected keyword argument {sorted(options)[0]!r}")


def _check_truths(reference: ScoreMatrix, values: np.ndarray) -> None:
    """Every target score finite and valid for the reference (as ``ScoreMatrix.check_score``)."""
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
