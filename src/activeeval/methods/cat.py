"""Continuous computerised adaptive testing for one model (continuous-CAT paper §4, §5).

A thin :class:`~activeeval.methods.base.BaseMethod` over :mod:`activeeval.irt`:

* calibration (b, k, the negative-discrimination filter, min–max scaling) is
  fitted once on the reference models, or passed in (the ranker shares one);
* the posterior of θ is kept exactly on a fixed grid (prior N(θ0, σ0²) times
  the per-item likelihoods, see :func:`activeeval.irt.log_likelihood`), so an
  update costs O(G) for G grid points, independent of N;
* selection maximises Fisher information at θ̂ over the unused pool items.
  Ĩ = μ(1−μ)/k peaks at the item whose b is closest to θ̂, so the pool is
  kept sorted by b and the choice is a bisection plus a skip over used items
  (union–find with path compression): O(log N) per step instead of O(N).
  The full information I = ½ + u(a² − 2) (u = μ(1−μ), App. E) orders items
  the same way when a > √2 and the opposite way (farthest b first) when
  a < √2, so the same structure serves both;
* the estimate is reported on the full-benchmark score scale (Estimate.mean /
  .var: observed scores plus the posterior-predictive mean of the unobserved
  ones, with both the θ uncertainty and the per-item noise kμ(1−μ) in the
  variance) and on the θ scale (:meth:`ContinuousCAT.ability`).

Missing reference scores: reference models with any missing score are
dropped (``missing="models"``, the BaseMethod default) so the item set — what
the benchmark score averages over — stays whole; pass ``missing="items"`` to
drop incomplete items instead. Either way a MissingScoresWarning says what went.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.irt import (
    DEFAULT_CLIP,
    Calibration,
    calibrate,
    default_grid,
    fisher_information,
    full_minus_tilde_slope,
    log_likelihood,
    response_mean,
)
from activeeval.methods.base import BaseMethod, SeedLike
from activeeval.methods.estimate import Estimate
from activeeval.stopping import StoppingRule

__all__ = ["ContinuousCAT"]

#: Floor of the default prior sd (the sd of the reference abilities): a reference
#: population with nearly equal abilities must not pin θ before any data.
PRIOR_SD_FLOOR = 0.5


class _SortedPool:
    """Pool items sorted by difficulty, with O(α(N)) skipping of used items.

    ``right[p]`` / ``left[p]`` point towards the nearest unused position at or
    right / left of p (path-compressed); sentinels are n and −1.
    """

    def __init__(self, items: np.ndarray, b: np.ndarray) -> None:
        order = np.argsort(b[items], kind="stable")
        self.items = items[order]
        self.b = b[self.items]
        self.b_list = self.b.tolist()  # bisect on a list is faster than np.searchsorted for scalars
        n = self.items.size
        self.n = n
        self.pos_of = {int(item): p for p, item in enumerate(self.items)}
        self.right = list(range(n + 1))
        self.left = list(range(n + 1))
        self.n_free = n

    def find_right(self, p: int) -> int:
        r = self.right
        root = p
        while r[root] != root:
            root = r[root]
        while r[p] != root:
            r[p], p = root, r[p]
        return root

    def find_left(self, p: int) -> int:
        ll = self.left  # indexed by q = p + 1, so q = 0 (position −1) is the sentinel root
        q = p + 1
        root = q
        while ll[root] != root:
            root = ll[root]
        while ll[q] != root:
            ll[q], q = root, ll[q]
        return root - 1

    def remove(self, item: int) -> None:
        p = self.pos_of.get(int(item))
        if p is None:
            return
        self.right[p] = p + 1
        self.left[p + 1] = p
        self.n_free -= 1

    def nearest(self, theta: float, k: int, skip: set[int], farthest: bool = False) -> list[int]:
        """Up to ``k`` unused items closest to (or farthest from) θ, in that order, none in ``skip``."""
        out: list[int] = []
        if farthest:
            lo, hi = self.find_right(0), self.find_left(self.n - 1)
            while len(out) < k and lo <= hi and lo < self.n and hi >= 0:
                take_lo = abs(self.b_list[lo] - theta) >= abs(self.b_list[hi] - theta)
                p = lo if take_lo else hi
                if take_lo:
                    lo = self.find_right(lo + 1)
                else:
                    hi = self.find_left(hi - 1)
                item = int(self.items[p])
                if item not in skip:
                    out.append(item)
            return out
        pos = bisect.bisect_left(self.b_list, theta)
        hi = self.find_right(pos) if pos < self.n else self.n
        lo = self.find_left(pos - 1) if pos > 0 else -1
        while len(out) < k and (lo >= 0 or hi < self.n):
            if hi >= self.n:
                take_lo = True
            elif lo < 0:
                take_lo = False
            else:
                # Ties in |b − θ| go to the easier item (lower b): deterministic.
                take_lo = theta - self.b_list[lo] <= self.b_list[hi] - theta
            if take_lo:
                p = lo
                lo = self.find_left(lo - 1) if lo > 0 else -1
            else:
                p = hi
                hi = self.find_right(hi + 1)
            item = int(self.items[p])
            if item not in skip:
                out.append(item)
        return out


class ContinuousCAT(BaseMethod):
    """Continuous CAT: heteroskedastic normal IRT, max-information selection, Bayesian update.

    Parameters
    ----------
    reference : ScoreMatrix
        Reference (calibration) models' scores, models x items.
    calibration : irt.Calibration, optional
        Precomputed item parameters for exactly these items (the ranker fits
        one and shares it across models). Default: :func:`irt.calibrate` on
        ``reference``.
    prior_mean, prior_sd : float, optional
        Prior θ ~ N(θ0, σ0²). Defaults: mean and sd (floored at 0.5) of the
        reference abilities θ_j = logit(ȳ_j) — the population they come from.
    information : {"tilde", "full"}
        Selection criterion: Ĩ = μ(1−μ)/k (paper default) or the full Fisher
        information μ(1−μ)/k + (1−2μ)²/2.
    likelihood : {"quasi", "normal"}
        Posterior update: the quasi-likelihood matching Ĩ (default; for 0/1
        scores it is the 1PL likelihood tempered by 1/k) or the full normal
        density (matching the full information; degenerate at 0/1 scores).
    scale : {"auto", "minmax", "none"}
        Min–max scaling of metrics that are not in [0, 1] (irt.calibrate).
    clip : float
        Proportion clip before logits (items all references score 0 or 1).
    filter_negative : bool
        Remove negatively discriminating items from the adaptive pool.
    grid_points : int
        Points of the θ grid on [−12, 12].
    epsilon1, epsilon2, window, n_max, stopping, seed, missing
        See :class:`~activeeval.methods.base.BaseMethod`.
    """

    name = "cat"

    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        calibration: Calibration | None = None,
        prior_mean: float | None = None,
        prior_sd: float | None = None,
        information: str = "tilde",
        likelihood: str = "quasi",
        scale: str = "auto",
        clip: float = DEFAULT_CLIP,
        filter_negative: bool = True,
        grid_points: int = 961,
        epsilon1: float = 0.005,
        epsilon2: float = 0.03,
        window: int = 30,
        n_max: int | None = None,
        stopping: StoppingRule | None = None,
        seed: SeedLike = None,
        missing: str = "models",
    ) -> None:
        super().__init__(
            reference,
            epsilon1=epsilon1,
            epsilon2=epsilon2,
            window=window,
            n_max=n_max,
            stopping=stopping,
            seed=seed,
            missing=missing,
        )
        if information not in ("tilde", "full"):
            raise ConfigurationError(f"information must be 'tilde' or 'full', got {information!r}")
        if likelihood not in ("quasi", "normal"):
            raise ConfigurationError(f"likelihood must be 'quasi' or 'normal', got {likelihood!r}")
        if calibration is None:
            calibration = calibrate(self.reference.scores, scale=scale, clip=clip, filter_negative=filter_negative)
        elif not isinstance(calibration, Calibration) or calibration.n_items != self.n_items:
            got = calibration.n_items if isinstance(calibration, Calibration) else type(calibration).__name__
            raise ConfigurationError(
                f"calibration must be an irt.Calibration for the reference's {self.n_items} items, got {got}; "
                "fit it with irt.calibrate(reference.scores) on the same (complete) matrix"
            )
        self.calibration = calibration
        self.k = float(calibration.k)
        self.information = information
        self.likelihood = likelihood
        theta_ref = calibration.theta_ref
        self.prior_mean = float(np.mean(theta_ref)) if prior_mean is None else float(prior_mean)
        sd = max(float(np.std(theta_ref)), PRIOR_SD_FLOOR) if prior_sd is None else prior_sd
        if not (np.isfinite(sd) and sd > 0):
            raise ConfigurationError(f"prior_sd must be a positive number, got {prior_sd}")
        if not np.isfinite(self.prior_mean):
            raise ConfigurationError(f"prior_mean must be a finite number, got {prior_mean}")
        self.prior_sd = float(sd)
        self.grid = default_grid(n_points=grid_points)
        self._logpost = -0.5 * ((self.grid - self.prior_mean) / self.prior_sd) ** 2
        self._post = np.empty_like(self.grid)
        self._normalise()

        # Selection: nearest b to θ̂ when the criterion increases in u = μ(1−μ), farthest otherwise.
        self._farthest = information == "full" and full_minus_tilde_slope(self.k) < 0
        self._pool = _SortedPool(np.flatnonzero(calibration.pool), calibration.b)

        # Score-scale prediction: raw s_i = low_i + width_i·y_i; sums over all items at each grid θ.
        b = calibration.b
        low, width = calibration.low, calibration.width
        self._sum_low = float(low.sum())
        self._t1 = np.zeros_like(self.grid)  # Σ_i width_i μ_i(θ)
        self._t2 = np.zeros_like(self.grid)  # Σ_i width_i² k μ_i(1−μ_i)
        chunk = max(1, 2**22 // self.grid.size)  # bounded memory at large N
        for start in range(0, b.size, chunk):
            mu = response_mean(self.grid[:, None], b[None, start : start + chunk])
            w = width[start : start + chunk]
            self._t1 += mu @ w
            self._t2 += (mu * (1.0 - mu)) @ (w**2) * self.k
        self._obs_low = 0.0
        self._obs_sum_raw = 0.0

    # ---------------------------------------------------------------- maths
    def _normalise(self) -> None:
        p = np.exp(self._logpost - self._logpost.max())
        self._post = p / p.sum()
        self._theta_mean = float(self._post @ self.grid)
        self._theta_var = float(self._post @ (self.grid - self._theta_mean) ** 2)

    def _update(self, item: int, score: float) -> None:
        cal = self.calibration
        y = float(cal.scale(score, item))
        b = float(cal.b[item])
        self._logpost += log_likelihood(self.grid, b, y, self.k, self.likelihood)
        self._normalise()
        mu = response_mean(self.grid, b)
        w = float(cal.width[item])
        self._t1 -= w * mu
        self._t2 -= w * w * self.k * mu * (1.0 - mu)
        self._obs_low += float(cal.low[item])
        self._obs_sum_raw += float(score)
        self._pool.remove(item)

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        skip = set(int(i) for i in exclude)
        chosen = self._pool.nearest(self._theta_mean, k, skip, farthest=self._farthest)
        if len(chosen) < k:
            # Pool exhausted (or all excluded): fall back to random unobserved items outside it.
            rest = np.ones(self.n_items, dtype=bool)
            rest[self._observed] = False
            rest[list(skip | set(chosen))] = False
            extra = rng.choice(np.flatnonzero(rest), size=k - len(chosen), replace=False)
            chosen.extend(int(i) for i in extra)
        return chosen

    def _current_estimate(self) -> Estimate:
        n = self.n_items
        # Predicted benchmark score at each grid θ: observed raw scores + predicted unobserved ones.
        r = (self._obs_sum_raw + (self._sum_low - self._obs_low) + self._t1) / n
        p = self._post
        mean = float(p @ r)
        var = float(p @ (r - mean) ** 2) + float(p @ np.maximum(self._t2, 0.0)) / (n * n)
        if self.n_observed >= n:
            mean, var = self._obs_sum_raw / n, 0.0
        return Estimate(mean=mean, var=var, n_observed=self.n_observed, n_items=n, bounds=self._bounds())

    # -------------------------------------------------------------- public
    @property
    def theta(self) -> float:
        """θ̂, the posterior mean of the ability."""
        return self._theta_mean

    @property
    def se(self) -> float:
        """SE(θ̂), the posterior sd of the ability."""
        return float(np.sqrt(self._theta_var))

    def ability(self) -> Estimate:
        """The ability posterior as an :class:`Estimate` (mean θ̂, var SE², unbounded)."""
        return Estimate(mean=self._theta_mean, var=self._theta_var, n_observed=self.n_observed, n_items=self.n_items)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """(grid, probabilities) of the θ posterior."""
        return self.grid.copy(), self._post.copy()

    def fisher_se(self) -> float:
        """Paper §3 SE = 1/√(1/σ0² + Σ_i I_i(θ̂)) over the observed items (information as configured)."""
        items = np.asarray(self._items, dtype=int)
        info = fisher_information(self._theta_mean, self.calibration.b[items], self.k, self.information == "full")
        return float(1.0 / np.sqrt(1.0 / self.prior_sd**2 + float(np.sum(info))))

    def item_information(self, theta: float | None = None) -> np.ndarray:
        """Information of every item at θ (default θ̂), ndarray of shape (n_items,)."""
        t = self._theta_mean if theta is None else theta
        return fisher_information(t, self.calibration.b, self.k, self.information == "full")
