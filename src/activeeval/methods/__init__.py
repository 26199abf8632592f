"""Estimation methods: the Method protocol, BayesAME and the baselines.

Names are imported on first use (PEP 562): importing one method module does
not pull in every other method's dependencies.
"""

from __future__ import annotations

from activeeval._lazy import lazy_getattr

_EXPORTS = {
    "Method": "activeeval.methods.base",
    "BaseMethod": "activeeval.methods.base",
    "Estimate": "activeeval.methods.estimate",
    "BayesAME": "activeeval.methods.bayesame",
    "BayesAMERS": "activeeval.methods.bayesame",
    "BayesAMEPaper": "activeeval.methods.bayesame_paper",
    "BayesAMEPaperRS": "activeeval.methods.bayesame_paper",
    "RSMean": "activeeval.methods.baselines.rs_mean",
    "ContinuousCAT": "activeeval.methods.cat",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(globals(), _EXPORTS, __name__)
