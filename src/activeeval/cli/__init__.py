"""The ``activeeval`` command line: a thin Typer layer over the library.

Each command lives in its own module and registers itself on :data:`app`
(defined in :mod:`activeeval.cli.common`). Library errors become a one-line
message on stderr and exit code 2, never a traceback.

A command run from the shell imports its own module alone (:func:`main`):
``activeeval session record ...`` pays neither the other modules' imports
(Rich's tables, the backtest's options) nor Typer's building of their
commands. ``app`` read from this package (``from activeeval.cli import app``:
tests, notebooks) has every command.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["COMMANDS", "app", "command_module", "main"]

#: Each command module and the top-level commands (and groups) it registers on ``app``.
COMMANDS: dict[str, tuple[str, ...]] = {
    "datasets": ("datasets",),
    "demo": ("demo",),
    "session": ("session", "run"),
    "rank": ("rank", "rank-backtest"),
    "backtest": ("backtest", "reproduce"),
    "reference": ("reference",),
    "dashboard": ("dashboard",),
}
# Options of the top-level callback (activeeval.cli.common._main) that take a value.
_VALUED_OPTIONS = ("--data-dir", "--threads")


def _load(modules: Iterable[str]) -> Any:
    """Import these command modules (each registers its commands); the app."""
    from activeeval.cli.common import app

    for name in modules:
        importlib.import_module(f"{__name__}.{name}")
    return app


def command_module(argv: Sequence[str]) -> str | None:
    """The module of the command ``argv`` (the arguments after ``activeeval``) runs, or None (help, a typo, none)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in _VALUED_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return next((module for module, names in COMMANDS.items() if arg in names), None)
    return None


def __getattr__(name: str) -> Any:
    if name == "app":
        app = _load(COMMANDS)
        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point: the command's module alone (every module when no known command is named)."""
    module = command_module(sys.argv[1:])
    _load([module] if module is not None else COMMANDS)()
