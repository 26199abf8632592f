"""The ``activeeval`` command line: a thin Typer layer over the library.

Each command lives in its own module and registers itself on :data:`app`
(defined in :mod:`activeeval.cli.common`). Library errors become a one-line
message on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

from activeeval.cli.common import app

# Command modules register themselves on `app` when imported.
from activeeval.cli import datasets as _datasets  # noqa: E402,F401
from activeeval.cli import demo as _demo  # noqa: E402,F401
from activeeval.cli import session as _session  # noqa: E402,F401
from activeeval.cli import rank as _rank  # noqa: E402,F401
from activeeval.cli import backtest as _backtest  # noqa: E402,F401
from activeeval.cli import reference as _reference  # noqa: E402,F401
from activeeval.cli import dashboard as _dashboard  # noqa: E402,F401

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
