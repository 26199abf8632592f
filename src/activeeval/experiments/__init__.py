"""Experiments: simulation on score matrices, protocols, metrics."""
