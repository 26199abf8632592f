"""The covariance kernels' old address, kept so that user code and scripts keep working.

The kernels live in :mod:`activeeval.gp.kernels` (one ``Kernel`` base with
declared hyperparameters; sums and products; the default's level kernel;
``kernel_sums``). Import from there in new code.
"""

from __future__ import annotations

from activeeval.gp.kernels import (
    _FLOAT32_EXACT,
    BLOCK,
    GROUPS,
    Matern32,
    SquaredExponential,
    _integer_points,
    kernel_sums,
)

__all__ = ["BLOCK", "GROUPS", "_FLOAT32_EXACT", "Matern32", "SquaredExponential", "_integer_points", "kernel_sums"]
