"""The adaptive ranker (paper §6, Algorithm 1): the next (model, item) step, pair-aware item choice, the loop."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from activeeval.exceptions import ConfigurationError, option
from activeeval.methods.base import Method
from activeeval.methods.multi import MultiTargetMethod
from activeeval.ranking.costs import check_costs
from activeeval.ranking.joint import joint_targets
from activeeval.ranking.pairwise import (
    Covariances,
    check_gamma,
    check_models,
    choose_model,
    pair_confidence,
    rank_order,
    uncertain_adjacent,
)
from activeeval.ranking.result import RankResult, ScaleLike, _result, ranking_posterior
from activeeval.settings import Integer, Number, Settings, setting

#: What the ranker and its baselines build their methods from: ``make(model_id) -> Method``, one fresh
#: method per model, or one joint multi-target method whose targets are the models (observed in place).
MethodSource = Callable[[str], Method] | MultiTargetMethod


def _gamma(name: str, value: Any) -> float:
    return check_gamma(value)


@dataclass(frozen=True)
class RankStop(Settings):
    """When the ranker stops: a ranking session's ``stop`` group and the ranking backtests' (each field is
    also a keyword of ``RankSession.create``, ``simulate_ranking`` and the rest). ``budget_per_model``: the
    total budget is that many items per model times the sum of the costs."""

    about: ClassVar[str] = "when the ranking stops"
    flags: ClassVar[bool] = True

    gamma: float = setting(0.95, _gamma, "the confidence level of each pairwise decision")
    min_items: int = setting(10, Integer(0, phrase="a non-negative integer"), "items per model before any decision")
    budget_per_model: float | None = setting(20.0, Number(0, low_open=True, optional=True, phrase="> 0"),
                                             "items per model times the sum of the costs (None: no budget)")


@dataclass(frozen=True)
class RankStep:
    """The ranker's next decision: test ``model`` next, or stop (``model`` None) for ``reason``.

    ``partner`` is the other model of the least decided adjacent pair ``model``
    belongs to (None in the warm-up): the comparison this item is for.
    """

    model: str | None
    reason: str | None = None
    partner: str | None = None


def next_step(
    models: Sequence[str],
    methods: Mapping[str, Method],
    counts: Mapping[str, int],
    costs: Mapping[str, float],
    *,
    gamma: float,
    min_items: int,
    budget: float,
    scale: ScaleLike = "auto",
) -> RankStep:
    """Which model the adaptive ranker tests next, from the current state alone (paper §6).

    Warm-up round-robin (the first model, in ``models`` order, with the
    fewest items among those below ``min_items``), then the model of an
    uncertain adjacent pair with the largest SE² / ((n + 1)·c). A pure
    function of the methods' estimates and the counts, so a ranking session
    rebuilt by replaying its journal decides exactly as the original did.
    When ``methods`` are the sides of one joint multi-target method
    (:func:`~activeeval.ranking.joint.joint_targets`), the pairs are judged
    on its joint posterior (:func:`~activeeval.ranking.result.ranking_posterior`).
    Stop reasons: "confident", "budget", "exhausted".
    """
    spent = float(sum(counts[m] * costs[m] for m in models))

    def exhausted(m: str) -> bool:
        return counts[m] >= methods[m].n_items

    warm = [m for m in models if counts[m] < min_items and not exhausted(m)]
    if warm:
        fewest = min(counts[m] for m in warm)
        m = next(m for m in warm if counts[m] == fewest)
        return RankStep(None, "budget") if spent + costs[m] > budget else RankStep(m)
    means, variances, covs = ranking_posterior(models, methods, scale)
    order = rank_order(models, means)
    pairs = uncertain_adjacent(order, means, variances, gamma, covs)
    if not pairs:
        return RankStep(None, "confident")
    open_models = [m for m in order if any(m in p for p in pairs) and not exhausted(m)]
    if not open_models:
        return RankStep(None, "exhausted")
    affordable = [m for m in open_models if spent + costs[m] <= budget]
    if not affordable:
        return RankStep(None, "budget")
    chosen = choose_model(affordable, variances, counts, costs)
    return RankStep(chosen, partner=pair_partner(chosen, pairs, means, variances, covs))


def pair_partner(model: str, pairs: Sequence[tuple[str, str]], means: Mapping[str, float],
                 variances: Mapping[str, float], covariances: Covariances | None = None) -> str | None:
    """The other model of the least decided pair (confidence nearest ½) among ``pairs`` that contain ``model``."""
    best, closest = None, math.inf
    for a, b in pairs:
        if model not in (a, b):
            continue
        gap = abs(pair_confidence(a, b, means, variances, covariances) - 0.5)
        if gap < closest:
            best, closest = (b if a == model else a), gap
    return best


#: Item choice of the ranker: "own" (each model's method chooses) or "partner" (see :func:`next_item`).
PAIRINGS = ("own", "partner")


def check_pairing(pairing: str) -> str:
    if pairing not in PAIRINGS:
        raise ConfigurationError(f"{option('pairing')} must be 'own' or 'partner', got {pairing!r}")
    return pairing


def next_item(method: Method, partner_items: Sequence[int], *, pairing: str = "own") -> int:
    """The item ``method``'s model takes next.

    ``pairing="own"``: the method's own choice. ``"partner"`` (pair-aware):
    an item the partner model (the other side of the comparison this step is
    for, :attr:`RankStep.partner`) has already taken and this model has not —
    so the two are compared on common items, as the static subset compares
    every model — the one the method rates most informative
    (``item_information()``, e.g. CAT's Fisher information at θ̂), else the
    partner's earliest; the method's own choice when there is none.
    A pure function of the state, so a ranking session replays it exactly.
    """
    if pairing == "partner" and partner_items:
        seen = set(getattr(method, "observed_items", ()))
        cand = [int(i) for i in partner_items if int(i) not in seen]
        if cand:
            info = getattr(method, "item_information", None)
            if callable(info):
                values = np.asarray(info())
                return max(cand, key=lambda i: (values[i], -cand.index(i)))
            return cand[0]
    return int(method.select())


def _build(models: Sequence[str], make: MethodSource) -> dict[str, Method]:
    """One method per model: ``make(model)`` each, or the models' sides of one joint method."""
    if isinstance(make, MultiTargetMethod):
        return joint_targets(make, models)  # type: ignore[return-value]
    out = {}
    for m in models:
        method = make(m)
        if not isinstance(method, Method):
            raise ConfigurationError(
                f"make({m!r}) returned {type(method).__name__}, not a Method (select/observe/estimate)"
            )
        out[m] = method
    return out


def _check_budget(budget: float | None) -> float:
    if budget is None:
        return math.inf
    b = float(budget)
    if not (b > 0):
        raise ConfigurationError(f"budget must be a positive total cost (or None for no limit), got {budget}")
    return b


# ------------------------------------------------------------------ ranker
class AdaptiveRanker:
    """Adaptive multi-model ranking with pairwise stopping and cost-aware allocation (paper §6, Algorithm 1).

    Parameters
    ----------
    models : sequence of str
        At least 2 distinct model ids.
    make : callable or MultiTargetMethod
        ``make(model_id) -> Method``: a fresh method for one model; all
        methods must share the item set. Or one joint multi-target method
        (e.g. ``bayesame-multi``) whose targets are the models: pairs are then
        judged on its joint posterior, each model's items are its choice for
        that model (warm start included, counted in the budget), and it is
        observed in place (give a fresh one per run).
    score : callable
        ``score(model_id, item) -> float``: the oracle (your harness).
    costs : mapping, optional
        Relative per-item cost of each model (default 1 each).
    gamma : float
        Confidence level of the pairwise decisions, in (0, 1).
    min_items : int
        Warm-up items per model before any stopping.
    budget : float, optional
        Total cost budget B = Σ_m n_m c_m (None: until confident or exhausted).
    scale : "auto", "ability", "estimate" or callable
        Ranking scale (see :func:`scale_of`).
    pairing : {"own", "partner"}
        Item choice after the warm-up (see :func:`next_item`): each model's
        method chooses ("own", the paper), or pair-aware ("partner").
    """

    def __init__(
        self,
        models: Sequence[str],
        make: MethodSource,
        score: Callable[[str, int], float],
        *,
        costs: Mapping[str, float] | None = None,
        gamma: float = 0.95,
        min_items: int = 10,
        budget: float | None = None,
        scale: ScaleLike = "auto",
        pairing: str = "own",
    ) -> None:
        self.models = check_models(models)
        self.pairing = check_pairing(pairing)
        self.gamma = check_gamma(gamma)
        if int(min_items) != min_items or min_items < 0:
            raise ConfigurationError(f"min_items must be a non-negative integer, got {min_items}")
        self.min_items = int(min_items)
        self.budget = _check_budget(budget)
        self.costs = check_costs(costs, self.models)
        self.make = make
        self.score = score
        self.scale = scale

    def run(self) -> RankResult:
        models, costs = self.models, self.costs
        methods = _build(models, self.make)
        # what a method has already observed counts (a joint method given with observations)
        asked: dict[str, list[int]] = {m: list(getattr(methods[m], "observed_items", ())) for m in models}
        while True:
            step = next_step(models, methods, {m: len(asked[m]) for m in models}, costs, gamma=self.gamma,
                             min_items=self.min_items, budget=self.budget, scale=self.scale)
            if step.model is None:
                return _result(models, methods, self.scale, self.gamma, costs, asked, str(step.reason))
            method = methods[step.model]
            partner_items = asked[step.partner] if step.partner is not None else []
            item = next_item(method, partner_items, pairing=self.pairing)
            method.observe(item, float(self.score(step.model, item)))
            asked[step.model].append(item)


# --------------------------------------------------------------- baselines
