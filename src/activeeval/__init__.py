"""activeeval: efficient, trustworthy LLM evaluation.

Estimate a model's full-benchmark score from a few actively chosen items, with
an honest interval and an automatic stop.

>>> from activeeval import BayesAME, WindowCIRule, datasets
>>> ref = datasets.load("ifeval")
>>> method = BayesAME(ref.drop_models([ref.model_ids[0]]), seed=0)
>>> item = method.select()  # index of the next item to evaluate
>>> rule = WindowCIRule(epsilon2=0.05)  # the stopping rule is the caller's: stop_reason(rule, method)

The public names are imported lazily (PEP 562), so that ``import activeeval``
and every CLI command start fast; ``from activeeval import X`` works as usual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from activeeval._lazy import lazy_getattr

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "ActiveEvalError": "activeeval.exceptions",
    "AnyOf": "activeeval.stopping",
    "BaseMethod": "activeeval.methods.base",
    "BayesAME": "activeeval.methods.bayesame",
    "BayesAMEPaper": "activeeval.methods.bayesame_paper",
    "BatchSettings": "activeeval.gp.acquisition",
    "DesignSettings": "activeeval.methods.bayesame",
    "FitSettings": "activeeval.gp.prior",
    "MultiModelSettings": "activeeval.methods.bayesame_multi",
    "PaperModelSettings": "activeeval.methods.bayesame_paper",
    "RefitSettings": "activeeval.methods.bayesame_multi",
    "BudgetRule": "activeeval.stopping",
    "DropReport": "activeeval.data.matrix",
    "Estimate": "activeeval.methods.estimate",
    "Method": "activeeval.methods.base",
    "RSMean": "activeeval.methods.baselines.rs_mean",
    "ScoreMatrix": "activeeval.data.matrix",
    "StopRule": "activeeval.stopping",
    "StoppingRule": "activeeval.stopping",
    "WindowCIRule": "activeeval.stopping",
    "default_rule": "activeeval.stopping",
    "limit_threads": "activeeval._threads",
    "stop_reason": "activeeval.stopping",
    "read_scores": "activeeval.data.io",
    "write_scores": "activeeval.data.io",
}
_EXPORTS["datasets"] = "activeeval.datasets:module"

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from activeeval import datasets
    from activeeval._threads import limit_threads
    from activeeval.data.io import read_scores, write_scores
    from activeeval.data.matrix import DropReport, ScoreMatrix
    from activeeval.exceptions import ActiveEvalError
    from activeeval.gp.acquisition import BatchSettings
    from activeeval.gp.prior import FitSettings
    from activeeval.methods.base import BaseMethod, Method
    from activeeval.methods.baselines.rs_mean import RSMean
    from activeeval.methods.bayesame import BayesAME, DesignSettings
    from activeeval.methods.bayesame_multi import MultiModelSettings, RefitSettings
    from activeeval.methods.bayesame_paper import BayesAMEPaper, PaperModelSettings
    from activeeval.methods.estimate import Estimate
    from activeeval.stopping import (
        AnyOf,
        BudgetRule,
        StoppingRule,
        StopRule,
        WindowCIRule,
        default_rule,
        stop_reason,
    )


__getattr__ = lazy_getattr(globals(), _EXPORTS, __name__)


def __dir__() -> list[str]:
    return sorted(__all__)
