"""Design-based (sampling) maths: what a uniformly random sample of items says about R.

Pure functions, vectorised over runs where it matters (the backtest replays
call them on whole trajectories).

* :func:`sampling_var_floor` — the smallest variance a mean of ``n`` random
  items may claim: the Wilson score interval for binary scores, and for
  bounded continuous scores the same rare-event bound applied to the part of
  the score range no observed item has reached. It keeps a run of equal
  scores (all 0 on a rare-success benchmark, say) from giving a zero-width
  interval: Eq. 9 alone gives s² = 0 there and its interval covers the truth
  far less often than it claims.
* :class:`Prequential` — an unbiased estimate of R from the items of a run
  that were drawn uniformly at random, with a model's predictions as a
  control variate: what the default BayesAME reports once the references
  stop describing the target (docs/MATHS.md).
* :class:`RidgeControl` — AIPW's item-level ridge prediction of the target's
  score from the reference models' scores on the same item, fitted on every
  item scored so far (random or chosen): a control variate for
  :class:`Prequential` through which items scored before a switch keep counting.
"""

from __future__ import annotations

import functools
from statistics import NormalDist

import numpy as np

__all__ = ["RIDGE_ALPHA", "Prequential", "RidgeControl", "effective_sample_size", "sampling_var_floor", "wilson_bounds"]

#: :class:`RidgeControl`'s penalty until it chooses one by leave-one-out error: AIPWPred's (``Ridge(alpha=10)``).
RIDGE_ALPHA = 10.0
#: The normal quantile of a two-sided 95 % interval, Φ⁻¹(0.975).
Z95 = 1.959963984540054
#: The shapes of an interval with a floor (BayesAME's design-based phase, RS-Mean: their ``interval`` option):
#: symmetric, each side of the floor on its own (:func:`two_sided`), the floor's interval as a whole.
INTERVALS = ("symmetric", "sides", "wilson")
#: Up to this many reference models the ridge keeps its K × K sums (primal); beyond, it solves in the items (dual).
RIDGE_PRIMAL_MAX = 512
#: The ridge control's penalties, relative to tr(X_cᵀ X_c)/K; the choice is by leave-one-out error.
RIDGE_ALPHAS = tuple(float(a) for a in np.logspace(-3, 2, 11))
#: Items before the ridge control chooses its penalty by leave-one-out error.
RIDGE_CV_FROM = 5


def effective_sample_size(n: np.ndarray | float, n_items: int) -> np.ndarray:
    """n' = n (N − 1) / (N − n): the sample size whose with-replacement variance p(1−p)/n'
    equals the without-replacement variance p(1−p)/n · (N − n)/(N − 1) of n of N items.

    ``inf`` at n = N (nothing is left to estimate).
    """
    n = np.asarray(n, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(n >= n_items, np.inf, n * (n_items - 1) / np.maximum(n_items - n, 1e-300))


def wilson_bounds(p: np.ndarray, n_eff: np.ndarray, z: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval (L, U) for a proportion ``p`` observed in ``n_eff`` trials.

    L, U = (p + z²/2n ∓ z sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n); at n = inf, (p, p).
    """
    p = np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    n_eff = np.asarray(n_eff, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(np.isfinite(n_eff), 1.0 / n_eff, 0.0)
    z2 = z * z
    denom = 1.0 + z2 * inv
    centre = (p + 0.5 * z2 * inv) / denom
    half = z * np.sqrt(np.maximum(p * (1.0 - p) * inv + 0.25 * z2 * inv * inv, 0.0)) / denom
    return centre - half, centre + half


def sampling_var_floor(
    mean: np.ndarray | float,
    low_seen: np.ndarray | float,
    high_seen: np.ndarray | float,
    n: np.ndarray | float,
    n_items: int,
    score_range: tuple[float, float] | None,
    binary: bool,
    z: float = Z95,
    split: bool = False,
) -> np.ndarray:
    """Smallest honest variance of a mean of ``n`` uniformly random items (without replacement).

    Parameters
    ----------
    mean : ndarray
        The sample mean of the ``n`` scores (any shape, broadcast with the others).
    low_seen, high_seen : ndarray
        The smallest and largest of those scores.
    n : ndarray
        Number of scores, 1 ≤ n ≤ N.
    n_items : int
        N.
    score_range : (low, high) or None
        Range of a score; None (unbounded scores) gives a floor of 0.
    binary : bool
        0/1 scores: the floor is the Wilson score interval's.
    z : float
        Normal quantile of the interval (1.96 for 95 %).

    Returns
    -------
    ndarray
        A variance v such that mean ± z·sqrt(v) contains

        * **binary**: the Wilson score interval of ``mean`` at the effective
          sample size n' = n(N − 1)/(N − n) (:func:`effective_sample_size`);
        * **continuous**: the shift of the mean that a fraction
          z²/(n' + z²) of unseen items at the far end of the range would cause,
          (z²/(n' + z²)) · max(low_seen − low, high − high_seen) — the Wilson
          upper bound for "no observed item reached this part of the range",
          which for 0/1 data with only zeros seen is exactly Wilson's.

        0 at n = N.

        With ``split``, the symmetric interval mean ± z·sqrt(v) need not
        hold *both* sides of the interval above: a miss below the truth and a
        miss above it are the two tails of the error α = 2 Φ(−z), and they
        need not be α/2 each. With α = α_lo + α_hi, the half-width
        max(mean − L(z_lo), U(z_hi) − mean) (L, U the one-sided bounds above
        at z_lo = Φ⁻¹(1 − α_lo), z_hi = Φ⁻¹(1 − α_hi)) still leaves each side
        missing at most its own share, and the floor takes the split (on a
        grid of 99) that makes it smallest. Near a bound of the range the
        bounds are lopsided (Wilson's at 0.9 from 14 items: 0.12 above, 0.27
        below) and the symmetric interval around the mean needed the long
        side on both; the split spends most of α on the long side, where the
        misses are, and the interval is narrower at the nominal coverage
        (docs/benchmarks/history.md, "Issue 25 (stop 36): the floors of a
        plain mean, a random start with AIPW's ridge, and where the misses
        are"; ``benchmarks/floor_coverage.py``).
    """
    if score_range is None:
        return np.zeros(np.broadcast(mean, n).shape)
    n_eff = effective_sample_size(n, n_items)
    if not split:
        return (_half_width(mean, low_seen, high_seen, n_eff, score_range, binary, z, z) / z) ** 2
    # every split at once, along a last axis, and the narrowest
    z_lo, z_hi = _split_quantiles(float(z))
    mean, low_seen, high_seen, n_eff = (np.asarray(a, dtype=float)[..., None]
                                        for a in (mean, low_seen, high_seen, n_eff))
    return (_half_width(mean, low_seen, high_seen, n_eff, score_range, binary, z_lo, z_hi).min(axis=-1) / z) ** 2


def sampling_side_floors(
    mean: np.ndarray | float,
    low_seen: np.ndarray | float,
    high_seen: np.ndarray | float,
    n: np.ndarray | float,
    n_items: int,
    score_range: tuple[float, float] | None,
    binary: bool,
    z: float = Z95,
) -> tuple[np.ndarray, np.ndarray]:
    """Each side of :func:`sampling_var_floor`'s interval on its own: (v_low, v_high) such that
    [mean − z·sqrt(v_low), mean + z·sqrt(v_high)] is the Wilson score interval at the effective sample size
    (0/1 scores), or reaches the unseen gap's bound on each side (bounded continuous scores).

    ``sampling_var_floor`` is the larger of the two (the symmetric interval as wide as the longer side); an
    interval reported with its two sides (:attr:`~activeeval.methods.estimate.Estimate.shift`) need not widen the
    short side to the long one's. Near 0 or 1 Wilson's sides differ by a factor of two and more (0.9 from 14
    items: 0.12 above, 0.27 below). Both 0 at n = N, and with ``score_range`` None.
    """
    shape = np.broadcast(mean, n).shape
    if score_range is None:
        return np.zeros(shape), np.zeros(shape)
    below, above = _sides(mean, low_seen, high_seen, effective_sample_size(n, n_items), score_range, binary, z, z)
    return (np.broadcast_to(np.maximum(below, 0.0) / z, shape) ** 2,
            np.broadcast_to(np.maximum(above, 0.0) / z, shape) ** 2)


def two_sided(var: np.ndarray | float, var_low: np.ndarray | float, var_high: np.ndarray | float,
              whole: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(variance, shift) of an interval with floors (``var_low``, ``var_high``) on its two sides
    (:func:`sampling_side_floors`) around an estimate of variance ``var``.

    * ``whole`` False: each side floored on its own, its standard deviation max(sd, sqrt(floor)) — never
      shorter than the estimate's own sd on either side (BayesAME's design-based phase: its estimate is not a
      plain mean, and in extrapolation the controls' bias lies on the short side);
    * ``whole`` True: the floors' interval as a whole wherever its longer side is longer than z·sd — both of
      its sides as they are, the shorter one too — else the symmetric interval: for a plain mean of 0/1 scores
      (RS-Mean), Wilson's interval, honest as a whole (near 0 or 1 its short side is shorter than the normal
      interval's, which over-covers on that side).

    The variance is that of the symmetric interval of the same width, ((sd_low + sd_high)/2)², and the shift
    (sd_high − sd_low)/2 moves its centre (:class:`~activeeval.methods.estimate.Estimate`'s ``var`` and
    ``shift``). With equal floors and ``whole`` False it is (max(var, floor), 0): the symmetric floor.
    """
    var = np.maximum(np.asarray(var, dtype=float), 0.0)
    var_low, var_high = np.maximum(var_low, 0.0), np.maximum(var_high, 0.0)
    sd = np.sqrt(var)
    if whole:
        floors = np.maximum(var_low, var_high) > var
        sd_low = np.where(floors, np.sqrt(var_low), sd)
        sd_high = np.where(floors, np.sqrt(var_high), sd)
    else:
        sd_low, sd_high = np.maximum(sd, np.sqrt(var_low)), np.maximum(sd, np.sqrt(var_high))
    return (0.5 * (sd_low + sd_high)) ** 2, 0.5 * (sd_high - sd_low)


@functools.lru_cache(maxsize=8)
def _split_quantiles(z: float, steps: int = 99) -> tuple[np.ndarray, np.ndarray]:
    """(z_lo, z_hi) of the splits α_lo = α·j/(steps + 1), α_hi = α − α_lo, j = 1..steps, α = 2 Φ(−z)."""
    dist = NormalDist()
    alpha = 2.0 * dist.cdf(-z)
    a_lo = alpha * np.arange(1, steps + 1) / (steps + 1)
    z_lo = np.array([dist.inv_cdf(1.0 - a) for a in a_lo])
    z_hi = np.array([dist.inv_cdf(1.0 - (alpha - a)) for a in a_lo])
    return z_lo, z_hi


def _half_width(mean, low_seen, high_seen, n_eff, score_range: tuple[float, float], binary: bool, z_lo, z_hi):
    """Half-width of the symmetric interval around ``mean`` that reaches the lower bound at ``z_lo`` and the upper
    bound at ``z_hi`` (:func:`sampling_var_floor`'s bounds: Wilson's for 0/1 scores, else the unseen gaps)."""
    return np.maximum(*_sides(mean, low_seen, high_seen, n_eff, score_range, binary, z_lo, z_hi))


def _sides(mean, low_seen, high_seen, n_eff, score_range: tuple[float, float], binary: bool, z_lo, z_hi):
    """(below, above): how far below ``mean`` the lower bound lies (at ``z_lo``) and above it the upper bound (at
    ``z_hi``): Wilson's bounds for 0/1 scores, else the part of each unseen gap the bound still covers."""
    lo, hi = score_range
    width = hi - lo
    if binary:
        p = (np.asarray(mean, dtype=float) - lo) / width
        low, high = wilson_bounds(p, n_eff, z_lo)
        if z_hi is not z_lo:
            _, high = wilson_bounds(p, n_eff, z_hi)
        return width * (p - low), width * (high - p)

    def share(zz):  # the part of a gap the bound at zz still covers: z²/(n + z²), 0 at n = inf
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(np.isfinite(n_eff), zz * zz / (n_eff + zz * zz), 0.0)

    f_lo = share(z_lo)
    f_hi = f_lo if z_hi is z_lo else share(z_hi)
    gap_lo = np.maximum(np.asarray(low_seen, dtype=float) - lo, 0.0)
    gap_hi = np.maximum(hi - np.asarray(high_seen, dtype=float), 0.0)
    return f_lo * gap_lo, f_hi * gap_hi


class Prequential:
    """Prequential (martingale) difference estimator of R = (1/N) Σ_i s_i.

    At a step where the next item i is drawn uniformly from the U unobserved
    items, with S the sum of the scores observed so far and ŝ any prediction
    fixed before the draw,

        T = (S + Σ_{j∈U} ŝ_j) / N + (U / N) (s_i − ŝ_i)

    has E[T | past] = R exactly, whatever the predictions. The prediction
    used is ŝ = ȳ + Σ_k b_k x_k with ȳ the mean of the scores so far and
    x_k = p_k − ȳ for the control variates p_k (a model's predictions, say):
    T = A + Σ_k b_k D_k, where A is the plain mean's term and each D_k has
    conditional mean 0, so any b fixed before the draw keeps T unbiased.

    b is chosen before each draw, from past steps only, among the
    candidates 0 (the plain mean: RS-Mean exactly), ``b_prior`` (one or
    several, e.g. "take the model's prediction as it is") and the least-squares fit of the past
    residuals of ȳ on the past x (the GREG estimator's coefficients; from
    ``warmup`` steps on) — whichever would have predicted the past drawn
    items best (the smallest sum of squared prediction errors, each made
    with the candidate of its time; the plain mean while there is no record,
    and on ties). Control variates that do not help are thus dropped, so the
    estimate is never much worse than RS-Mean, and better by the share of
    the variance they explain.

    The steps are averaged with weights w = 1 / (U (U − 1)), the inverse of
    T's conditional variance up to the residual variance σ_e²; the variance
    of the average is then σ_e² / (N² Σ w) = (1 − n/N) σ_e² / n for n steps
    from the start, with σ_e² estimated by the mean squared residual (or by
    the spread of the steps: :meth:`estimate`). When the last unobserved item
    is drawn (U = 1), T = R exactly.

    Parameters
    ----------
    n_items : int
        N.
    n_controls : int
        Number of control variates k.
    b_prior : ndarray of shape (k,) or (m, k), optional
        The fixed candidate(s) besides the plain mean and the fit (default 0,
        i.e. only those two).
    warmup : int
        Steps before the least-squares candidate is available.
    b_max : float
        Bound on |b_k| of the fit (a safeguard; it is rarely reached).
    """

    def __init__(
        self,
        n_items: int,
        n_controls: int = 1,
        b_prior: np.ndarray | None = None,
        warmup: int = 5,
        b_max: float = 3.0,
    ) -> None:
        self.n_items = int(n_items)
        self.n_controls = int(n_controls)
        self.b_prior = np.zeros(self.n_controls) if b_prior is None else np.asarray(b_prior, dtype=float)
        if self.b_prior.shape[-1:] != (self.n_controls,) or self.b_prior.ndim not in (1, 2):
            raise ValueError(f"b_prior must have shape ({self.n_controls},) or (m, {self.n_controls}), "
                             f"got {self.b_prior.shape}")
        self._priors = list(np.atleast_2d(self.b_prior))
        self.warmup = int(warmup)
        self.b_max = float(b_max)
        self.count = 0
        self._sxx = np.zeros((self.n_controls, self.n_controls))
        self._sxy = np.zeros(self.n_controls)
        self._sw = self._swt = 0.0
        self._steps = 0  # steps with U > 1 (those averaged)
        self._t_mean = self._t_ss = 0.0  # weighted running mean of T and Σ w (T − T̄)², West's update
        self._se2 = 0.0
        self._loss = np.zeros(2 + len(self._priors))  # past squared prediction errors of: plain, priors, fit
        self._exact: float | None = None
        self.low_seen = np.inf
        self.high_seen = -np.inf
        self._sum_scores = 0.0
        self._swe = 0.0  # Σ w_t v_t, v_t = w_t (e_t / q_t)² the step's squared residual, weighted up by 1 / q_t
        self._earlier: tuple[float, float, float, float, int, int, float] | None = None  # see :meth:`start_block`
        self._later = [0.0, 0.0, 0.0, 0.0, 0, 0, 0.0]  # sw, swt, t_mean, t_ss, steps, count, swe since then

    def start_block(self) -> None:
        """Set the steps so far apart as an earlier block, which :meth:`estimate` can weight down.

        A decision made on the items so far (a switch to this estimate, say)
        makes their steps biased given that decision: a switch fires when
        the early scores look extreme, so given that it fired, they were more
        extreme than the truth. The steps after it are fresh draws, unbiased
        given the past. Only the first call counts.
        """
        if self._earlier is None:
            self._earlier = (self._sw, self._swt, self._t_mean, self._t_ss, self._steps, self.count, self._swe)


    def effective_count(self, earlier_weight: float = 1.0) -> float:
        """The number of steps, each of the earlier block (:meth:`start_block`) counted as ``earlier_weight``."""
        if self._earlier is None:
            return float(self.count)
        later = self._later[5]
        return earlier_weight * (self.count - later) + later

    def _candidates(self) -> list[np.ndarray | None]:
        """Plain, prior(s) and least-squares b for the next step (the fit is None during the warm-up)."""
        return [np.zeros(self.n_controls), *self._priors, self._fitted()]

    def _choice(self, candidates: list[np.ndarray | None]) -> int:
        """Index of the candidate with the smallest past loss; on ties the plain mean, then the priors, then the fit."""
        available = [j for j, c in enumerate(candidates) if c is not None]
        return min(available, key=lambda j: self._loss[j])

    @property
    def coefficients(self) -> np.ndarray:
        """b for the next step (predictable: from past steps only), shape (k,)."""
        cands = self._candidates()
        return np.asarray(cands[self._choice(cands)])

    def _fitted(self) -> np.ndarray | None:
        """The least-squares b of the past steps (None during the warm-up)."""
        if self.count < self.warmup or self.n_controls == 0:
            return None
        ridge = 1e-6 * (np.trace(self._sxx) / max(self.n_controls, 1) + 1e-12)
        try:
            b = np.linalg.solve(self._sxx + ridge * np.eye(self.n_controls), self._sxy)
        except np.linalg.LinAlgError:  # pragma: no cover - the ridge keeps it invertible
            return np.zeros(self.n_controls)
        return np.clip(b, -self.b_max, self.b_max)

    def add(
        self,
        score: float,
        observed_sum: float,
        n_unobserved: int,
        ybar: float,
        pred_item: np.ndarray,
        pred_sum: np.ndarray,
        prob: float | None = None,
    ) -> None:
        """One randomly drawn item: its ``score``; the rest as they were just before the draw.

        ``observed_sum`` S, ``n_unobserved`` U (the drawn item included), ``ybar`` ȳ,
        ``pred_item`` the control variates p_k of the drawn item (k,), ``pred_sum``
        their sums Σ_{j∈U} p_k,j over the U unobserved items (k,). ``prob``: the
        probability with which the item was drawn, fixed before the draw (default
        1/U, a uniform draw); the residual is then weighted by 1/(N·prob)
        (inverse probability: T = (S + Σ_U ŝ)/N + (s_i − ŝ_i)/(N q_i), still
        E[T | past] = R). With unequal probabilities only the "increments"
        variance of :meth:`estimate` holds.
        """
        n_items, u = self.n_items, int(n_unobserved)
        pred_item = np.atleast_1d(np.asarray(pred_item, dtype=float))
        pred_sum = np.atleast_1d(np.asarray(pred_sum, dtype=float))
        inv = u if prob is None else 1.0 / float(prob)
        a = (observed_sum + u * ybar) / n_items + (inv / n_items) * (score - ybar)
        d = (pred_sum - u * ybar) / n_items - (inv / n_items) * (pred_item - ybar)
        cands = self._candidates()
        b = np.asarray(cands[self._choice(cands)])
        t = a + float(b @ d)
        e_plain, x = score - ybar, pred_item - ybar
        resid = e_plain - float(b @ x)
        for j, cand in enumerate(cands):
            # the fit has no record before the warm-up ends: it starts at the plain mean's loss
            err = e_plain - float(cand @ x) if cand is not None else e_plain
            self._loss[j] += err * err
        self._sxx += np.outer(x, x)
        self._sxy += e_plain * x
        self._se2 += resid * resid
        if u > 1:
            w = 1.0 / (u * (u - 1.0))
            self._sw += w
            self._swt += w * t
            self._steps += 1
            delta = t - self._t_mean
            self._t_mean += (w / self._sw) * delta
            self._t_ss += w * delta * (t - self._t_mean)
            swe = w * w * (inv * resid) ** 2
            self._swe += swe
            if self._earlier is not None:
                later = self._later
                later[6] += swe
                later[0] += w
                later[1] += w * t
                later[4] += 1
                delta = t - later[2]
                later[2] += (w / later[0]) * delta
                later[3] += w * delta * (t - later[2])
        else:
            self._exact = t
        self.count += 1
        if self._earlier is not None:
            self._later[5] += 1
        self.low_seen = min(self.low_seen, score)
        self.high_seen = max(self.high_seen, score)
        self._sum_scores += score

    @property
    def variance_reduction(self) -> float:
        """How much the control variates shrank the squared prediction errors, out of sample: Σ e_plain² / Σ e².

        e_plain is each drawn item's error from the plain mean of the scores
        before it, e its error from the prediction used at its step (made
        before the draw). 1 before two steps; inf when every residual was 0.
        """
        if self.count < 2:
            return 1.0
        if self._se2 <= 0.0:
            return np.inf if self._loss[0] > 0.0 else 1.0
        return float(self._loss[0] / self._se2)

    @property
    def mean_score(self) -> float:
        """Mean of the drawn items' scores."""
        return self._sum_scores / self.count if self.count else float("nan")

    def estimate(self, fallback_var: float, variance: str = "residuals",
                 earlier_weight: float = 1.0) -> tuple[float, float]:
        """(R̂, Var R̂); σ_e² is ``fallback_var`` until 2 steps are known. Needs ≥ 1 step.

        ``variance`` says how σ_e² is estimated: "residuals", the mean squared
        prediction error Σ e² / n; "increments", from the spread of the steps
        themselves (the martingale CLT's estimate): with Var(T_t | past) =
        σ_e² / (N² w_t), σ_e² = N² Σ w_t (T_t − T̄)² / (n − 1). The prediction
        errors also hold the predictions' bias — (ȳ − the unobserved items'
        mean)², large while ȳ rests on a few items — which T cancels
        (a constant prediction drops out of T entirely); the increments' spread
        does not count it. "weighted": the residuals' variance for unequal
        probabilities q_t. Var(T_t | past) = (Σ_U e_j² / q_j − (Σ_U e_j)²) / N²
        ≤ Σ_U e_j² / q_j / N², of which (e_t / q_t)² / N² is unbiased, so
        Var R̂ = Σ_t w_t v_t / (N² (Σ w)²) with v_t = w_t (e_t / q_t)²: like
        "residuals", it counts the predictions' bias too, and leans wide early.

        ``earlier_weight`` γ ∈ (0, 1]: after :meth:`start_block`, each step of
        the earlier block enters the average with its weight times γ, and the
        variance is as if the earlier steps were 1/γ times as noisy: a possible
        bias of the earlier block is counted as variance, and it fades as
        later steps come. With "increments", σ_e² is then pooled from the
        spread of each block around its own mean.
        """
        if self.count == 0:
            raise ValueError("no uniformly drawn item yet")
        if self._exact is not None:
            return float(self._exact), 0.0
        n2 = self.n_items**2
        earlier = self._earlier if earlier_weight != 1.0 else None
        spread: float
        dof: float
        if earlier is None:  # one block: the steps at their own weights
            sw, swt, swe = self._sw, self._swt, self._swe
            spread, dof = self._t_ss, self._steps - 1
        else:
            sw0, swt0, _, ss0, steps0, _, swe0 = earlier
            sw1, swt1, _, ss1, steps1, _, swe1 = self._later
            sw, swt, swe = earlier_weight * sw0 + sw1, earlier_weight * swt0 + swt1, earlier_weight * swe0 + swe1
            spread, dof = ss0 + ss1, steps0 + steps1 - (steps0 > 0) - (steps1 > 0)  # within each block
        mean = swt / sw
        if variance == "weighted":
            return mean, (swe / (n2 * sw * sw) if self._steps >= 2 else fallback_var / (n2 * sw))
        if variance == "increments":
            sig2 = n2 * spread / dof if dof >= 1 else fallback_var
        else:
            sig2 = self._se2 / self.count if self.count >= 2 else fallback_var
        return mean, sig2 / (n2 * sw)


class RidgeControl:
    """AIPW's ridge prediction of every item's score, refitted on each item scored.

    The target's score on item i is regressed on the reference models' scores
    on that item, x_i (K,), with an intercept and penalty α on the slopes (no
    scaling, as scikit-learn's ``Ridge(alpha)`` and benchmark-prediction's
    ``AIPWPred``): ŝ_j = ȳ + (x_j − x̄)ᵀ β, β = (X_cᵀ X_c + α I)⁻¹ X_cᵀ y_c over
    the n items scored so far. Any item scored counts, however it was chosen:
    a control variate of :class:`Prequential` only has to be fixed before the
    draw it predicts, so items chosen actively before a switch to random
    items keep counting through the fit.

    α is chosen by leave-one-out error (closed form, from the hat matrix's
    diagonal) on a grid ``RIDGE_ALPHAS`` × tr(X_cᵀ X_c)/K — relative to the
    features' spread, so the same grid serves 0/1 and 0–100 scores — and
    chosen again each time n has grown by a quarter (from ``RIDGE_CV_FROM``
    items; ``alpha`` until then). A fixed α = 10 (AIPWPred's) shrinks a fit on
    a few dozen items nearly to the plain mean. The fit is solved in the K
    reference models while K ≤ ``RIDGE_PRIMAL_MAX`` (incremental K × K sums),
    otherwise in the n items (their n × n Gram matrix).

    Parameters
    ----------
    features : ndarray of shape (N, K)
        The reference models' scores on each item.
    alpha : float
        Ridge penalty before the first leave-one-out choice.
    score_range : (low, high), optional
        Predictions are clipped to it.
    """

    def __init__(self, features: np.ndarray, alpha: float = RIDGE_ALPHA,
                 score_range: tuple[float, float] | None = None) -> None:
        self.features = np.asarray(features, dtype=float)
        self.alpha_ = float(alpha)
        self.score_range = score_range
        k = self.features.shape[1]
        self._sx = np.zeros(k)
        self._sxx = np.zeros((k, k)) if k <= RIDGE_PRIMAL_MAX else None
        self._sxy = np.zeros(k)
        self._sy = 0.0
        self._items: list[int] = []
        self._y: list[float] = []
        self._cv_at = 0  # n at the last leave-one-out choice of α

    @property
    def count(self) -> int:
        return len(self._items)

    def add(self, item: int, score: float) -> None:
        """Record the target's ``score`` on ``item``."""
        x = self.features[item]
        self._sx += x
        if self._sxx is not None:
            self._sxx += np.outer(x, x)
        self._sxy += score * x
        self._sy += score
        self._items.append(int(item))
        self._y.append(float(score))

    def _choose_alpha(self, xc: np.ndarray, yc: np.ndarray) -> float:
        """The grid's α with the smallest leave-one-out squared error of the centred fit (with its intercept)."""
        n, k = xc.shape
        scale = float(np.einsum("ij,ij->", xc, xc)) / k
        if scale <= 0.0:
            return self.alpha_
        if n <= k:  # the Gram matrix of the items: X_c X_cᵀ = U diag(e) Uᵀ
            e, u = np.linalg.eigh(xc @ xc.T)
            proj, u2 = u.T @ yc, u * u
        else:  # the references': X_cᵀ X_c = V diag(d) Vᵀ, Z = X_c V; the same hat matrix in its terms
            d, v = np.linalg.eigh(xc.T @ xc)
            z = xc @ v
            zy, z2 = z.T @ yc, z * z
        best, best_err = self.alpha_, np.inf
        for rel in RIDGE_ALPHAS:
            a = rel * scale
            if n <= k:
                e_pos = np.maximum(e, 0.0)
                shrink = e_pos / (e_pos + a)
                fitted, lever = u @ (shrink * proj), u2 @ shrink
            else:
                inv = 1.0 / (np.maximum(d, 0.0) + a)
                fitted, lever = z @ (inv * zy), z2 @ inv
            h = 1.0 / n + lever
            loo = (yc - fitted) / np.maximum(1.0 - h, 1e-12)
            err = float(loo @ loo)
            if err < best_err:
                best, best_err = a, err
        return best

    def coefficients(self) -> tuple[float, np.ndarray, np.ndarray]:
        """(ȳ, x̄, β) of the current fit; β = 0 before two items."""
        n, k = self.count, self.features.shape[1]
        if n == 0:
            return 0.0, np.zeros(k), np.zeros(k)
        xbar, ybar = self._sx / n, self._sy / n
        if n < 2:
            return ybar, xbar, np.zeros(k)
        xc = yc = None
        if n >= RIDGE_CV_FROM and n >= 1.25 * self._cv_at:
            xc, yc = self.features[self._items] - xbar, np.asarray(self._y) - ybar
            self.alpha_ = self._choose_alpha(xc, yc)
            self._cv_at = n
        if self._sxx is not None:
            gram = self._sxx - n * np.outer(xbar, xbar)
            rhs = self._sxy - n * ybar * xbar
            beta = np.linalg.solve(gram + self.alpha_ * np.eye(k), rhs)
        else:  # the dual: β = X_cᵀ (X_c X_cᵀ + α I)⁻¹ y_c
            if xc is None or yc is None:
                xc, yc = self.features[self._items] - xbar, np.asarray(self._y) - ybar
            beta = xc.T @ np.linalg.solve(xc @ xc.T + self.alpha_ * np.eye(n), yc)
        return ybar, xbar, beta

    def predict(self) -> np.ndarray:
        """ŝ for every item (N,), clipped to the score range; the plain mean before two items."""
        ybar, xbar, beta = self.coefficients()
        pred = ybar + (self.features - xbar) @ beta
        if self.score_range is not None:
            pred = np.clip(pred, *self.score_range)
        return pred
