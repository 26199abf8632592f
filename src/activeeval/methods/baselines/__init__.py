"""Baselines of the BayesAME paper (§5.1), each a Method.

Names are imported on first use (PEP 562) so that using one baseline does not
import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "RSMean": "activeeval.methods.baselines.rs_mean",
    "SeqAPW": "activeeval.methods.baselines.seq_apw",
    "BayesAIPW": "activeeval.methods.baselines.bayes_aipw",
    "BayesRSLearn": "activeeval.methods.baselines.bayes_rs_learn",
    "ProEval": "activeeval.methods.baselines.proeval",
    "IRTBaseline": "activeeval.methods.baselines.irt",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'activeeval.methods.baselines' has no attribute {name!r}")
