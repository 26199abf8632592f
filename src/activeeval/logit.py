"""Pure maths of the logit-normal BayesAME variants (BayesAME paper App. B.3; SPEC.md §1; docs/MATHS.md).

A latent f ∈ R^B (one value per bucket) is Gaussian, and the bucket ability
in score space is θ_b = low + (high − low) σ(f_b), σ the logistic function.

* **continuous scores** — scores are rescaled to [0, 1], clipped to
  [ε, 1 − ε] and logit-transformed; logit(s_i) | f ~ N(f_b, N_b σ²) is an
  exact Gaussian model in logit space (the bucket posterior of
  :mod:`activeeval.gaussian`, unchanged).
* **binary scores** — s_i | f ~ Bernoulli(σ(f_b)), linearised around a
  reference point f_b,0 (Osborne et al. 2012): s = σ(f_b,0) + σ'(f_b,0)(f_b − f_b,0) + e,
  Var(e) = σ'(f_b,0), i.e. the *working response*
  z = f_b,0 + (s − σ(f_b,0)) / σ'(f_b,0) observes f_b with noise variance
  1 / σ'(f_b,0) (:func:`bernoulli_working_response`).

Back in score space, E[θ_b] uses the probit approximation of MacKay (1992),
E[σ(f)] ≈ σ(κ m), κ = 1/√(1 + π v/8) for f ~ N(m, v) (:func:`moderated_mean`),
and the covariance of θ the *statistical linearisation* θ_b ≈ E[θ_b] + g_b (f_b − m_b)
with g_b = ∂E[σ(f_b)]/∂m_b = E[σ'(f_b)] (Stein's lemma), from the same
approximation g_b ≈ κ σ'(κ m_b) (:func:`moderated_slope`); it tends to the
delta method's σ'(m_b) as v → 0. Var(R) and the information gain are then
the Gaussian model's Eq. 2 and Eq. 6 with u replaced by g ∘ u
(:func:`linearised_var_r`, :func:`linearised_information_gain`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = [
    "LOGIT_EPS",
    "bernoulli_working_response",
    "linearised_information_gain",
    "linearised_var_r",
    "logit",
    "moderated_mean",
    "moderated_slope",
    "to_unit",
]

#: Default clip ε of logit(·): scores (rescaled to [0, 1]) and reference points are clipped to [ε, 1 − ε],
#: so logit stays within ±6.9; 0 and 1 themselves have no finite logit.
LOGIT_EPS = 1e-3
_PROBIT = np.pi / 8.0  # λ² of σ(x) ≈ Φ(λx), the probit with the logistic's slope 1/4 at 0 (MacKay 1992)


def to_unit(scores: np.ndarray | float, low: float, high: float) -> np.ndarray:
    """Scores in [low, high] rescaled to [0, 1] (same shape)."""
    return (np.asarray(scores, dtype=float) - low) / (high - low)


def logit(p: np.ndarray | float, eps: float = LOGIT_EPS) -> np.ndarray:
    """log(p / (1 − p)) of p clipped to [ε, 1 − ε] (same shape as ``p``)."""
    q = np.clip(np.asarray(p, dtype=float), eps, 1.0 - eps)
    return np.log(q) - np.log1p(-q)


def _kappa(var: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(1.0 + _PROBIT * np.maximum(np.asarray(var, dtype=float), 0.0))


def moderated_mean(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """E[σ(f)] ≈ σ(m / √(1 + π v/8)) for f ~ N(m, v), elementwise (paper App. B.3, MacKay 1992).

    Parameters
    ----------
    mean, var : ndarray of shape (B,)
        Posterior means m_b and variances v_b of f.
    """
    return expit(_kappa(var) * np.asarray(mean, dtype=float))


def moderated_slope(mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """g = ∂E[σ(f)]/∂m = E[σ'(f)] ≈ κ σ'(κ m) for f ~ N(m, v), elementwise (shape of ``mean``).

    The slope of the best linear predictor of σ(f) from f (statistical
    linearisation: Cov(σ(f), f) = E[σ'(f)] v by Stein's lemma), from the
    probit approximation of :func:`moderated_mean`; σ'(m) as v → 0.
    """
    kappa = _kappa(var)
    p = expit(kappa * np.asarray(mean, dtype=float))
    return kappa * p * (1.0 - p)


def bernoulli_working_response(
    p0: np.ndarray, n_obs: np.ndarray, sum_obs: np.ndarray, eps: float = LOGIT_EPS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Bernoulli likelihood linearised around σ(f_b,0) = p0_b, as Gaussian observations of f.

    s_i ≈ p0 + g0 (f_b − f_b,0) + e_i with g0 = p0 (1 − p0) = σ'(f_b,0) and
    Var(e_i) = g0 (the Bernoulli variance at the reference point). Divided by
    g0: z_i = f_b,0 + (s_i − p0)/g0 = f_b + e_i/g0, noise variance 1/g0; the
    mean of a bucket's n_b working responses is z̄_b = f_b,0 + (s̄_b − p0)/g0.

    Parameters
    ----------
    p0 : ndarray of shape (B,)
        Reference points in probability space (clipped here to [ε, 1 − ε]).
    n_obs, sum_obs : ndarray of shape (B,)
        n_b and Σ s_i over the evaluated items of each bucket.

    Returns
    -------
    f0 : ndarray (B,)
        logit(p0), the reference points.
    z_sum : ndarray (B,)
        n_b z̄_b (0 where n_b = 0).
    noise : ndarray (B,)
        1/g0, the noise variance of one working response in each bucket.
    """
    p = np.clip(np.asarray(p0, dtype=float), eps, 1.0 - eps)
    f0 = np.log(p) - np.log1p(-p)
    g0 = p * (1.0 - p)
    n_obs = np.asarray(n_obs, dtype=float)
    z_sum = n_obs * f0 + (np.asarray(sum_obs, dtype=float) - n_obs * p) / g0
    return f0, z_sum, 1.0 / g0


def linearised_var_r(
    remaining: np.ndarray,
    slope: np.ndarray,
    cov_su: np.ndarray,
    noise_slope: np.ndarray,
    noise: np.ndarray,
    n_items: int,
) -> float:
    """Eq. 2 through the linearisation: Var(R | s_C) ≈ (Σ_b u_b a_b² r_b + (g∘u)ᵀ Σ|C (g∘u)) / N².

    R = (1/N)(Σ_C s_i + Σ_b Σ_{i∈U_b} s_i) with s_i ≈ θ_b + a_b η_i,
    θ_b ≈ E[θ_b] + g_b (f_b − m_b) and η_i the item's noise in the latent
    space, of variance r_b. With g = a = 1 and r = N_b σ² this is Eq. 2.

    Parameters
    ----------
    remaining : ndarray (B,)
        u, unevaluated items per bucket.
    slope : ndarray (B,)
        g_b, ∂θ_b/∂f_b.
    cov_su : ndarray (B,)
        Σ|C (g ∘ u), Σ|C the posterior covariance of f.
    noise_slope, noise : ndarray (B,)
        a_b (score change per unit of an item's latent noise) and r_b (its variance).
    """
    w = slope * remaining
    total = float(remaining @ (noise_slope * noise_slope * noise)) + float(w @ cov_su)
    return max(total, 0.0) / (n_items * n_items)


def linearised_information_gain(
    cov_su: np.ndarray, post_diag: np.ndarray, noise_slope: np.ndarray, noise: np.ndarray, scaled_var: float
) -> np.ndarray:
    """Eq. 6 through the linearisation: information about R of one more item of each bucket, shape (B,).

    An item of bucket b gives y = f_b + η (the logit score, or the working
    response), Var(y) = v_b = Σ|C_bb + r_b, and Cov(y, N R) = c_b =
    (Σ|C (g∘u))_b + a_b r_b; both are jointly Gaussian under the
    linearisation, so IG_b = −½ log(1 − c_b² / (N² Var(R) v_b)) ≥ 0.
    With g = a = 1 and r = N_b σ² this is :func:`activeeval.gaussian.information_gain`.

    Parameters
    ----------
    cov_su : ndarray (B,)
        Σ|C (g ∘ u).
    post_diag : ndarray (B,)
        diag(Σ|C).
    noise_slope, noise : ndarray (B,)
        a_b and r_b as in :func:`linearised_var_r`.
    scaled_var : float
        N² Var(R | s_C).
    """
    c = cov_su + noise_slope * noise
    v = np.maximum(post_diag, 0.0) + noise
    if scaled_var <= 0.0:
        return np.zeros_like(c)
    rho2 = np.clip(c * c / (scaled_var * v), 0.0, 1.0 - 1e-15)
    return -0.5 * np.log1p(-rho2)
