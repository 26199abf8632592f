"""Gaussian-process building blocks shared by the Gaussian methods (issue 29): kernels, the reference prior."""
