"""The lm-eval walkthrough of docs/sessions.md, run as written (bash, in an empty folder, no network)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "sessions.md"

pytest.importorskip("lm_eval", reason='lm-eval is not installed (pip install "activeeval[lm-eval]")')


def walkthrough() -> str:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- walkthrough:start -->\n```bash\n(.*?)```\n<!-- walkthrough:end -->", text, re.DOTALL)
    assert block is not None, "docs/sessions.md lost its walkthrough block"
    return block.group(1)


def test_the_walkthrough_runs_as_written(tmp_path) -> None:
    env = dict(os.environ)
    # The venv's commands (activeeval, lm_eval, python) first, as for a user who activated it; no network.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / ".hf"))
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", walkthrough()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert ("wrote quiz_ref.csv: 2 models x 40 items, binary (lm-eval task 'quiz', metric acc; item ids are its "
            "doc ids)") in out
    assert re.search(r"items used 12/40  stop: yes \(budget\)", out), out
    assert "changed max-items: 12 -> 20 (recorded in the journal)" in out
    assert re.search(r"items used 20/40  stop: yes \(budget\)", out), out
    assert "model: my-model" in out and "wrote mine.html" in out
    assert "my-model" in (tmp_path / "mine.html").read_text()
