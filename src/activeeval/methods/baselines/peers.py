"""The two strongest public peers, as baselines: benchmark-prediction's AIPW and RS-learn.

Both select items uniformly at random (the order RS-Mean plays, so a backtest
compares them on the same items) and use the reference models' scores as
features, as the benchmark-prediction code does; they differ from the BayesAME
paper's baselines ``bayes-aipw`` and ``bayes-rs-learn``, which fit scikit-learn's
``BayesianRidge`` (an evidence-maximised ridge with its own noise model):

* :class:`AIPWRidge` (``aipw-ridge``) — an item-level ridge regression: the
  target's score on an item is regressed on the reference models' scores on
  that item (``Ridge(alpha=10)`` with an intercept, as benchmark-prediction's
  ``AIPWPred``), fitted on the sampled items; the unsampled items are
  predicted and the sampled items' mean residual is added (AIPW's correction;
  with an intercept it is zero in-sample, as in that code). Its estimate of
  the full-benchmark score is the finite-population one,
  R̂ = (Σ_C s + Σ_U ŝ + (N − n) r̄_C) / N. Its variance is the regression
  estimator's, (1 − n/N) s_r² / n with s_r² the residual variance on
  n − df degrees of freedom (df the ridge's effective number of parameters,
  plus the intercept); while n − df < 2, RS-Mean's variance.
* :class:`RSLearn` (``rs-learn``) — a model-level ridge regression (Random
  Sampling-Learn, Zhang et al. 2025, with scikit-learn's ``RidgeCV``): across
  the reference models, the full-benchmark score is regressed on the model's
  scores on the sampled items, the penalty chosen by leave-one-out error
  from a log grid; the target is predicted from its own sampled scores. Its
  variance is the leave-one-out mean squared error at that penalty (a
  prediction error over reference models; R̂ ≠ R* even at n = N).

The fits are closed-form ridge solutions in the eigenbasis of the centred Gram
matrix (:mod:`._ridge` does the same for the Bayesian ridges), equal to
scikit-learn's ``Ridge`` / ``RidgeCV`` (tested; scikit-learn is not needed at
run time). The fast replays play every target of a backtest seed at once: the
targets share the item order, so one eigendecomposition per n serves them all.
"""

from __future__ import annotations

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import eq9_variance, fast_replay, prior_estimate, worst_case_var
from activeeval.methods.estimate import Estimate

__all__ = ["AIPW_ALPHA", "RS_LEARN_ALPHAS", "AIPWRidge", "RSLearn"]

#: benchmark-prediction's AIPWPred penalty.
AIPW_ALPHA = 10.0
#: RS-learn's penalty grid (RidgeCV's leave-one-out choice among them).
RS_LEARN_ALPHAS = tuple(float(a) for a in np.logspace(-3, 4, 15))


# ------------------------------------------------------------------ AIPW (item level)
def _aipw_from_moments(
    n: int, n_items: int, sx: np.ndarray, sxx: np.ndarray, sy: np.ndarray, sxy: np.ndarray, syy: np.ndarray,
    total_x: np.ndarray, fallback: np.ndarray, alpha: float,
) -> tuple[np.ndarray, np.ndarray]:
    """AIPW-ridge R̂ and variance of several targets from the sampled items' sums.

    ``sx`` Σ x (K,), ``sxx`` Σ x xᵀ (K, K), ``sy`` Σ y (T,), ``sxy`` Σ x y (K, T),
    ``syy`` Σ y² (T,) over the n sampled items; ``total_x`` Σ x over all items;
    ``fallback`` the variance while the regression has < 2 residual degrees of freedom.
    """
    xbar, ybar = sx / n, sy / n
    gram = sxx - n * np.outer(xbar, xbar)
    b = sxy - n * np.outer(xbar, ybar)
    d, v = np.linalg.eigh((gram + gram.T) / 2.0)
    d = np.maximum(d, 0.0)
    vb = v.T @ b
    coef = v @ (vb / (d + alpha)[:, None])  # (K, T)
    unseen = n_items - n
    pred_u = unseen * ybar + (total_x - sx - unseen * xbar) @ coef  # Σ_U ŝ
    mean = (sy + pred_u) / n_items  # the in-sample mean residual of a ridge with an intercept is 0
    yy = syy - n * ybar * ybar
    rss = yy - 2.0 * np.einsum("kt,kt->t", coef, b) + np.einsum("kt,kt->t", coef, gram @ coef)
    df = 1.0 + float(np.sum(d / (d + alpha)))
    dof = n - df
    if dof >= 2.0:
        var = (1.0 - n / n_items) * np.maximum(rss, 0.0) / dof / n
    else:
        var = fallback
    return mean, var


def _rs_var(y: np.ndarray, n_items: int, worst: float) -> float:
    n = y.size
    return eq9_variance(y, np.full(n, 1.0 / n), n_items, worst)


class AIPWRidge(BaseMethod):
    """benchmark-prediction's AIPW: random items, an item-level ridge on the references' scores (see module)."""

    name = "aipw-ridge"

    def __init__(self, reference: ScoreMatrix, *, alpha: float = AIPW_ALPHA, **kwargs: object) -> None:
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]
        self.alpha = float(alpha)
        self._phi = np.ascontiguousarray(self.reference.scores.T, dtype=float)
        k = self._phi.shape[1]
        self._sx, self._sxx, self._sxy = np.zeros(k), np.zeros((k, k)), np.zeros((k, 1))
        self._sy, self._syy = np.zeros(1), np.zeros(1)

    def _update(self, item: int, score: float) -> None:
        # the sums the replay keeps, in its order (so the two agree to the last bit)
        x, y = self._phi[item], np.array([score])
        self._sx += x
        self._sxx += np.outer(x, x)
        self._sy += y
        self._sxy += np.outer(x, y)
        self._syy += y * y

    def _current_estimate(self) -> Estimate:
        n = self.n_observed
        if n == 0:
            mean, var = prior_estimate(self.reference)
            return Estimate(mean, var, 0, self.n_items, self._bounds())
        scores = np.asarray(self.observed_scores, dtype=float)
        if n == 1:
            return Estimate(float(scores[0]), worst_case_var(self.reference) * (1 - 1 / self.n_items), 1,
                            self.n_items, self._bounds())
        if n >= self.n_items:
            return Estimate(float(self._sy[0] / n), 0.0, n, self.n_items, self._bounds())
        fallback = np.array([_rs_var(scores, self.n_items, worst_case_var(self.reference))])
        means, vars_ = _aipw_from_moments(n, self.n_items, self._sx, self._sxx, self._sy, self._sxy, self._syy,
                                          self._phi.sum(0), fallback, self.alpha)
        return Estimate(_clip(float(means[0]), self.reference), float(vars_[0]), n, self.n_items, self._bounds())

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int, *,
               alpha: float = AIPW_ALPHA) -> tuple[np.ndarray, np.ndarray]:
        """Every target of a seed at once; see :func:`.fast_replay`."""
        n_items = reference.n_items
        phi = np.ascontiguousarray(reference.scores.T, dtype=float)
        order = random_order(seed, n_items)
        n_t = truths.shape[0]
        means, vars_ = np.empty((n_t, n_items)), np.empty((n_t, n_items))
        k = phi.shape[1]
        sx, sxx = np.zeros(k), np.zeros((k, k))
        sy, sxy, syy = np.zeros(n_t), np.zeros((k, n_t)), np.zeros(n_t)
        total_x = phi.sum(0)
        worst = worst_case_var(reference)
        lo_hi = reference.score_range
        running = np.zeros(n_t)
        running_sq = np.zeros(n_t)
        for n in range(1, n_items + 1):
            i = order[n - 1]
            x, y = phi[i], truths[:, i]
            sx += x
            sxx += np.outer(x, x)
            sy += y
            sxy += np.outer(x, y)
            syy += y * y
            running += y
            running_sq += y * y
            if n == 1:
                means[:, 0], vars_[:, 0] = y, worst * (1 - 1 / n_items)
                continue
            if n == n_items:
                means[:, -1], vars_[:, -1] = sy / n, 0.0
                continue
            s2 = np.maximum(running_sq - running * running / n, 0.0) / (n - 1)
            fallback = np.maximum(s2 / n * (n_items - n) / n_items, 0.0)
            m, v = _aipw_from_moments(n, n_items, sx, sxx, sy, sxy, syy, total_x, fallback, alpha)
            means[:, n - 1] = m if lo_hi is None else np.clip(m, *lo_hi)
            vars_[:, n - 1] = v
        return means, vars_


# ------------------------------------------------------------------ RS-learn (model level)
def _rs_learn_from_gram(gram: np.ndarray, cross: np.ndarray, labels: np.ndarray,
                        alphas: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """RidgeCV's prediction and LOO mean squared error, for several targets.

    ``gram`` (K, K): Z̃ Z̃ᵀ of the references' centred features; ``cross`` (K, T):
    Z̃ z̃_t of each target; ``labels`` (K,): the references' full scores.
    """
    k_refs = labels.size
    rbar = labels.mean()
    r = labels - rbar
    d, u = np.linalg.eigh((gram + gram.T) / 2.0)
    d = np.maximum(d, 0.0)
    ur = u.T @ r
    best = None
    for a in alphas:
        shrink = d / (d + a)
        fitted = u @ (shrink * ur)
        hat = np.einsum("kj,j,kj->k", u, shrink, u) + 1.0 / k_refs  # diag of the hat matrix (with the intercept)
        loo = (r - fitted) / np.maximum(1.0 - hat, 1e-12)
        mse = float(np.mean(loo**2))
        if best is None or mse < best[0] - 1e-15:
            best = (mse, a)
    mse, a = best  # type: ignore[misc]
    dual = u @ (ur / (d + a))  # (G + aI)^-1 r̃
    pred = rbar + cross.T @ dual
    return pred, np.full(pred.shape, mse)


class RSLearn(BaseMethod):
    """Random Sampling-Learn with RidgeCV: random items, a model-level ridge (see module)."""

    name = "rs-learn"

    def __init__(self, reference: ScoreMatrix, **kwargs: object) -> None:
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]
        k = self.reference.n_models
        self._gram, self._cross = np.zeros((k, k)), np.zeros((k, 1))

    def _update(self, item: int, score: float) -> None:
        # the sums the replay keeps, in its order (so the two agree to the last bit)
        col = np.asarray(self.reference.scores[:, item], dtype=float)
        c = col - col.mean()
        self._gram += np.outer(c, c)
        self._cross += np.outer(c, np.array([score - col.mean()]))

    def _current_estimate(self) -> Estimate:
        n = self.n_observed
        if n == 0:
            mean, var = prior_estimate(self.reference)
            return Estimate(mean, var, 0, self.n_items, self._bounds())
        pred, mse = _rs_learn_from_gram(self._gram, self._cross, self.reference.scores.mean(1), RS_LEARN_ALPHAS)
        return Estimate(_clip(float(pred[0]), self.reference), float(mse[0]), n, self.n_items, self._bounds())

    @fast_replay
    def replay(reference: ScoreMatrix, truths: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Every target of a seed at once; see :func:`.fast_replay`."""
        n_items = reference.n_items
        ref = np.asarray(reference.scores, dtype=float)
        labels = ref.mean(1)
        order = random_order(seed, n_items)
        n_t = truths.shape[0]
        means, vars_ = np.empty((n_t, n_items)), np.empty((n_t, n_items))
        k = ref.shape[0]
        gram = np.zeros((k, k))
        cross = np.zeros((k, n_t))
        lo_hi = reference.score_range
        for n in range(1, n_items + 1):
            i = order[n - 1]
            col = ref[:, i]
            c = col - col.mean()
            gram += np.outer(c, c)
            cross += np.outer(c, truths[:, i] - col.mean())
            m, v = _rs_learn_from_gram(gram, cross, labels, RS_LEARN_ALPHAS)
            means[:, n - 1] = m if lo_hi is None else np.clip(m, *lo_hi)
            vars_[:, n - 1] = v
        return means, vars_


def _clip(mean: float, reference: ScoreMatrix) -> float:
    if reference.score_range is None:
        return float(mean)
    lo, hi = reference.score_range
    return float(min(max(mean, lo), hi))
