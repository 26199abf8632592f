"""Item response theory, pure maths: one module per model.

* :mod:`activeeval.irt.continuous` — the continuous-CAT model (continuous-CAT
  paper §4–§5, App. E): calibration of difficulties, slopes, noise and the
  error model; the ability posterior on a grid; Fisher information. Used by
  :class:`~activeeval.methods.cat.ContinuousCAT` and the ranker.
* :mod:`activeeval.irt.baseline` — the BayesAME paper's IRT baseline (§5.1,
  baseline 7): 2-PL for binary scores, Beta IRT for continuous ones, and the
  posterior of the full-benchmark score. Used by
  :class:`~activeeval.methods.baselines.irt.IRTBaseline`.
"""
