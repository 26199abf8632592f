"""The Inspect walkthrough of docs/inspect.md, run as written (bash, in an empty folder, no network).

The mock model's tokenizer stand-in (tests/integration/offline) is put on
PYTHONPATH, as HF_HUB_OFFLINE is set for the lm-eval walkthrough: the doc
says the first run of the mock model needs the network.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "inspect.md"

pytest.importorskip("inspect_ai", reason='inspect-ai is not installed (pip install "activeeval[inspect]")')


def walkthrough() -> str:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- walkthrough:start -->\n```bash\n(.*?)```\n<!-- walkthrough:end -->", text, re.DOTALL)
    assert block is not None, "docs/inspect.md lost its walkthrough block"
    return block.group(1)


def test_the_inspect_walkthrough_runs_as_written(tmp_path) -> None:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(Path(__file__).parent / "offline")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", walkthrough()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = proc.stdout
    assert ("wrote quiz_ref.csv: 4 models x 24 items, binary (Inspect task 'quiz', scorer (the only one); item ids "
            "are its sample ids)") in out
    assert re.search(r"items used 12/24  stop: yes \(budget\)", out), out
    assert "changed max-items: 12 -> 18 (recorded in the journal)" in out
    assert re.search(r"items used 18/24  stop: yes \(budget\)", out), out
    assert "model: my-model" in out
    assert len(list((tmp_path / "my-logs").glob("*.eval"))) == 3  # runs of 8 and 4 samples, then 6 on resume
