"""RS-Mean: random items, the sample mean, and the Eq. 9 variance."""

from __future__ import annotations

import numpy as np

from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate

__all__ = ["RSMean", "eq9_variance"]


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
    """

    name = "rs-mean"

    def _update(self, item: int, score: float) -> None:
        pass  # the observed scores, kept by BaseMethod, are the whole state

    def _worst_case_var(self) -> float:
        if self.reference.score_range is None:
            return float(np.var(self.reference.scores, ddof=1))
        lo, hi = self.reference.score_range
        return ((hi - lo) / 2.0) ** 2

    def _current_estimate(self) -> Estimate:
        scores = np.asarray(self._scores)
        n = scores.size
        if n == 0:
            prior = self.reference.mean_scores()
            return Estimate(float(prior.mean()), float(prior.var(ddof=1)), 0, self.n_items, self._bounds())
        var = eq9_variance(scores, np.full(n, 1.0 / n), self.n_items, self._worst_case_var())
        return Estimate(float(scores.mean()), var, n, self.n_items, self._bounds())
