"""Suite-wide test settings.

Hypothesis draws fresh random examples on every run by default, so a rare numerical corner can fail one CI
run and pass the next. The suite therefore runs derandomised (the same examples every run, still ``max_examples``
of them per test). To search new examples locally::

    HYPOTHESIS_PROFILE=explore python -m pytest tests/test_bayesame_maths.py

The user cache (parsed references, session snapshots: :mod:`activeeval.user_cache`) goes to a temporary folder
for the whole run, never into the real one in the home folder; the commands the tests start inherit it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from hypothesis import settings

_CACHE = tempfile.mkdtemp(prefix="activeeval-test-cache-")
os.environ["ACTIVEEVAL_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))
