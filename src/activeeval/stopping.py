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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from activeeval.exceptions import ConfigurationError, option
from activeeval.methods.estimate import Estimate
from activeeval.settings import Settings, setting

__all__ = [
    "DEFAULT_EPSILON1",
    "DEFAULT_EPSILON2",
    "DEFAULT_STOP",
    "DEFAULT_WINDOW",
    "AnyOf",
    "BudgetRule",
    "Condition",
    "StopRule",
    "StoppingRule",
    "WindowCIRule",
    "conditions_of",
    "default_rule",
    "stop_reason",
]

#: The defaults of the paper's stopping rule (Algorithm 1), defined once: sessions, backtests, the cost forecast
#: and the CLI's options take them from here (:class:`StopRule`).
DEFAULT_EPSILON1 = 0.005
DEFAULT_EPSILON2 = 0.03
DEFAULT_WINDOW = 30


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

    epsilon1: float = DEFAULT_EPSILON1
    epsilon2: float = DEFAULT_EPSILON2
    window: int = DEFAULT_WINDOW
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
        m = self.max_items
        if isinstance(m, bool) or not isinstance(m, (int, float)) or int(m) != m or m < 1:
            raise ConfigurationError(f"{option('max_items')} must be a positive integer, got {m!r}")
        object.__setattr__(self, "max_items", int(m))

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
    epsilon1: float = DEFAULT_EPSILON1, epsilon2: float = DEFAULT_EPSILON2, window: int = DEFAULT_WINDOW,
    max_items: int | None = None,
) -> StoppingRule:
    """The paper's rule, plus a fixed budget when ``max_items`` is given."""
    rule: StoppingRule = WindowCIRule(epsilon1=epsilon1, epsilon2=epsilon2, window=window)
    if max_items is not None:
        rule = AnyOf((rule, BudgetRule(max_items)))
    return rule



@dataclass(frozen=True)
class StopRule(Settings):
    """The stopping settings as one value: the paper's rule (ε1, ε2, window) and an optional budget.

    What a session stores and a caller passes around instead of four loose numbers; its defaults are
    :data:`DEFAULT_EPSILON1`, :data:`DEFAULT_EPSILON2`, :data:`DEFAULT_WINDOW` and no budget. Checked when
    made (a :class:`~activeeval.exceptions.ConfigurationError` names the option); :meth:`rule` is the
    stopping rule, :meth:`to_dict` / :meth:`from_dict` its stored form (JSON types, values as given).
    """

    about: ClassVar[str] = "the stopping rule"

    epsilon1: float = setting(DEFAULT_EPSILON1, None, "largest move of R̂ over the window")
    epsilon2: float = setting(DEFAULT_EPSILON2, None, "largest width of the 95 % interval")
    window: int = setting(DEFAULT_WINDOW, None, "steps over which R̂ may move at most epsilon1")
    max_items: int | None = setting(None, None, "a budget of items (None: none)")

    def check(self) -> None:
        if self.max_items is not None:  # checked (and made an int) by the budget rule
            object.__setattr__(self, "max_items", BudgetRule(self.max_items).max_items)
        self.rule()  # the rules check their own values

    def rule(self) -> StoppingRule:
        """The stopping rule: Algorithm 1, or it or the budget when ``max_items`` is set."""
        return default_rule(self.epsilon1, self.epsilon2, self.window, self.max_items)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StopRule:
        """The rule of a stored form (a key it lacks, or holds None, takes its default; ``n_max`` is read as
        ``max_items``; other keys are ignored: a session's stored settings hold more)."""
        known = set(cls.names())
        values: dict[str, Any] = {k: v for k, v in data.items() if k in known and v is not None}
        if data.get("max_items") is None and data.get("n_max") is not None:
            values["max_items"] = data["n_max"]
        return cls(**values)


#: The paper's rule with its defaults and no budget.
DEFAULT_STOP = StopRule()


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
