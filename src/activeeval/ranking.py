"""The adaptive multi-model ranker and its matched-cost baselines (continuous-CAT paper §6, §7.1).

The ranker is generic over any :class:`~activeeval.methods.base.Method` that
reports a mean and a variance on a scale shared by all models:

* with :class:`~activeeval.methods.cat.ContinuousCAT` it ranks on the ability
  θ (``ability()``: θ̂ and SE², as in the paper);
* with :class:`~activeeval.methods.bayesame.BayesAME` (or any other method)
  it ranks on the full-benchmark score scale (``estimate()``: R̂ and Var R),
  so the ranking is of the full-benchmark scores themselves.

The ranker never sees a score matrix. It gets a factory ``make(model_id) ->
Method`` (one fresh method per model, all on the same items) and an oracle
``score(model_id, item) -> float`` (the user's harness; in a simulation, a
lookup of held-out scores). Items are indices into the methods' item set.

Algorithm (paper §6, ../shared/SPEC.md §4):

1. Warm-up: every model gets ``min_items`` items, each chosen by its method.
2. While some adjacent pair of the current ranking is uncertain —
   P(θ_i > θ_j) = Φ((θ̂_i − θ̂_j)/√(SE_i² + SE_j²)) inside
   [(1 − γ)/2, 1 − (1 − γ)/2] — and budget remains: among the models in
   uncertain pairs that are affordable and not exhausted, test the one with
   the largest SE² / ((n + 1)·c) on its method's next item.
3. Report the ranking; adjacent pairs still uncertain are ties.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import numpy as np
from scipy.special import ndtr, ndtri  # Φ and Φ⁻¹; scipy.stats costs ~1 s to import

from activeeval.exceptions import ConfigurationError, DataFormatError
from activeeval.methods.base import Method, SeedLike
from activeeval.methods.estimate import Estimate

__all__ = [
    "RankResult",
    "RankStep",
    "AdaptiveRanker",
    "next_step",
    "next_item",
    "pair_partner",
    "PAIRINGS",
    "check_pairing",
    "rank_result",
    "pairwise_confidence",
    "is_confident",
    "allocation_value",
    "choose_model",
    "uncertain_adjacent",
    "rank_order",
    "check_gamma",
    "check_models",
    "check_costs",
    "load_costs",
    "scale_of",
    "rank_random",
    "rank_fixed_length",
    "static_subset",
    "rank_static",
]

ScaleLike = Union[str, Callable[[Method], tuple[float, float]]]


# ------------------------------------------------------------------ maths
def pairwise_confidence(mean_i: float, var_i: float, mean_j: float, var_j: float) -> float:
    """P(θ_i > θ_j) = Φ((θ̂_i − θ̂_j) / √(SE_i² + SE_j²)) (paper §6, "Pairwise confidence").

    With both variances 0 it is 1, 0 or ½ by the sign of the difference.
    """
    sd = math.sqrt(max(var_i, 0.0) + max(var_j, 0.0))
    diff = mean_i - mean_j
    if sd == 0.0:
        return 1.0 if diff > 0 else (0.0 if diff < 0 else 0.5)
    return float(ndtr(diff / sd))


def check_gamma(gamma: float) -> float:
    """γ must lie strictly between 0 and 1."""
    try:
        g = float(gamma)
    except (TypeError, ValueError):
        g = float("nan")
    if not (0.0 < g < 1.0):
        raise ConfigurationError(f"gamma must be in (0, 1) (a confidence level such as 0.95), got {gamma}")
    return g


def is_confident(p: float, gamma: float) -> bool:
    """True when P lies outside [(1 − γ)/2, 1 − (1 − γ)/2]: a two-sided level-γ decision (§6)."""
    lo = (1.0 - gamma) / 2.0
    return p < lo or p > 1.0 - lo


def allocation_value(var: float, n_observed: int, cost: float) -> float:
    """SE² / ((n + 1)·c): expected uncertainty reduction per unit cost (paper §6, "Cost-aware allocation")."""
    return var / ((n_observed + 1) * cost)


def choose_model(candidates: Sequence[str], variances: Mapping[str, float], counts: Mapping[str, int],
                 costs: Mapping[str, float]) -> str:
    """The candidate with the largest :func:`allocation_value`; ties go to the earliest candidate."""
    if not candidates:
        raise ConfigurationError("choose_model needs at least one candidate model")
    values = [allocation_value(variances[m], counts[m], costs[m]) for m in candidates]
    return candidates[int(np.argmax(values))]


def rank_order(models: Sequence[str], means: Mapping[str, float]) -> list[str]:
    """Models sorted by mean, best first; equal means keep the input order (stable)."""
    idx = sorted(range(len(models)), key=lambda i: (-means[models[i]], i))
    return [models[i] for i in idx]


def uncertain_adjacent(order: Sequence[str], means: Mapping[str, float], variances: Mapping[str, float],
                       gamma: float) -> list[tuple[str, str]]:
    """Adjacent pairs (higher, lower) of ``order`` whose pairwise confidence is not decided at γ."""
    out = []
    for hi, lo in zip(order[:-1], order[1:]):
        p = pairwise_confidence(means[hi], variances[hi], means[lo], variances[lo])
        if not is_confident(p, gamma):
            out.append((hi, lo))
    return out


# ------------------------------------------------------------------ input
def check_models(models: Sequence[str]) -> list[str]:
    models = [str(m) for m in models]
    if len(models) < 2:
        raise ConfigurationError(f"need at least 2 models to rank, got {len(models)} ({models}); pass two or more")
    dup = sorted({m for m in models if models.count(m) > 1})
    if dup:
        raise ConfigurationError(f"models to rank must be distinct; repeated: {dup}")
    return models


def check_costs(costs: Mapping[str, float] | None, models: Sequence[str]) -> dict[str, float]:
    """Relative per-item cost of each model (default 1 for all). Every model needs a finite cost > 0."""
    if costs is None:
        return {m: 1.0 for m in models}
    missing = [m for m in models if m not in costs]
    if missing:
        raise ConfigurationError(
            f"costs are missing for model(s) {missing}; give a positive cost for every model to rank"
        )
    out = {}
    for m in models:
        try:
            c = float(costs[m])
        except (TypeError, ValueError):
            c = float("nan")
        if not (math.isfinite(c) and c > 0):
            raise ConfigurationError(f"cost of model {m!r} must be a positive number, got {costs[m]!r}")
        out[m] = c
    return out


def load_costs(path: str | Path) -> dict[str, float]:
    """Read relative costs: a JSON object {model: cost} or a CSV/TSV of ``model,cost`` rows (header optional)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigurationError(f"costs file {str(p)!r} does not exist; give a JSON or CSV file of model,cost")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataFormatError(f"costs file {str(p)!r} is not valid JSON ({exc})") from None
        if not isinstance(data, dict):
            raise DataFormatError(f"costs file {str(p)!r} must hold a JSON object {{model: cost}}")
        return {str(k): v for k, v in data.items()}
    first = text.splitlines()[0] if text.strip() else ""
    delim = "\t" if "\t" in first else ","
    out: dict[str, Any] = {}
    for i, row in enumerate(csv.reader(text.splitlines(), delimiter=delim)):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            raise DataFormatError(f"costs file {str(p)!r} line {i + 1}: expected 'model,cost', got {row}")
        model, cost = row[0].strip(), row[1].strip()
        if i == 0:
            try:
                float(cost)
            except ValueError:
                continue  # header row
        out[model] = cost
    return out


def scale_of(scale: ScaleLike, method: Method) -> tuple[float, float]:
    """(mean, variance) of ``method`` on the ranking scale.

    ``"auto"``: the ability θ when the method has ``ability()`` (CAT), else the
    full-benchmark score ``estimate()``; ``"ability"`` / ``"estimate"`` force
    one; a callable is used as is.
    """
    if callable(scale):
        mean, var = scale(method)
        return float(mean), float(var)
    if scale not in ("auto", "ability", "estimate"):
        raise ConfigurationError(f"scale must be 'auto', 'ability', 'estimate' or a callable, got {scale!r}")
    has_ability = callable(getattr(method, "ability", None))
    if scale == "ability" and not has_ability:
        raise ConfigurationError(
            f"scale='ability' needs a method with an ability() estimate (e.g. cat), got {type(method).__name__}"
        )
    use_ability = scale == "ability" or (scale == "auto" and has_ability)
    est: Estimate = method.ability() if use_ability else method.estimate()  # type: ignore[attr-defined]
    return float(est.mean), float(est.var)


# ------------------------------------------------------------------ result
@dataclass(frozen=True)
class RankResult:
    """Outcome of a ranking run.

    Attributes
    ----------
    ranking : tuple of str
        Models, best first.
    means, variances : dict
        Per model, on the ranking scale (θ for CAT by default).
    estimates : dict of Estimate
        Per model, on the full-benchmark score scale (``method.estimate()``).
    items_per_model : dict of int
    cost_spent : float
        Σ_m n_m · c_m.
    ties : tuple of (str, str)
        Adjacent pairs not decided at γ (higher-ranked first).
    stop_reason : str
        "confident", "budget", "exhausted" or "fixed" (baselines).
    gamma : float
    """

    ranking: tuple[str, ...]
    means: dict[str, float]
    variances: dict[str, float]
    estimates: dict[str, Estimate]
    items_per_model: dict[str, int]
    cost_spent: float
    ties: tuple[tuple[str, str], ...]
    stop_reason: str
    gamma: float
    items: dict[str, tuple[int, ...]] = field(default_factory=dict, repr=False)

    @property
    def n_items_used(self) -> int:
        return int(sum(self.items_per_model.values()))

    def confidence(self, a: str, b: str) -> float:
        """P(a ranks above b) on the ranking scale."""
        return pairwise_confidence(self.means[a], self.variances[a], self.means[b], self.variances[b])

    def uncertain_pairs(self) -> set[frozenset[str]]:
        """All pairs (not only adjacent ones) undecided at γ: the ranker's tie predictions."""
        out = set()
        for i, a in enumerate(self.ranking):
            for b in self.ranking[i + 1:]:
                if not is_confident(self.confidence(a, b), self.gamma):
                    out.add(frozenset((a, b)))
        return out

    def to_dict(self, level: float | None = None) -> dict[str, Any]:
        z = float(ndtri(0.5 + (level if level is not None else self.gamma) / 2.0))
        rows = []
        for rank, m in enumerate(self.ranking, start=1):
            sd = math.sqrt(max(self.variances[m], 0.0))
            est = self.estimates[m]
            lo, hi = est.ci(level if level is not None else self.gamma)
            rows.append({
                "rank": rank, "model": m, "mean": self.means[m], "std": sd,
                "ci_low": self.means[m] - z * sd, "ci_high": self.means[m] + z * sd,
                "score": est.mean, "score_ci_low": lo, "score_ci_high": hi,
                "items": self.items_per_model[m],
            })
        return {
            "ranking": rows,
            "ties": [list(t) for t in self.ties],
            "items_per_model": dict(self.items_per_model),
            "cost_spent": self.cost_spent,
            "stop_reason": self.stop_reason,
            "gamma": self.gamma,
        }


def _result(models: Sequence[str], methods: Mapping[str, Method], scale: ScaleLike, gamma: float,
            costs: Mapping[str, float], asked: Mapping[str, list[int]], stop: str) -> RankResult:
    means, variances = {}, {}
    for m in models:
        means[m], variances[m] = scale_of(scale, methods[m])
    order = rank_order(models, means)
    ties = tuple(uncertain_adjacent(order, means, variances, gamma))
    counts = {m: len(asked[m]) for m in models}
    return RankResult(
        ranking=tuple(order), means=means, variances=variances,
        estimates={m: methods[m].estimate() for m in models}, items_per_model=counts,
        cost_spent=float(sum(counts[m] * costs[m] for m in models)), ties=ties, stop_reason=stop,
        gamma=gamma, items={m: tuple(asked[m]) for m in models},
    )


def rank_result(models: Sequence[str], methods: Mapping[str, Method], costs: Mapping[str, float],
                asked: Mapping[str, list[int]], stop: str, *, gamma: float = 0.95,
                scale: ScaleLike = "auto") -> RankResult:
    """The ranking of ``models`` as it stands: order, scale means and variances, ties, items and cost."""
    return _result(models, methods, scale, gamma, costs, asked, stop)


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
    means, variances = {}, {}
    for m in models:
        means[m], variances[m] = scale_of(scale, methods[m])
    order = rank_order(models, means)
    pairs = uncertain_adjacent(order, means, variances, gamma)
    if not pairs:
        return RankStep(None, "confident")
    open_models = [m for m in order if any(m in p for p in pairs) and not exhausted(m)]
    if not open_models:
        return RankStep(None, "exhausted")
    affordable = [m for m in open_models if spent + costs[m] <= budget]
    if not affordable:
        return RankStep(None, "budget")
    chosen = choose_model(affordable, variances, counts, costs)
    return RankStep(chosen, partner=pair_partner(chosen, pairs, means, variances))


def pair_partner(model: str, pairs: Sequence[tuple[str, str]], means: Mapping[str, float],
                 variances: Mapping[str, float]) -> str | None:
    """The other model of the least decided pair (confidence nearest ½) among ``pairs`` that contain ``model``."""
    best, closest = None, math.inf
    for a, b in pairs:
        if model not in (a, b):
            continue
        gap = abs(pairwise_confidence(means[a], variances[a], means[b], variances[b]) - 0.5)
        if gap < closest:
            best, closest = (b if a == model else a), gap
    return best


#: Item choice of the ranker: "own" (each model's method chooses) or "partner" (see :func:`next_item`).
PAIRINGS = ("own", "partner")


def check_pairing(pairing: str) -> str:
    if pairing not in PAIRINGS:
        raise ConfigurationError(f"--pairing (pairing=) must be 'own' or 'partner', got {pairing!r}")
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


def _build(models: Sequence[str], make: Callable[[str], Method]) -> dict[str, Method]:
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
    make : callable
        ``make(model_id) -> Method``: a fresh method for one model; all
        methods must share the item set.
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
        make: Callable[[str], Method],
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
        asked: dict[str, list[int]] = {m: [] for m in models}
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
def rank_random(
    models: Sequence[str],
    make: Callable[[str], Method],
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
    make: Callable[[str], Method],
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


def rank_static(models: Sequence[str], subset: np.ndarray, score: Callable[[str, int], float]) -> dict[str, float]:
    """Mean score of each model on the fixed ``subset`` (ranked on it by the caller)."""
    models = check_models(models)
    return {m: float(np.mean([score(m, int(i)) for i in subset])) for m in models}
