"""The multi-target LMC's old address: the module lives in :mod:`activeeval.gp.lmc` (issue 29's Gaussian-process wing).

``import activeeval.lmc`` gives that very module (every name, private ones included), so user code, and session
snapshots that name its classes by their old path, keep working.
"""

import sys

from activeeval.gp import lmc as _lmc

sys.modules[__name__] = _lmc
