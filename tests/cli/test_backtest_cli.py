"""`activeeval backtest` and `activeeval reproduce table1`: output, --json, files, and every bad-input path."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix

runner = CliRunner()


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    rng = np.random.default_rng(0)
    ability = np.sort(rng.normal(size=16))
    p = 1 / (1 + np.exp(-(ability[:, None] - rng.normal(size=40)[None, :])))
    scores = (rng.random((16, 40)) < p).astype(float)
    path = tmp_path_factory.mktemp("bt") / "toy.csv"
    write_scores(ScoreMatrix(scores, [f"m{j}" for j in range(16)], [f"i{i}" for i in range(40)], kind="binary"), path)
    return str(path)


BASE = ("backtest", "--targets", "3", "--seeds", "2", "--workers", "1", "--no-progress")


def test_json_has_exactly_the_documented_keys(toy) -> None:
    r = run(*BASE, "--dataset", toy, "--methods", "rs-mean,seq-apw,irt", "--json")
    assert r.exit_code == 0, r.output
    payload = json.loads(r.stdout)
    assert set(payload) == {"dataset", "regime", "methods"}
    assert payload["regime"] == "interpolation"
    assert set(payload["methods"]) == {"rs-mean", "seq-apw", "irt"}
    for entry in payload["methods"].values():
        assert set(entry) == {"ew_irmse", "gain_db", "coverage_at_stop", "mean_fraction_at_stop"}
        assert set(entry["gain_db"]) == {"5", "10", "25"}
    assert payload["methods"]["rs-mean"]["gain_db"]["10"] == 0.0


def test_method_specs_compare_settings_side_by_side(toy) -> None:
    r = run(*BASE, "--dataset", toy, "--methods", "rs-mean,proeval,proeval[noise_var=0.01]", "--json")
    assert r.exit_code == 0, r.output
    methods = json.loads(r.stdout)["methods"]
    assert list(methods) == ["rs-mean", "proeval", "proeval[noise_var=0.01]"]
    assert methods["proeval"]["ew_irmse"] != methods["proeval[noise_var=0.01]"]["ew_irmse"]
    r = run(*BASE, "--dataset", toy, "--methods", "rs-mean,proeval[noise_var=0.01]")
    assert r.exit_code == 0 and "proeval[noise_var=0.01]" in r.stdout  # not eaten as Rich markup


def test_table_files_and_plots(toy, tmp_path) -> None:
    out = tmp_path / "res"
    r = run(*BASE, "--dataset", toy, "--methods", "seq-apw", "--regime", "extrapolation", "--out", str(out),
            "--format", "csv")
    assert r.exit_code == 0, r.output
    assert "note: added rs-mean (the baseline of RMSE Gain)" in r.stderr
    for text in ("EW-IRMSE", "gain@5%", "cov@stop", "n/N@stop", "seq-apw", "rs-mean", "wall time"):
        assert text in r.stdout
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([".activeeval-results", "config.json", "cost_accuracy.csv", "cost_accuracy.png",
                            "coverage.png", "curves.csv", "rmse_gain.png", "rmse_log.png", "runs.csv", "stops.csv",
                            "summary.json"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]  # temp dir moved, not left
    r = run(*BASE, "--dataset", toy, "--methods", "seq-apw", "--regime", "extrapolation", "--out", str(out),
            "--format", "csv")
    assert r.exit_code == 2 and "holds the results of an earlier run; pass --force to replace them" in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--methods", "rs-man"), "error: unknown method 'rs-man' (did you mean 'rs-mean'?); choose one of:"),
        (("--refs", "1.5"), "error: --refs must be in (0, 1], got 1.5; e.g. 0.5 for half the pool"),
        (("--refs", "0"), "error: --refs must be in (0, 1], got 0.0"),
        (("--targets", "16"), "error: --targets 16 is too many:"),
        (("--regime", "extrapolation", "--targets", "12"),
         "error: the extrapolation split of toy (16 models, 12 targets, 3 discarded) leaves 1 reference model(s)"),
        (("--regime", "sideways"), "error: regime must be 'interpolation' or 'extrapolation', got 'sideways'"),
        (("--backend", "spark"), "error: --backend must be one of local, ray, dask, got 'spark'"),
        (("--workers", "0"), "error: --workers must be a positive integer, got 0"),
        (("--orders", "random"), "error: --orders must be 'shared' or 'independent', got 'random'"),
        (("--methods", "rs-mean,proeval[noise=0.1]"),
         "error: method 'proeval[noise=0.1]': proeval has no option 'noise' (did you mean 'noise_var'?)"),
        (("--methods", "rs-mean,proeval[noise_var=-1]"), "error: method 'proeval[noise_var=-1]': "),
        (("--methods", "rs-mean,proeval[noise_var=0.1"), "error: unclosed '[' in the method list"),
    ],
)
def test_bad_input_exit_2_and_nothing_written(toy, tmp_path, args, message) -> None:
    out = tmp_path / "res"
    r = run(*BASE, "--dataset", toy, *args, "--out", str(out))
    assert r.exit_code == 2
    assert message in r.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_unknown_dataset_and_missing_path(tmp_path) -> None:
    r = run(*BASE, "--dataset", "ifevel", "--out", str(tmp_path / "o"))
    assert r.exit_code == 2 and "ifevel" in r.stderr and "did you mean 'ifeval'" in r.stderr
    r = run(*BASE, "--dataset", str(tmp_path / "nope.csv"))
    assert r.exit_code == 2 and "nope.csv" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_existing_out_is_refused(toy, tmp_path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    r = run(*BASE, "--dataset", toy, "--out", str(tmp_path))
    assert r.exit_code == 2
    assert "is a folder of other files (1 entries) that activeeval did not write; choose a new folder" in r.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


def test_reproduce_table1_rs_mean_only_json() -> None:
    r = run("reproduce", "table1", "--seeds", "1", "--datasets", "ifeval", "--methods", "rs-mean",
            "--workers", "1", "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    payload = json.loads(r.stdout)
    row = payload["rows"][0]
    assert row["method"] == "rs-mean" and row["paper_interpolation"] == 72.45 and row["paper_extrapolation"] == 64.54
    assert row["ours_interpolation"] > 0


def test_reproduce_rejects_datasets_without_a_paper_row() -> None:
    r = run("reproduce", "table1", "--datasets", "gsm", "--seeds", "1")
    assert r.exit_code == 2
    assert "error: --datasets: Table 1 rows exist for ifeval, musr, got 'gsm'" in r.stderr


def test_a_warning_inside_the_command_is_printed_once_and_does_not_hang(toy, monkeypatch) -> None:
    import warnings

    import activeeval.experiments.tables as bt  # the command imports summarize from here when it runs

    original = bt.summarize

    def noisy(*args, **kwargs):
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=1)
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=1)
        return original(*args, **kwargs)

    monkeypatch.setattr(bt, "summarize", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("default", RuntimeWarning)  # the suite turns RuntimeWarning into errors
        r = run(*BASE, "--dataset", toy, "--methods", "rs-mean", "--json")
    assert r.exit_code == 0, r.output
    assert r.stderr.count("warning: RuntimeWarning: Mean of empty slice") == 1


def test_baseline_of_the_cli_is_the_tables():
    """The CLI keeps its own copy of the RMSE-gain baseline (so --help imports no pandas); they must agree."""
    from activeeval.cli.backtest import BASELINE
    from activeeval.experiments import tables

    assert BASELINE == tables.BASELINE
