"""Continuous item response theory: pure maths (continuous-CAT paper §4–§5, App. E).

The heteroskedastic normal response model (paper §4; ../shared/SPEC.md §4)::

    X | θ, b, k ~ N(μ, k·μ(1 − μ)),     μ = 1 / (1 + exp(−(θ − b)))

keeps the logistic mean of the 1PL model and a variance shaped like the
Bernoulli one, inflated by a global noise factor k (discrimination a = 1/√k).
Everything here is a function of arrays: calibration from reference models
(§5), Fisher information (§4, App. E), the posterior of θ on a grid, and the
prediction of the full-benchmark score from θ. The CAT method
(:mod:`activeeval.methods.cat`) and the ranker only call these.

Conventions: ``scores`` are arrays of shape (n_models, n_items) with values
in [0, 1] (use :func:`minmax_params` / :func:`minmax_apply` first for metrics
that are not); ``theta`` is ability, ``b`` difficulty, ``k`` the noise factor.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import numpy as np
from scipy.special import expit, log_expit, stdtrit

from activeeval.exceptions import ConfigurationError, InvalidScoresError

__all__ = [
    "CALIBRATION_METHODS",
    "DEFAULT_CLIP",
    "RESPONSES",
    "Z95",
    "Calibration",
    "ScoreIntervalCalibration",
    "ability_correlation",
    "calibrate",
    "corrected_item_total_correlation",
    "default_grid",
    "discrimination",
    "fisher_information",
    "fit_abilities",
    "fit_item_slopes",
    "full_minus_tilde_slope",
    "grid_posterior",
    "information_2pl",
    "interval_factor",
    "item_difficulty",
    "item_noise",
    "joint_fit",
    "log_likelihood",
    "logit_clipped",
    "minmax_apply",
    "minmax_params",
    "model_ability",
    "noise_factor",
    "posterior_moments",
    "response_mean",
    "response_mean_2pl",
    "response_var",
]

#: Proportions are clipped to [DEFAULT_CLIP, 1 − DEFAULT_CLIP] before a logit, so an
#: item that every reference scores 0 (or 1) gets a finite difficulty
#: |b| = log((1 − 1e-3)/1e-3) ≈ 6.91 instead of ±inf. 1e-3 is below 1/K for any
#: realistic number K of reference models, so it only bites on all-0/all-1 items.
DEFAULT_CLIP = 1e-3


# ----------------------------------------------------------------- response
def response_mean(theta: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """μ = 1 / (1 + exp(−(θ − b))), the logistic mean of paper §4 (broadcasts)."""
    return expit(np.subtract(theta, b))


def response_var(mu: np.ndarray | float, k: float) -> np.ndarray:
    """σ² = k·μ(1 − μ), the heteroskedastic variance of paper §4."""
    mu = np.asarray(mu, dtype=float)
    return k * mu * (1.0 - mu)


def logit_clipped(p: np.ndarray | float, clip: float = DEFAULT_CLIP) -> np.ndarray:
    """logit(p) after clipping p to [clip, 1 − clip]: always finite."""
    _check_clip(clip)
    p = np.clip(np.asarray(p, dtype=float), clip, 1.0 - clip)
    return np.log(p) - np.log1p(-p)


def _check_clip(clip: float) -> None:
    if not (0.0 < clip < 0.5):
        raise ConfigurationError(f"clip must be in (0, 0.5) (a proportion bound before the logit), got {clip}")


def _check_unit_scores(scores: np.ndarray, what: str = "scores") -> np.ndarray:
    y = np.asarray(scores, dtype=float)
    if y.ndim != 2:
        raise InvalidScoresError(f"{what} must be a 2-D array (models x items), got shape {y.shape}")
    if not np.all(np.isfinite(y)):
        raise InvalidScoresError(
            f"{what} contain NaN or inf; drop incomplete models or items first (ScoreMatrix.dropna)"
        )
    if y.size and (y.min() < 0.0 or y.max() > 1.0):
        raise InvalidScoresError(
            f"{what} must lie in [0, 1], got range [{y.min():g}, {y.max():g}]; "
            "min-max scale them first (irt.minmax_params / irt.minmax_apply)"
        )
    return y


# --------------------------------------------------------------- calibration
def item_difficulty(scores: np.ndarray, clip: float = DEFAULT_CLIP) -> np.ndarray:
    """Item difficulties b_i = log((1 − p̂_i)/p̂_i) (paper §5, "Item Difficulty").

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items)
        Reference scores in [0, 1], complete.
    clip : float
        p̂_i = mean score on item i is clipped to [clip, 1 − clip], so items
        every reference scores 0 or 1 get a finite b (never NaN/inf).

    Returns
    -------
    ndarray of shape (n_items,)
    """
    y = _check_unit_scores(scores)
    return -logit_clipped(y.mean(axis=0), clip)


def model_ability(scores: np.ndarray, clip: float = DEFAULT_CLIP) -> np.ndarray:
    """Reference abilities θ_j = logit(ȳ_j), ȳ_j = mean scaled score (paper §5), clipped.

    Returns ndarray of shape (n_models,).
    """
    y = _check_unit_scores(scores)
    return logit_clipped(y.mean(axis=1), clip)


def noise_factor(scores: np.ndarray, theta: np.ndarray, b: np.ndarray, n_params: int = 0) -> float:
    """Global noise k by the method of moments (paper §5, "Noise Parameter").

    k = Σ_ij (y_ij − μ_ij)² / Σ_ij μ_ij(1 − μ_ij) · n / (n − n_params),  μ_ij = σ(θ_j − b_i),

    over the n = n_models·n_items scores. ``n_params`` is the number of fitted
    parameters the residuals were computed at (the paper: 0; the joint fit:
    n_models + n_items − 1), the usual degrees-of-freedom correction of a
    quasi-likelihood dispersion, without which k is biased low by that fraction.

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items)
    theta : ndarray of shape (n_models,)
    b : ndarray of shape (n_items,)

    Returns
    -------
    float
        k > 0. A perfectly fitting (deterministic) matrix would give k = 0;
        k is floored at 1e-6 so that a = 1/√k and Ĩ = μ(1−μ)/k stay finite.
    """
    y = _check_unit_scores(scores)
    theta = np.asarray(theta, dtype=float)
    b = np.asarray(b, dtype=float)
    if theta.shape != (y.shape[0],) or b.shape != (y.shape[1],):
        raise ConfigurationError(
            f"theta must have shape ({y.shape[0]},) and b shape ({y.shape[1]},) for scores of shape {y.shape}; "
            f"got {theta.shape} and {b.shape}"
        )
    n = y.size
    if int(n_params) != n_params or not (0 <= n_params < n):
        raise ConfigurationError(f"n_params must be an integer in [0, {n}) for {n} scores, got {n_params}")
    mu = response_mean(theta[:, None], b[None, :])
    denom = float(np.sum(mu * (1.0 - mu)))
    # With θ and b finite (clipped means), μ(1−μ) > 0 per entry, so denom > 0.
    return max(float(np.sum((y - mu) ** 2)) / denom * n / (n - int(n_params)), 1e-6)


def discrimination(k: float) -> float:
    """a = 1/√k, the 1PL discrimination equivalent to the noise k (paper §4)."""
    if not (np.isfinite(k) and k > 0):
        raise ConfigurationError(f"k must be a positive number, got {k}")
    return 1.0 / float(np.sqrt(k))


def _pearson_columns(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pearson correlation of each column of y with x; 0 where a column (or x) is constant."""
    yc = y - y.mean(axis=0, keepdims=True)
    xc = x - x.mean()
    num = xc @ yc
    den = np.sqrt((yc**2).sum(axis=0) * float((xc**2).sum()))
    out = np.zeros(y.shape[1])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


def ability_correlation(scores: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """Pearson correlation of each item's scores with the reference abilities (paper §5 filter).

    Items with a negative value are the "negative discrimination" items that
    the paper removes from the adaptive pool. Constant items (all references
    score the same, e.g. all 0) have no correlation; they get 0 and are kept.

    Returns ndarray of shape (n_items,).
    """
    y = _check_unit_scores(scores)
    return _pearson_columns(y, np.asarray(theta, dtype=float))


def corrected_item_total_correlation(scores: np.ndarray) -> np.ndarray:
    """Correlation of item i with the total over the *other* items (the static-subset criterion, §7.1).

    Returns ndarray of shape (n_items,); 0 for constant items.
    """
    y = _check_unit_scores(scores)
    total = y.sum(axis=1, keepdims=True)
    rest = total - y  # (n_models, n_items): total without item i
    yc = y - y.mean(axis=0, keepdims=True)
    rc = rest - rest.mean(axis=0, keepdims=True)
    num = (yc * rc).sum(axis=0)
    den = np.sqrt((yc**2).sum(axis=0) * (rc**2).sum(axis=0))
    out = np.zeros(y.shape[1])
    ok = den > 0
    out[ok] = num[ok] / den[ok]
    return out


def minmax_params(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-item minimum and width over the calibration models (paper App. A scaling).

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items), finite

    Returns
    -------
    low, width : ndarray of shape (n_items,)
        The scaled score is (x − low)/width clipped to [0, 1]. An item on which
        every calibration model has the same value has width 0; it is given
        width 1 so the map stays finite (such an item carries no ranking
        signal: all references sit at scaled 0 and its b is clipped).
    """
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or not np.all(np.isfinite(x)):
        raise InvalidScoresError("scores to scale must be a complete 2-D array (models x items) of finite numbers")
    low = x.min(axis=0)
    width = x.max(axis=0) - low
    width = np.where(width > 0, width, 1.0)
    return low, width


def minmax_apply(x: np.ndarray | float, low: np.ndarray | float, width: np.ndarray | float) -> np.ndarray:
    """(x − low)/width clipped to [0, 1]: a new model can fall outside the calibration range."""
    return np.clip((np.asarray(x, dtype=float) - low) / width, 0.0, 1.0)


# ------------------------------------------------------- Fisher information
def fisher_information(
    theta: np.ndarray | float, b: np.ndarray | float, k: float, full: bool = False
) -> np.ndarray:
    """Fisher information of one item about θ (paper §4 and App. E).

    Ĩ(θ | b, k) = μ(1 − μ)/k  (``full=False``, the paper's default), or
    I(θ | b, k) = μ(1 − μ)/k + (1 − 2μ)²/2  (``full=True``), the exact
    information of N(μ, kμ(1−μ)): (μ′)²/σ² + [(σ²)′]²/(2σ⁴) with μ′ = μ(1−μ).

    With u = μ(1−μ), (1−2μ)² = 1 − 4u, so I = ½ + u·(a² − 2): linear in u with
    slope a² − 2. For a = 1/√k > √2 both orders items identically (App. E).
    """
    if not (np.isfinite(k) and k > 0):
        raise ConfigurationError(f"k must be a positive number, got {k}")
    mu = response_mean(theta, b)
    u = mu * (1.0 - mu)
    info = u / k
    if full:
        info = info + (1.0 - 2.0 * mu) ** 2 / 2.0
    return info


def full_minus_tilde_slope(k: float) -> float:
    """Slope a² − 2 of the full information in u = μ(1−μ) (App. E): > 0 ⇔ a > √2."""
    return 1.0 / k - 2.0


# ------------------------------------------------------------- posterior
def default_grid(center: float = 0.0, half_width: float = 12.0, n_points: int = 961) -> np.ndarray:
    """The θ grid of the posterior: ``n_points`` equally spaced points on center ± half_width.

    ±12 covers every clipped difficulty (|b| ≤ 6.91) with room for the prior;
    961 points give a spacing of 0.025, far below any posterior sd reached
    with a few hundred items (≈ √k / √(n/4) ≳ 0.05).
    """
    if int(n_points) != n_points or n_points < 3:
        raise ConfigurationError(f"n_points must be an integer >= 3, got {n_points}")
    if not half_width > 0:
        raise ConfigurationError(f"half_width must be > 0, got {half_width}")
    return np.linspace(center - half_width, center + half_width, int(n_points))


def log_likelihood(
    theta: np.ndarray, b: float, x: float | np.ndarray, k: float, likelihood: str = "quasi"
) -> np.ndarray:
    """Log-likelihood of one scaled score x ∈ [0, 1] at every θ in ``theta``.

    Parameters
    ----------
    likelihood : {"quasi", "normal"}
        ``"quasi"`` (default): the quasi-likelihood of the heteroskedastic
        normal model, (1/k)·[x log μ + (1 − x) log(1 − μ)]. Its score is
        (x − μ)/k and its information exactly Ĩ = μ(1−μ)/k: it is the
        likelihood that matches the paper's Ĩ (the mean term of the normal
        likelihood, the variance held fixed). For 0/1 scores it is the 1PL
        (Rasch) likelihood tempered by 1/k.
        ``"normal"``: the full density log N(x; μ, kμ(1−μ)), whose
        information is the full I. Beware: at x = 0 or 1 it grows without
        bound as μ → x (the variance collapses), so on binary data it piles
        the posterior onto the edge of the grid. Prefer "quasi" there.
    """
    if likelihood == "quasi":
        z = theta - b
        # log(1 − μ) = log μ − z, so one log-sigmoid pass gives both terms.
        return (log_expit(z) - (1.0 - x) * z) / k
    if likelihood == "normal":
        mu = response_mean(theta, b)
        # The floor keeps the log finite where μ(1−μ) underflows at the grid's edge.
        var = np.maximum(response_var(mu, k), 1e-300)
        return -0.5 * (np.log(2.0 * np.pi * var) + (x - mu) ** 2 / var)
    raise ConfigurationError(f"likelihood must be 'quasi' or 'normal', got {likelihood!r}")


def grid_posterior(
    theta: np.ndarray,
    prior_mean: float,
    prior_sd: float,
    b: np.ndarray,
    x: np.ndarray,
    k: float,
    likelihood: str = "quasi",
) -> np.ndarray:
    """Normalised posterior of θ on ``theta`` after observing scores x at difficulties b (batch form).

    p(θ | x) ∝ N(θ; θ0, σ0²) · Π_i L(x_i | θ, b_i, k), evaluated in log space.
    Returns the probabilities, ndarray of the shape of ``theta`` summing to 1.
    """
    logp = -0.5 * ((theta - prior_mean) / prior_sd) ** 2
    for bi, xi in zip(np.atleast_1d(b), np.atleast_1d(x), strict=True):
        logp = logp + log_likelihood(theta, float(bi), float(xi), k, likelihood)
    p = np.exp(logp - logp.max())
    return p / p.sum()


def posterior_moments(theta: np.ndarray, weights: np.ndarray) -> tuple[float, float]:
    """Mean and variance of θ under normalised grid weights."""
    mean = float(weights @ theta)
    var = float(weights @ (theta - mean) ** 2)
    return mean, var


# ------------------------------------------------ consistent calibration
def _solve_logistic_sum(offsets: np.ndarray, targets: np.ndarray, start: np.ndarray | None = None,
                        tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """For each row r, the t_r with Σ_i σ(t_r − offsets[r, i]) = targets[r] (safeguarded Newton).

    ``offsets`` has shape (R, M) (or (M,), shared by every row) and each target
    lies strictly inside (0, M). The left side increases in t, so the root is
    unique; it lies in [min_i o + logit(T/M), max_i o + logit(T/M)], and a
    Newton step that leaves the current bracket is replaced by bisection.
    """
    o = np.atleast_2d(np.asarray(offsets, dtype=float))
    t_target = np.asarray(targets, dtype=float)
    m = o.shape[1]
    base = np.log(t_target / m) - np.log1p(-t_target / m)
    lo = o.min(axis=1) + base
    hi = o.max(axis=1) + base
    t = np.clip(np.asarray(start, dtype=float), lo, hi) if start is not None else (lo + hi) / 2.0
    t = np.broadcast_to(t, t_target.shape).copy()
    # each row is its own root: iterate on the rows not yet converged (a row stops once its own step is below tol)
    active = np.arange(t.size)
    shared = o.shape[0] == 1
    for _ in range(max_iter):
        ta, oa = t[active], (o if shared else o[active])
        mu = expit(ta[:, None] - oa)
        g = mu.sum(axis=1) - t_target[active]
        d = (mu * (1.0 - mu)).sum(axis=1)
        hi_a = np.where(g > 0, ta, hi[active])
        lo_a = np.where(g < 0, ta, lo[active])
        new = ta - g / np.maximum(d, 1e-300)
        outside = ~((new > lo_a) & (new < hi_a))
        new = np.where(outside, (lo_a + hi_a) / 2.0, new)
        t[active], lo[active], hi[active] = new, lo_a, hi_a
        active = active[np.abs(new - ta) > tol * (1.0 + np.abs(ta))]
        if active.size == 0:
            break
    return t


def fit_abilities(scores: np.ndarray, b: np.ndarray, clip: float = DEFAULT_CLIP,
                  start: np.ndarray | None = None) -> np.ndarray:
    """Each model's ability on the scale of the difficulties b: the root of Σ_i (y_ji − σ(θ_j − b_i)) = 0.

    This is the estimating equation of the response model's quasi-likelihood
    (its score is Σ_i (y_i − μ_i)/k), i.e. the θ at which the model's expected
    total over the items equals its observed total. Σ_i σ(θ − b_i) increases in
    θ, so θ_j ranks the models exactly as their mean scaled score. A mean of 0
    or 1 has no finite root: the mean is clipped to [clip, 1 − clip] first.

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items), in [0, 1]
    b : ndarray of shape (n_items,)

    Returns ndarray of shape (n_models,).
    """
    y = _check_unit_scores(scores)
    b = np.asarray(b, dtype=float)
    if b.shape != (y.shape[1],):
        raise ConfigurationError(f"b must have shape ({y.shape[1]},) for scores of shape {y.shape}, got {b.shape}")
    _check_clip(clip)
    n = y.shape[1]
    total = np.clip(y.mean(axis=1), clip, 1.0 - clip) * n
    return _solve_logistic_sum(b, total, start)


def _fit_difficulties(y: np.ndarray, theta: np.ndarray, clip: float, start: np.ndarray | None) -> np.ndarray:
    """b_i solving Σ_j (y_ji − σ(θ_j − b_i)) = 0 (t = −b_i solves Σ_j σ(t + θ_j) = Σ_j y_ji)."""
    k_models = y.shape[0]
    total = np.clip(y.mean(axis=0), clip, 1.0 - clip) * k_models
    t0 = None if start is None else -start
    return -_solve_logistic_sum(-theta, total, t0)


def joint_fit(scores: np.ndarray, clip: float = DEFAULT_CLIP, *, tol: float = 1e-7,
              max_iter: int = 1000) -> tuple[np.ndarray, np.ndarray, int]:
    """Joint fit of abilities θ_j and difficulties b_i on one scale (the quasi-likelihood's estimating equations).

    Solves Σ_i (y_ji − σ(θ_j − b_i)) = 0 for every model and
    Σ_j (y_ji − σ(θ_j − b_i)) = 0 for every item — the joint maximum
    (quasi-)likelihood equations of the response model, which under the model
    recover θ, b (and, from the residuals, k) — by alternating exact 1-D
    solves, each of which cannot decrease the quasi-likelihood. The scale's
    origin is free; it is fixed by mean_j θ_j = 0. Item and model means of
    0 or 1 are clipped to [clip, 1 − clip] (finite parameters for items every
    model scores 0 or 1).

    The paper's calibration (b_i = −logit p̂_i, θ_j = logit ȳ_j) puts b on the
    scale of a population of models all at θ = 0 and θ on a scale of its own;
    the two disagree as soon as the models differ, which shifts the prior and
    inflates k. Here both live on the scale the response model uses.

    Returns (theta of shape (n_models,), b of shape (n_items,), iterations).
    """
    y = _check_unit_scores(scores)
    _check_clip(clip)
    b = item_difficulty(y, clip)
    theta = fit_abilities(y, b, clip)
    it = 0
    for it in range(1, max_iter + 1):  # noqa: B007 - the count is read after the loop
        b_new = _fit_difficulties(y, theta, clip, b)
        theta_new = fit_abilities(y, b_new, clip, theta)
        shift = float(theta_new.mean())
        theta_new, b_new = theta_new - shift, b_new - shift
        delta = max(float(np.max(np.abs(b_new - b))), float(np.max(np.abs(theta_new - theta))))
        b, theta = b_new, theta_new
        if delta <= tol:
            break
    return theta, b, it


# ------------------------------------------------- items with their own slope
def response_mean_2pl(theta: np.ndarray | float, a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    """μ = σ(a·(θ − b)): an item whose score moves with ability at its own rate a (broadcasts)."""
    return expit(np.multiply(a, np.subtract(theta, b)))


def fit_item_slopes(scores: np.ndarray, theta: np.ndarray, b: np.ndarray, k: float, *,
                    clip: float = DEFAULT_CLIP, slope_sd: float = 0.5, max_iter: int = 100,
                    tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Per-item slope a_i and difficulty b_i on a *fixed* ability scale θ (anchored two-parameter items).

    Maximises, item by item, the response model's quasi-likelihood
    Σ_j [y_ji log μ_ji + (1 − y_ji) log(1 − μ_ji)] / k with μ_ji = σ(a_i(θ_j − b_i)),
    minus (log a_i)² / (2·slope_sd²): a log-normal prior that shrinks every
    slope towards 1, i.e. towards the one-slope model the abilities were
    fitted with. The abilities are not refitted: they stay on the consistent
    scale (:func:`joint_fit`), on which a model's ability ranks it exactly as
    its mean score — what a ranking is judged by. (Refitting them jointly
    with the slopes gives the two-parameter ability, which weights items by
    their slope and so ranks models differently from their mean score.)
    Fisher scoring with step halving, vectorised over items; item means of
    0 or 1 are clipped to [clip, 1 − clip] as in :func:`item_difficulty`.

    Returns (a of shape (n_items,), b of shape (n_items,)).
    """
    y = _check_unit_scores(scores)
    theta = np.asarray(theta, dtype=float)
    b = np.array(b, dtype=float)
    if theta.shape != (y.shape[0],) or b.shape != (y.shape[1],):
        raise ConfigurationError(f"theta must have shape ({y.shape[0]},) and b ({y.shape[1]},), "
                                 f"got {theta.shape} and {b.shape}")
    if not (np.isfinite(slope_sd) and slope_sd > 0):
        raise ConfigurationError(f"slope_sd must be a positive number, got {slope_sd}")
    p = y.mean(axis=0)
    yy = y + (np.clip(p, clip, 1.0 - clip) - p)[None, :]  # same estimating equation for b, finite root
    lam = k / slope_sd**2  # the prior in the likelihood's units (the quasi-likelihood is divided by k)
    alpha = np.zeros(y.shape[1])

    def objective(yc: np.ndarray, al: np.ndarray, bb: np.ndarray) -> np.ndarray:
        eta = np.exp(al)[None, :] * (theta[:, None] - bb[None, :])
        return (yc * log_expit(eta) + (1.0 - yc) * log_expit(-eta)).sum(axis=0) - 0.5 * lam * al**2

    # each item's (a_i, b_i) is its own problem: iterate on those not yet converged (an item stops once its own
    # step is below tol; the slowest items no longer keep every other item's columns in the products)
    f = objective(yy, alpha, b)
    active = np.arange(y.shape[1])
    for _ in range(max_iter):
        yc, al, bb, fa = yy[:, active], alpha[active], b[active], f[active]
        a = np.exp(al)
        eta = a[None, :] * (theta[:, None] - bb[None, :])
        mu = expit(eta)
        r, w = yc - mu, mu * (1.0 - mu)
        g_al = (r * eta).sum(axis=0) - lam * al
        g_b = -a * r.sum(axis=0)
        h_aa = (w * eta**2).sum(axis=0) + lam
        h_ab = -a * (w * eta).sum(axis=0)
        h_bb = a**2 * w.sum(axis=0)
        det = np.maximum(h_aa * h_bb - h_ab**2, 1e-300)
        d_al = (h_bb * g_al - h_ab * g_b) / det
        d_b = (-h_ab * g_al + h_aa * g_b) / det
        step = np.ones_like(al)
        for _half in range(40):
            new_al, new_b = al + step * d_al, bb + step * d_b
            f_new = objective(yc, new_al, new_b)
            worse = f_new < fa - 1e-12 * (1.0 + np.abs(fa))
            if not worse.any():
                break
            step = np.where(worse, step / 2.0, step)
        keep = ~worse
        moved = np.where(keep, np.abs(step * d_al) + np.abs(step * d_b), 0.0)
        alpha[active] = np.where(keep, new_al, al)
        b[active] = np.where(keep, new_b, bb)
        f[active] = np.where(keep, f_new, fa)
        active = active[moved > tol]
        if active.size == 0:
            break
    return np.exp(alpha), b


#: Pseudo-observations with which each item's noise is shrunk towards the median item's (item_noise).
NOISE_SHRINK = 20.0


def item_noise(scores: np.ndarray, theta: np.ndarray, a: np.ndarray, b: np.ndarray,
               shrink: float = NOISE_SHRINK) -> np.ndarray:
    """Per-item residual variance s_i² around μ = σ(a_i(θ − b_i)), shrunk towards the median item's.

    s_i² = [(K − 2)·v_i + shrink·median(v)] / (K − 2 + shrink), v_i the
    residual variance of item i over the K references (2 fitted parameters per
    item). Items differ in how noisy they are (a sentence whose chrF swings
    between systems for reasons that have nothing to do with their quality),
    which one global k cannot say; the shrinkage keeps an item that K
    references happen to agree on from looking noiseless. Floored at 1e-6.
    """
    y = _check_unit_scores(scores)
    n_models = y.shape[0]
    dof = max(n_models - 2, 1)
    mu = response_mean_2pl(np.asarray(theta, dtype=float)[:, None], a[None, :], b[None, :])
    v = ((y - mu) ** 2).sum(axis=0) / dof
    s2 = (dof * v + shrink * float(np.median(v))) / (dof + shrink)
    return np.maximum(s2, 1e-6)


def information_2pl(theta: np.ndarray | float, a: np.ndarray, b: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """Fisher information about θ of items with μ = σ(a(θ − b)) and Gaussian noise s²: (a·μ(1−μ))² / s²."""
    mu = response_mean_2pl(theta, a, b)
    return (a * mu * (1.0 - mu)) ** 2 / noise


# ------------------------------------------------------- score interval
#: z of a central 95 % normal interval.
Z95 = 1.959963984540054


def interval_factor(z: np.ndarray, level: float = 0.95) -> float:
    """The factor f that makes ±Z95·f·sd cover ``level`` of a new run like those with standardised errors ``z``.

    With n ≥ 1/(1 − level) − 1 runs (19 at 95 %), the split-conformal
    quantile at rank p = (n + 1)·level of the sorted |z|, interpolated
    linearly between the order statistics around p: a new exchangeable run
    falls below the k-th smallest with probability k/(n + 1), so the
    interpolation covers ``level`` on average (the conformal ⌈p⌉-th value
    covers up to level + 1/(n + 1): 97.4 % with 38 runs). With fewer runs,
    the normal-theory prediction bound √(mean z²)·t_{n, (1+level)/2} (a new
    z over the root mean square of n others is t with n degrees of freedom
    when the z are normal). NaN without any run. May be below 1.
    """
    z = np.abs(np.asarray(z, dtype=float))
    z = z[np.isfinite(z)]
    n = z.size
    if n == 0:
        return float("nan")
    p = (n + 1) * level
    if p <= n:
        zs = np.sort(z)
        lo = int(np.floor(p))
        frac = p - lo
        below = zs[lo - 1]
        above = zs[min(lo, n - 1)]
        return float((1.0 - frac) * below + frac * above) / Z95
    return float(np.sqrt(np.mean(z * z)) * stdtrit(n, 0.5 + level / 2.0)) / Z95


@dataclass(frozen=True)
class ScoreIntervalCalibration:
    """How far off CAT's full-benchmark score estimate has been for reference models playing the target.

    At each of ``checkpoints`` (items taken), the factor f by which the
    model's score sd must be multiplied so that the 95 % interval covers the
    references' own full-benchmark scores (:func:`interval_factor` of their
    standardised errors), for three cases: ``within`` (the runs of references
    held out — at random, 5 folds, or as the edge runs below — that CAT's
    outside test classes within), ``above`` (the best references held out,
    calibrated on those below them, plus the fold runs classed above) and
    ``below`` (the worst held out, plus the fold runs classed below). None
    where too few references played that case to measure it. ``runs`` counts
    the fold runs and the above and below edge runs;
    ``local_error``: whether the runs' variances had the local error check
    (a CAT must use the calibration learned for its own setting).

    ``above_reach`` (``below_reach``): at each checkpoint, the furthest any
    ``above`` (``below``) run lay beyond the references it was calibrated on
    (:func:`activeeval.methods.cat.outside_margin`, raw score units): how far
    out the ``above`` (``below``) factor was measured. A target further out
    has its factor raised in proportion to its distance over the reach
    (:meth:`activeeval.methods.cat.ContinuousCAT.estimate`). None (a
    calibration stored before them): no such check.
    """

    checkpoints: tuple[int, ...]
    within: tuple[float | None, ...]
    above: tuple[float | None, ...]
    below: tuple[float | None, ...]
    runs: tuple[int, ...] = (0, 0, 0)  # one count per case (within, above, below)
    local_error: bool = False
    above_reach: tuple[float | None, ...] | None = None
    below_reach: tuple[float | None, ...] | None = None

    CASES = ("within", "above", "below")
    REACHES = ("above_reach", "below_reach")

    def factor(self, n: int, case: str = "within") -> float | None:
        """f after ``n`` items, for ``case``: linear in log n between checkpoints, the end values outside.

        None when the case was not measured at the checkpoints around ``n``.
        """
        return self._at(n, getattr(self, case))

    def reach(self, n: int, case: str) -> float | None:
        """How far beyond the references the ``case`` ("above" or "below") runs reached after ``n`` items
        (interpolated as :meth:`factor`); None when not measured or not stored."""
        values = getattr(self, f"{case}_reach")
        return None if values is None else self._at(n, values)

    def _at(self, n: int, values: tuple[float | None, ...]) -> float | None:
        cps = self.checkpoints
        if not cps:
            return None
        if n <= cps[0]:
            return values[0]
        if n >= cps[-1]:
            return values[-1]
        j = int(np.searchsorted(cps, n, side="right"))
        lo, hi = values[j - 1], values[j]
        if lo is None or hi is None:
            return None
        w = (np.log(n) - np.log(cps[j - 1])) / (np.log(cps[j]) - np.log(cps[j - 1]))
        return float((1.0 - w) * lo + w * hi)

    def to_dict(self) -> dict:
        """Plain JSON values (a session stores them): lists, None for what was not measured."""
        out: dict[str, object] = {
            "checkpoints": list(self.checkpoints), "within": list(self.within), "above": list(self.above),
            "below": list(self.below), "runs": list(self.runs), "local_error": self.local_error}
        for key in self.REACHES:
            values = getattr(self, key)
            if values is not None:  # absent (not None) when not learned: an older session's dict, unchanged
                out[key] = list(values)
        return out

    @classmethod
    def from_dict(cls, d: dict | ScoreIntervalCalibration) -> ScoreIntervalCalibration:
        """The inverse of :meth:`to_dict`; ConfigurationError naming what is wrong."""
        if isinstance(d, ScoreIntervalCalibration):
            return d
        try:
            cps = tuple(int(c) for c in d["checkpoints"])
            cases = {c: tuple(None if v is None else float(v) for v in d[c]) for c in cls.CASES}
            runs = tuple(int(r) for r in d.get("runs", (0, 0, 0)))
            local_error = d.get("local_error", False)
            if not isinstance(local_error, (bool, np.bool_)):
                raise TypeError(local_error)
            reaches = {key: None if d.get(key) is None else tuple(None if v is None else float(v) for v in d[key])
                       for key in cls.REACHES}
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"interval_calibration must be a dict with checkpoints, within, above and below lists, got {d!r}; "
                "drop it to learn it from the reference"
            ) from exc
        ok = (len(cps) > 0 and all(b > a for a, b in itertools.pairwise(cps)) and cps[0] >= 1 and len(runs) == 3
              and all(len(v) == len(cps) for v in cases.values())
              and all(v is None or (np.isfinite(v) and v > 0) for vs in cases.values() for v in vs)
              and all(vs is None or (len(vs) == len(cps) and all(v is None or (np.isfinite(v) and v >= 0) for v in vs))
                      for vs in reaches.values()))
        if not ok:
            raise ConfigurationError(
                f"interval_calibration needs increasing positive checkpoints and one positive factor (or None) per "
                f"checkpoint in within, above and below (and a non-negative reach or None per checkpoint in "
                f"above_reach and below_reach, if given), got {d!r}; drop it to learn it from the reference"
            )
        return cls(cps, cases["within"], cases["above"], cases["below"], runs,
                   bool(local_error), reaches["above_reach"], reaches["below_reach"])


# ---------------------------------------------------------------- bundle
@dataclass(frozen=True)
class Calibration:
    """Item parameters fitted on reference models (paper §5).

    Attributes
    ----------
    b : ndarray of shape (n_items,)
        Difficulties, finite.
    k : float
        Global noise factor used by CAT (``k_fit · k_factor``); ``a = 1/√k``.
    theta_ref : ndarray of shape (n_models,)
        Reference abilities: on the scale of b (the joint fit) for
        ``method="consistent"``, θ_j = logit(ȳ_j) for ``method="paper"``.
    correlation : ndarray of shape (n_items,)
        Item score vs ability correlation (0 for constant items).
    pool : ndarray of bool, shape (n_items,)
        Items in the adaptive pool (correlation ≥ 0 unless filtering is off).
    low, width : ndarray of shape (n_items,)
        Min-max map from raw scores to [0, 1] (low 0, width 1 when unscaled).
    scaled : bool
        Whether the raw scores were min-max scaled.
    method : {"consistent", "paper"}
        How b, θ and k were fitted (see :func:`calibrate`).
    k_factor : float
        Factor applied to the fitted noise (1 unless set, :meth:`with_k_factor`).
    error_scale, error_floor : float
        The ability's error model Var(θ̂ − θ*) = error_scale · SE² + error_floor
        (1 and 0 unless learned on reference pseudo-targets, see
        :func:`activeeval.methods.cat.learn_error_model`).
    slopes, noise : ndarray of shape (n_items,) or None
        Two-parameter items (``response="2pl"``): slopes and per-item noise
        variances s_i² (:func:`fit_item_slopes`, :func:`item_noise`); None
        for the one-slope (Rasch) response model with the global k.
    b_scale : ndarray of shape (n_items,) or None
        The one-slope difficulties that define the ability scale (a model's
        true ability is :meth:`true_ability`); None means ``b``.
    interval : ScoreIntervalCalibration or None
        The full-benchmark score interval's calibration on reference
        pseudo-targets (:func:`activeeval.methods.cat.learn_reference_errors`);
        None until learned.
    """

    b: np.ndarray
    k: float
    theta_ref: np.ndarray
    correlation: np.ndarray
    pool: np.ndarray
    low: np.ndarray
    width: np.ndarray
    scaled: bool
    method: str = "paper"
    k_factor: float = 1.0
    error_scale: float = 1.0
    error_floor: float = 0.0
    slopes: np.ndarray | None = None
    noise: np.ndarray | None = None
    b_scale: np.ndarray | None = None
    interval: ScoreIntervalCalibration | None = None

    @property
    def response(self) -> str:
        """"rasch" (one slope, global k) or "2pl" (a slope and a noise per item)."""
        return "rasch" if self.slopes is None else "2pl"

    def true_ability(self, scaled_scores: np.ndarray, clip: float = DEFAULT_CLIP) -> np.ndarray:
        """The ability of models whose scaled scores on every item are known (the estimand of a CAT run)."""
        b = self.b if self.b_scale is None else self.b_scale
        return fit_abilities(np.atleast_2d(scaled_scores), b, clip)

    def item_mean(self, theta: np.ndarray | float, items: np.ndarray | slice | int = slice(None)) -> np.ndarray:
        """Expected scaled score of ``items`` at ability θ (broadcast θ as (G, 1) for a grid)."""
        if self.slopes is None:
            return response_mean(theta, self.b[items])
        return response_mean_2pl(theta, self.slopes[items], self.b[items])

    def item_var(self, mu: np.ndarray, items: np.ndarray | slice | int = slice(None)) -> np.ndarray:
        """Variance of the scaled score of ``items`` around their mean μ: k·μ(1−μ) or s_i²."""
        if self.noise is None:
            return response_var(mu, self.k)
        return np.broadcast_to(self.noise[items], np.shape(mu))

    @property
    def k_fit(self) -> float:
        """The noise fitted on the reference residuals, before the empirical factor."""
        return self.k / self.k_factor

    def with_k_factor(self, factor: float) -> Calibration:
        """This calibration with k = k_fit · ``factor``."""
        if not (np.isfinite(factor) and factor > 0):
            raise ConfigurationError(f"k_factor must be a positive number, got {factor}")
        return replace(self, k=self.k_fit * float(factor), k_factor=float(factor))

    def with_error_model(self, scale: float, floor: float) -> Calibration:
        """This calibration with the ability error model Var = ``scale`` · SE² + ``floor``."""
        if not (np.isfinite(scale) and scale > 0):
            raise ConfigurationError(f"error_scale must be a positive number, got {scale}")
        if not (np.isfinite(floor) and floor >= 0):
            raise ConfigurationError(f"error_floor must be a non-negative number, got {floor}")
        return replace(self, error_scale=float(scale), error_floor=float(floor))

    def with_interval(self, interval: ScoreIntervalCalibration | dict | None) -> Calibration:
        """This calibration with the score interval's calibration (a dict as
        :meth:`ScoreIntervalCalibration.to_dict`)."""
        return replace(self, interval=None if interval is None else ScoreIntervalCalibration.from_dict(interval))

    # the arrays of :meth:`to_arrays`, in order (the optional ones last; absent ones are left out)
    _ARRAYS = ("b", "theta_ref", "correlation", "pool", "low", "width")
    _OPTIONAL = ("slopes", "noise", "b_scale")

    def to_arrays(self) -> tuple[dict, list[np.ndarray]]:
        """Plain data: a JSON object (the numbers, the method, the interval's calibration, which optional
        arrays are present) and the arrays in a fixed order; :meth:`from_arrays` reads them back exactly.
        (What the user cache stores: :mod:`activeeval.user_cache`.)"""
        present = [name for name in self._OPTIONAL if getattr(self, name) is not None]
        meta = {"k": float(self.k), "scaled": bool(self.scaled), "method": self.method,
                "k_factor": float(self.k_factor), "error_scale": float(self.error_scale),
                "error_floor": float(self.error_floor), "optional": present,
                "interval": None if self.interval is None else self.interval.to_dict()}
        return meta, [np.asarray(getattr(self, name)) for name in (*self._ARRAYS, *present)]

    @classmethod
    def from_arrays(cls, meta: dict, arrays: tuple[np.ndarray, ...] | list[np.ndarray]) -> Calibration:
        """The inverse of :meth:`to_arrays`; ValueError when the data are not a calibration's (shapes, kinds,
        numbers)."""
        present = list(meta["optional"])
        names = (*cls._ARRAYS, *present)
        if not set(present) <= set(cls._OPTIONAL) or len(arrays) != len(names):
            raise ValueError("stored CAT calibration: arrays")
        got = dict(zip(names, arrays, strict=True))
        n_items = got["b"].shape
        ok = (all(got[name].shape == n_items and got[name].dtype == (np.bool_ if name == "pool" else np.float64)
                  for name in names if name != "theta_ref")
              and got["theta_ref"].ndim == 1 and got["theta_ref"].dtype == np.float64 and len(n_items) == 1
              and meta["method"] in CALIBRATION_METHODS and isinstance(meta["scaled"], bool)
              and all(isinstance(meta[k], float) and np.isfinite(meta[k])
                      for k in ("k", "k_factor", "error_scale", "error_floor")))
        if not ok:
            raise ValueError("stored CAT calibration: shapes, kinds or numbers")
        return cls(**got, k=meta["k"], scaled=meta["scaled"], method=meta["method"], k_factor=meta["k_factor"],
                   error_scale=meta["error_scale"], error_floor=meta["error_floor"],
                   interval=None if meta["interval"] is None else ScoreIntervalCalibration.from_dict(meta["interval"]))

    def ability_var(self, posterior_var: float) -> float:
        """The honest variance of θ̂ − θ* for a posterior variance SE² (the error model)."""
        return self.error_scale * float(posterior_var) + self.error_floor

    @property
    def a(self) -> float:
        return discrimination(self.k)

    @property
    def n_items(self) -> int:
        return int(self.b.shape[0])

    def scale(self, x: np.ndarray | float, item: int | np.ndarray | slice = slice(None)) -> np.ndarray:
        """Raw score(s) of ``item`` mapped to [0, 1]."""
        if not self.scaled:
            return np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
        return minmax_apply(x, self.low[item], self.width[item])


CALIBRATION_METHODS = ("consistent", "paper")
#: Response models: one slope and a global noise k (the paper's), or a slope and a noise per item.
RESPONSES = ("rasch", "2pl")


def calibrate(
    scores: np.ndarray,
    *,
    method: str = "consistent",
    response: str = "rasch",
    scale: str = "auto",
    clip: float = DEFAULT_CLIP,
    filter_negative: bool = True,
) -> Calibration:
    """Fit b, θ_ref, k (and a = 1/√k) on complete reference scores (paper §5).

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items)
        Complete raw reference scores (no NaN: apply ScoreMatrix.dropna first).
    method : {"consistent", "paper"}
        ``"consistent"`` (default): abilities and difficulties fitted jointly
        on one scale (:func:`joint_fit`) and k from the residuals there, with
        the degrees-of-freedom correction. ``"paper"``: the paper's §5
        formulas, b_i = −logit p̂_i, θ_j = logit ȳ_j and k from the residuals
        at those θ — the two are on different scales when the models differ
        (on AlpacaEval 2 the abilities' mean is −2.4 where the response model
        puts the models near 0, and k is 4.4 times too large).
    response : {"rasch", "2pl"}
        ``"rasch"`` (default): μ = σ(θ − b), variance k·μ(1−μ). ``"2pl"``
        (consistent calibration only): on the same ability scale, each item
        gets its own slope a_i and noise s_i² (:func:`fit_item_slopes`,
        :func:`item_noise`), so items that separate models well weigh more.
    scale : {"auto", "minmax", "none"}
        "minmax" scales each item to [0, 1] over the references (App. A);
        "auto" does so only if some score lies outside [0, 1].
    clip : float
        Proportion clip before each logit (see :data:`DEFAULT_CLIP`).
    filter_negative : bool
        Drop items whose scores correlate negatively with the reference
        abilities from the adaptive pool (paper §5).
    """
    if scale not in ("auto", "minmax", "none"):
        raise ConfigurationError(f"scale must be 'auto', 'minmax' or 'none', got {scale!r}")
    if method not in CALIBRATION_METHODS:
        raise ConfigurationError(f"calibration method must be 'consistent' or 'paper', got {method!r}")
    if response not in RESPONSES:
        raise ConfigurationError(f"response must be 'rasch' or '2pl', got {response!r}")
    if response == "2pl" and method == "paper":
        raise ConfigurationError("response='2pl' needs the consistent calibration (the paper's is one-slope only)")
    _check_clip(clip)
    x = np.asarray(scores, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise InvalidScoresError(
            f"calibration needs at least 2 reference models and 2 items, got shape {x.shape}"
        )
    if not np.all(np.isfinite(x)):
        raise InvalidScoresError(
            "calibration scores contain NaN or inf; drop incomplete models or items first (ScoreMatrix.dropna)"
        )
    use_minmax = scale == "minmax" or (scale == "auto" and (x.min() < 0.0 or x.max() > 1.0))
    if use_minmax:
        low, width = minmax_params(x)
        y = minmax_apply(x, low, width)
    else:
        if x.min() < 0.0 or x.max() > 1.0:
            raise InvalidScoresError(
                f"scores lie in [{x.min():g}, {x.max():g}], outside [0, 1], and scale='none'; use scale='minmax'"
            )
        low, width = np.zeros(x.shape[1]), np.ones(x.shape[1])
        y = x
    if method == "paper":
        b = item_difficulty(y, clip)
        theta = model_ability(y, clip)
        k = noise_factor(y, theta, b)
    else:
        theta, b, _ = joint_fit(y, clip)
        n_params = y.shape[0] + y.shape[1] - 1
        k = noise_factor(y, theta, b, n_params=n_params if n_params < y.size else 0)
    corr = ability_correlation(y, theta)
    pool = corr >= 0 if filter_negative else np.ones(y.shape[1], dtype=bool)
    extra: dict = {}
    if response == "2pl":
        a, b2 = fit_item_slopes(y, theta, b, k, clip=clip)
        extra = {"slopes": a, "noise": item_noise(y, theta, a, b2), "b_scale": b}
        b = b2
    return Calibration(b=b, k=k, theta_ref=theta, correlation=corr, pool=pool, low=low, width=width,
                       scaled=use_minmax, method=method, **extra)
