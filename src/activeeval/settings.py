"""Settings as objects: small frozen dataclasses whose fields declare their constraints.

A method's constructor takes a few settings objects instead of two dozen loose keywords
(:class:`activeeval.methods.bayesame.DesignSettings`, ``FitSettings``,
:class:`activeeval.gp.acquisition.BatchSettings`, ...).
Each field declares what it accepts with :func:`setting` and a constraint (:class:`OneOf`,
:class:`Integer`, :class:`Number`, :class:`Flag`, or any callable ``check(name, value) -> value``);
:class:`Settings` checks them all when the object is made, so no constructor hand-writes its checks, and
an error names the option and what it must be.

The option names stay flat for everyone who writes them one by one — a method spec
``bayesame[warmup=10,floor=effective]``, a session's stored options, ``make_method("bayesame", ref,
warmup=10)``, or ``BayesAME(ref, warmup=10)``: a constructor decorated with :func:`takes_settings`
routes each flat keyword to the field of its group (``warmup`` → ``design.warmup``), and
:func:`flat_options` / :func:`flatten` give the registry the names and the flat form of groups given as
objects. A field's name is unique across a constructor's groups and parameters (checked when the class
is defined), so the flat form is never ambiguous.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

import numpy as np

from activeeval.exceptions import ConfigurationError, option

__all__ = [
    "Flag",
    "Integer",
    "Number",
    "OneOf",
    "Settings",
    "flat_options",
    "flatten",
    "setting",
    "takes_settings",
]

S = TypeVar("S", bound="Settings")
F = TypeVar("F", bound=Callable[..., Any])


# ------------------------------------------------------------------ constraints
def _or(values: tuple[Any, ...]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


@dataclass(frozen=True)
class OneOf:
    """One of the given values (compared with ``==``; None allowed only if listed)."""

    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        object.__setattr__(self, "values", tuple(values))

    def __call__(self, name: str, value: Any) -> Any:
        if isinstance(value, (bool, np.bool_)) and not any(isinstance(v, bool) for v in self.values):
            ok = False  # True == 1: a flag is no choice among numbers or words
        else:
            try:
                ok = any(value is v or (isinstance(value, str) == isinstance(v, str) and bool(value == v))
                         for v in self.values)
            except Exception:  # an array's ==
                ok = False
        if not ok:
            raise ConfigurationError(f"{name} must be {_or(self.values)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Integer:
    """A whole number ``>= low`` (and ``<= high``), kept as an int; ``optional``: None too."""

    low: int | None = None
    high: int | None = None
    optional: bool = False
    #: how the message says the bound ("a non-negative integer" for low = 0 reads better than ">= 0")
    phrase: str | None = None

    def __call__(self, name: str, value: Any) -> int | None:
        if value is None and self.optional:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            whole = False
        elif isinstance(value, numbers.Integral):
            whole = True
        else:  # a float that is a whole number (10.0) is taken as one
            whole = math.isfinite(float(value)) and float(value).is_integer()
        if not whole or (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ConfigurationError(f"{name} must be {self.describe()}, got {value!r}")
        return int(value)

    def describe(self) -> str:
        if self.phrase is not None:
            text = self.phrase
        elif self.low is not None and self.high is not None:
            text = f"an integer from {self.low} to {self.high}"
        elif self.low is not None:
            text = f"an integer >= {self.low}"
        elif self.high is not None:
            text = f"an integer <= {self.high}"
        else:
            text = "an integer"
        return text + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Number:
    """A finite real number in a range (``low``/``high`` bounds, each open or closed); ``optional``: None too.

    The value is kept as given (an int stays an int): a setting's stored form and the results it feeds are
    exactly what they were before it was an object.
    """

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    optional: bool = False
    phrase: str | None = None

    def __call__(self, name: str, value: Any) -> Any:
        if value is None and self.optional:
            return None
        ok = (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
              and math.isfinite(float(value)))
        if ok and self.low is not None:
            ok = value > self.low if self.low_open else value >= self.low
        if ok and self.high is not None:
            ok = value < self.high if self.high_open else value <= self.high
        if not ok:
            raise ConfigurationError(f"{name} must be {self.describe()}, got {value!r}")
        return value

    def describe(self) -> str:
        if self.phrase is not None:
            text = self.phrase
        else:
            parts = []
            if self.low is not None:
                parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
            if self.high is not None:
                parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
            text = "a number" + (" " + " and ".join(parts) if parts else "")
        return text + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Flag:
    """True or False (a NumPy bool is read as one); ``optional``: None too."""

    optional: bool = False

    def __call__(self, name: str, value: Any) -> bool | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, (bool, np.bool_)):
            raise ConfigurationError(f"{name} must be true or false{' or None' if self.optional else ''}, "
                                     f"got {value!r}")
        return bool(value)


def setting(default: Any, check: Callable[[str, Any], Any] | None = None, doc: str = "") -> Any:
    """A settings field: its default, the constraint it must meet, and one line saying what it does."""
    return field(default=default, metadata={"check": check, "doc": doc})


# ------------------------------------------------------------------ the base
@dataclass(frozen=True)
class Settings:
    """Base of the settings objects: frozen, checked when made, stored as plain data.

    A subclass is a ``@dataclass(frozen=True)`` whose fields are made with :func:`setting`. The fields'
    constraints run in declaration order when an object is made (a value may be normalised, e.g. 10.0 →
    10 for an :class:`Integer`); :meth:`check` is the place for a rule that ties two fields together.
    """

    #: what the group is, in a few words (the registry's option listing and the docs use it)
    about: ClassVar[str] = ""
    #: True: a constraint's message names the field with :func:`activeeval.exceptions.option` (``name=`` in
    #: Python, its flag where the CLI prints it) — for a group the CLI sets from flags of its own; False: by its
    #: bare name, as a method option is written alike in Python and in a spec (``bayesame[warmup=10]``)
    flags: ClassVar[bool] = False

    def __post_init__(self) -> None:
        for f in fields(self):
            check = f.metadata.get("check")
            if check is not None:
                name = option(f.name) if self.flags else f.name
                object.__setattr__(self, f.name, check(name, getattr(self, f.name)))
        self.check()

    def check(self) -> None:
        """A rule between fields (each field's own constraint has run); raise ConfigurationError."""

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` (checked again); an unknown name is refused with the known ones."""
        unknown = [k for k in changes if k not in self.names()]
        if unknown:
            raise ConfigurationError(f"{type(self).__name__} has no setting {unknown[0]!r}; its settings are: "
                                     f"{', '.join(self.names())}")
        return dataclasses.replace(self, **changes)

    def changed(self, base: Settings | None = None) -> dict[str, Any]:
        """The fields whose value differs (by value and type) from ``base``'s (default: the fields' defaults),
        in declaration order."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if not _same(value, f.default if base is None else getattr(base, f.name)):
                out[f.name] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        """Every field by name (tuples as lists: JSON types when the values are)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any]) -> S:
        """The settings of a stored form (a field it lacks takes its default; an unknown key is refused)."""
        return cls().replace(**dict(data))


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except Exception:  # arrays
        return False


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# ------------------------------------------------------------------ flat keywords
def _group_defaults(init: Callable[..., Any]) -> dict[str, Settings]:
    """The parameters of ``init`` that take a settings object (its default is one): name → that default."""
    return {name: p.default for name, p in inspect.signature(init).parameters.items()
            if isinstance(p.default, Settings)}


def takes_settings(init: F) -> F:
    """Decorate a constructor (or a function) whose settings groups are parameters defaulting to a
    :class:`Settings` object: it then also takes each group's fields as flat keywords (``warmup=10`` is
    ``design.warmup = 10``; a flat keyword replaces that field of the group object given, if any).

    The decorated signature is the constructor's own (``inspect.signature`` shows the groups);
    ``init.flat_options`` maps each flat name to its group. Raises TypeError when the class is defined if
    two groups, or a group and a parameter, share a name.
    """
    params = inspect.signature(init).parameters
    defaults = _group_defaults(init)
    owner: dict[str, str] = {}
    for group, default in defaults.items():
        for name in default.names():
            if name in params or name in owner:
                raise TypeError(f"{init.__qualname__}: setting {name!r} of {group}= is also "
                                f"{'a parameter' if name in params else 'a setting of ' + owner[name] + '='}")
            owner[name] = group

    @functools.wraps(init)
    def wrapper(*args: Any, **kwargs: Any) -> Any:  # (self, ...) of a constructor, or a function's arguments
        flat: dict[str, dict[str, Any]] = {}
        for key in [k for k in kwargs if k in owner]:
            flat.setdefault(owner[key], {})[key] = kwargs.pop(key)
        for group, default in defaults.items():
            given = kwargs.get(group)
            if given is not None and not isinstance(given, type(default)):
                raise ConfigurationError(f"{group} must be a {type(default).__name__} (activeeval.settings), got "
                                         f"{type(given).__name__}")
            if group in flat:  # the flat keywords replace those fields of the group given (or of the default)
                kwargs[group] = (default if given is None else given).replace(**flat[group])
        return init(*args, **kwargs)

    wrapper.flat_options = owner  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def flat_options(init: Callable[..., Any]) -> dict[str, str]:
    """Flat option name → its group's parameter, of a constructor decorated with :func:`takes_settings`
    (an empty mapping for any other)."""
    return dict(getattr(init, "flat_options", {}))


def flatten(init: Callable[..., Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with each settings object given for a group replaced by the fields in which it differs from
    the constructor's default for that group, flat (what a spec string or a stored session writes); the
    other options as given, in order."""
    defaults = _group_defaults(inspect.unwrap(init))
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in defaults and isinstance(value, Settings):
            for name, v in value.changed(defaults[key]).items():  # against the constructor's default
                if name in options and not _same(options[name], v):
                    raise ConfigurationError(f"{name} is given twice: {options[name]!r} and {v!r} in {key}=")
                out[name] = v
        else:
            out[key] = value
    return out
