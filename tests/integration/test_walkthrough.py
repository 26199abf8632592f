"""The lm-eval walkthrough of docs/sessions.md, run as written (bash, in an empty folder, no network)."""

from __future__ import annotations

import json
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
    out, err = proc.stdout, proc.stderr
    assert ("wrote quiz_ref.csv: 3 models x 40 items, binary (lm-eval task 'quiz', metric acc; item ids are its "
            "doc ids)") in out
    # steps 3 and 4 (lm-eval's own option names): the loop, the results file, the budget change on resume
    assert re.search(r"items used 12/40  stop: yes \(budget\)\nwrote out/results.json\n", out), out
    assert "changed max-items: 12 -> 20 (recorded in the journal)" in out
    assert re.search(r"items used 20/40  stop: yes \(budget\)\nwrote out/results.json\n", out), out
    assert "forecast: about " in err and "from 3 reference models playing the target" in err
    # step 5: the results file is valid against its schema, the samples are lm-eval's format, read back
    assert "results.json: my-model 20 items, stopped by budget" in out
    assert "wrote my_samples.csv: 1 models x 20 items, binary (lm-eval task 'quiz', metric acc" in out
    (samples,) = (tmp_path / "out" / "my-model").glob("samples_quiz_*.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(lines) == 20 and {"doc_id", "doc", "arguments", "resps", "filtered_resps", "acc"} <= set(lines[0])
    assert isinstance(lines[0]["arguments"], dict) and "gen_args_0" in lines[0]["arguments"]  # as lm-eval writes
    # step 6
    assert "model: my-model" in out and "wrote mine.html" in out
    assert "my-model" in (tmp_path / "mine.html").read_text()
    # step 7: the tryout
    assert re.search(r"items used 10/40  stop: yes \(budget\)\ntrue score of ref-3 \(all 40 items\): [\d.]+; "
                     r"error [+-][\d.]+, (inside|outside) the interval\nwrote try.results.json\n", out), out

    # quiet by default: the resumed command again, with a larger budget, prints none of lm-eval's tables, bars,
    # warnings, nor git's complaint (step 1's own lm_eval runs printed them all)
    assert "fatal: not a git repository" in err and "|Tasks|" in out
    again = subprocess.run(
        ["activeeval", "run", "--harness", "lm-eval", "--model", "dummy", "--model_args", "pretrained=my-model",
         "--tasks", "quiz", "--include_path", ".", "--metric", "acc", "--reference", "quiz_ref.csv", "--session",
         "mine.aeval", "--max-items", "24", "--output_path", "out", "--log_samples"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr == ""  # no progress off a terminal, no forecast on resume, nothing of lm-eval's
    lines = again.stdout.splitlines()
    assert lines[0] == "changed max-items: 20 -> 24 (recorded in the journal)" and "items used 24/40" in lines[1]
    assert lines[2:] == ["wrote out/results.json"]
    assert len((tmp_path / "out" / "my-model").glob("samples_quiz_*.jsonl").__next__().read_text().splitlines()) == 24
