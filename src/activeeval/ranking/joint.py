"""Ranking on a joint posterior: one multi-target method for every ranked model.

A multi-target method (:class:`~activeeval.methods.multi.MultiTargetMethod`,
e.g. ``bayesame-multi``) estimates all the ranked models together, and its
``covariance()`` says how their full-benchmark scores co-vary a posteriori.
The ranker compares two models by P(R_i > R_j) = Φ((m_i − m_j)/√(C_ii + C_jj
− 2 C_ij)), so positively correlated posteriors give sharper comparisons
than the independent ones; with a diagonal covariance
(:class:`~activeeval.methods.multi.Independent`) it is exactly the ranking
on independent posteriors.

The ranker still decides which model to test next (its own logic: which
pairs are unresolved, SE² / ((n + 1)·c)); :class:`JointTarget` is one
model's side of the joint method, with the single-target method's face the
ranker, its baselines and the ranking session use: ``select()`` asks the
joint method for that model's next item (``select(active=[model])``, its
warm start included), ``observe`` records a score for that model. Every
observation is one the ranker asked for, so warm-start items count in its
budget like any other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from activeeval.exceptions import ConfigurationError
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import MultiTargetMethod
from activeeval.ranking.pairwise import Covariances

__all__ = ["JointTarget", "joint_method", "joint_posterior", "joint_targets"]


class JointTarget:
    """One model of a joint multi-target method, as the ranker's per-model method."""

    def __init__(self, joint: MultiTargetMethod, model: str) -> None:
        self.joint = joint
        self.model = str(model)
        self.target = joint.target_index(self.model)
        self.reference = joint.reference
        self.item_ids = joint.item_ids
        self.n_items = joint.n_items

    @property
    def n_observed(self) -> int:
        return self.joint.n_observed_of(self.target)

    @property
    def observed_items(self) -> tuple[int, ...]:
        return self.joint.observed_items(self.target)

    def select(self, rng: np.random.Generator | None = None) -> int:
        """This model's next item, the joint method's choice (pure when ``rng`` is None)."""
        _, item = self.joint.select(rng, active=[self.target])
        return int(item)

    def check_observation(self, item: int | str, score: float) -> tuple[int, float]:
        _, idx, value = self.joint.check_observation(self.target, item, score)
        return idx, value

    def observe(self, item: int | str, score: float) -> None:
        self.joint.observe(self.target, item, score)

    def estimate(self) -> Estimate:
        return self.joint.estimate(self.target)

    def frozen_options(self) -> dict:
        return self.joint.frozen_options()

    def __repr__(self) -> str:
        return f"JointTarget({type(self.joint).__name__}, {self.model!r})"


def joint_targets(joint: MultiTargetMethod, models: Sequence[str]) -> dict[str, JointTarget]:
    """Each of ``models`` as a :class:`JointTarget` of ``joint``, whose targets must be exactly these models."""
    if not isinstance(joint, MultiTargetMethod):
        raise ConfigurationError(f"expected a multi-target method, got {type(joint).__name__}")
    if sorted(joint.targets) != sorted(models):
        raise ConfigurationError(
            f"the joint method's targets ({', '.join(joint.targets)}) must be the models to rank "
            f"({', '.join(models)}); build it with targets=the models")
    return {m: JointTarget(joint, m) for m in models}


def joint_method(models: Sequence[str], methods: Mapping[str, object]) -> MultiTargetMethod | None:
    """The one joint method every model's method is a side of, or None (independent per-model methods)."""
    sides = [methods[m] for m in models]
    if not sides or not all(isinstance(s, JointTarget) for s in sides):
        return None
    joint_sides = cast("list[JointTarget]", sides)
    joint = joint_sides[0].joint
    if any(s.joint is not joint for s in joint_sides):
        raise ConfigurationError("the models' methods are sides of different joint methods; rank with one")
    return joint


def joint_posterior(models: Sequence[str], joint: MultiTargetMethod
                    ) -> tuple[dict[str, float], dict[str, float], Covariances]:
    """Means, variances (the covariance's diagonal) and pairwise covariances of ``models`` from ``joint``."""
    idx = [joint.target_index(m) for m in models]
    est = joint.estimates()
    cov = np.asarray(joint.covariance(), dtype=float)
    means = {m: float(est[t].mean) for m, t in zip(models, idx, strict=True)}
    variances = {m: float(cov[t, t]) for m, t in zip(models, idx, strict=True)}
    covs = {frozenset((a, b)): float(cov[ta, tb])
            for i, (a, ta) in enumerate(zip(models, idx, strict=True))
            for b, tb in zip(models[i + 1:], idx[i + 1:], strict=True)}
    return means, variances, covs
