"""Bundled datasets: catalog, loading, the shared data fallback and resolve()."""

from __future__ import annotations

import csv
import gzip
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from activeeval import datasets
from activeeval.data import datasets as impl
from activeeval.data import read_scores, write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, UnknownDatasetError

BUNDLED = ["ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro"]
CATALOG = json.loads(resources.files("activeeval.data").joinpath("bundled", "catalog.json").read_text())
SHARED = impl.shared_data_dir()
needs_shared = pytest.mark.skipif(
    SHARED is None,
    reason="the project's shared/data folder is absent (a user's clone); CI always has it",
)


def test_catalog_lists_exactly_the_redistributable_datasets() -> None:
    assert [e["name"] for e in CATALOG] == BUNDLED
    assert [d.name for d in datasets.list()] == BUNDLED
    for entry in CATALOG:
        assert entry["licence"] in ("MIT", "Apache-2.0")
        assert resources.files("activeeval.data").joinpath("bundled", entry["file"]).is_file()
    attribution = resources.files("activeeval.data").joinpath("bundled", "ATTRIBUTION.md").read_text()
    for origin in ("socialfoundations/benchmark-prediction", "tatsu-lab/alpaca_eval", "TIGER-AI-Lab/MMLU-Pro"):
        assert origin in attribution


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_dataset_matches_its_catalog_entry(name: str) -> None:
    info = datasets.info(name)
    m = datasets.load(name)
    assert isinstance(m, ScoreMatrix) and m.name == name
    assert m.shape == (info.n_models, info.n_items)
    assert m.kind == info.kind and m.score_range == info.score_range == (0.0, 1.0)
    assert m.n_missing == info.n_missing  # missing entries are kept as NaN
    present = m.scores[~np.isnan(m.scores)]
    assert present.min() >= 0.0 and present.max() <= 1.0
    assert len(set(m.model_ids)) == m.n_models and len(set(m.item_ids)) == m.n_items


def test_load_is_cached_and_case_insensitive() -> None:
    assert datasets.load("gsm") is datasets.load("GSM")


def test_known_shapes_and_missing_counts() -> None:
    assert datasets.load("alpacaeval2").shape == (57, 805) and datasets.load("alpacaeval2").n_missing == 10
    assert datasets.load("mmlu_pro").shape == (29, 12032) and datasets.load("mmlu_pro").n_missing == 1713
    # The leaderboard files repeat some models with identical rows; load() keeps one of each.
    assert datasets.load("ifeval").n_models == 448 - 19 and datasets.load("arc_challenge").n_models == 218 - 6


def test_dataset_info_fields() -> None:
    info = datasets.info("alpacaeval2")
    assert (info.kind, info.n_missing, info.licence, info.bundled) == ("continuous", 10, "Apache-2.0", True)
    assert "AlpacaEval" in info.origin and info.description
    assert "repeats 19 model rows" in datasets.info("ifeval").notes


@pytest.mark.parametrize(
    ("name", "suggestion"), [("ifevl", "ifeval"), ("mmlu-pro", "mmlu_pro"), ("alpaca", "alpacaeval2")]
)
def test_unknown_name_suggests_the_closest(name: str, suggestion: str) -> None:
    with pytest.raises(
        UnknownDatasetError, match=rf"unknown dataset '{name}'; did you mean '{suggestion}'\? datasets: "
    ):
        datasets.load(name)


def test_unknown_name_lists_the_names_and_is_a_key_error() -> None:
    with pytest.raises(KeyError, match=r"datasets: alpacaeval2, arc_challenge, .*\(see activeeval.datasets.list\(\)"):
        datasets.load("zzzzzz")


# ------------------------------------------------------------ shared data
@needs_shared
@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_files_are_the_shared_files_with_each_model_once(name: str) -> None:
    """The shared file's rows, in order, with a repeated model's later (identical) rows left out (issue 27)."""
    entry = next(e for e in CATALOG if e["name"] == name)
    with gzip.open(SHARED / entry["file"], "rt", newline="") as f:
        shared_rows = list(csv.reader(f))
    with resources.as_file(resources.files("activeeval.data").joinpath("bundled", entry["file"])) as path:
        with gzip.open(path, "rt", newline="") as f:
            bundled_rows = list(csv.reader(f))
        # no repeated model: a file derived from it needs no --duplicate-models
        strict = read_scores(path, layout="wide", duplicate_models="error")
    first: dict[str, list[str]] = {}
    for row in shared_rows[1:]:
        assert first.setdefault(row[0], row) == row  # the source's repeats are identical
    assert bundled_rows == [shared_rows[0], *first.values()]
    shared_catalog = {e["name"]: e for e in json.loads((SHARED / "catalog.json").read_text())}
    loaded = datasets.load(name)
    assert strict.model_ids == loaded.model_ids and strict.n_models == entry["n_models"] == len(first)
    assert len(shared_rows[0]) - 1 == shared_catalog[name]["items"] == loaded.n_items
    assert shared_catalog[name]["missing"] == loaded.n_missing


@needs_shared
def test_shared_only_datasets_load_but_are_not_listed_by_default() -> None:
    assert "wmt21_en-zh_chrf" not in [d.name for d in datasets.list()]
    shared = [d for d in datasets.list(include_shared=True) if not d.bundled]
    assert {d.name for d in shared} == {"wmt21_en-zh_chrf", "wmt21_zh-en_chrf"}
    m = datasets.load("wmt21_en-zh_chrf")
    assert m.shape == (29, 1002) and m.kind == "continuous" and m.n_missing == 0


def test_shared_data_env_var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = ScoreMatrix([[0.5, 0.25], [1.0, 0.0]], ["a", "b"], ["x", "y"])
    write_scores(m, tmp_path / "toy.csv.gz")
    entry = {
        "name": "toy",
        "file": "toy.csv.gz",
        "models": 2,
        "items": 2,
        "score": "continuous",
        "min": 0.0,
        "max": 1.0,
        "missing": 0,
        "description": "a toy",
        "source": "a test",
    }
    (tmp_path / "catalog.json").write_text(json.dumps([entry]))
    monkeypatch.setenv(impl.SHARED_DATA_ENV, str(tmp_path))
    assert impl.shared_data_dir() == tmp_path.resolve()
    assert (
        datasets.load("toy").fingerprint()
        == ScoreMatrix(m.scores, m.model_ids, m.item_ids, kind="continuous").fingerprint()
    )
    assert [d.name for d in datasets.list(include_shared=True)][-1] == "toy"
    monkeypatch.setenv(impl.SHARED_DATA_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ConfigurationError, match=r"ACTIVEEVAL_SHARED_DATA=.*nowhere' has no catalog.json; point it"):
        impl.shared_data_dir()
    monkeypatch.delenv(impl.SHARED_DATA_ENV)
    assert datasets.load("toy", data_dir=tmp_path).n_items == 2  # an explicit folder, no environment
    with pytest.raises(ConfigurationError, match=r"data_dir=.*nowhere' has no catalog.json; point it"):
        datasets.load("toy", data_dir=tmp_path / "nowhere")


def test_shared_data_does_not_depend_on_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "catalog.json").write_text("[]")
    monkeypatch.delenv(impl.SHARED_DATA_ENV, raising=False)
    before = impl.shared_data_dir()
    monkeypatch.chdir(tmp_path)
    assert impl.shared_data_dir() == before  # not tmp_path/shared/data: where you stand does not matter


def test_corrupt_shared_catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "catalog.json").write_text("[{]")
    monkeypatch.setenv(impl.SHARED_DATA_ENV, str(tmp_path))
    with pytest.raises(DataFormatError, match=r"catalog.json: cannot read the shared data catalog"):
        datasets.load("not_bundled")


# ------------------------------------------------------------------ resolve
def test_resolve_a_name_or_a_path(tmp_path: Path) -> None:
    assert datasets.resolve("math") is datasets.load("math")
    path = write_scores(ScoreMatrix([[1, 0], [0, 1]], ["a", "b"], ["x", "y"]), tmp_path / "mine.csv")
    m = datasets.resolve(path, kind="continuous")
    assert m.name == "mine" and m.kind == "continuous"
    assert datasets.resolve(str(path)).kind == "binary"


def test_resolve_errors(tmp_path: Path) -> None:
    with pytest.raises(
        UnknownDatasetError,
        match=(
            r"'gms' is neither a dataset name nor an existing file; did you mean 'gsm'\? datasets: .*; "
            r"or give a path to a wide/long CSV/Parquet/JSONL score file"
        ),
    ):
        datasets.resolve("gms")
    with pytest.raises(DataFormatError, match=r"missing.csv: cannot read scores, no such file"):
        datasets.resolve("missing.csv")
    with pytest.raises(ConfigurationError, match=r"\['kind'\] only apply when reading a file, but 'gsm' is a dataset"):
        datasets.resolve("gsm", kind="continuous")


def test_read_scores_reads_a_bundled_file_directly() -> None:
    with resources.as_file(resources.files("activeeval.data").joinpath("bundled", "gsm.csv.gz")) as path:
        assert read_scores(path).fingerprint() == datasets.load("gsm").fingerprint()
