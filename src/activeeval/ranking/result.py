"""What a ranking run reports (:class:`RankResult`), and how a method's estimate is put on the ranking scale."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scipy.special import ndtri  # Φ⁻¹; scipy.stats costs ~1 s to import

from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import Method
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.ranking.joint import joint_method, joint_posterior
from activeeval.ranking.pairwise import Covariances, is_confident, pair_confidence, rank_order, uncertain_adjacent

ScaleLike = str | Callable[[Method], tuple[float, float]]


def ranks_on_ability(method: Any) -> bool:
    """Whether the ranker puts ``method`` on the ability θ by default: its declared
    :class:`~activeeval.methods.capabilities.Capabilities` say so, or, declaring none, it has ``ability()``."""
    declared = getattr(method, "capabilities", None)
    if isinstance(declared, Capabilities):
        return declared.ranking_scale == "theta"
    return callable(getattr(method, "ability", None))


def scale_of(scale: ScaleLike, method: Method) -> tuple[float, float]:
    """(mean, variance) of ``method`` on the ranking scale.

    ``"auto"``: the scale the method's class declares
    (:attr:`~activeeval.methods.capabilities.Capabilities.ranking_scale`: the
    ability θ, ``ability()``, for CAT; the full-benchmark score
    ``estimate()`` for the others), or, for a method that declares none, θ
    when it has ``ability()``; ``"ability"`` / ``"estimate"`` force one; a
    callable is used as is.
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
    use_ability = scale == "ability" or (scale == "auto" and ranks_on_ability(method))
    if use_ability and not has_ability:
        raise ConfigurationError(
            f"{type(method).__name__} declares the θ ranking scale but has no ability() estimate")
    est: Estimate = method.ability() if use_ability else method.estimate()  # type: ignore[attr-defined]
    return float(est.mean), float(est.var)


def ranking_posterior(models: Sequence[str], methods: Mapping[str, Method], scale: ScaleLike = "auto"
                      ) -> tuple[dict[str, float], dict[str, float], Covariances | None]:
    """Means, variances and covariances (None: independent) of ``models`` on the ranking scale.

    When the models' methods are the sides of one joint multi-target method
    (:class:`~activeeval.ranking.joint.JointTarget`) and the scale is the
    full-benchmark score (``"auto"`` or ``"estimate"``), they come from its
    joint posterior (``estimates()`` and ``covariance()``); otherwise from
    :func:`scale_of` of each method, independent.
    """
    joint = joint_method(models, methods)
    if joint is not None and not callable(scale) and scale in ("auto", "estimate"):
        return joint_posterior(models, joint)
    means, variances = {}, {}
    for m in models:
        means[m], variances[m] = scale_of(scale, methods[m])
    return means, variances, None


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
    covariances : dict
        Posterior covariances of pairs of models on the ranking scale, by
        ``frozenset((a, b))``; empty for independent posteriors (a joint
        multi-target method fills it).
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
    covariances: dict[frozenset, float] = field(default_factory=dict, repr=False)

    @property
    def n_items_used(self) -> int:
        return int(sum(self.items_per_model.values()))

    def confidence(self, a: str, b: str) -> float:
        """P(a ranks above b) on the ranking scale (with their posterior covariance, if any)."""
        return pair_confidence(a, b, self.means, self.variances, self.covariances)

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
            # a method that cannot vouch for an interval reports an infinite variance and says why in its notes
            lo, hi = est.ci(level if level is not None else self.gamma) if math.isfinite(est.var) else (None, None)
            rows.append({
                "rank": rank, "model": m, "mean": self.means[m], "std": sd,
                "ci_low": self.means[m] - z * sd, "ci_high": self.means[m] + z * sd,
                "score": est.mean, "score_ci_low": lo, "score_ci_high": hi, "notes": list(est.notes),
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
    means, variances, covs = ranking_posterior(models, methods, scale)
    order = rank_order(models, means)
    ties = tuple(uncertain_adjacent(order, means, variances, gamma, covs))
    counts = {m: len(asked[m]) for m in models}
    return RankResult(
        ranking=tuple(order), means=means, variances=variances,
        estimates={m: methods[m].estimate() for m in models}, items_per_model=counts,
        cost_spent=float(sum(counts[m] * costs[m] for m in models)), ties=ties, stop_reason=stop,
        gamma=gamma, items={m: tuple(asked[m]) for m in models}, covariances=dict(covs or {}),
    )


def rank_result(models: Sequence[str], methods: Mapping[str, Method], costs: Mapping[str, float],
                asked: Mapping[str, list[int]], stop: str, *, gamma: float = 0.95,
                scale: ScaleLike = "auto") -> RankResult:
    """The ranking of ``models`` as it stands: order, scale means and variances, ties, items and cost."""
    return _result(models, methods, scale, gamma, costs, asked, stop)
