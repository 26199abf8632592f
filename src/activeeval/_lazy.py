"""Lazy public names for package ``__init__`` modules (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(namespace: dict[str, Any], exports: Mapping[str, str], package: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``exports[name]`` (a module path) on first use.

    ``exports`` maps a public name to the module that defines it; a path ending
    in ``:module`` stands for the module itself. The value is cached in
    ``namespace`` so later lookups are plain attribute reads.
    """

    def __getattr__(name: str) -> Any:
        try:
            target = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        module_path, _, kind = target.partition(":")
        module = importlib.import_module(module_path)
        value = module if kind == "module" else getattr(module, name)
        namespace[name] = value
        return value

    return __getattr__


def lazy_function(path: str) -> Callable[..., Any]:
    """A stand-in for ``from module import name`` (``path`` is ``"module:name"``) that imports at its first call.

    For a function of a library that is slow to import and that only some
    calls need (``scipy.linalg`` costs about 0.4 s: a later session command
    of most methods never calls it). The BLAS thread limit in force reaches
    any BLAS library the import loads (``activeeval._threads`` watches those
    imports, however they are made).
    """
    module_name, _, name = path.partition(":")
    func: Callable[..., Any] | None = None

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal func
        if func is None:
            func = getattr(importlib.import_module(module_name), name)
        return func(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"``{module_name}.{name}``, imported at its first call."
    return call
