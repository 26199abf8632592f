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
