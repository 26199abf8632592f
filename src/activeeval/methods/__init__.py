"""Estimation methods: the Method protocol, BayesAME and the baselines."""

from activeeval.methods.base import BaseMethod, Estimate, Method
from activeeval.methods.baselines import RSMean
from activeeval.methods.bayesame import BayesAME

__all__ = ["Method", "BaseMethod", "Estimate", "BayesAME", "RSMean"]
