"""Terminal manners (issue 27, item 5): stdout carries only results, progress goes to stderr and only on a
terminal (or with --progress), every long step is shown as it starts, NO_COLOR is respected; and a harness in
the loop is quiet unless --verbose."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.session.drivers.harness_output import harness_output

runner = CliRunner()
DEMO = ["demo", "--dataset", "math", "--method", "rs-mean", "--max-items", "40", "--seed", "1"]
SGR = re.compile(r"\x1b\[([0-9;]*)m")


def coloured(text: str) -> bool:
    """Whether ``text`` sets a colour (SGR 30-38, 40-48, 90-97, 100-107); bold or cursor moves are no colour."""
    codes = {int(c) for m in SGR.finditer(text) for c in m.group(1).split(";") if c}
    return any(30 <= c <= 38 or 40 <= c <= 48 or 90 <= c <= 97 or 100 <= c <= 107 for c in codes)


def test_a_piped_demo_prints_its_result_alone() -> None:
    r = runner.invoke(app, DEMO)
    assert r.exit_code == 0, r.output
    assert r.stdout.lstrip().startswith("math: ") and "items used" in r.stdout
    assert "rs-mean on math" not in r.stdout + r.stderr and r.stderr == ""  # no progress off a terminal
    r = runner.invoke(app, [*DEMO, "--json"])
    assert json.loads(r.stdout)["n_used"] == 40


def test_progress_on_request_names_each_step_on_stderr() -> None:
    r = runner.invoke(app, [*DEMO, "--json", "--progress"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_used"] == 40  # stdout is still the result alone
    assert "reading math ...\nfitting rs-mean on 82 reference models x 437 items ...\n" in r.stderr


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run ``activeeval ARGS`` with stdout and stderr on a pseudo-terminal; what it printed."""
    main, child = pty.openpty()
    command = str(Path(sys.executable).parent / "activeeval")
    proc = subprocess.Popen([command, *args], stdin=subprocess.DEVNULL, stdout=child, stderr=child,
                            env={**env, "COLUMNS": "120", "TERM": "xterm-256color"})
    os.close(child)
    out = b""
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        out += data
    proc.wait(timeout=120)
    os.close(main)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_no_color_is_respected_on_a_terminal() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    assert coloured(_on_a_terminal(DEMO, env)), "Rich draws colours on a terminal (else this test could not fail)"
    plain = _on_a_terminal(DEMO, {**env, "NO_COLOR": "1"})
    assert "items used" in plain and not coloured(plain)


def test_a_harness_is_silent_unless_verbose(capfd) -> None:
    noisy = [sys.executable, "-c", "import os, sys; os.write(1, b'fd1 '); os.write(2, b'fd2 ')"]
    with harness_output(verbose=False, loggers=("lm_eval",)):
        print("python stdout")
        print("python stderr", file=sys.stderr)
        subprocess.run(noisy, check=True)  # what a child prints (git's "fatal: not a git repository")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    with harness_output(verbose=True):
        print("python stdout")
        subprocess.run(noisy, check=True)
    out, err = capfd.readouterr()
    assert out == "" and "python stdout" in err and "fd1 fd2" in err  # never on stdout (--json stays clean)
