"""Baselines of the BayesAME paper (§5.1), each a Method."""

from activeeval.methods.baselines.rs_mean import RSMean

__all__ = ["RSMean"]
