"""The Gaussian-process wing of activeeval: one home per concept.

* :mod:`activeeval.gp.kernels` — covariance kernels as objects (one :class:`~activeeval.gp.kernels.Kernel`
  base; sums and products of kernels; the default's level kernel; ``kernel_sums``).

Import the submodules themselves; this package imports nothing (``import activeeval.gp`` stays cheap).
"""
