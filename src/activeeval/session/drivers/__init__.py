"""What scores a session's items: the scorer process runner and its drive loops (:mod:`.runner`), the
lm-evaluation-harness and Inspect adapters (:mod:`.lm_eval_harness`, :mod:`.inspect_harness`) and the
quieting of their output (:mod:`.harness_output`).

The top floor of :mod:`activeeval.session`: drivers use the session kinds, nothing below uses a driver.
"""
