"""The multi-target backtest (BayesAME paper §5.2): target sets of low or high correlation.

The paper compares multi-target BayesAME with single-target methods run on
each target on two sets of 10 targets: one of low correlation (a random
draw) and one of high correlation ("the 10 most correlated models overall").
Precisely:

* **Candidates**: the models with complete scores, one per group of models
  with identical score rows (aliases of one model, see
  :mod:`~activeeval.experiments.protocol`; the first in matrix order is
  kept), so that no set holds one model twice.
* **Correlation** of two models: the Pearson correlation of their per-item
  score vectors over every item of the matrix (for binary scores, the phi
  coefficient); 0 with a model whose scores are all equal.
* **low**: ``n_targets`` candidates drawn uniformly at random, from
  ``split_seed`` (as the interpolation targets are).
* **high**: greedy — the most correlated pair of candidates, then, until
  there are ``n_targets``, the candidate with the highest mean correlation
  to those already chosen (ties: the first in matrix order).
* **Reference pool**: every other model with complete scores, without the
  exact twins of a target; each seed samples ``ref_fraction`` of it, as the
  single-target backtest does (:func:`~activeeval.experiments.protocol.sample_references`).

Methods: a single-target method runs on each target as in the single-target
backtest; a multi-target method
(:func:`~activeeval.methods.registry.is_multi_target`) is built once per seed
on all the targets and played until every target has observed every item
(T·N observations, :func:`~activeeval.experiments.simulate.run_multi_to_end`);
each target's trajectory (its estimate after each of its own observations)
gives the (T, N) arrays the metrics, tables and plots read, exactly as for a
single-target method. One (method, seed) task is one unit of work, so the
multi-target tasks run in parallel over seeds (``workers``).

**Stops are read off the trajectories**, as in the single-target backtest.
For a single-target method (and for ``Independent``) this is exact. A live
multi-target run drops each target from the rotation once it stops, so the
targets still running observe items in another order than in the full run,
and a joint method's estimates of them (which use every target's
observations) differ from the trajectories read here: the read-off is the
stop of a run in which every target goes on to the end, an approximation of
the live run (:func:`~activeeval.experiments.simulate.run_multi_until_stop`
plays the live one).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, option
from activeeval.experiments.protocol import BacktestConfig, Split, drop_twins
from activeeval.experiments.runner import BacktestResult, run_backtest

__all__ = [
    "CORRELATIONS",
    "MULTI_TARGET_REGIME",
    "MultiTargetConfig",
    "MultiTargetSplit",
    "make_target_split",
    "mean_pairwise",
    "most_correlated_set",
    "run_multi_target_backtest",
    "score_correlations",
    "target_candidates",
]

CORRELATIONS = ("low", "high")
MULTI_TARGET_REGIME = "multi-target"


def _check_correlation(correlation: object) -> str:
    if correlation not in CORRELATIONS:
        raise ConfigurationError(
            f"{option('correlation')} must be 'low' (a random target set) or 'high' (the most correlated "
            f"models), got {correlation!r}")
    return str(correlation)


# ------------------------------------------------------------------ maths
def score_correlations(scores: np.ndarray) -> np.ndarray:
    """Pearson correlation of every pair of rows of ``scores`` (models × items).

    0 with a constant row (its correlation is undefined), 1 on the diagonal.
    """
    x = np.asarray(scores, dtype=float)
    x = x - x.mean(axis=1, keepdims=True)
    norm = np.sqrt((x**2).sum(axis=1, keepdims=True))
    z = np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)
    corr = np.clip(z @ z.T, -1.0, 1.0)
    np.fill_diagonal(corr, 1.0)
    return corr


def most_correlated_set(corr: np.ndarray, k: int) -> np.ndarray:
    """Greedy high-correlation set of ``k`` rows of ``corr``, in index order.

    The most correlated pair (the first in row-major order on ties), then
    repeatedly the row with the highest mean correlation to those chosen
    (the lowest index on ties).
    """
    corr = np.asarray(corr, dtype=float)
    n = corr.shape[0]
    if not 2 <= k <= n:
        raise ConfigurationError(f"a correlated set needs 2 <= k <= {n} models, got k = {k}")
    off = corr.copy()
    np.fill_diagonal(off, -np.inf)
    i, j = np.unravel_index(int(np.argmax(off)), off.shape)
    chosen = [int(i), int(j)]
    total = corr[:, i] + corr[:, j]  # sum of correlations to the chosen rows: same argmax as their mean
    while len(chosen) < k:
        score = total.copy()
        score[chosen] = -np.inf
        nxt = int(np.argmax(score))
        chosen.append(nxt)
        total += corr[:, nxt]
    return np.array(sorted(chosen), dtype=np.intp)


def mean_pairwise(corr: np.ndarray, idx: np.ndarray | None = None) -> tuple[float, float]:
    """Mean and minimum of the correlations between distinct rows ``idx`` (default: all rows)."""
    corr = np.asarray(corr, dtype=float)
    sub = corr if idx is None else corr[np.ix_(idx, idx)]
    upper = sub[np.triu_indices(sub.shape[0], 1)]
    return float(upper.mean()), float(upper.min())


# ------------------------------------------------------------------ target sets
def target_candidates(matrix: ScoreMatrix) -> list[str]:
    """Models with complete scores, one per group of identical score rows (the first in matrix order)."""
    complete = np.flatnonzero(~np.isnan(matrix.scores).any(axis=1))
    if complete.size == 0:
        return []
    _, first = np.unique(matrix.scores[complete], axis=0, return_index=True)
    return [matrix.model_ids[int(complete[i])] for i in sorted(first)]


@dataclass(frozen=True)
class MultiTargetSplit(Split):
    """A multi-target split: the target set, its reference pool, and how correlated the targets are.

    ``mean_correlation`` and ``min_correlation`` are over the pairs of
    targets; ``candidates_mean_correlation`` over every pair of candidates
    (what a random set has on average).
    """

    correlation: str = "high"
    mean_correlation: float = math.nan
    min_correlation: float = math.nan
    candidates_mean_correlation: float = math.nan
    n_candidates: int = 0

    def correlation_summary(self) -> dict:
        return {
            "set": self.correlation,
            "mean": self.mean_correlation,
            "min": self.min_correlation,
            "candidates_mean": self.candidates_mean_correlation,
            "candidates": self.n_candidates,
        }


def make_target_split(
    matrix: ScoreMatrix, correlation: str, n_targets: int = 10, split_seed: int = 0
) -> MultiTargetSplit:
    """The ``correlation`` ("low" or "high") set of ``n_targets`` targets and its reference pool (module docstring).

    Raises
    ------
    ConfigurationError
        An unknown ``correlation``, or more targets than candidates leaving at least 2 references.
    """
    correlation = _check_correlation(correlation)
    candidates = target_candidates(matrix)
    name = matrix.name or "the dataset"
    if int(n_targets) != n_targets or n_targets < 2:
        raise ConfigurationError(f"{option('n_targets')} must be an integer >= 2 for a multi-target backtest, got "
                                 f"{n_targets}")
    if n_targets > len(candidates) - 2:
        raise ConfigurationError(
            f"{option('n_targets', str(n_targets))} is too many: {name} has {len(candidates)} distinct models with "
            f"complete scores and at least 2 must remain as references; lower {option('n_targets')}")
    corr = score_correlations(matrix.select_models(candidates).scores)
    if correlation == "high":
        idx = most_correlated_set(corr, int(n_targets))
    else:
        rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0x10C0]))
        idx = np.sort(rng.choice(len(candidates), int(n_targets), replace=False))
    targets = [candidates[i] for i in idx]
    complete = ~np.isnan(matrix.scores).any(axis=1)
    chosen = set(targets)
    pool = [m for m, ok in zip(matrix.model_ids, complete, strict=True) if ok and m not in chosen]
    pool, twins = drop_twins(matrix, targets, pool)  # >= 2 remain: two candidates, distinct from every target
    mean, low = mean_pairwise(corr, idx)
    return MultiTargetSplit(
        MULTI_TARGET_REGIME, tuple(targets), tuple(pool), (), tuple(twins), correlation=correlation,
        mean_correlation=mean, min_correlation=low, candidates_mean_correlation=mean_pairwise(corr)[0],
        n_candidates=len(candidates),
    )


# ------------------------------------------------------------------ the backtest
@dataclass(frozen=True)
class MultiTargetConfig(BacktestConfig):
    """A :class:`~activeeval.experiments.protocol.BacktestConfig` whose targets are a correlation set.

    ``correlation`` is "low" or "high" (required); ``n_targets`` its size
    (default 10, as the paper); ``split_seed`` seeds the low set. ``regime``
    is always "multi-target" and ``gap`` is not used.
    """

    regime: str = MULTI_TARGET_REGIME
    correlation: str | None = None

    multi_target = True

    def _check_regime(self) -> None:
        if self.regime != MULTI_TARGET_REGIME:
            raise ConfigurationError(
                f"a multi-target backtest takes its targets from correlation=, not from a regime; got regime = "
                f"{self.regime!r}: leave regime out (its value is {MULTI_TARGET_REGIME!r})")
        _check_correlation(self.correlation)

    def make_split(self, matrix: ScoreMatrix) -> MultiTargetSplit:
        return make_target_split(matrix, str(self.correlation), self.n_targets, self.split_seed)


def run_multi_target_backtest(
    matrix: ScoreMatrix,
    config: BacktestConfig,
    *,
    correlation: str | None = None,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> BacktestResult:
    """Run the multi-target backtest: ``activeeval backtest --multi-target --correlation low|high``.

    ``config`` is a :class:`MultiTargetConfig`, or a plain
    :class:`~activeeval.experiments.protocol.BacktestConfig` (with its
    default regime) plus ``correlation``. ``workers``, ``backend``,
    ``address`` and ``progress`` are those of
    :func:`~activeeval.experiments.runner.run_backtest`; the result is a
    :class:`~activeeval.experiments.runner.BacktestResult` whose ``split``
    is a :class:`MultiTargetSplit`.
    """
    if isinstance(config, MultiTargetConfig):
        if correlation is not None and correlation != config.correlation:
            raise ConfigurationError(
                f"correlation={correlation!r} contradicts the config's {config.correlation!r}; give it once")
    else:
        if correlation is None:
            raise ConfigurationError(
                f"the multi-target backtest needs {option('correlation', repr('low'), 'low')} or 'high'")
        default = BacktestConfig.__dataclass_fields__["regime"].default
        if config.regime != default:
            raise ConfigurationError(
                f"a multi-target backtest takes its targets from correlation=, so regime={config.regime!r} does not "
                f"apply; leave {option('regime')} at its default (drop it)")
        values = {f.name: getattr(config, f.name) for f in dataclasses.fields(BacktestConfig) if f.name != "regime"}
        config = MultiTargetConfig(**values, correlation=correlation)
    return run_backtest(matrix, config, workers=workers, backend=backend, address=address, progress=progress)
