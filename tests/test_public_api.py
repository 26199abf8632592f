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
        module.no_such_name  # noqa: B018 - the attribute access is what raises


def test_the_version_is_written_once() -> None:
    """pyproject reads the version from __init__.py (hatch dynamic version): the installed metadata agrees."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from importlib.metadata import version
    from pathlib import Path

    import activeeval

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert version("activeeval") == activeeval.__version__
