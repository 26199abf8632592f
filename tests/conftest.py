"""Suite-wide test settings.

Hypothesis draws fresh random examples on every run by default, so a rare numerical corner can fail one CI
run and pass the next. The suite therefore runs derandomised (the same examples every run, still ``max_examples``
of them per test). To search new examples locally::

    HYPOTHESIS_PROFILE=explore python -m pytest tests/test_bayesame_maths.py

The user cache (parsed references, session snapshots: :mod:`activeeval.user_cache`) goes to a temporary folder
for the whole run, never into the real one in the home folder; the commands the tests start inherit it.

The test process runs its BLAS libraries (NumPy's and SciPy's OpenBLAS) at one thread, as activeeval's own numeric
work does (activeeval._threads): a few library functions the tests call directly (``fit_hyperparameters``,
``calibrate``) run outside that scope, and OpenBLAS's default of one thread per core made one such test take
309 s instead of about 2 s on a 2-core machine with other work on it (docs/benchmarks/history.md, issue 29 item 7). With
``pytest -n 2`` each worker holds one core's worth of BLAS. Only this process is set: the commands and scorer
processes the tests start keep the machine's default (tests/test_threads.py checks that, with its own setting).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
import scipy.linalg  # noqa: F401 - loads SciPy's own BLAS, so the limit below holds for it too
from hypothesis import settings
from threadpoolctl import threadpool_limits

_CACHE = tempfile.mkdtemp(prefix="activeeval-test-cache-")
os.environ["ACTIVEEVAL_CACHE"] = _CACHE
atexit.register(shutil.rmtree, _CACHE, True)

threadpool_limits(1, user_api="blas")

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# The modules that take longest (seconds of a loaded serial run, docs/benchmarks/history.md issue 29 item 7) run first:
# `pytest -n auto --dist loadscope` hands out whole modules in collection order, so a long module collected last
# (tests/test_cat.py, tests/test_benchmarks.py) would finish alone after the other worker had run out of work.
LONG_FIRST = (
    "tests/test_cat.py",  # 173 s: ContinuousCAT calibrated on real MuSR
    "tests/integration/test_ifeval_real.py",  # 115 s: 50 BayesAME runs on IFEval
    "tests/test_benchmarks.py",  # 90 s: every benchmark script's --smoke run
    "tests/session/test_rank_session.py",  # 79 s: CAT calibrated on AlpacaEval 2 per session
    "tests/integration/test_rank_real.py",  # 48 s
    "tests/integration/test_walkthrough.py",  # 39 s
)


def pytest_collection_modifyitems(config, items) -> None:
    """Long modules first (a stable sort: every module's own order, and the others' order, unchanged)."""
    rank = {path: i for i, path in enumerate(LONG_FIRST)}
    root = config.rootpath

    def key(item) -> int:
        try:
            rel = item.path.relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(rel, len(rank))

    items.sort(key=key)


@pytest.fixture(scope="session")
def ifeval_3_targets():
    """The multi-target tests' real IFEval split: 40 reference models on the first 80 items, three targets and
    their true scores on those items, as (reference, targets, truth)."""
    import numpy as np

    from activeeval import datasets

    m = datasets.load("ifeval")
    ids = list(m.model_ids)
    targets = ids[:3]
    items = list(m.item_ids[:80])
    ref = m.select_models(ids[10:50]).select_items(items)
    truth = np.stack([np.asarray(m.select_items(items).model_scores(t), float) for t in targets])
    return ref, targets, truth


@pytest.fixture()
def user_cache_folder(tmp_path, monkeypatch):
    """A fresh user cache folder for one test (``ACTIVEEVAL_CACHE``), with the process's memos of what is derived
    from a reference emptied before and after (they would answer before the disk)."""
    from activeeval import user_cache
    from activeeval._cache import clear_caches

    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(folder))
    clear_caches()
    yield folder
    clear_caches()
