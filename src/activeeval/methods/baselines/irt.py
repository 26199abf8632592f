"""IRT baseline (BayesAME paper §5.1, baseline 7): 2-PL for binary, Beta IRT for continuous scores.

Item parameters come from a joint MAP fit on the reference models (see
:mod:`activeeval.irt.baseline`); the target's ability posterior is exact 1-D
quadrature on a grid, updated after every observation (the paper used MCMC
refreshed every 50 evaluations). Items are selected at random. R̂ is Eq. 5
with w = 1/N using the predicted item means, so R̂ = R* and Var_R = 0 at n = N.

:meth:`IRTBaseline.replay` plays every target of a backtest at once (one item
fit, the posterior after every n from cumulative sums).
"""

from __future__ import annotations

import numpy as np

from activeeval._cache import ReferenceCache
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.irt.baseline import (
    ItemParams,
    ability_grid,
    fit_2pl,
    fit_beta_irt,
    grid_loglik,
    grid_loglik_all,
    grid_loglik_terms,
    item_moments,
    posterior_R,
    posterior_R_rows,
)
from activeeval.methods.base import BaseMethod, random_order
from activeeval.methods.baselines._common import fast_replay
from activeeval.methods.estimate import Estimate

__all__ = ["IRTBaseline", "fit_item_params"]

_ITEM_PARAMS: ReferenceCache[ItemParams] = ReferenceCache("IRT baseline item parameters", 8)


def fit_item_params(reference: ScoreMatrix, model: str = "auto") -> ItemParams:
    """Fit (and cache per process, by the reference's fingerprint) the item parameters.

    ``model``: "2pl", "beta" or "auto" (2-PL for binary scores, Beta IRT otherwise).
    """
    if model == "auto":
        model = "2pl" if reference.kind == "binary" else "beta"
    if model not in ("2pl", "beta"):
        raise ConfigurationError(f"model must be 'auto', '2pl' or 'beta', got {model!r}")
    lo, hi = reference.score_range if reference.score_range is not None else (0.0, 1.0)
    if model == "beta" and (lo, hi) != (0.0, 1.0):
        raise ConfigurationError(
            f"Beta IRT needs scores in [0, 1], the reference's score_range is {reference.score_range}; "
            "rescale the scores to [0, 1] first"
        )
    scores = np.asarray(reference.scores, dtype=float)  # a backtest uses one reference set per seed: 8 kept
    return _ITEM_PARAMS.get_or_compute(f"{model}:{reference.fingerprint()}",
                                       lambda: fit_2pl(scores) if model == "2pl" else fit_beta_irt(scores))


def _check_grid_points(grid_points: int) -> int:
    if int(grid_points) != grid_points or grid_points < 11:
        raise ConfigurationError(f"grid_points must be an integer >= 11, got {grid_points}")
    return int(grid_points)


class IRTBaseline(BaseMethod):
    """IRT baseline with an exact quadrature posterior on the target's ability.

    Parameters
    ----------
    model : {"auto", "2pl", "beta"}
        Response model; "auto" is 2-PL for binary references, Beta IRT otherwise.
    grid_points : int
        Quadrature points on [−8, 8] (default 401).
    """

    name = "irt"

    def __init__(self, reference, *, model: str = "auto", grid_points: int = 401, **kwargs) -> None:
        super().__init__(reference, **kwargs)
        grid_points = _check_grid_points(grid_points)
        self.params = fit_item_params(self.reference, model)
        self._grid, self._log_post = ability_grid(grid_points)
        self._mu, self._var = item_moments(self.params, self._grid)
        self._u_mean = self._mu.sum(axis=1)  # Σ_U μ_i(θ_g), shrinks as items are observed
        self._u_var = self._var.sum(axis=1)
        self._observed_sum = 0.0

    def _update(self, item: int, score: float) -> None:
        self._log_post = self._log_post + grid_loglik(self.params, self._grid, item, score)
        self._u_mean = self._u_mean - self._mu[:, item]
        self._u_var = self._u_var - self._var[:, item]
        self._observed_sum += score

    def _current_estimate(self) -> Estimate:
        n = len(self._items)
        if n == self.n_items:  # exact; avoids round-off left in the running sums
            return Estimate(self._observed_sum / self.n_items, 0.0, n, self.n_items, self._bounds())
        mean, var = posterior_R(self._log_post, self._observed_sum, self._u_mean, self._u_var, self.n_items)
        return Estimate(mean, var, n, self.n_items, self._bounds())

    @fast_replay
    def replay(
        reference: ScoreMatrix, truths: np.ndarray, seed: int, *, model: str = "auto", grid_points: int = 401
    ) -> tuple[np.ndarray, np.ndarray]:
        """IRT-baseline trajectories of every target played with method seed ``seed``; see :func:`.fast_replay`.

        The item parameters are fitted once (cached as for the class); all
        targets see the items in the order
        :func:`~activeeval.methods.base.random_order` gives. For each target
        the grid log-posterior after every n is a cumulative sum of the
        ordered items' grid log-likelihoods, and the unobserved items'
        Σ μ_i(θ_g), Σ Var(s_i | θ_g) after every n (shared by the targets)
        are the same running differences the class keeps; then
        :func:`~activeeval.irt.baseline.posterior_R_rows` gives every n at
        once. At n = N the estimate is exact (Σ s / N, variance 0), as in the class.
        """
        grid_points = _check_grid_points(grid_points)
        params = fit_item_params(reference, model)
        n_items = reference.n_items
        order = random_order(seed, n_items)
        grid, log_prior = ability_grid(grid_points)
        mu, var = item_moments(params, grid)
        # after n items (row n − 1): Σ_U over the items not yet observed, as the class's running differences
        u_mean = np.cumsum(np.vstack([mu.sum(axis=1), -mu[:, order].T]), axis=0)[1:-1]
        u_var = np.cumsum(np.vstack([var.sum(axis=1), -var[:, order].T]), axis=0)[1:-1]
        terms = grid_loglik_terms(params, grid)  # the score-independent part, shared by the targets
        means = np.empty_like(truths)
        variances = np.zeros_like(truths)
        for t, truth in enumerate(truths):
            observed = truth[order]
            observed_sum = np.cumsum(observed)
            log_lik = grid_loglik_all(params, grid, truth, terms)[:, order].T
            log_post = np.cumsum(np.vstack([log_prior, log_lik[:-1]]), axis=0)[1:]
            means[t, :-1], variances[t, :-1] = posterior_R_rows(
                log_post, observed_sum[:-1], u_mean, u_var, n_items
            )
            means[t, -1] = observed_sum[-1] / n_items  # n = N: exact, as in the class
        return means, variances
