"""The exception hierarchy of activeeval.

Every error the library raises on purpose derives from :class:`ActiveEvalError`,
so ``except ActiveEvalError`` catches them all. Errors about bad values also
derive from :class:`ValueError` (and lookup errors from :class:`KeyError`) so
that generic handlers keep working. Messages name the problem and the fix.
"""

from __future__ import annotations

__all__ = [
    "ActiveEvalError",
    "ConfigurationError",
    "DataFormatError",
    "DuplicateIdError",
    "DuplicateObservationError",
    "InvalidScoresError",
    "MissingScoresError",
    "MissingScoresWarning",
    "NumericalError",
    "ScoreOutOfRangeError",
    "SessionStateError",
    "StorageError",
    "UnknownDatasetError",
    "UnknownItemError",
    "UnknownModelError",
]


class ActiveEvalError(Exception):
    """Base class of every error raised by activeeval on purpose."""


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


class MissingScoresWarning(UserWarning):
    """Reference entries were missing and some models or items were dropped."""
