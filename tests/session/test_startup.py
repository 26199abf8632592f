"""What a later session command imports: only what it uses (a guard against start-up regressions, not a timing test).

`activeeval session next/record/status` run many times in a user's loop; each one pays its imports
(docs/benchmarks/history.md, "Later commands in well under a second"): SciPy's linear algebra alone costs about 0.4 s,
Rich and the other command modules another 0.1 s. The commands run in a fresh process, as from the shell.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from activeeval.cli import COMMANDS, command_module
from activeeval.session import Session

RUN = """
import json, sys
from activeeval.cli import main
for args in json.loads(sys.argv[1]):
    sys.argv = ["activeeval", *args]
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
print(json.dumps(sorted(sys.modules)))
"""


def modules_after(commands: list[list[str]], cwd: Path) -> set[str]:
    """The modules loaded once ``activeeval ARGS`` ran for each ARGS, in turn, in one fresh process."""
    out = subprocess.run([sys.executable, "-c", RUN, json.dumps(commands)], capture_output=True, text=True, cwd=cwd,
                         check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


@pytest.mark.parametrize("method", ["rs-mean", "bayesame"])
def test_later_session_commands_import_only_what_they_use(tmp_path, continuous_ref_file, continuous_split,
                                                          method) -> None:
    _, target = continuous_split
    f = tmp_path / "s.aeval"
    with Session.create(f, continuous_ref_file, method=method, seed=0) as s:
        for a in s.ask(3):
            s.tell(a.item_id, target[a.item_id])
        (item,) = s.ask(1)
    loaded = modules_after([["session", "next", str(f)], ["session", "record", str(f), item.item_id,
                                                                 str(target[item.item_id])],
                            ["session", "status", str(f)]], tmp_path)
    assert "activeeval.session.session" in loaded  # (the commands ran)
    # SciPy's linear algebra (and its BLAS): neither method's later step needs it
    assert not {"scipy.linalg", "scipy.optimize", "scipy.stats", "pandas", "pyarrow", "sklearn"} & loaded
    # the other commands' modules, and Rich (their tables and progress bars); not even Typer and the pydantic
    # validation it runs: the light path (activeeval.cli.light) parses these command lines
    assert not {m for m in loaded if m.startswith("activeeval.cli.")} - {
        "activeeval.cli.light", "activeeval.cli.plain", "activeeval.cli.session_core"}
    assert not {"rich", "typer", "click", "pydantic"} & {m.split(".")[0] for m in loaded}
    if method == "rs-mean":
        assert not {m for m in loaded if m.split(".")[0] == "scipy"}


def test_each_command_module_registers_the_commands_it_is_listed_with() -> None:
    """`main` imports the module COMMANDS names for the command; every module, imported alone, registers exactly
    its names (so a command added to a module and not to COMMANDS fails here, not in a user's shell)."""
    code = ("import importlib, json, sys\nfrom activeeval.cli.common import app\n"
            "importlib.import_module('activeeval.cli.' + sys.argv[1])\n"
            "print(json.dumps([c.name or c.callback.__name__ for c in app.registered_commands]"
            " + [g.name for g in app.registered_groups]))")
    for module, names in COMMANDS.items():
        out = subprocess.run([sys.executable, "-c", code, module], capture_output=True, text=True, check=True)
        assert sorted(json.loads(out.stdout)) == sorted(names), module


def test_the_command_is_found_after_the_top_level_options() -> None:
    assert command_module(["session", "status", "s.aeval"]) == "session"
    assert command_module(["--threads", "2", "--no-cache", "run", "--help"]) == "session"
    assert command_module(["--data-dir", "rank", "reproduce", "table1"]) == "backtest"  # a value named like a command
    assert command_module(["--threads=2", "rank-backtest"]) == "rank"
    assert command_module(["--help"]) is None and command_module(["sesion", "status"]) is None
    assert command_module([]) is None


def test_a_session_on_a_csv_reference_imports_no_pandas(tmp_path, continuous_ref_file, monkeypatch) -> None:
    """`session new` on a CSV or TSV reference parses it without pandas (a quarter of a second of the first
    session's start: issue 26, item 2); Parquet and JSONL files still go through it."""
    monkeypatch.setenv("ACTIVEEVAL_CACHE", "off")  # the file is parsed, not read back from the user cache
    assert str(continuous_ref_file).endswith((".csv", ".tsv", ".csv.gz"))
    loaded = modules_after([["session", "new", str(tmp_path / "s.aeval"), "--reference", str(continuous_ref_file),
                             "--method", "rs-mean", "--seed", "0", "--no-forecast"]], tmp_path)
    assert "activeeval.data.io" in loaded  # (the file was read)
    assert not {"pandas", "pyarrow"} & loaded
