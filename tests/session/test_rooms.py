"""session/ in rooms (issue 29): each floor imports only the floors below it; every old module path still works."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import activeeval.exceptions as exc_module

SESSION = Path(importlib.import_module("activeeval.session").__file__).parent  # type: ignore[arg-type]
# Floors, lowest first: a module may import its own floor and those below, never one above.
FLOORS = {"journal": 0, "kinds": 1, "report": 2, "drivers": 2}
OLD_PATHS = {
    "storage": "journal.storage", "snapshot": "journal.snapshot", "runner": "drivers.runner",
    "lm_eval_harness": "drivers.lm_eval_harness", "inspect_harness": "drivers.inspect_harness",
    "harness_output": "drivers.harness_output", "results": "report.results",
}


def _room(module: str) -> str | None:
    """The room of ``activeeval.session.<...>`` (None for the package itself and the old paths)."""
    parts = module.split(".")[2:]
    if not parts or parts[0] in OLD_PATHS:
        return None
    return parts[0] if parts[0] in FLOORS else "kinds"


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)  # from activeeval.session import snapshot
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.startswith("activeeval.session.")}


def test_each_floor_imports_only_the_floors_below_it() -> None:
    wrong = []
    for path in sorted(SESSION.rglob("*.py")):
        module = "activeeval." + ".".join(path.relative_to(SESSION.parent).with_suffix("").parts)
        room = _room(module.removesuffix(".__init__"))
        if room is None:
            continue
        for imported in _imports(path):
            target = _room(imported)
            if target is None and imported.split(".")[2] in OLD_PATHS:
                wrong.append(f"{module} imports the old path {imported}")
            elif target is not None and target != room and FLOORS.get(target, 1) >= FLOORS.get(room, 1):
                wrong.append(f"{module} ({room}) imports {imported} ({target})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_module_path_is_the_moved_module(old: str) -> None:
    moved = importlib.import_module(f"activeeval.session.{OLD_PATHS[old]}")
    assert importlib.import_module(f"activeeval.session.{old}") is moved
    assert getattr(importlib.import_module("activeeval.session"), old) is moved
    for name in getattr(moved, "__all__", ()):
        exec(f"from activeeval.session.{old} import {name}", {})


def test_the_old_report_module_is_the_report_room() -> None:
    from activeeval.session.report import OPTION_NAMES, html, readable_options, render_report, write_report

    assert (readable_options, render_report, write_report) == (html.readable_options, html.render_report,
                                                               html.write_report)
    assert OPTION_NAMES is html.OPTION_NAMES
    with pytest.raises(AttributeError):
        importlib.import_module("activeeval.session.report").no_such_name  # noqa: B018


def test_the_session_errors_live_in_exceptions_and_keep_their_old_homes() -> None:
    from activeeval import session
    from activeeval.session import runner, storage

    for name, old in (("ReferenceMismatchError", storage), ("CorruptedSessionError", storage),
                      ("ScorerError", runner), ("ReferenceMismatchError", session),
                      ("CorruptedSessionError", session)):
        cls = getattr(exc_module, name)
        assert cls.__module__ == "activeeval.exceptions" and name in exc_module.__all__
        assert getattr(old, name) is cls
        assert issubclass(cls, exc_module.ActiveEvalError)
