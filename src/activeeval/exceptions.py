"""The exception hierarchy of activeeval.

Every error the library raises on purpose derives from :class:`ActiveEvalError`,
so ``except ActiveEvalError`` catches them all. Errors about bad values also
derive from :class:`ValueError` (and lookup errors from :class:`KeyError`) so
that generic handlers keep working. Messages name the problem and the fix.

The library speaks Python, the command line speaks flags: a message names an
option with :func:`option` (``seed=`` in the Python text, ``--seed`` where the
CLI prints it). The error keeps the message as written (:attr:`ActiveEvalError.template`)
and the options it names (:attr:`ActiveEvalError.options`); ``str(error)`` is the
Python text, and the CLI renders the template with its one table of flags
(:mod:`activeeval.cli.flags`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "ActiveEvalError",
    "ConfigurationError",
    "CorruptedSessionError",
    "DataFormatError",
    "DuplicateIdError",
    "DuplicateObservationError",
    "InvalidScoresError",
    "MissingScoresError",
    "MissingScoresWarning",
    "NumericalError",
    "ReferenceMismatchError",
    "ScoreOutOfRangeError",
    "ScorerError",
    "SessionStateError",
    "StorageError",
    "UnknownDatasetError",
    "UnknownItemError",
    "UnknownModelError",
    "option",
    "render_options",
    "template_of",
]

# An option named in a message: \x1f name \x1e table key \x1e python value \x1e command-line value \x1f. Control
# characters no message of ours contains; only :func:`option` writes them (and strips them from values).
_MARK, _SEP = "\x1f", "\x1e"
_OPTION_RE = re.compile(r"\x1f([A-Za-z_][A-Za-z0-9_]*)\x1e([A-Za-z0-9_.]*)\x1e([^\x1f\x1e]*)\x1e([^\x1f\x1e]*)\x1f")
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def option(name: str, value: str | None = None, cli_value: str | None = None, *, key: str | None = None) -> str:
    """The option ``name`` as a message names it: ``name=`` (``name=value``) in Python, its flag on the command line.

    ``value`` is how a Python user writes the value (``"(low, high)"``, ``"'items'"``); ``cli_value`` how a
    command-line user does (``"LOW HIGH"``, ``"items"``; defaults to ``value``). ``key`` is the entry of the
    CLI's table of flags when it is not ``name`` (one keyword with two flags, e.g. the Inspect harness's
    ``model_args``, given one by one as ``--model-arg``). Use it in an :class:`ActiveEvalError`'s message.
    """
    if not _NAME_RE.fullmatch(name) or (key is not None and not re.fullmatch(r"[A-Za-z0-9_.]+", key)):
        raise ValueError(f"option name must be a Python identifier, got {name!r} (key {key!r})")
    py = "" if value is None else _plain(str(value))
    cli = py if cli_value is None else _plain(str(cli_value))
    return f"{_MARK}{name}{_SEP}{key or ''}{_SEP}{py}{_SEP}{cli}{_MARK}"


def _plain(text: str) -> str:
    """A value as a message may carry it: without the marker characters (a user's value could hold them)."""
    return text.replace(_MARK, "").replace(_SEP, "")


def render_options(text: str, flags: Any = None, between: Callable[[str], str] | None = None) -> str:
    """``text`` with each :func:`option` written for Python (``flags`` None: ``name=value``) or for the command
    line (``flags``: a mapping of option name, or key, to flag — ``"name=value"`` to a flag that says the value,
    such as ``"overwrite=True"`` → ``--force``; an option it lacks stays in its Python form). ``between``, if
    given, rewrites the text between the options (never what an option renders)."""

    def one(m: re.Match[str]) -> str:
        name, key, py, cli = m.groups()
        if flags is None:
            return f"{name}={py}"
        said = flags.get(f"{key or name}={py}") if py else None  # a flag that says the value: --force
        if said is not None:
            return str(said)
        flag = flags.get(key or name)
        if flag is None:
            return f"{name}={py}"
        return f"{flag} {cli}" if cli else str(flag)

    if between is None:
        return _OPTION_RE.sub(one, text)
    parts, last = [], 0
    for m in _OPTION_RE.finditer(text):
        parts += [between(text[last:m.start()]), one(m)]
        last = m.end()
    return "".join([*parts, between(text[last:])])


def options_in(text: str) -> tuple[str, ...]:
    """The options :func:`option` wrote into ``text`` (their table keys), in order, each once."""
    return tuple(dict.fromkeys(m.group(2) or m.group(1) for m in _OPTION_RE.finditer(text)))


def template_of(exc: BaseException) -> str:
    """An error's message with its options still marked (:attr:`ActiveEvalError.template`), else ``str(exc)``:
    for a message that quotes another error's, so the CLI can still print that one's flags."""
    template = getattr(exc, "template", None)
    return template if isinstance(template, str) else str(exc)


class ActiveEvalError(Exception):
    """Base class of every error raised by activeeval on purpose.

    A message may name options with :func:`option`: ``str(error)`` (and ``args[0]``) is then the Python text
    (``seed=``), :attr:`template` the message as written, :attr:`options` the names (the CLI prints flags).
    """

    template: str | None = None
    options: tuple[str, ...] = ()

    def __init__(self, *args: Any) -> None:
        if args and isinstance(args[0], str) and _MARK in args[0]:
            self.template = args[0]
            self.options = options_in(args[0])
            args = (render_options(args[0]), *args[1:])
        super().__init__(*args)

    def __reduce__(self) -> Any:  # across processes (a backtest's workers) the options stay marked
        args = self.args if self.template is None else (self.template, *self.args[1:])
        return (type(self), args, self.__dict__ or None)


class DataFormatError(ActiveEvalError, ValueError):
    """A file or table could not be read as a score matrix."""


class InvalidScoresError(ActiveEvalError, ValueError):
    """Scores that are not usable: non-numeric, NaN/inf, wrong shape, too few."""


class DuplicateIdError(InvalidScoresError):
    """The same model id or item id appears more than once."""


class MissingScoresError(InvalidScoresError):
    """Missing reference scores where a complete matrix is required."""


class UnknownItemError(ActiveEvalError, KeyError):
    """An item id or index that is not part of the benchmark."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class UnknownModelError(ActiveEvalError, KeyError):
    """A model id that is not part of the score matrix."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnknownDatasetError(ActiveEvalError, KeyError):
    """A bundled dataset name that does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DuplicateObservationError(ActiveEvalError, ValueError):
    """An item observed a second time for the same target."""


class ScoreOutOfRangeError(InvalidScoresError):
    """A score outside the benchmark's score range (or not 0/1 on a binary one)."""


class ConfigurationError(ActiveEvalError, ValueError):
    """An argument of a method, rule or command has an invalid value."""


class NumericalError(ActiveEvalError, ArithmeticError):
    """A linear-algebra failure (e.g. a covariance that is not positive definite)."""


class SessionStateError(ActiveEvalError):
    """A session operation that is not valid in the session's current state."""


class StorageError(ActiveEvalError):
    """A session file that cannot be read or written."""


class ReferenceMismatchError(StorageError):
    """The reference data changed since the session was created."""


class CorruptedSessionError(StorageError):
    """The session file is damaged (or was altered outside activeeval)."""


class ScorerError(ActiveEvalError):
    """The scorer failed, timed out or printed no number."""


class MissingScoresWarning(UserWarning):
    """Reference entries were missing and some models or items were dropped."""
