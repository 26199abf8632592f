"""`activeeval datasets`: the table, --json and --all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from activeeval.cli import app
from activeeval.data.datasets import SHARED_DATA_ENV, shared_data_dir

BUNDLED = ["ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro"]
runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    result = runner.invoke(app, ["datasets", *args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_table_lists_every_bundled_dataset() -> None:
    result = run()
    assert result.exit_code == 0
    for header in ("name", "models", "items", "kind", "missing", "origin"):
        assert header in result.stdout
    for name in BUNDLED:
        assert name in result.stdout
    mmlu_pro_row = next(line for line in result.stdout.splitlines() if "mmlu_pro" in line)
    assert "12032" in mmlu_pro_row and "1713" in mmlu_pro_row and "binary" in mmlu_pro_row
    assert "wmt21" not in result.stdout


def test_json_is_a_list_of_objects() -> None:
    result = run("--json")
    assert result.exit_code == 0
    entries = json.loads(result.stdout)
    assert [e["name"] for e in entries] == BUNDLED
    alpaca = entries[BUNDLED.index("alpacaeval2")]
    assert alpaca["n_models"] == 57 and alpaca["n_items"] == 805 and alpaca["n_missing"] == 10
    assert alpaca["kind"] == "continuous" and alpaca["score_range"] == [0.0, 1.0] and alpaca["licence"] == "Apache-2.0"
    assert all(e["bundled"] for e in entries)


@pytest.mark.skipif(shared_data_dir() is None, reason="the project's shared/data folder is absent (a user's clone)")
def test_all_adds_the_shared_datasets() -> None:
    entries = json.loads(run("--all", "--json").stdout)
    shared = [e["name"] for e in entries if not e["bundled"]]
    assert shared == ["wmt21_en-zh_chrf", "wmt21_zh-en_chrf"]
    assert "wmt21_zh-en_chrf" in run("--all").stdout


def test_bad_shared_data_env_is_a_one_line_error(tmp_path: Path) -> None:
    result = run("--all", env={SHARED_DATA_ENV: str(tmp_path)})
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ACTIVEEVAL_SHARED_DATA=") and "has no catalog.json" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_data_dir_flag_names_the_shared_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the flag sets the variable for the process: setenv records the value before, so teardown restores it
    monkeypatch.setenv(SHARED_DATA_ENV, "")
    entry = {"name": "toy", "file": "toy.csv", "models": 2, "items": 2, "score": "continuous", "min": 0.0,
             "max": 1.0, "missing": 0, "description": "a toy", "source": "a test"}
    (tmp_path / "catalog.json").write_text(json.dumps([entry]))
    (tmp_path / "toy.csv").write_text("model,a,b\nm1,0.1,0.2\nm2,0.3,0.4\n")
    result = runner.invoke(app, ["--data-dir", str(tmp_path), "datasets", "--all", "--json"])
    assert result.exit_code == 0, result.output
    assert [e["name"] for e in json.loads(result.stdout)][-1] == "toy"
    bad = runner.invoke(app, ["--data-dir", str(tmp_path / "nowhere"), "datasets"])
    assert bad.exit_code == 2
    assert bad.stderr.startswith("error: --data-dir ") and "has no catalog.json" in bad.stderr
