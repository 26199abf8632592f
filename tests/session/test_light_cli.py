"""The light path of `session next / record / status` (activeeval.cli.light) against Typer's, command line by command
line: the same stdout, stderr, exit code and session file; and it declines what it should leave to Typer.

Each path runs the whole table in one fresh process, as from the shell (stdout and stderr are files, as in a pipe):
"light" is `activeeval.cli.main` as installed; "typer" is the same with the light parser switched off.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from activeeval.cli import light
from activeeval.cli.light import GLOBAL_OPTIONS, Opt
from activeeval.data.matrix import ScoreMatrix
from activeeval.session import Session

RUNNER = r"""
import json, os, shutil, sys
from pathlib import Path
from activeeval.cli import light, main

cases, base, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
real_run = light.run
taken = []

def spy(argv):
    code = real_run(argv) if mode == "light" else None
    taken.append(code is not None)
    return code

light.run = spy
results = []
for args in cases:
    shutil.copy(base, "s.aeval")
    shutil.copy(base.replace("base.aeval", "esc_base.aeval"), "esc.aeval")
    env = dict(os.environ)
    with open("out.txt", "w+b") as out, open("err.txt", "w+b") as err:
        sys.stdout.flush(); sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        sys.argv = ["activeeval", *args]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
    os.environ.clear(); os.environ.update(env)
    from activeeval.session.base import open_session
    with open_session(Path("s.aeval"), readonly=True) as s:
        journal = [{k: v for k, v in e.items() if k != "time"} for e in s.history()]
    here = os.getcwd()  # (each path runs in a folder of its own: messages naming a path name it)
    results.append({"args": args, "code": code, "stdout": Path("out.txt").read_text().replace(here, "<cwd>"),
                    "stderr": Path("err.txt").read_text().replace(here, "<cwd>"), "journal": journal,
                    "light": taken[-1], "typer_loaded": "typer" in sys.modules})
print(json.dumps(results))
"""

# (command line, whether the light path takes it). "{item}" is an item handed out and pending.
CASES: list[tuple[list[str], bool]] = [
    (["session", "next", "s.aeval"], True),
    (["session", "next", "s.aeval", "-k", "2"], True),
    (["session", "next", "s.aeval", "-k3", "--json"], True),
    (["session", "next", "--k=2", "s.aeval"], True),
    (["session", "next", "s.aeval", "-k", "0"], True),
    (["session", "status", "s.aeval"], True),
    (["session", "status", "--json", "s.aeval"], True),
    (["session", "record", "s.aeval", "{item}", "0.25"], True),
    (["session", "record", "s.aeval", "{item}", "1"], True),
    (["session", "record", "s.aeval", "{item}", "--", "-0"], True),
    (["session", "record", "--", "s.aeval", "{item}", "-0.0"], True),
    (["session", "record", "s.aeval", "q-nope", "1"], True),  # an unknown item: the library's error
    (["session", "record", "s.aeval", "{item}", "abc"], True),
    (["session", "record", "s.aeval", "{item}", "nan"], True),
    (["session", "record", "s.aeval", "{item}", "1_0"], True),
    (["session", "record", "s.aeval"], True),  # no ITEM_ID SCORE: the command's own error
    (["session", "record", "s.aeval", "--all"], True),
    (["session", "record", "s.aeval", "{item}", "1", "--target", "m1"], True),
    (["session", "record", "s.aeval", "{item}", "1", "--metric", "acc"], True),
    (["session", "record", "s.aeval", "{item}", "1", "--from", "r.csv"], True),
    (["session", "record", "s.aeval", "--from", "r.csv"], True),
    (["session", "record", "s.aeval", "--from", "missing.csv"], True),
    (["--no-cache", "session", "status", "s.aeval"], True),
    (["--threads", "1", "session", "next", "s.aeval"], True),
    (["--threads=2", "--no-cache", "session", "record", "s.aeval", "{item}", "1"], True),
    (["--threads", "0", "session", "status", "s.aeval"], True),
    (["--data-dir", "no-such-folder", "session", "status", "s.aeval"], True),
    (["session", "status", "other.aeval"], True),  # no such file
    (["session", "next", "esc.aeval", "-k", "3"], True),  # item ids with terminal escapes: removed in a pipe
    (["session", "record", "esc.aeval", "\x1b[31mi1\x1b[0m", "1"], True),
    (["session", "status", "s.aeval", "--reference", "nothere.csv"], True),
    (["session", "next", "s.aeval", "--reference", "ref.csv"], True),
    # what Typer answers: usage errors, help, odd values
    (["session", "next", "s.aeval", "--k", "x"], False),
    (["session", "next", "s.aeval", "--k", "2.0"], False),
    (["session", "next", "s.aeval", "--k", "007"], False),
    (["session", "next", "s.aeval", "-k", "-1"], False),
    (["session", "next", "s.aeval", "-k", "1", "-k", "2"], False),
    (["session", "next", "s.aeval", "--bogus"], False),
    (["session", "next", "s.aeval", "--js"], False),
    (["session", "next"], False),
    (["session", "status", "s.aeval", "extra"], False),
    (["session", "status", "s.aeval", "--json=1"], False),
    (["session", "status", "folder"], False),  # a folder: click.Path's check
    (["session", "status", "s.aeval", "--reference", ""], False),
    (["session", "record", "s.aeval", "{item}", "-1"], False),  # "-1" is an option to Click
    (["session", "next", "s.aeval", "--help"], False),
    (["session", "next", "-h"], False),
    (["session", "--help"], False),
    (["session", "nxt", "s.aeval"], False),
    (["--version"], False),
    (["--threads", "session", "status", "s.aeval"], False),
    (["--data-dir", "session", "session", "status", "s.aeval"], False),
    (["session", "new", "x.aeval", "--reference", "ref.csv", "--seed", "0", "--no-forecast"], False),
]


@pytest.fixture(scope="module")
def table(tmp_path_factory, continuous_split) -> tuple[list[dict], list[dict]]:
    """Each case run by both paths, each in a folder of its own holding the same files."""
    from activeeval.data.io import write_scores

    root = tmp_path_factory.mktemp("light")
    ref = write_scores(continuous_split[0], root / "ref.csv")
    base = root / "base.aeval"
    with Session.create(base, ref, method="rs-mean", seed=0) as s:
        (item,) = s.ask(1)
    rng = np.random.default_rng(0)
    esc = ScoreMatrix(rng.random((6, 4)), [f"m{j}" for j in range(6)], [f"\x1b[31mi{i}\x1b[0m" for i in range(4)])
    with Session.create(root / "esc_base.aeval", write_scores(esc, root / "esc.csv"), method="rs-mean", seed=0):
        pass
    cases = [[a.replace("{item}", item.item_id) for a in args] for args, _ in CASES]
    out = []
    for mode in ("light", "typer"):
        cwd = root / mode
        (cwd / "folder").mkdir(parents=True)
        (cwd / "r.csv").write_text(f"item_id,score\n{item.item_id},0.5\n")
        (cwd / "ref.csv").write_bytes(ref.read_bytes())
        proc = subprocess.run([sys.executable, "-c", RUNNER, json.dumps(cases), str(base), mode], check=False, cwd=cwd,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        out.append(json.loads(proc.stdout.splitlines()[-1]))
    return out[0], out[1]


def test_the_light_path_takes_the_ordinary_command_lines_and_declines_the_rest(table) -> None:
    light_runs, _ = table
    assert [r["light"] for r in light_runs] == [taken for _, taken in CASES]
    first_declined = [taken for _, taken in CASES].index(False)
    # until a command line went to Typer, Typer was never imported
    assert not any(r["typer_loaded"] for r in light_runs[:first_declined])


@pytest.mark.parametrize("i", range(len(CASES)), ids=[" ".join(a) for a, _ in CASES])
def test_the_light_path_answers_as_typer_does(table, i) -> None:
    light_run, typer_run = table[0][i], table[1][i]
    for what in ("code", "stdout", "stderr", "journal"):
        assert light_run[what] == typer_run[what], (what, light_run["args"])


def test_the_table_covers_outcomes_that_matter(table) -> None:
    """(a guard on the table itself: it holds successes, library errors naming a flag, and recorded scores)"""
    light_runs, _ = table
    codes = {r["code"] for r in light_runs}
    assert {0, 2} <= codes
    assert any("--target" in r["stderr"] for r in light_runs if r["light"])
    assert any(r["journal"] and r["journal"][-1]["kind"] == "tell" for r in light_runs if r["light"])


def test_every_option_of_the_commands_is_declared_once() -> None:
    """The Typer commands are built from the same declarations the light parser reads (so they cannot drift)."""
    import typer.main

    from activeeval.cli import app, session_core

    group = next(g for g in typer.main.get_command(app).commands.values() if g.name == "session")
    for name, params in (("next", session_core.NEXT), ("record", session_core.RECORD),
                         ("status", session_core.STATUS)):
        command = group.commands[name]
        assert [p.name for p in command.params if p.name != "help"] == [p.dest for p in params]
        for p, click_param in zip(params, [q for q in command.params if q.name != "help"]):
            assert tuple(click_param.opts) + tuple(click_param.secondary_opts) == (p.flags or (p.dest,))
    top = typer.main.get_command(app)
    assert [p.name for p in top.params if p.name not in ("help", "version")] == [p.dest for p in GLOBAL_OPTIONS]


def test_the_parser_declines_doubtful_values(tmp_path) -> None:
    k = Opt("k", ("--k",), int, 1, "")
    assert light._parse_params(["--k", "12"], [k]) == {"k": 12}
    for bad in (["--k", "1.0"], ["--k", "+1"], ["--k", "01"], ["--k", " 1"], ["--k"], ["--k", "1", "--k", "2"]):
        with pytest.raises(light._Doubt):
            light._parse_params(bad, [k])
    assert light.parse(["session", "status", "s.aeval", "--rferenc", "x"]) is None
