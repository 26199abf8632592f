"""The library speaks Python, the CLI speaks flags (issue 29, item 3).

No module outside ``activeeval.cli`` (and ``activeeval.dashboard``'s command, which is CLI) spells a
command-line flag of ours in a string it can show a user: a message names an option with
:func:`activeeval.exceptions.option`, and the CLI prints the flag from its one table
(:data:`activeeval.cli.flags.FLAGS`). Docstrings and comments may mention flags (they document the CLI
beside the Python API); only strings that reach users are checked.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import activeeval
from activeeval.exceptions import ConfigurationError, option, render_options, template_of

SOURCE = Path(activeeval.__file__).parent
CLI_DIRS = {"cli"}
FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9_-]*")
# Flags of other programs that a message may quote, as those programs spell them.
FOREIGN = {
    "--log_samples",  # lm_eval's
    "--log-dir",  # inspect eval's
    "--output_path",  # lm_eval's
}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    # attribute docstrings (a string expression statement after an assignment) are documentation too
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            ids.add(id(node.value))
    return ids


def library_flag_spellings() -> list[str]:
    found = []
    for path in sorted(SOURCE.rglob("*.py")):
        rel = path.relative_to(SOURCE)
        if rel.parts[0] in CLI_DIRS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
                for flag in FLAG_RE.findall(node.value):
                    if flag not in FOREIGN:
                        found.append(f"{rel}:{node.lineno}: {flag} in {node.value[:70]!r}")
    return found


def test_no_library_module_spells_a_flag() -> None:
    found = library_flag_spellings()
    assert found == [], "library strings that spell a command-line flag (name the option with " \
        "activeeval.exceptions.option instead):\n" + "\n".join(found)


def test_the_check_finds_a_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the scan itself can fail: a module with a flag in a message is reported, one in a docstring is not
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text('"""Use --seed on the CLI."""\n\ndef f():\n    raise ValueError("pass --seed 3")\n')
    monkeypatch.setattr(__import__(__name__), "SOURCE", pkg, raising=False)
    global SOURCE
    old, SOURCE = SOURCE, pkg
    try:
        found = library_flag_spellings()
    finally:
        SOURCE = old
    assert len(found) == 1 and "--seed" in found[0] and "m.py:4" in found[0]


def test_option_reads_as_python_and_keeps_its_template() -> None:
    exc = ConfigurationError(f"{option('seed')} must be >= 0; or {option('score_range', '(low, high)', 'LOW HIGH')}")
    assert str(exc) == "seed= must be >= 0; or score_range=(low, high)"
    assert exc.options == ("seed", "score_range")
    assert render_options(template_of(exc), {"seed": "--seed", "score_range": "--score-range"}) == \
        "--seed must be >= 0; or --score-range LOW HIGH"
    # an option the table lacks stays in its Python form; a plain error has no template
    assert render_options(template_of(exc), {}) == str(exc)
    assert template_of(ValueError("x")) == "x"


def test_marker_characters_in_a_value_cannot_forge_an_option() -> None:
    forged = "\x1fseed\x1e\x1e\x1e\x1f"
    exc = ConfigurationError(f"{option('model', repr(forged))} is unknown")
    assert exc.options == ("model",) and "seed" not in exc.options


def test_an_error_crossing_processes_keeps_its_options() -> None:
    import pickle

    exc = ConfigurationError(f"{option('n_seeds')} must be a positive integer, got 0")
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is ConfigurationError and str(back) == str(exc) and back.options == ("n_seeds",)


def _options_named_in_the_library() -> set[str]:
    """Every table key an ``option(...)`` call in the library names (its first argument, or its ``key=``)."""
    keys = set()
    for path in sorted(SOURCE.rglob("*.py")):
        if path.relative_to(SOURCE).parts[0] in CLI_DIRS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "option" and node.args:
                key = next((kw.value for kw in node.keywords if kw.arg == "key"), None)
                named = node.args[0] if key is None else key
                if isinstance(named, ast.Constant) and isinstance(named.value, str):
                    keys.add(named.value)  # (a name built at run time, e.g. inspect.{name}: the harness tests)
    return keys


def _cli_flags() -> set[str]:
    import typer.main

    from activeeval.cli import app

    flags: set[str] = set()

    def walk(cmd) -> None:
        for param in getattr(cmd, "params", []):
            flags.update(o for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return flags


def test_every_option_a_message_names_has_a_flag() -> None:
    from activeeval.cli.flags import FLAGS

    named = _options_named_in_the_library()
    assert {"seed", "score_range", "n_targets", "inspect.model_args"} <= named  # the scan finds them
    missing = sorted(k for k in named if k not in FLAGS)
    assert missing == [], f"options named in library messages with no flag in activeeval.cli.flags.FLAGS: {missing}"


def test_every_flag_of_the_table_is_one_a_command_takes() -> None:
    from activeeval.cli.flags import FLAGS

    flags = _cli_flags()
    assert "--seed" in flags and "--score-range" in flags
    unknown = sorted(f"{k}: {v}" for k, v in FLAGS.items() if v not in flags)
    assert unknown == [], f"flags no command takes: {unknown}"
