"""Estimation methods: the Method protocol, BayesAME and the baselines.

Names are imported on first use (PEP 562): importing one method module does
not pull in every other method's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Method": "activeeval.methods.base",
    "BaseMethod": "activeeval.methods.base",
    "Estimate": "activeeval.methods.estimate",
    "BayesAME": "activeeval.methods.bayesame",
    "RSMean": "activeeval.methods.baselines.rs_mean",
    "ContinuousCAT": "activeeval.methods.cat",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'activeeval.methods' has no attribute {name!r}")
