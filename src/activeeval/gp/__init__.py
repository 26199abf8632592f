"""The Gaussian-process wing of activeeval: one home per concept.

* :mod:`activeeval.gp.kernels` — covariance kernels as objects (one :class:`~activeeval.gp.kernels.Kernel`
  base; sums and products of kernels; the default's level kernel; ``kernel_sums``).
* :mod:`activeeval.gp.prior` — the reference-fitted prior as a value (:class:`~activeeval.gp.prior.ReferencePrior`:
  the fit and the calibration, plain data) and its bucket form (:class:`~activeeval.gp.prior.BucketPrior`), which
  every Gaussian method built on a reference can share.
* :mod:`activeeval.gp.posterior` — the bucket posterior both BayesAME methods keep
  (:class:`~activeeval.gp.posterior.BucketPosterior`, its rank-one update and its fantasy for unscored items).
* :mod:`activeeval.gp.acquisition` — Eq. 6's information gain and the batch selector
  (:class:`~activeeval.gp.acquisition.BatchSelector`) given a posterior and the pending items.

Import the submodules themselves; this package imports nothing (``import activeeval.gp`` stays cheap).
"""
