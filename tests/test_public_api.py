"""Every public name resolves, lazily, and unknown names fail clearly."""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("package", ["activeeval", "activeeval.methods", "activeeval.methods.baselines", "activeeval.data"])
def test_every_exported_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'no_such_name'"):
        getattr(module, "no_such_name")
