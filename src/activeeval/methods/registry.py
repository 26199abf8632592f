"""Methods by name, for the CLI, sessions and the backtest engine.

Each name maps to ``"module:attribute"`` (imported on first use, so a session
with BayesAME does not import every baseline's dependencies) or to a factory
``f(reference, **kwargs) -> BaseMethod`` registered at run time.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import BaseMethod

__all__ = ["METHODS", "REPLAYS", "make_method", "method_names", "register", "resolve_factory", "resolve_replay"]

MethodFactory = Callable[..., BaseMethod]

METHODS: dict[str, str | MethodFactory] = {
    "bayesame": "activeeval.methods.bayesame:BayesAME",
    "bayesame-rs": "activeeval.methods.bayesame:BayesAMERS",
    "rs-mean": "activeeval.methods.baselines.rs_mean:RSMean",
    "seq-apw": "activeeval.methods.baselines.seq_apw:SeqAPW",
    "bayes-aipw": "activeeval.methods.baselines.bayes_aipw:BayesAIPW",
    "bayes-rs-learn": "activeeval.methods.baselines.bayes_rs_learn:BayesRSLearn",
    "proeval": "activeeval.methods.baselines.proeval:ProEval",
    "irt": "activeeval.methods.baselines.irt:IRTBaseline",
    "cat": "activeeval.methods.cat:ContinuousCAT",
}


# Fast backtest replays: ``replay(reference, truths (T, N), seed, **options) -> (means, vars)``,
# each (T, N), equal to playing the method with that seed on each target to n = N (tested per
# method). They share every target-independent computation across the targets of a seed.
REPLAYS: dict[str, str] = {
    "rs-mean": "activeeval.methods.baselines.rs_mean:replay",
    "seq-apw": "activeeval.methods.baselines.seq_apw:replay",
    "bayes-aipw": "activeeval.methods.baselines.bayes_aipw:replay",
    "bayes-rs-learn": "activeeval.methods.baselines.bayes_rs_learn:replay",
    "proeval": "activeeval.methods.baselines.proeval:replay",
    "irt": "activeeval.methods.baselines.irt:replay",
}


def resolve_replay(name: str) -> Callable[..., tuple[Any, Any]] | None:
    """The fast replay of method ``name``, or None if it has none (the runner then plays it step by step)."""
    spec = REPLAYS.get(name)
    if spec is None or METHODS.get(name) is None or not isinstance(METHODS[name], str):
        return None  # a method re-registered at run time keeps no fast path
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr, None)


def register(name: str, factory: MethodFactory) -> None:
    """Make ``factory(reference, **kwargs)`` available as ``name``."""
    METHODS[name] = factory


def method_names() -> list[str]:
    return list(METHODS)


def resolve_factory(name: str) -> MethodFactory:
    """The class or factory registered as ``name``.

    Raises :class:`ConfigurationError` for an unknown name, suggesting the
    closest known one.
    """
    try:
        spec = METHODS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), METHODS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigurationError(
            f"unknown method {name!r}{hint}; choose one of: {', '.join(METHODS)}"
        ) from None
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        return getattr(importlib.import_module(module), attr)
    return spec


def make_method(name: str, reference: ScoreMatrix, **kwargs: Any) -> BaseMethod:
    """Build the method called ``name`` on ``reference``."""
    return resolve_factory(name)(reference, **kwargs)
