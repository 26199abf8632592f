"""The old path of :mod:`activeeval.session.drivers.harness_output` (moved there: session/ in rooms, issue 29).

This old path is that same module (``sys.modules`` points here to it): every name, private ones included,
and every patch of one, stays one and the same.
"""

import sys
from typing import TYPE_CHECKING

from activeeval.session.drivers import harness_output as _moved

if TYPE_CHECKING:  # what a type checker sees at this path (at run time: the module itself)
    from activeeval.session.drivers.harness_output import *  # noqa: F403

sys.modules[__name__] = _moved
