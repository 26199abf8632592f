"""The README's Python example runs as written (with a real model as the harness)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from activeeval import datasets

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs() -> None:
    if not README.exists():
        pytest.skip("README.md is not next to the tests (installed package without sources)")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README.md has no python example"
    truth = datasets.load("ifeval").model_scores("Qwen/Qwen2.5-7B-Instruct")
    item_ids = datasets.load("ifeval").item_ids
    namespace = {"my_harness": lambda item_id: float(truth[item_ids.index(item_id)]), "print": lambda *a: None}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    est = namespace["est"]
    assert namespace["stop_reason"](namespace["rule"], namespace["method"]) is not None
    assert abs(est.mean - truth.mean()) < 0.05
