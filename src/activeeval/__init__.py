"""activeeval: efficient, trustworthy LLM evaluation.

Estimate a model's full-benchmark score from a few actively chosen items, with
an honest interval and an automatic stop.

>>> from activeeval import BayesAME, datasets
>>> ref = datasets.load("ifeval")
>>> method = BayesAME(ref.drop_models([ref.model_ids[0]]), epsilon2=0.05, seed=0)
>>> item = method.select()  # index of the next item to evaluate
"""

from __future__ import annotations

from activeeval import datasets
from activeeval.data.io import read_scores, write_scores
from activeeval.data.matrix import DropReport, ScoreMatrix
from activeeval.exceptions import ActiveEvalError
from activeeval.methods import BaseMethod, BayesAME, Estimate, Method, RSMean
from activeeval.stopping import AnyOf, BudgetRule, StoppingRule, WindowCIRule

__version__ = "0.1.0"

__all__ = [
    "ActiveEvalError",
    "AnyOf",
    "BaseMethod",
    "BayesAME",
    "BudgetRule",
    "DropReport",
    "Estimate",
    "Method",
    "RSMean",
    "ScoreMatrix",
    "StoppingRule",
    "WindowCIRule",
    "datasets",
    "read_scores",
    "write_scores",
    "__version__",
]
