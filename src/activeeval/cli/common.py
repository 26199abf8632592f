"""Shared pieces of the CLI: the Typer app, error handling, output helpers."""

from __future__ import annotations

import functools
import json
import math
import sys
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from activeeval.exceptions import ActiveEvalError, MissingScoresWarning

app = typer.Typer(
    name="activeeval",
    help="Efficient, trustworthy LLM evaluation on a few actively chosen items.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


def one_line(message: object) -> str:
    return " ".join(str(message).split())


def fail(message: object) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; return Exit(2) for the caller to raise."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(code=2)


def cli_errors(func: F) -> F:
    """Turn library errors into a one-line message and exit code 2.

    Warnings are printed on stderr once each, after the command: missing-score
    drops as ``note:`` lines, anything else as ``warning:`` lines.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", MissingScoresWarning)
                try:
                    return func(*args, **kwargs)
                except ActiveEvalError as exc:
                    raise fail(exc) from None
        finally:
            # Re-emit outside the recording context: showing a warning inside
            # it would append to `caught` while we iterate over it.
            # Each distinct warning once (a backtest repeats the same ones per run).
            shown: set[str] = set()
            for w in caught:
                if issubclass(w.category, MissingScoresWarning):
                    text = f"note: {one_line(w.message)}"
                else:
                    text = f"warning: {w.category.__name__}: {one_line(w.message)}"
                if text not in shown:
                    shown.add(text)
                    typer.echo(text, err=True)

    return wrapper  # type: ignore[return-value]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def print_json(obj: Any) -> None:
    """One JSON object on stdout (NaN/inf become null, numpy scalars become numbers)."""
    sys.stdout.write(json.dumps(_jsonable(obj), indent=2) + "\n")
