"""Small helpers shared by the baselines (prior estimate, worst-case variance)."""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix

__all__ = ["worst_case_var", "prior_estimate"]


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

