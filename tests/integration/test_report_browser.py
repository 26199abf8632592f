"""The HTML report as a person sees it: rendered by headless Chromium (Debian's), key elements checked.

The checks live in ``scripts/check_report_in_browser.py`` (also the command that made
``docs/report.png``). ``.ci/run`` installs Chromium, so CI always runs this test; elsewhere it is
skipped when no Chromium is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_report_in_browser.py"


def test_report_in_headless_chromium(tmp_path) -> None:
    binary = shutil.which("chromium")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must have Chromium (.ci/run installs Debian's chromium package)")
        pytest.skip("no Chromium (apt-get install chromium) to render the report in")
    shot = tmp_path / "report.png"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--chromium", binary, "--screenshot", str(shot)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok: ") == 10
    assert "ok: the chart was laid out by the browser" in proc.stdout
    assert "ok: the ε2 target line lies inside the width panel" in proc.stdout
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000  # a page, not a blank
