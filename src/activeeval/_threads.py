"""The BLAS threads of activeeval's own numeric work: a scoped limit, lifted again for the user's code.

NumPy and SciPy ship OpenBLAS, which by default starts one thread per core
for every matrix operation. activeeval's operations are small and many (a
session step is a few milliseconds), so on a machine whose cores are busy
with other work those threads mostly wait for each other (``activeeval demo``
with two to four other busy processes: ``benchmarks/bench_load.py``,
docs/benchmarks/history.md "BLAS threads under load"). activeeval therefore runs
its numeric work with ``limit`` BLAS threads (default
:data:`DEFAULT_THREADS`; ``ACTIVEEVAL_THREADS=N``, ``activeeval --threads N``,
or ``with limit_threads(N):`` in Python) through threadpoolctl, and gives the
libraries their own setting back when its call returns: your code between
two calls (a harness in the same process, ``my_harness`` in the README's
loop) and your scorer processes keep theirs.

Where the limit holds: building a method, ``select``/``select_batch`` and
``observe`` (:class:`~activeeval.methods.base.BaseMethod`, the multi-target
methods), every backtest task (on every backend), and every CLI command —
inside which :func:`user_threads` lifts it for lm-eval and Inspect, which run
in the same process.

Work that splits itself over threads of its own (the reference fit's
pseudo-targets, the prior's kernel sums) runs :func:`worker_threads` of them,
each with one BLAS thread (:func:`serial_blas`): the cores, up to
:data:`WORKERS_MAX`, unless a limit was asked for (then that many); its
numbers are the same for any count.

Scopes nest and the outermost one decides the limit: entering an inner scope
costs a lock and a check (about a microsecond), the outermost one a
threadpoolctl call (tens of microseconds; measured in docs/BENCHMARKS.md).
The BLAS settings are per process, so the scope is too: a limit entered by
one Python thread holds for all of them until the last scope is left.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from activeeval.exceptions import ConfigurationError

__all__ = [
    "DEFAULT_THREADS",
    "THREADS_ENV",
    "WORKERS_MAX",
    "active_limit",
    "fixed_workers",
    "limit_threads",
    "numeric",
    "numeric_methods",
    "refresh",
    "resolve_threads",
    "serial_blas",
    "user_threads",
    "worker_threads",
]

#: The environment variable that sets the limit (``activeeval --threads N`` overrides it for one command).
THREADS_ENV = "ACTIVEEVAL_THREADS"
#: BLAS threads of activeeval's numeric work unless told otherwise (docs/benchmarks/history.md: "BLAS threads").
DEFAULT_THREADS = 1
#: Most threads of activeeval's own parallel work (:func:`worker_threads`) when no limit was set.
WORKERS_MAX = 4

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.RLock()  # re-entrant: a BLAS import seen by _BlasImportWatch may happen under it
_depth = 0  # scopes entered and not yet left, over all threads
_limit = DEFAULT_THREADS  # the outermost scope's limit
_limit_set = False  # whether the outermost scope's limit was asked for (an argument or ACTIVEEVAL_THREADS)
_workers: int | None = None  # worker_threads() inside fixed_workers
_limiter: Any = None  # threadpoolctl's limiter while the limit is applied
_controller: Any = None  # threadpoolctl's view of the BLAS libraries loaded when it was made
_controller_saw: tuple[bool, ...] = ()  # which of _SCIPY_BLAS were imported then
# SciPy links a BLAS library of its own, loaded by the first of these modules imported (NumPy's comes with NumPy).
# activeeval imports SciPy's linear algebra only where a call needs it (`_lazy.lazy_function`, or a plain
# import inside a function, e.g. scipy.optimize in the default's fit), so a command that needs none does not
# pay its import (about 0.4 s). Whichever way it is imported, `_BlasImportWatch` brings SciPy's BLAS under the
# limit in force as soon as its module is loaded, and the controller is made anew.
_SCIPY_BLAS = ("scipy.linalg", "scipy.special")


def _check(threads: object, where: str) -> int:
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ConfigurationError(f"{where} must be a positive integer (BLAS threads), got {threads!r}")
    return threads


def resolve_threads(threads: int | None = None) -> int:
    """The limit to use: ``threads`` if given, else ``ACTIVEEVAL_THREADS``, else :data:`DEFAULT_THREADS`."""
    if threads is not None:
        return _check(threads, "threads")
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return DEFAULT_THREADS
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or value < 1:
        raise ConfigurationError(
            f"{THREADS_ENV}={raw!r} is not a positive integer; set it to the number of BLAS threads activeeval may "
            f"use, e.g. {THREADS_ENV}=1, or unset it")
    return value


def active_limit() -> int:
    """The limit of the scope in force, else the one a new scope would take (for work handed to other processes)."""
    with _lock:
        if _depth:
            return _limit
    return resolve_threads()


def _env_set() -> bool:
    """Whether ``ACTIVEEVAL_THREADS`` asks for a limit."""
    return bool(os.environ.get(THREADS_ENV, "").strip())


def _usable_cores() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def worker_threads() -> int:
    """Threads for activeeval's own parallel work, each calling BLAS with one thread (:func:`serial_blas`).

    The work that runs its own threads (the reference fit's pseudo-targets,
    :class:`~activeeval.gaussian.LeaveOneOutNLML`; the prior's kernel sums,
    :func:`~activeeval.gp.kernels.kernel_sums`) gives the same numbers to the
    last bit for any number of threads, and its threads wait without
    spinning, unlike BLAS's own (which made the demo 10× slower on a busy
    machine). So where no limit was asked for, it uses the cores this process
    may run on, at most :data:`WORKERS_MAX`; where one was (``--threads N``,
    ``ACTIVEEVAL_THREADS=N``, ``limit_threads(N)``), that many; inside
    :func:`fixed_workers` (a backtest task), what it says.
    """
    with _lock:
        if _workers is not None:
            return _workers
        if _depth:
            limit, given = _limit, _limit_set
        else:
            limit, given = resolve_threads(), _env_set()
    return limit if given else min(_usable_cores(), WORKERS_MAX)


def _scipy_seen() -> tuple[bool, ...]:
    return tuple(name in sys.modules for name in _SCIPY_BLAS)


def _stale() -> bool:
    """Whether SciPy's BLAS may have been loaded since the controller was made."""
    return _controller_saw != _scipy_seen()


def _blas() -> Any:
    """threadpoolctl's controller of the BLAS libraries loaded now: NumPy's, and SciPy's once it is imported."""
    global _controller, _controller_saw
    if _controller is None or _stale():
        import numpy  # noqa: F401 - loads NumPy's BLAS
        from threadpoolctl import ThreadpoolController

        _controller_saw = _scipy_seen()
        _controller = ThreadpoolController().select(user_api="blas")
    return _controller


def _apply() -> None:
    """Limit the BLAS libraries (under the lock, inside a scope), unless done already for those loaded now."""
    global _limiter
    if _limiter is not None and not _stale():
        return
    if _limiter is not None:  # a BLAS library was loaded inside the scope: limit it too
        limiter, _limiter = _limiter, None
        limiter.restore_original_limits()
    _limiter = _blas().limit(limits=_limit)


def refresh() -> None:
    """Bring a BLAS library loaded inside a scope (SciPy's, imported on first use) under the limit in force.

    Called by :class:`_BlasImportWatch` once a module of :data:`_SCIPY_BLAS`
    is loaded, however it was imported (a plain ``import scipy.optimize``
    inside a scope loads SciPy's BLAS with its own thread count: before this
    watch, the default's fit then ran at one thread per core until the next
    inner scope, 10-14x slower on a busy machine: docs/benchmarks/history.md "BLAS
    threads under load, again"). An inner scope entered later checks the same.
    """
    with _lock:
        if _limiter is not None:
            _apply()


class _BlasImportWatch:
    """An import hook that calls :func:`refresh` right after a module of :data:`_SCIPY_BLAS` is executed.

    It finds nothing itself: it asks the other finders for the module's spec
    and wraps the loader's ``exec_module``. Modules imported before activeeval
    need nothing (the controller sees them when it is made). A finder and a
    loader by protocol (PEP 451), not by subclassing ``importlib.abc``, whose
    import costs a later command about 0.1 s.
    """

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname not in _SCIPY_BLAS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                loader = spec.loader
                if loader is not None and hasattr(loader, "exec_module"):
                    # typeshed types ModuleSpec.loader as importlib.abc.Loader (nominal); this one is a Loader by
                    # protocol (PEP 451), see the class docstring: a stub limitation.
                    spec.loader = _RefreshingLoader(loader)  # type: ignore[assignment]
                return spec
        return None


class _RefreshingLoader:
    """The real loader, then :func:`refresh` (the module's BLAS library is loaded once it is executed)."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        refresh()

    def __getattr__(self, name: str) -> Any:  # is_package, get_code, get_resource_reader, ...
        return getattr(self._loader, name)


def _install_watch() -> None:
    if not any(isinstance(finder, _BlasImportWatch) for finder in sys.meta_path):
        sys.meta_path.insert(0, _BlasImportWatch())


_install_watch()


def _enter(threads: int | None, defer: bool = False) -> None:
    global _depth, _limit, _limit_set
    with _lock:
        if _depth == 0:
            _limit = resolve_threads(threads)
            _limit_set = threads is not None or _env_set()
        _depth += 1
        if not defer:
            try:
                _apply()
            except BaseException:
                _depth -= 1
                raise


def _exit() -> None:
    global _depth, _limiter
    with _lock:
        _depth -= 1
        if _depth == 0 and _limiter is not None:
            limiter, _limiter = _limiter, None
            limiter.restore_original_limits()
            _release()


def _release() -> None:
    """Let any Python thread set OpenBLAS's threads again, once activeeval has given its setting back.

    threadpoolctl (3.8 on) lets one Python thread at a time change OpenBLAS's
    process-wide setting, the first to do so, until it is released; a limiter
    made by ``ThreadpoolController.limit`` (ours) never releases it. So once
    the main thread had limited BLAS, a scope entered later by another thread
    (the dashboard's worker, a user's thread pool) changed nothing and its
    work ran at every core's thread. Called where no scope of activeeval's is
    left (outer scopes keep their setting, which inner ones share)."""
    try:
        from threadpoolctl import OpenBLASController
    except ImportError:  # pragma: no cover - threadpoolctl before 3.8 has no such rule
        return
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:
        clear()  # only if this thread holds it


class limit_threads(contextlib.ContextDecorator):
    """Run the block with at most ``threads`` BLAS threads (default: ``ACTIVEEVAL_THREADS``, else 1).

    Around your own use of the library, e.g. a method driven by hand in a loop
    that also runs your model in this process, a scope is not needed: every
    method call limits itself and gives the threads back when it returns.
    Wrap a block to set another limit for everything in it (``with
    limit_threads(4): ...``; the outermost scope decides) or to save the cost
    of entering and leaving per call. ``defer=True`` applies the limit only
    once numeric work starts inside (an inner scope is entered), so a block
    that turns out to need none does not load SciPy for it (the CLI's scope).
    """

    def __init__(self, threads: int | None = None, *, defer: bool = False) -> None:
        self.threads = None if threads is None else _check(threads, "threads")
        self.defer = defer

    def __enter__(self) -> None:
        _enter(self.threads, self.defer)

    def __exit__(self, *exc: object) -> None:
        _exit()


def numeric(func: F) -> F:
    """Decorator: run ``func`` inside a scope of the default limit (the inner scope of an outer one)."""
    if getattr(func, "_limits_threads", False):
        return func

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _enter(None)
        try:
            return func(*args, **kwargs)
        finally:
            _exit()

    wrapper._limits_threads = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def numeric_methods(cls: type, names: tuple[str, ...]) -> None:
    """Wrap the methods ``names`` that ``cls`` itself defines with :func:`numeric` (for ``__init_subclass__``)."""
    for name in names:
        func = cls.__dict__.get(name)
        if callable(func):
            setattr(cls, name, numeric(func))


@contextlib.contextmanager
def user_threads() -> Iterator[None]:
    """Give the libraries their own setting back for the block (the user's code run inside a scope).

    Re-applied afterwards, so a change the user's code made to its threads
    is what activeeval restores when its outermost scope ends.
    """
    global _limiter
    with _lock:
        limiter, _limiter = _limiter, None
        if limiter is not None:
            limiter.restore_original_limits()
    try:
        yield
    finally:
        with _lock:
            if limiter is not None and _depth:
                _apply()


@contextlib.contextmanager
def serial_blas() -> Iterator[None]:
    """One BLAS thread for the block, then the setting before it: for work that runs its own threads, each
    calling BLAS (``gp.kernels.kernel_sums``, the reference fit's pseudo-targets), so that threads are not
    multiplied by BLAS's own, and its sums are the same whatever the limit.

    Used by the thread that starts the workers (the setting is per process), around their whole run.
    (threadpoolctl lets one Python thread at a time change OpenBLAS's setting, the first to do so; in others
    the block changes nothing.)
    """
    with _lock:
        inner = _blas().limit(limits=1)
    try:
        yield
    finally:
        with _lock:
            inner.restore_original_limits()
            if not _depth:
                _release()


@contextlib.contextmanager
def fixed_workers(workers: int) -> Iterator[None]:
    """:func:`worker_threads` is ``workers`` inside the block, whatever the scopes around it: a backtest task,
    whose parallelism is across tasks (its process may have inherited a scope from the command that forked it)."""
    global _workers
    workers = _check(workers, "workers")
    with _lock:
        before, _workers = _workers, workers
    try:
        yield
    finally:
        with _lock:
            _workers = before
