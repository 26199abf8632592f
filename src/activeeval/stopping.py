"""Stopping rules as small, pure objects, owned by whatever drives a method.

A rule looks at the trajectory of estimates (one :class:`Estimate` after each
observation, oldest first) and says why to stop, or ``None`` to go on. Rules
hold no state, so a method rebuilt by replaying its history stops at exactly
the same point. Methods know nothing of them: the session, the backtest and
:func:`~activeeval.experiments.simulate.run_until_stop` hold a rule and ask
:func:`stop_reason` (which adds "exhausted" once every item is
observed). The budget is spelled ``max_items`` everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from activeeval.exceptions import ConfigurationError, option
from activeeval.methods.estimate import Estimate

__all__ = [
    "AnyOf",
    "BudgetRule",
    "Condition",
    "StoppingRule",
    "WindowCIRule",
    "conditions_of",
    "default_rule",
    "stop_reason",
]


@dataclass(frozen=True)
class Condition:
    """One condition of a stopping rule against its threshold, for a status display.

    ``rule`` groups conditions that must hold together ("precision": window,
    stability and width; "budget"). ``value`` is None while it cannot be
    computed yet (e.g. the range over a window not yet filled).
    """

    rule: str
    name: str
    value: float | None
    threshold: float
    met: bool

    def to_dict(self) -> dict[str, object]:
        return {"rule": self.rule, "name": self.name, "value": self.value, "threshold": self.threshold,
                "met": self.met}


class StoppingRule(Protocol):
    def check(self, trajectory: Sequence[Estimate]) -> str | None:
        """A short reason to stop (e.g. ``"precision"``), or None to continue."""
        ...


@dataclass(frozen=True)
class WindowCIRule:
    """Algorithm 1 of the BayesAME paper.

    Stop once at least ``window`` items are observed and (i) the range of R̂
    over the last ``window`` steps is at most ``epsilon1`` and (ii) the width
    of the ``level`` credible interval, 2·z·sqrt(Var R), is at most ``epsilon2``.
    """

    epsilon1: float = 0.005
    epsilon2: float = 0.03
    window: int = 30
    level: float = 0.95

    def __post_init__(self) -> None:
        if not self.epsilon1 >= 0:
            raise ConfigurationError(
                f"{option('epsilon1')} must be >= 0 (the tolerated R-hat range), got {self.epsilon1}")
        if not self.epsilon2 > 0:
            raise ConfigurationError(
                f"{option('epsilon2')} must be > 0 (the tolerated interval width), got {self.epsilon2}")
        if int(self.window) != self.window or self.window < 1:
            raise ConfigurationError(f"{option('window')} must be a positive integer, got {self.window}")
        if not 0 < self.level < 1:
            raise ConfigurationError(f"level must be in (0, 1), got {self.level}")

    def check(self, trajectory: Sequence[Estimate]) -> str | None:
        if len(trajectory) < self.window:
            return None
        recent = [e.mean for e in trajectory[-self.window :]]
        if max(recent) - min(recent) > self.epsilon1:
            return None
        if trajectory[-1].width(self.level) > self.epsilon2:
            return None
        return "precision"

    def conditions(self, trajectory: Sequence[Estimate]) -> tuple[Condition, ...]:
        """Window filled, R̂ range over the window ≤ ε1, interval width ≤ ε2: each against its threshold."""
        n = len(trajectory)
        recent = [e.mean for e in trajectory[-self.window :]] if n >= self.window else None
        spread = max(recent) - min(recent) if recent else None
        width = trajectory[-1].width(self.level) if trajectory else None
        return (
            Condition("precision", "window", float(n), float(self.window), n >= self.window),
            Condition("precision", "stability", spread, self.epsilon1, spread is not None and spread <= self.epsilon1),
            Condition("precision", "width", width, self.epsilon2, width is not None and width <= self.epsilon2),
        )


@dataclass(frozen=True)
class BudgetRule:
    """Stop after ``max_items`` observed items."""

    max_items: int

    def __post_init__(self) -> None:
        if int(self.max_items) != self.max_items or self.max_items < 1:
            raise ConfigurationError(
                f"{option('max_items')} must be a positive integer number of items, got {self.max_items}")

    def check(self, trajectory: Sequence[Estimate]) -> str | None:
        return "budget" if len(trajectory) >= self.max_items else None

    def conditions(self, trajectory: Sequence[Estimate]) -> tuple[Condition, ...]:
        n = len(trajectory)
        return (Condition("budget", "budget", float(n), float(self.max_items), n >= self.max_items),)


@dataclass(frozen=True)
class AnyOf:
    """Stop as soon as any of ``rules`` says so (the first reason wins)."""

    rules: tuple[StoppingRule, ...]

    def check(self, trajectory: Sequence[Estimate]) -> str | None:
        for rule in self.rules:
            if (reason := rule.check(trajectory)) is not None:
                return reason
        return None

    def conditions(self, trajectory: Sequence[Estimate]) -> tuple[Condition, ...]:
        return tuple(c for rule in self.rules for c in conditions_of(rule, trajectory))


def conditions_of(rule: StoppingRule, trajectory: Sequence[Estimate]) -> tuple[Condition, ...]:
    """The conditions of ``rule`` (empty for a rule that does not describe itself)."""
    describe = getattr(rule, "conditions", None)
    return tuple(describe(trajectory)) if callable(describe) else ()


def default_rule(
    epsilon1: float = 0.005, epsilon2: float = 0.03, window: int = 30, max_items: int | None = None
) -> StoppingRule:
    """The paper's rule, plus a fixed budget when ``max_items`` is given."""
    rule: StoppingRule = WindowCIRule(epsilon1=epsilon1, epsilon2=epsilon2, window=window)
    if max_items is not None:
        rule = AnyOf((rule, BudgetRule(max_items)))
    return rule


class _Driven(Protocol):
    n_items: int

    @property
    def n_observed(self) -> int: ...

    @property
    def trajectory(self) -> Sequence[Estimate]: ...


def stop_reason(rule: StoppingRule, method: _Driven) -> str | None:
    """Why to stop ``method`` now under ``rule``: "exhausted" once every item is observed, else the rule's reason
    ("precision", "budget", ...) or None to go on."""
    if method.n_observed >= method.n_items:
        return "exhausted"
    return rule.check(method.trajectory)
