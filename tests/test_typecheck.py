"""The library passes the type checker (mypy, settings in pyproject.toml [tool.mypy]; issue 29 item 6).

Part of the suite, like tests/test_lint.py for ruff, so the README's test command — what CI runs — checks it.
mypy is in the ``test`` extra, pinned: a new release's inference cannot turn CI red on its own. Every module
of the library is checked: the config has no ``ignore_errors`` override (no module is exempt).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes() -> None:
    mypy = shutil.which("mypy") or str(Path(sys.executable).with_name("mypy"))
    assert Path(mypy).exists(), "mypy is not installed: pip install -e '.[test]'"
    # No arguments: the files and every setting come from pyproject.toml (14 s uncached, under a second after).
    out = subprocess.run([mypy], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
