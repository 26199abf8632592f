"""Pairwise confidence and the ranker's decision rules: which pairs are decided, which model to test (paper §6)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy.special import ndtr  # Φ; scipy.stats costs ~1 s to import

from activeeval.exceptions import ConfigurationError

#: Posterior covariances between models' ranking-scale values, by unordered pair (absent: 0, independent).
Covariances = Mapping[frozenset, float]


def pairwise_confidence(mean_i: float, var_i: float, mean_j: float, var_j: float, cov_ij: float = 0.0) -> float:
    """P(θ_i > θ_j) = Φ((θ̂_i − θ̂_j) / √(SE_i² + SE_j² − 2 C_ij)) (paper §6, "Pairwise confidence").

    ``cov_ij`` is the posterior covariance of the two (0, the paper's
    independent posteriors, by default; a joint multi-target method's
    ``covariance()`` gives it — positively correlated posteriors make the
    difference surer). With a zero variance of the difference it is 1, 0
    or ½ by the sign of the difference.
    """
    sd = math.sqrt(max(max(var_i, 0.0) + max(var_j, 0.0) - 2.0 * cov_ij, 0.0))
    diff = mean_i - mean_j
    if sd == 0.0:
        return 1.0 if diff > 0 else (0.0 if diff < 0 else 0.5)
    return float(ndtr(diff / sd))


def check_gamma(gamma: float) -> float:
    """γ must lie strictly between 0 and 1."""
    try:
        g = float(gamma)
    except (TypeError, ValueError):
        g = float("nan")
    if not (0.0 < g < 1.0):
        raise ConfigurationError(f"gamma must be in (0, 1) (a confidence level such as 0.95), got {gamma}")
    return g


def is_confident(p: float, gamma: float) -> bool:
    """True when P lies outside [(1 − γ)/2, 1 − (1 − γ)/2]: a two-sided level-γ decision (§6)."""
    lo = (1.0 - gamma) / 2.0
    return p < lo or p > 1.0 - lo


def allocation_value(var: float, n_observed: int, cost: float) -> float:
    """SE² / ((n + 1)·c): expected uncertainty reduction per unit cost (paper §6, "Cost-aware allocation")."""
    return var / ((n_observed + 1) * cost)


def choose_model(candidates: Sequence[str], variances: Mapping[str, float], counts: Mapping[str, int],
                 costs: Mapping[str, float]) -> str:
    """The candidate with the largest :func:`allocation_value`; ties go to the earliest candidate."""
    if not candidates:
        raise ConfigurationError("choose_model needs at least one candidate model")
    values = [allocation_value(variances[m], counts[m], costs[m]) for m in candidates]
    return candidates[int(np.argmax(values))]


def rank_order(models: Sequence[str], means: Mapping[str, float]) -> list[str]:
    """Models sorted by mean, best first; equal means keep the input order (stable)."""
    idx = sorted(range(len(models)), key=lambda i: (-means[models[i]], i))
    return [models[i] for i in idx]


def cross_covariance(covariances: Covariances | None, a: str, b: str) -> float:
    """C_ab from ``covariances`` (0 when None or absent: independent posteriors)."""
    return 0.0 if covariances is None else float(covariances.get(frozenset((a, b)), 0.0))


def pair_confidence(a: str, b: str, means: Mapping[str, float], variances: Mapping[str, float],
                    covariances: Covariances | None = None) -> float:
    """P(a > b) for two models by name: :func:`pairwise_confidence` with their covariance, if any."""
    return pairwise_confidence(means[a], variances[a], means[b], variances[b], cross_covariance(covariances, a, b))


def uncertain_adjacent(order: Sequence[str], means: Mapping[str, float], variances: Mapping[str, float],
                       gamma: float, covariances: Covariances | None = None) -> list[tuple[str, str]]:
    """Adjacent pairs (higher, lower) of ``order`` whose pairwise confidence is not decided at γ."""
    out = []
    for hi, lo in itertools.pairwise(order):
        p = pair_confidence(hi, lo, means, variances, covariances)
        if not is_confident(p, gamma):
            out.append((hi, lo))
    return out


# ------------------------------------------------------------------ input


def check_models(models: Sequence[str]) -> list[str]:
    models = [str(m) for m in models]
    if len(models) < 2:
        raise ConfigurationError(f"need at least 2 models to rank, got {len(models)} ({models}); pass two or more")
    dup = sorted({m for m in models if models.count(m) > 1})
    if dup:
        raise ConfigurationError(f"models to rank must be distinct; repeated: {dup}")
    return models


