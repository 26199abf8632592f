"""Small helpers shared by the baselines (prior estimate, worst-case variance, sklearn import)."""

from __future__ import annotations

from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError

__all__ = ["worst_case_var", "prior_estimate", "bayesian_ridge"]


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


def bayesian_ridge(**kwargs: Any) -> Any:
    """scikit-learn's ``BayesianRidge`` (defaults, as the paper uses), or a clear error naming the extra."""
    try:
        from sklearn.linear_model import BayesianRidge
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigurationError(
            "this method needs scikit-learn (BayesianRidge); install it with "
            'pip install "activeeval[baselines]" (or pip install scikit-learn)'
        ) from None
    return BayesianRidge(**kwargs)
