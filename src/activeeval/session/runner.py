"""The old path of :mod:`activeeval.session.drivers.runner` (moved there: session/ in rooms, issue 29).

This old path is that same module (``sys.modules`` points here to it): every name, private ones included,
and every patch of one, stays one and the same.
"""

import sys

from activeeval.session.drivers import runner as _moved

sys.modules[__name__] = _moved
