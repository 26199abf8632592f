"""The code passes the project's linter (ruff, rules in pyproject.toml [tool.ruff.lint]; issue 29 item 6).

Part of the suite, so the README's test command — what CI runs — checks it. ruff is in the ``test`` extra,
pinned: a new release's rules cannot turn CI red on its own.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_passes() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    assert Path(ruff).exists(), "ruff is not installed: pip install -e '.[test]'"
    out = subprocess.run([ruff, "check", "--no-cache", "src", "tests", "benchmarks", "scripts"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
