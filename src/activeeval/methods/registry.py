"""Methods by name, for the CLI, sessions and the backtest engine."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import BaseMethod
from activeeval.methods.baselines import RSMean
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.cat import ContinuousCAT

__all__ = ["METHODS", "make_method", "method_names", "register"]

MethodFactory = Callable[..., BaseMethod]

METHODS: dict[str, MethodFactory] = {
    "bayesame": BayesAME,
    "bayesame-rs": lambda reference, **kw: BayesAME(reference, selection="random", **kw),
    "rs-mean": RSMean,
    "cat": ContinuousCAT,
}


def register(name: str, factory: MethodFactory) -> None:
    """Make ``factory(reference, **kwargs)`` available as ``name``."""
    METHODS[name] = factory


def method_names() -> list[str]:
    return list(METHODS)


def make_method(name: str, reference: ScoreMatrix, **kwargs: Any) -> BaseMethod:
    """Build the method called ``name`` on ``reference``.

    Raises :class:`ConfigurationError` for an unknown name, suggesting the
    closest known one.
    """
    try:
        factory = METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(
            f"unknown method {name!r}{hint}; choose one of: {', '.join(METHODS)}"
        ) from None
    return factory(reference, **kwargs)
