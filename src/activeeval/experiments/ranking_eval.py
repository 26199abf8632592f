"""Backtesting the adaptive ranker (continuous-CAT paper §7, Tables 2–5; ../shared/SPEC.md §4).

A fold holds out a few models with complete scores; the rest are the
references (calibration). The held-out models are ranked by the adaptive
ranker (with CAT or BayesAME), by random sampling and by the static
most-informative subset at the adaptive ranker's cost, and by fixed-length
CAT (every model gets as many items as the adaptive ranker's busiest model).
Metrics compare each ranking with the full-evaluation ranking (mean score
over all items).

Protocol choices (stated, since the paper's data differ from ours):

* Folds: for each seed the models with complete scores are shuffled and cut
  into ``folds`` disjoint groups of ``holdout`` models (the paper: 5 folds of
  4 models, 20 seeds; its seeds vary the random baseline only).
* Missing reference scores: reference models with any missing score are
  dropped (``ScoreMatrix.dropna("models")``), so every item stays.
* Budget: B = ``budget_per_model`` items per held-out model, times their
  mean relative cost (the paper: the cost of 20 items per model).
* Ground-truth ties: pairs whose paired bootstrap (over items) 95 % interval
  of the mean-score difference contains 0.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from activeeval._threads import numeric
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, InvalidScoresError, option
from activeeval.experiments.checkpoint import BacktestInterrupted, TaskStore
from activeeval.irt.continuous import (
    CALIBRATION_METHODS,
    RESPONSES,
    Calibration,
    calibrate,
    corrected_item_total_correlation,
)
from activeeval.methods.estimate import Estimate
from activeeval.ranking import (
    AdaptiveRanker,
    MethodSource,
    RankResult,
    RankStop,
    check_costs,
    check_models,
    check_pairing,
    rank_fixed_length,
    rank_random,
    rank_static,
    static_subset,
)
from activeeval.settings import takes_settings

if TYPE_CHECKING:
    from activeeval.methods.multi import MultiTargetMethod

__all__ = [
    "RunRecord",
    "backtest_folds",
    "bootstrap_ties",
    "check_rank_method",
    "confident_accuracy",
    "confident_counts",
    "kendall_tau",
    "method_factory",
    "model_family",
    "rank_identity",
    "rank_methods",
    "rank_store",
    "record_from_json",
    "record_to_json",
    "run_family_holdout",
    "run_rank_backtest",
    "simulate_ranking",
    "summarize_rank_backtest",
    "tie_prf",
]

#: The default method of a ranking simulation (listed first among the choices).
DEFAULT_RANK_METHOD = "cat"
#: Options of a ranking simulation's method that the simulation sets itself, and how.
RESERVED_OPTIONS = {
    "seed": f"the simulation; use {option('seed')}",
    "targets": f"the simulation: the models ranked ({option('models')}/{option('holdout')})",
    "missing": "the simulation (incomplete reference models are dropped)",
    "calibration": f"the simulation; use {option('calibration')}",
}


def rank_methods() -> list[str]:
    """Methods a ranking simulation takes: every registered method whose capabilities say it ranks
    (:attr:`~activeeval.methods.capabilities.Capabilities.ranks`), the default first, then in the registry's
    order (the built-ins first); the ones ranking one model each come before the joint multi-target ones."""
    from activeeval.methods.registry import capabilities, method_names

    ranking = [n for n in method_names() if capabilities(n).ranks]
    ranking.sort(key=lambda n: (n != DEFAULT_RANK_METHOD, capabilities(n).multi_target))  # stable: registry order
    return ranking


def __getattr__(name: str) -> Any:
    # RANK_METHODS (public until issue 29): the single-target methods a ranking simulation takes, now derived
    # from the capabilities (computed when asked: it imports every method's module).
    if name == "RANK_METHODS":
        from activeeval.methods.registry import is_multi_target

        return tuple(n for n in rank_methods() if not is_multi_target(n))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _ranks(name: Any) -> bool:
    """Whether ``name`` is a registered method that a ranking simulation takes (its capabilities say so)."""
    from activeeval.methods.registry import METHODS, capabilities

    return isinstance(name, str) and name in METHODS and capabilities(name).ranks


def check_rank_method(method: str) -> tuple[str, dict[str, Any]]:
    """``"bayesame-multi[warm_start=0.02]"`` → (name, options) for ranking; ConfigurationError naming the choices.

    A joint multi-target method (``is_multi_target``) ranks every model on
    its joint posterior; the others rank each model on its own method.
    """
    from activeeval.methods.registry import check_method_spec, parse_method_spec

    name = parse_method_spec(method)[0] if isinstance(method, str) else method
    if not _ranks(name):
        raise ConfigurationError(f"method must be one of {rank_methods()} for ranking, got {method!r}")
    return check_method_spec(method, RESERVED_OPTIONS)


# ------------------------------------------------------------------ metrics
def model_family(model_id: str) -> str:
    """Organisation prefix of a model id: ``meta-llama/Llama-3-8B`` → ``meta-llama``.

    Ids without a "/" (e.g. AlpacaEval's ``vicuna-13b-v1.5``) fall back to the
    leading run of letters, lower-cased (``vicuna``); document this when
    reporting a family hold-out on such data.
    """
    s = str(model_id)
    if "/" in s:
        return s.split("/", 1)[0]
    m = re.match(r"[A-Za-z]+", s)
    return m.group(0).lower() if m else s


def kendall_tau(predicted: Mapping[str, float], truth: Mapping[str, float]) -> float:
    """Kendall τ-b between predicted and true scores of the same models (NaN if undefined)."""
    models = list(truth)
    if set(predicted) != set(models):
        raise ConfigurationError("predicted and true scores must cover the same models")
    x = [predicted[m] for m in models]
    y = [truth[m] for m in models]
    if len(set(x)) < 2 or len(set(y)) < 2:
        return float("nan")
    from scipy.stats import kendalltau  # scipy.stats is slow to import: only when needed

    return float(kendalltau(x, y).statistic)


def bootstrap_ties(scores: np.ndarray, models: Sequence[str], *, n_boot: int = 1000, level: float = 0.95,
                   seed: int | np.random.Generator | None = 0) -> set[frozenset[str]]:
    """Ground-truth ties: pairs whose paired bootstrap CI over items of the mean difference contains 0.

    Parameters
    ----------
    scores : ndarray of shape (n_models, n_items)
        Full scores of ``models`` (complete).
    """
    s = np.asarray(scores, dtype=float)
    if s.shape[0] != len(models):
        raise ConfigurationError(f"scores have {s.shape[0]} rows for {len(models)} models")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    n = s.shape[1]
    idx = rng.integers(0, n, size=(n_boot, n))
    # Means per bootstrap replicate, shape (n_boot, n_models); the same resample for every model (paired).
    boot = np.stack([s[j][idx].mean(axis=1) for j in range(s.shape[0])], axis=1)
    alpha = (1.0 - level) / 2.0
    ties = set()
    for a in range(len(models)):
        for b in range(a + 1, len(models)):
            d = boot[:, a] - boot[:, b]
            lo, hi = np.quantile(d, [alpha, 1.0 - alpha])
            if lo <= 0.0 <= hi:
                ties.add(frozenset((models[a], models[b])))
    return ties


def tie_prf(predicted: set[frozenset[str]], truth: set[frozenset[str]]) -> tuple[float, float, float]:
    """Precision, recall and F1 of predicted ties against ground-truth ties.

    Conventions: with no predicted and no true ties all three are 1 (perfect
    agreement); precision is NaN with no predicted ties, recall NaN with no
    true ties, and F1 is 0 whenever exactly one of the sets is empty.
    """
    if not predicted and not truth:
        return 1.0, 1.0, 1.0
    hit = len(predicted & truth)
    p = hit / len(predicted) if predicted else float("nan")
    r = hit / len(truth) if truth else float("nan")
    if not predicted or not truth or hit == 0:
        return p, r, 0.0
    return p, r, 2 * p * r / (p + r)


def confident_accuracy(result: RankResult, truth: Mapping[str, float]) -> tuple[float, int]:
    """Accuracy of the ranker's confident pairwise orderings against the full evaluation.

    Returns (accuracy, number of confident pairs); accuracy is NaN with none
    (never 1: a run that says nothing has made no correct call). Pool runs by
    summing accuracy × count (see :func:`summarize_rank_backtest`), not by averaging accuracies.
    Pairs tied exactly in the full evaluation count as correct either way.
    """
    correct, total = confident_counts(result, truth)
    return (correct / total if total else float("nan")), total


def _confident_pairs(result: RankResult):
    """(higher, lower) in the reported order, for every pair the ranker did not leave undecided at γ."""
    unsure = result.uncertain_pairs()
    order = result.ranking
    for i, a in enumerate(order):
        for b in order[i + 1:]:
            if frozenset((a, b)) not in unsure:
                yield a, b


def expected_wrong(result: RankResult) -> float:
    """Σ over the confident pairs of 1 − P(the reported order): the wrong calls the ranker itself expects.

    If its pairwise confidences are honest, the wrong confident calls of many
    runs add up to about this (a ranker at γ = 0.95 whose calls all sit just
    above γ expects 5 % of them wrong); many more wrong calls than expected
    means over-confidence.
    """
    total = 0.0
    for a, b in _confident_pairs(result):
        p = result.confidence(a, b)
        total += 1.0 - max(p, 1.0 - p)
    return total


def confident_counts(result: RankResult, truth: Mapping[str, float]) -> tuple[int, int]:
    """(correct, total) confident pairwise orderings of ``result`` against ``truth`` (see confident_accuracy)."""
    correct = total = 0
    for a, b in _confident_pairs(result):
        total += 1
        predicted_a_first = result.means[a] >= result.means[b]
        correct += truth[a] == truth[b] or (truth[a] > truth[b]) == predicted_a_first
    return correct, total


# ----------------------------------------------------------------- factories
def method_factory(method: str, reference: ScoreMatrix, *, calibration: Calibration | None = None,
                   seed: int = 0, models: Sequence[str] | None = None, **kwargs: Any) -> MethodSource:
    """What the ranker builds its methods from, on a complete reference matrix, for ``method`` in :func:`rank_methods`.

    What is built is the method's capabilities' answer
    (:class:`~activeeval.methods.capabilities.Capabilities`), never its name:
    a joint multi-target method (``multi_target``, e.g. ``bayesame-multi``)
    is one fresh method object with ``models`` as its targets, seeded by
    ``seed``; otherwise ``make(model_id) -> Method``, one method per model.
    A method with a ``shared_calibration`` (CAT) gets one calibration for
    every model (``calibration``, fitted here if not given). With
    ``rank_seeds="shared"`` every model's method gets ``seed``; otherwise
    (BayesAME, the default, or the paper's ``bayesame-paper``) each gets a
    seed derived from ``seed`` and the model's position of first request, so
    runs are reproducible, and what the method derives from the reference
    alone (the default's fit and calibration) is computed once and shared by
    every model.
    """
    from activeeval.methods.registry import capabilities, make_method, resolve_factory, sharing_factory

    if not _ranks(method):
        raise ConfigurationError(f"method must be one of {rank_methods()} for ranking, got {method!r}")
    caps = capabilities(method)
    if caps.multi_target:
        if models is None:
            raise ConfigurationError(f"the joint method {method!r} ranks given models: pass models= (its targets)")
        joint = make_method(method, reference, targets=list(models), seed=seed, **kwargs)
        return cast("MultiTargetMethod", joint)  # a joint method's name builds one
    if caps.shared_calibration is not None:
        shared = calibration if calibration is not None else caps.fit_shared_calibration(reference.scores, kwargs)
        kwargs = {**kwargs, "calibration": shared}
    if caps.rank_seeds == "shared":
        factory = resolve_factory(method)
        return lambda model_id: factory(reference, seed=seed, **kwargs)
    counter = iter(range(10**9))
    make = sharing_factory(method, reference, **kwargs)
    return lambda model_id: make(seed=seed * 1000 + next(counter))


def _oracle(matrix: ScoreMatrix, reference: ScoreMatrix) -> Callable[[str, int], float]:
    cols = [matrix.item_index(i) for i in reference.item_ids]

    def score(model_id: str, item: int) -> float:
        return float(matrix.scores[matrix.model_index(model_id), cols[item]])

    return score


def complete_models(matrix: ScoreMatrix) -> list[str]:
    ok = ~np.isnan(matrix.scores).any(axis=1)
    return [m for m, good in zip(matrix.model_ids, ok, strict=True) if good]


def check_holdout(matrix: ScoreMatrix, models: Sequence[str]) -> list[str]:
    """Held-out models must exist and have a score on every item (their full ranking is the truth)."""
    out = []
    for m in models:
        row = matrix.model_index(m)  # UnknownModelError names the model
        n_missing = int(np.isnan(matrix.scores[row]).sum())
        if n_missing:
            raise InvalidScoresError(
                f"model {m!r} has {n_missing} missing scores; a model to rank in simulation needs all its scores "
                "(pick another model)"
            )
        out.append(str(m))
    return out


# ----------------------------------------------------------------- one run
@dataclass
class RunRecord:
    """Metrics of one held-out set (one fold of one seed)."""

    models: tuple[str, ...]
    adaptive: RankResult
    truth: dict[str, float]
    adaptive_tau: float
    random_tau: float
    static_tau: float
    fixed_tau: float
    items_adaptive: int
    items_random: int
    items_static: int
    items_fixed: int
    pct_used: float
    cost_adaptive: float
    cost_fixed: float
    tie_precision: float
    tie_recall: float
    tie_f1: float
    adapt_tie_frac: float
    gt_tie_frac: float
    confident_accuracy: float
    n_confident: int
    n_pairs: int = 0
    n_correct_confident: int = 0
    n_distinct: int = 0
    n_false_ties: int = 0
    expected_wrong: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def record_to_json(rec: RunRecord) -> dict[str, Any]:
    """``rec`` as plain JSON data (floats exactly, NaN included; a pair's covariance under its sorted names)."""
    res = rec.adaptive
    adaptive = {
        "ranking": list(res.ranking), "means": dict(res.means), "variances": dict(res.variances),
        "estimates": {m: dataclasses.asdict(e) for m, e in res.estimates.items()},
        "items_per_model": {m: int(n) for m, n in res.items_per_model.items()}, "cost_spent": float(res.cost_spent),
        "ties": [list(t) for t in res.ties], "stop_reason": res.stop_reason, "gamma": float(res.gamma),
        "items": {m: [int(i) for i in items] for m, items in res.items.items()},
        "covariances": [[*sorted(pair), float(c)] for pair, c in res.covariances.items()],
    }
    out = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec) if f.name not in ("models", "adaptive")}
    return {"models": list(rec.models), "adaptive": adaptive,
            **{k: v if isinstance(v, (str, dict)) else (int(v) if isinstance(v, (int, np.integer)) else float(v))
               for k, v in out.items()}}


def record_from_json(data: Mapping[str, Any]) -> RunRecord:
    """The :class:`RunRecord` that :func:`record_to_json` wrote."""
    a = data["adaptive"]
    estimates = {m: Estimate(e["mean"], e["var"], e["n_observed"], e["n_items"],
                             None if e["bounds"] is None else tuple(e["bounds"]), tuple(e["notes"]))
                 for m, e in a["estimates"].items()}
    adaptive = RankResult(
        ranking=tuple(a["ranking"]), means=dict(a["means"]), variances=dict(a["variances"]), estimates=estimates,
        items_per_model=dict(a["items_per_model"]), cost_spent=a["cost_spent"], ties=tuple(map(tuple, a["ties"])),
        stop_reason=a["stop_reason"], gamma=a["gamma"], items={m: tuple(v) for m, v in a["items"].items()},
        covariances={frozenset((x, y)): c for x, y, c in a["covariances"]},
    )
    rest = {k: v for k, v in data.items() if k not in ("models", "adaptive")}
    return RunRecord(models=tuple(data["models"]), adaptive=adaptive, **rest)


@numeric  # one thread-limit scope for the whole simulation (activeeval._threads)
@takes_settings
def simulate_ranking(
    matrix: ScoreMatrix,
    holdout: Sequence[str],
    *,
    method: str = "cat",
    stop: RankStop = RankStop(),
    costs: Mapping[str, float] | None = None,
    seed: int = 0,
    reference: ScoreMatrix | None = None,
    baselines: bool = True,
    n_boot: int = 1000,
    calibration: str = "consistent",
    response: str | None = None,
    pairing: str = "own",
    local_error: bool | None = None,
) -> RunRecord:
    """Rank ``holdout`` by simulation against their known scores, with the baselines and metrics.

    ``method`` is a name of :func:`rank_methods`, optionally with options
    (``"bayesame-multi[warm_start=0.02]"``, as a method spec); a joint
    multi-target method ranks on its joint posterior (and plays the random
    and fixed-length baselines too), the others on one method per model.
    ``reference`` defaults to every other model of ``matrix``, with incomplete
    models dropped. Pass it for a family hold-out. ``calibration`` is CAT's
    (``"consistent"`` or the paper's ``"paper"``, see
    :func:`activeeval.methods.cat.fit_calibration`), fitted once on the
    references and shared by every model; ``pairing`` the ranker's item
    choice (:func:`activeeval.ranking.next_item`); ``local_error`` CAT's
    check of its error against the references' on the same items
    (:class:`activeeval.methods.cat.LocalError`; default on with the
    consistent calibration).
    """
    gamma, min_items, budget_per_model = stop.gamma, stop.min_items, stop.budget_per_model
    check_pairing(pairing)
    name, options = check_rank_method(method)
    if calibration not in CALIBRATION_METHODS:
        raise ConfigurationError(f"{option('calibration')} must be 'consistent' or 'paper', got {calibration!r}")
    if response is not None and response not in RESPONSES:
        raise ConfigurationError(f"{option('response')} must be '2pl' or 'rasch', got {response!r}")
    models = check_models(check_holdout(matrix, holdout))
    costs = check_costs(costs, models)
    if budget_per_model is None:  # a simulation plays its baselines at the adaptive ranker's cost
        raise ConfigurationError(f"{option('budget_per_model')} must be > 0 (items per model) in a simulation, "
                                 "got None")
    from activeeval.methods.registry import capabilities

    caps = capabilities(name)
    if local_error is not None and caps.shared_calibration is None:
        raise ConfigurationError(f"{option('local_error')} applies to {option('method', repr('cat'), 'cat')} only")
    reference = _complete_reference(matrix, reference, models)
    score = _oracle(matrix, reference)
    cal = None
    if caps.shared_calibration is not None:  # fitted once, shared by every model's method (and the baselines)
        cal = caps.fit_shared_calibration(reference.scores, options, calibration=calibration, response=response,
                                          local_error=local_error)
    if local_error is not None:
        options["local_error"] = local_error

    def make(seed_: int) -> MethodSource:
        return method_factory(name, reference, calibration=cal, seed=seed_, models=models, **options)

    budget = budget_per_model * sum(costs.values())
    adaptive = AdaptiveRanker(models, make(seed), score, costs=costs, gamma=gamma, min_items=min_items,
                              budget=budget, pairing=pairing).run()
    full = np.stack([matrix.scores[matrix.model_index(m), [matrix.item_index(i) for i in reference.item_ids]]
                     for m in models])
    rec = _adaptive_record(models, adaptive, full, reference.n_items, n_boot, seed)
    if baselines:
        _add_baselines(rec, make, score, reference, cal, costs, gamma, seed)
    return rec


def _complete_reference(matrix: ScoreMatrix, reference: ScoreMatrix | None, models: Sequence[str]) -> ScoreMatrix:
    """The given reference, or every model of ``matrix`` but the held-out ones; incomplete models dropped."""
    if reference is None:
        reference = matrix.drop_models(models)
    reference, _ = reference.dropna("models")
    if reference.n_models < 2:
        raise InvalidScoresError(
            f"only {reference.n_models} complete reference model(s) remain after holding out {len(models)}; "
            "hold out fewer models"
        )
    return reference


def _adaptive_record(models: Sequence[str], adaptive: RankResult, full: np.ndarray, n_items: int, n_boot: int,
                     seed: int) -> RunRecord:
    """The metrics of the adaptive run against the full scores ``full`` (models × items); baselines not yet run."""
    truth = {m: float(full[j].mean()) for j, m in enumerate(models)}
    n_used = adaptive.n_items_used
    gt_ties = bootstrap_ties(full, models, n_boot=n_boot, seed=seed)
    pred_ties = adaptive.uncertain_pairs()
    tp, tr, tf = tie_prf(pred_ties, gt_ties)
    n_pairs = len(models) * (len(models) - 1) // 2
    n_right, n_conf = confident_counts(adaptive, truth)
    all_pairs = {frozenset((a, b)) for i, a in enumerate(models) for b in models[i + 1:]}
    distinct = all_pairs - gt_ties
    return RunRecord(
        models=tuple(models), adaptive=adaptive, truth=truth, adaptive_tau=kendall_tau(adaptive.means, truth),
        random_tau=float("nan"), static_tau=float("nan"), fixed_tau=float("nan"),
        items_adaptive=n_used, items_random=0, items_static=0, items_fixed=0,
        pct_used=100.0 * n_used / (len(models) * n_items),
        cost_adaptive=adaptive.cost_spent, cost_fixed=float("nan"),
        tie_precision=tp, tie_recall=tr, tie_f1=tf, adapt_tie_frac=len(pred_ties) / n_pairs,
        gt_tie_frac=len(gt_ties) / n_pairs, confident_accuracy=n_right / n_conf if n_conf else float("nan"),
        n_confident=n_conf, n_pairs=n_pairs, n_correct_confident=n_right, n_distinct=len(distinct),
        n_false_ties=len(pred_ties & distinct), expected_wrong=expected_wrong(adaptive),
    )


def _add_baselines(rec: RunRecord, make: Callable[[int], MethodSource], score: Callable[[str, int], float],
                   reference: ScoreMatrix, cal: Any, costs: Mapping[str, float], gamma: float,
                   seed: int) -> None:
    """Random items, the static subset and fixed-length CAT at the adaptive ranker's spend, into ``rec``."""
    models, adaptive, truth = list(rec.models), rec.adaptive, rec.truth
    rnd = rank_random(models, make(seed + 7919), score, budget=max(adaptive.cost_spent, min(costs.values())),
                      costs=costs, gamma=gamma, seed=np.random.default_rng([seed, 1]))
    rec.random_tau = kendall_tau(rnd.means, truth)
    rec.items_random = rnd.n_items_used
    # Static subset: the same items for every model, as many as the spend allows.
    n_static = max(1, int(adaptive.cost_spent // sum(costs.values())))
    # only a min–max map is needed (the same for every calibration): the shared one if it is an IRT
    # calibration (CAT's), else the cheap one
    scaler = cal if isinstance(cal, Calibration) else calibrate(reference.scores, method="paper")
    itc = corrected_item_total_correlation(scaler.scale(reference.scores))
    subset = static_subset(itc, min(n_static, reference.n_items))
    st = rank_static(models, subset, score, n_items=reference.n_items, costs=costs, gamma=gamma)
    rec.static_tau = kendall_tau(st.means, truth)
    rec.items_static = len(subset) * len(models)
    # Fixed-length CAT: everyone gets the busiest model's count.
    fixed = rank_fixed_length(models, make(seed), score, n_items=max(adaptive.items_per_model.values()),
                              costs=costs, gamma=gamma)
    rec.fixed_tau = kendall_tau(fixed.means, truth)
    rec.items_fixed = fixed.n_items_used
    rec.cost_fixed = fixed.cost_spent


def backtest_folds(matrix: ScoreMatrix, *, folds: int, holdout: int, seed: int) -> list[list[str]]:
    """``folds`` disjoint groups of ``holdout`` complete models, from a shuffle seeded by ``seed``."""
    for label, v, lo in (("folds", folds, 1), ("holdout", holdout, 2)):
        if int(v) != v or v < lo:
            raise ConfigurationError(f"{label} must be an integer >= {lo}, got {v}")
    pool = complete_models(matrix)
    need = folds * holdout
    if need > len(pool) - 2:
        raise ConfigurationError(
            f"{folds} folds x {holdout} held-out models need {need} complete models plus 2 references, "
            f"but {matrix.name or 'the matrix'} has {len(pool)} complete models; lower {option('folds')} or "
            f"{option('holdout')}"
        )
    perm = np.random.default_rng(seed).permutation(len(pool))
    return [[pool[j] for j in perm[f * holdout:(f + 1) * holdout]] for f in range(folds)]


@takes_settings
def run_rank_backtest(
    matrix: ScoreMatrix,
    *,
    method: str = "cat",
    folds: int = 5,
    holdout: int = 4,
    seeds: int = 20,
    stop: RankStop = RankStop(),
    first_seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    calibration: str = "consistent",
    response: str | None = None,
    pairing: str = "own",
    local_error: bool | None = None,
    checkpoint: str | os.PathLike[str] | TaskStore | None = None,
) -> list[RunRecord]:
    """The paper's Table 2–4 protocol: ``seeds`` x ``folds`` held-out sets, each ranked by all methods.

    ``checkpoint``: a folder that keeps each held-out set's record as it
    finishes, so an interrupted run (:class:`BacktestInterrupted`) resumes
    where it stopped (:mod:`activeeval.experiments.checkpoint`).
    """
    check_rank_method(method)
    if int(seeds) != seeds or seeds < 1:
        raise ConfigurationError(f"seeds must be a positive integer, got {seeds}")
    settings: dict[str, Any] = dict(method=method, **stop.to_dict(), calibration=calibration, response=response,
                                    pairing=pairing, local_error=local_error)
    runs = {f"run-{s:05d}-{f:02d}": (s, group) for s in range(first_seed, first_seed + seeds)
            for f, group in enumerate(backtest_folds(matrix, folds=folds, holdout=holdout, seed=s))}
    store = rank_store(checkpoint, matrix, {**settings, "folds": folds, "holdout": holdout, "seeds": seeds,
                                            "first_seed": first_seed})
    return _run_kept(runs, lambda s, group: simulate_ranking(matrix, group, seed=s, **settings), store, progress)


def rank_identity(matrix: ScoreMatrix, settings: Mapping[str, Any]) -> dict[str, Any]:
    """What a ranking backtest's checkpoint folder belongs to: the data's fingerprint and every setting."""
    return {"run": "rank-backtest", "data": matrix.fingerprint(), "settings": dict(settings)}


def rank_store(checkpoint: str | os.PathLike[str] | TaskStore | None, matrix: ScoreMatrix,
               settings: Mapping[str, Any]) -> TaskStore | None:
    """The checkpoint of a ranking backtest (a folder or a TaskStore), checked against ``settings``."""
    if checkpoint is None:
        return None
    store = checkpoint if isinstance(checkpoint, TaskStore) else TaskStore(checkpoint)
    store.check(rank_identity(matrix, settings))
    return store


def _run_kept(runs: Mapping[str, tuple[int, Any]], simulate: Callable[[int, Any], RunRecord],
              store: TaskStore | None, progress: Callable[[int, int], None] | None) -> list[RunRecord]:
    """Each run's record in order: read from ``store`` when kept there, else simulated and kept."""
    kept = set(store.names()) if store is not None else set()
    out = []
    try:
        for name, (seed, group) in runs.items():
            if name in kept:
                out.append(record_from_json(store.load_json(name)))  # type: ignore[union-attr]
            else:
                out.append(simulate(seed, group))
                if store is not None:
                    store.save_json(name, record_to_json(out[-1]))
            if progress is not None:
                progress(len(out), len(runs))
    except KeyboardInterrupt:
        done = len(out) if store is None else len(store.names())
        raise BacktestInterrupted(done, len(runs), None if store is None else store.folder) from None
    return out


@takes_settings
def run_family_holdout(
    matrix: ScoreMatrix,
    families: Sequence[str],
    *,
    method: str = "cat",
    seeds: int = 20,
    stop: RankStop = RankStop(),
    first_seed: int = 0,
    calibration: str = "consistent",
    response: str | None = None,
    pairing: str = "own",
    local_error: bool | None = None,
    checkpoint: str | os.PathLike[str] | TaskStore | None = None,
) -> list[RunRecord]:
    """Family hold-out (paper §7.5): rank every complete model of ``families``, calibrating on the other families.

    The family of a model is :func:`model_family`. Seeds vary the method seeds and the random baseline.
    ``checkpoint`` as in :func:`run_rank_backtest`.
    """
    check_rank_method(method)
    fams = {str(f) for f in families}
    known = sorted({model_family(m) for m in matrix.model_ids})
    unknown = sorted(fams - set(known))
    if unknown:
        raise ConfigurationError(f"unknown model families {unknown}; families in this matrix: {known}")
    in_family = [m for m in matrix.model_ids if model_family(m) in fams]
    targets = [m for m in complete_models(matrix) if m in set(in_family)]
    reference = matrix.drop_models(in_family)
    settings: dict[str, Any] = dict(method=method, **stop.to_dict(), calibration=calibration, response=response,
                                    pairing=pairing, local_error=local_error)
    store = rank_store(checkpoint, matrix, {**settings, "families": sorted(fams), "seeds": seeds,
                                            "first_seed": first_seed})
    runs = {f"run-{s:05d}-00": (s, targets) for s in range(first_seed, first_seed + seeds)}
    return _run_kept(runs, lambda s, group: simulate_ranking(matrix, group, seed=s, reference=reference, **settings),
                     store, None)


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    v = np.asarray([x for x in values if not math.isnan(x)], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=0))


def summarize_rank_backtest(records: Sequence[RunRecord]) -> dict[str, float]:
    """Means (and sds) over runs of every reported metric; NaN entries are skipped."""
    keys = ["adaptive_tau", "random_tau", "static_tau", "fixed_tau", "items_adaptive", "items_random",
            "items_static", "items_fixed", "pct_used", "tie_precision", "tie_recall", "tie_f1",
            "adapt_tie_frac", "gt_tie_frac", "confident_accuracy"]
    out: dict[str, float] = {"n_runs": len(records)}
    for k in keys:
        m, s = _mean_sd([float(getattr(r, k)) for r in records])
        out[k] = m
        out[k + "_sd"] = s
    # Pooled over runs: every confident call and every ground-truth-distinct pair counts once.
    n_conf = sum(r.n_confident for r in records)
    n_right = sum(r.n_correct_confident for r in records)
    n_distinct = sum(r.n_distinct for r in records)
    n_pairs = sum(r.n_pairs for r in records)
    out["n_pairs"] = n_pairs
    out["n_confident"] = n_conf
    out["n_wrong_confident"] = n_conf - n_right
    out["expected_wrong_confident"] = float(sum(r.expected_wrong for r in records))
    out["pooled_confident_accuracy"] = n_right / n_conf if n_conf else float("nan")
    out["ties_reported"] = (n_pairs - n_conf) / n_pairs if n_pairs else float("nan")
    out["false_tie_rate"] = sum(r.n_false_ties for r in records) / n_distinct if n_distinct else float("nan")
    item_sav = [1 - r.items_adaptive / r.items_fixed for r in records if r.items_fixed]
    cost_sav = [1 - r.cost_adaptive / r.cost_fixed for r in records if r.cost_fixed and not math.isnan(r.cost_fixed)]
    out["item_savings_vs_fixed"] = _mean_sd(item_sav)[0]
    out["cost_savings_vs_fixed"] = _mean_sd(cost_sav)[0]
    return out
