"""The ranker's matched-cost baselines (paper §7.1): random items, fixed-length CAT, the static subset."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import SeedLike
from activeeval.methods.estimate import Estimate
from activeeval.ranking.adaptive import MethodSource, _build, _check_budget
from activeeval.ranking.costs import check_costs
from activeeval.ranking.pairwise import check_gamma, check_models, rank_order, uncertain_adjacent
from activeeval.ranking.result import RankResult, ScaleLike, _result


def rank_random(
    models: Sequence[str],
    make: MethodSource,
    score: Callable[[str, int], float],
    *,
    budget: float,
    costs: Mapping[str, float] | None = None,
    gamma: float = 0.95,
    scale: ScaleLike = "auto",
    seed: SeedLike = None,
) -> RankResult:
    """Random sampling at matched cost (paper §7.1).

    Repeatedly draw a random model (among those with unseen items) and a
    random unseen item for it, stopping at the first draw whose cost exceeds
    the remaining budget. Each model's method only *estimates* (it never
    chooses); models are ranked on the same scale as the adaptive ranker.
    """
    models = check_models(models)
    gamma = check_gamma(gamma)
    costs = check_costs(costs, models)
    total = _check_budget(budget)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    methods = _build(models, make)
    asked: dict[str, list[int]] = {m: [] for m in models}
    unseen = {m: list(rng.permutation(methods[m].n_items)) for m in models}
    spent = 0.0
    while True:
        open_models = [m for m in models if unseen[m]]
        if not open_models:
            break
        m = open_models[int(rng.integers(len(open_models)))]
        if spent + costs[m] > total:
            break
        item = int(unseen[m].pop())
        methods[m].observe(item, float(score(m, item)))
        asked[m].append(item)
        spent += costs[m]
    return _result(models, methods, scale, gamma, costs, asked, "budget")


def rank_fixed_length(
    models: Sequence[str],
    make: MethodSource,
    score: Callable[[str, int], float],
    *,
    n_items: int,
    costs: Mapping[str, float] | None = None,
    gamma: float = 0.95,
    scale: ScaleLike = "auto",
) -> RankResult:
    """Fixed-length CAT (paper §7.4 ablation): every model gets ``n_items`` items chosen by its method."""
    models = check_models(models)
    gamma = check_gamma(gamma)
    costs = check_costs(costs, models)
    if int(n_items) != n_items or n_items < 1:
        raise ConfigurationError(f"n_items must be a positive integer, got {n_items}")
    methods = _build(models, make)
    asked: dict[str, list[int]] = {m: [] for m in models}
    for m in models:
        method = methods[m]
        for _ in range(min(int(n_items), method.n_items)):
            item = int(method.select())
            method.observe(item, float(score(m, item)))
            asked[m].append(item)
    return _result(models, methods, scale, gamma, costs, asked, "fixed")


def static_subset(item_total_correlation: np.ndarray, n_items: int) -> np.ndarray:
    """The ``n_items`` items with the largest corrected item–total correlation (paper §7.1 static baseline).

    Ties are broken by item index (stable). Returns item indices, best first.
    """
    r = np.asarray(item_total_correlation, dtype=float)
    if int(n_items) != n_items or n_items < 1:
        raise ConfigurationError(f"n_items must be a positive integer, got {n_items}")
    order = np.argsort(-np.nan_to_num(r, nan=-np.inf), kind="stable")
    return order[: int(n_items)]


def rank_static(models: Sequence[str], subset: np.ndarray, score: Callable[[str, int], float], *,
                n_items: int | None = None, costs: Mapping[str, float] | None = None,
                gamma: float = 0.95) -> RankResult:
    """Every model on the same fixed ``subset`` of items, ranked by its mean score there (paper §7.1).

    Means and variances are on the subset-mean scale: the mean score and its
    sampling variance s²/n over the subset (0 for a subset of one item), so
    ties are the adjacent pairs not decided at ``gamma`` like the adaptive
    ranker's. ``n_items`` is the benchmark size the estimates refer to
    (default: the subset's size).
    """
    models = check_models(models)
    gamma = check_gamma(gamma)
    costs = check_costs(costs, models)
    items = [int(i) for i in subset]
    n = len(items)
    if n < 1:
        raise ConfigurationError("the static subset is empty; give it at least one item")
    n_total = n if n_items is None else int(n_items)
    scores = {m: np.array([float(score(m, i)) for i in items]) for m in models}
    means = {m: float(np.mean(scores[m])) for m in models}
    variances = {m: float(np.var(scores[m], ddof=1)) / n if n > 1 else 0.0 for m in models}
    order = rank_order(models, means)
    return RankResult(
        ranking=tuple(order), means=means, variances=variances,
        estimates={m: Estimate(means[m], variances[m], n, n_total) for m in models},
        items_per_model={m: n for m in models}, cost_spent=float(n * sum(costs[m] for m in models)),
        ties=tuple(uncertain_adjacent(order, means, variances, gamma)), stop_reason="fixed", gamma=gamma,
        items={m: tuple(items) for m in models},
    )
