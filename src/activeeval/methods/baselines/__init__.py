"""Baselines of the BayesAME paper (§5.1), each a Method.

One module per method: its class and, declared on the class, its fast
backtest replay (``Cls.replay``, see :func:`._common.fast_replay`); what the
modules share is in ``_common`` (estimates, the replays' frame) and
``_ridge`` (the Bayesian ridge of Bayes-AIPW and Bayes-RS-Learn). Adding a
method is a module here plus its line in
:data:`activeeval.methods.registry.METHODS` (and, to export the class from
this package, in ``_EXPORTS`` below).

Names are imported on first use (PEP 562) so that using one baseline does not
import the others.
"""

from __future__ import annotations

from activeeval._lazy import lazy_getattr

_EXPORTS = {
    "RSMean": "activeeval.methods.baselines.rs_mean",
    "SeqAPW": "activeeval.methods.baselines.seq_apw",
    "BayesAIPW": "activeeval.methods.baselines.bayes_aipw",
    "BayesRSLearn": "activeeval.methods.baselines.bayes_rs_learn",
    "ProEval": "activeeval.methods.baselines.proeval",
    "IRTBaseline": "activeeval.methods.baselines.irt",
}

__all__ = list(_EXPORTS)


__getattr__ = lazy_getattr(globals(), _EXPORTS, __name__)
