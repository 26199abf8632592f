"""What a harness running in this process prints: nowhere by default, on stderr with ``--verbose``.

lm-evaluation-harness prints tables and tqdm bars, logs warnings for every
batch, and runs ``git`` whose "fatal: not a git repository" reaches the
terminal through the process's own file descriptor 2. In the loop that is
noise repeated per batch, and whatever reaches stdout would break ``--json``
and pipes. :func:`harness_output` redirects both levels for the duration of
one harness call: Python's ``sys.stdout``/``sys.stderr`` and the file
descriptors 1 and 2 that child processes inherit.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
from collections.abc import Iterator, Sequence

__all__ = ["harness_output"]


@contextlib.contextmanager
def _fd_redirect(targets: dict[int, int]) -> Iterator[None]:
    """Point file descriptors at others (``{1: 2}``: stdout to stderr) and back; nothing if they cannot be."""
    saved: dict[int, int] = {}
    try:
        for fd in targets:
            saved[fd] = os.dup(fd)
    except OSError:  # a closed descriptor: nothing to redirect
        for copy in saved.values():
            os.close(copy)
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        for fd, target in targets.items():
            os.dup2(target, fd)
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


@contextlib.contextmanager
def harness_output(verbose: bool, loggers: Sequence[str] = ()) -> Iterator[None]:
    """For ``with``: the harness's output on stderr (``verbose``) or nowhere; stdout is never written.

    ``loggers`` are the harness's loggers: INFO and up with ``verbose``, only errors otherwise (their
    handlers may hold the terminal's stream itself, which no redirection reaches).
    """
    levels = {name: logging.getLogger(name).level for name in loggers}
    for name in loggers:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.ERROR)
    try:
        if verbose:
            with contextlib.redirect_stdout(sys.stderr), _fd_redirect({1: 2}):
                yield
            return
        sink = io.StringIO()
        with open(os.devnull, "wb") as null, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink), \
                _fd_redirect({1: null.fileno(), 2: null.fileno()}):
            yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
