"""CLI users get CLI fixes, Python users Python keywords (issue 24, item 5): cli_message and its table."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import activeeval
from activeeval.cli import app
from activeeval.cli.common import CLI_FIXES, cli_message
from activeeval.exceptions import ConfigurationError, option

SOURCE = Path(activeeval.__file__).parent


def test_every_phrase_of_the_table_is_still_in_a_library_message() -> None:
    text = "\n".join(p.read_text() for p in SOURCE.rglob("*.py") if p.parts[-2:] != ("cli", "common.py"))
    text = re.sub(r"\"\s*\n\s*f?\"", "", text)  # adjacent string literals, as Python joins them
    text = text.replace("{what}_column", "item_column") + text.replace("{what}_column", "score_column")
    stale = [phrase for phrase in CLI_FIXES if phrase not in text]
    assert stale == [], f"phrases no library message uses any more: {stale}"


@pytest.mark.parametrize(("library", "cli"), [
    ("fix the data or pass score_range=(low, high) (None for unbounded scores)", "fix the data or pass --score-range "
     "LOW HIGH"),
    (f"the tolerance needs {option('score_range', '(low, high)', 'LOW HIGH')}", "the tolerance needs --score-range "
     "LOW HIGH"),
    (f"{option('missing')} must be 'models' or 'items'", "--missing must be 'models' or 'items'"),
    (f"drop {option('batch_strategy')}/{option('myopic', 'False')}", "drop --batch-strategy/--non-myopic"),
    (f"give {option('model_args', repr('k=v'), 'KEY=VALUE', key='inspect.model_args')}", "give --model-arg KEY=VALUE"),
    # an option's value is never taken for an idiom of the Python text
    (f"item {option('target', repr('overwrite=True'), 'overwrite=True')} is unknown",
     "item --target overwrite=True is unknown"),
    ("report 'r.html' exists; pass overwrite=True to overwrite it", "report 'r.html' exists; pass --force to "
     "overwrite it"),
    ("kind='binary' but a score is 0.5 (use kind='continuous')", "--kind binary but a score is 0.5 (use --kind "
     "continuous)"),
    ("model 'x' with data_dir=... not found", "model 'x' with --data-dir ... not found"),
    # a value that happens to contain a phrase's replacement is not replaced again (one pass)
    ("item 'overwrite=True --force' is unknown", "item '--force --force' is unknown"),
])
def test_cli_message(library: str, cli: str) -> None:
    assert cli_message(ConfigurationError(library)) == cli


def test_a_semicolon_separated_reference_and_the_flags_in_its_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    ref = tmp_path / "eu.csv"
    rows = ["model;" + ";".join(f"q{i}" for i in range(30))]
    rows += [f"m{j};" + ";".join(str((i * j) % 7) for i in range(30)) for j in range(10)]
    ref.write_text("\n".join(rows) + "\n")
    r = runner.invoke(app, ["session", "new", str(tmp_path / "a.aeval"), "--reference", str(ref), "--method",
                            "rs-mean"])
    assert r.exit_code == 2, r.output
    assert "outside the score range [0, 1]; fix the data or pass --score-range LOW HIGH" in r.stderr
    r = runner.invoke(app, ["session", "new", str(tmp_path / "a.aeval"), "--reference", str(ref), "--method",
                            "rs-mean", "--score-range", "0", "6"])
    assert r.exit_code == 0 and "(10 models x 30 items)" in r.stdout, r.output
