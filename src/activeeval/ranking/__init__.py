"""The adaptive multi-model ranker and its matched-cost baselines (continuous-CAT paper §6, §7.1).

One module per concept: :mod:`~activeeval.ranking.pairwise` (the pairwise
confidence and decision rules), :mod:`~activeeval.ranking.costs` (per-item
costs), :mod:`~activeeval.ranking.joint` (the models' sides of one joint
multi-target method), :mod:`~activeeval.ranking.result` (:class:`RankResult`,
the ranking scale), :mod:`~activeeval.ranking.adaptive` (the ranker) and
:mod:`~activeeval.ranking.baselines` (its matched-cost baselines); every
name is importable from ``activeeval.ranking``.

The ranker is generic over any :class:`~activeeval.methods.base.Method` that
reports a mean and a variance on a scale shared by all models:

* with :class:`~activeeval.methods.cat.ContinuousCAT` it ranks on the ability
  θ (``ability()``: θ̂ and SE², as in the paper);
* with :class:`~activeeval.methods.bayesame.BayesAME` (or any other method)
  it ranks on the full-benchmark score scale (``estimate()``: R̂ and Var R),
  so the ranking is of the full-benchmark scores themselves;
* with one joint multi-target method for all the models (e.g.
  ``bayesame-multi``; :mod:`~activeeval.ranking.joint`) it ranks on their
  joint posterior: P(R_i > R_j) = Φ((m_i − m_j)/√(C_ii + C_jj − 2 C_ij)).

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

from activeeval.ranking.adaptive import (
    PAIRINGS,
    AdaptiveRanker,
    MethodSource,
    RankStep,
    RankStop,
    check_pairing,
    next_item,
    next_step,
    pair_partner,
)
from activeeval.ranking.baselines import rank_fixed_length, rank_random, rank_static, static_subset
from activeeval.ranking.costs import check_costs, load_costs
from activeeval.ranking.joint import JointTarget, joint_method, joint_posterior, joint_targets
from activeeval.ranking.pairwise import (
    Covariances,
    allocation_value,
    check_gamma,
    check_models,
    choose_model,
    cross_covariance,
    is_confident,
    pair_confidence,
    pairwise_confidence,
    rank_order,
    uncertain_adjacent,
)
from activeeval.ranking.result import RankResult, rank_result, ranking_posterior, scale_of

__all__ = [
    "PAIRINGS",
    "AdaptiveRanker",
    "Covariances",
    "JointTarget",
    "MethodSource",
    "RankResult",
    "RankStep",
    "RankStop",
    "allocation_value",
    "check_costs",
    "check_gamma",
    "check_models",
    "check_pairing",
    "choose_model",
    "cross_covariance",
    "is_confident",
    "joint_method",
    "joint_posterior",
    "joint_targets",
    "load_costs",
    "next_item",
    "next_step",
    "pair_confidence",
    "pair_partner",
    "pairwise_confidence",
    "rank_fixed_length",
    "rank_order",
    "rank_random",
    "rank_result",
    "rank_static",
    "ranking_posterior",
    "scale_of",
    "static_subset",
    "uncertain_adjacent",
]
