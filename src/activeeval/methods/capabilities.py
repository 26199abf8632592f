"""What a method can do, declared on its class, for the engines that drive it (issue 29 item 4).

The drivers (sessions, the backtest runner, the ranker and its simulation,
the CLI) never test a method's *name*: they ask its :class:`Capabilities`,
read through the registry (:func:`activeeval.methods.registry.capabilities`).
A method class declares them as a class attribute,
``capabilities = Capabilities(...)``; a factory registered at run time
passes them to :func:`~activeeval.methods.registry.register` (or carries the
attribute). A method that declares nothing has the defaults: one target, no
ranking simulation, ranked on the full-benchmark score, no batch options, no
shared calibration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from activeeval.exceptions import ConfigurationError

__all__ = ["Capabilities", "SharedCalibration"]

#: ``fit(reference_scores, options, *, calibration, response, local_error) -> calibration``: what a ranking
#: simulation fits once on the references and gives every ranked model's method as ``calibration=``.
#: ``options`` are the method's constructor options; the keywords are the ranking's calibration settings
#: (``calibration`` "consistent" or "paper", ``response``, ``local_error``; None where not given).
SharedCalibration = Callable[..., Any]

_SCALES = ("score", "theta")
_SEEDS = ("per_model", "shared")


@dataclass(frozen=True)
class Capabilities:
    """A method's answers to the questions its drivers ask (every field has the plain method's answer).

    Attributes
    ----------
    multi_target : bool
        The method evaluates several targets jointly
        (:class:`~activeeval.methods.multi.MultiTargetMethod`), built as
        ``cls(reference, targets, **options)``: sessions and the backtest build
        one for all the targets (a multi-target backtest), the ranker ranks on
        its joint posterior.
    ranks : bool
        A ranking simulation (``simulate_ranking``, ``run_rank_backtest``)
        takes it: one method per ranked model, or, with ``multi_target``, one
        joint method whose targets are the models. (A ranking *session* takes
        any method.)
    ranking_scale : {"score", "theta"}
        The scale the ranker puts its models on by default: the
        full-benchmark score (``estimate()``) or the ability θ (``ability()``,
        which a "theta" method must have).
    rank_seeds : {"per_model", "shared"}
        In a ranking simulation, each model's method gets its own seed
        (derived from the run's seed and the model's order of first request),
        or every model's method the run's seed.
    batch : bool
        The method has the batch-selection options (``batch_strategy``,
        ``batch_size``, ``myopic``) that the backtest's batch settings set.
    shared_calibration : callable or None
        How a ranking fits the calibration it shares across the ranked
        models (:data:`SharedCalibration`). A method with one takes the
        ranking's calibration settings as constructor options
        (``calibration``, ``response``, ``local_error``); the others refuse
        them.
    """

    multi_target: bool = False
    ranks: bool = False
    ranking_scale: Literal["score", "theta"] = "score"
    rank_seeds: Literal["per_model", "shared"] = "per_model"
    batch: bool = False
    shared_calibration: SharedCalibration | None = None

    def __post_init__(self) -> None:
        for field, value in (("multi_target", self.multi_target), ("ranks", self.ranks), ("batch", self.batch)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"Capabilities.{field} must be True or False, got {value!r}")
        if self.ranking_scale not in _SCALES:
            raise ConfigurationError(f"Capabilities.ranking_scale must be one of {_SCALES}, got {self.ranking_scale!r}")
        if self.rank_seeds not in _SEEDS:
            raise ConfigurationError(f"Capabilities.rank_seeds must be one of {_SEEDS}, got {self.rank_seeds!r}")
        if self.shared_calibration is not None and not callable(self.shared_calibration):
            raise ConfigurationError("Capabilities.shared_calibration must be a callable or None")
        if self.multi_target and (self.batch or self.shared_calibration is not None or self.ranking_scale != "score"):
            raise ConfigurationError("a multi-target method ranks on its joint posterior of the score: it declares "
                                     "no batch options, shared calibration or θ scale")

    def fit_shared_calibration(self, scores: Any, options: Mapping[str, Any], **settings: Any) -> Any:
        """The calibration a ranking shares across its models (:data:`SharedCalibration`); error if it has none."""
        if self.shared_calibration is None:
            raise ConfigurationError("this method takes no shared calibration")
        return self.shared_calibration(scores, options, **settings)
