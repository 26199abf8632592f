"""`activeeval reproduce table2`: the paper's numbers, the runs it plans, its JSON and files, and its errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner, Result

from activeeval import datasets
from activeeval.cli import app
from activeeval.experiments import tables
from activeeval.experiments.protocol import BacktestConfig, sample_references
from activeeval.experiments.runner import backtest_split, check_methods
from activeeval.experiments.tables import PAPER_TABLE2, TABLE2_NON_MYOPIC, TABLE2_ROWS, paper_regimes, table2_note
from activeeval.methods.bayesame_paper import BayesAMEPaper

runner = CliRunner()


def run(*args: str) -> Result:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def test_paper_numbers_are_the_issues():
    """Issue 14 item 4 (the paper's Table 2, EW-IRMSE, 50 % refs, interpolation / extrapolation)."""
    assert PAPER_TABLE2 == {
        "ifeval": {"bayesame-paper": (49.53, 58.08), "bayesame-paper-rs": (56.14, 58.08),
                   "myopic-2": (49.99, None), "non-myopic-2": (50.00, None), "bayes-aipw": (56.71, 60.52)},
        "musr": {"bayesame-paper": (47.86, 54.19), "bayesame-paper-rs": (47.86, 54.19),
                 "myopic-2": (None, None), "non-myopic-2": (None, None), "bayes-aipw": (49.18, 56.72)},
    }
    assert [r.key for r in TABLE2_ROWS] == [*PAPER_TABLE2["ifeval"], "bayesame"]


def test_rows_run_the_methods_the_issue_names():
    # the non-myopic row is the issue's spec, in the backtest's canonical spelling
    assert check_methods(["bayesame-paper[batch_strategy=pair,batch_size=2,myopic=false]"]) == (TABLE2_NON_MYOPIC,)
    assert [(r.label, r.myopic_batch) for r in TABLE2_ROWS] == [
        ("bayesame-paper", 1), ("bayesame-paper-rs", 1), ("bayesame-paper", 2), (TABLE2_NON_MYOPIC, 1),
        ("bayes-aipw", 1), ("bayesame", 1)]


def test_notes_say_why_a_paper_cell_is_empty_and_where_ours_select_at_random():
    rows = {r.key: r for r in TABLE2_ROWS}
    unique, mixed = {"interpolation": ["unique"] * 2, "extrapolation": ["non-unique"] * 2}, {
        "interpolation": ["unique", "non-unique"], "extrapolation": ["non-unique"] * 2}
    assert table2_note("ifeval", rows["bayes-aipw"], unique) == ""
    assert table2_note("ifeval", rows["bayesame-paper-rs"], unique) == ""  # random by design: nothing to flag
    assert table2_note("ifeval", rows["myopic-2"], unique) == (
        "extrap.: no paper number (the paper did not run it); ours select at random (non-unique regime): extrap. "
        "on 2/2 seeds")
    assert table2_note("ifeval", rows["myopic-2"], mixed, short=True) == (
        "extrap.: not in the paper; ours random: interp. 1/2, extrap. 2/2")
    assert table2_note("musr", rows["non-myopic-2"], mixed, short=True) == (
        "paper –: non-unique regime; ours random: interp. 1/2, extrap. 2/2")
    assert table2_note("alpacaeval2", rows["bayes-aipw"], unique) == "no paper number (a set the paper did not use)"
    assert table2_note("musr", rows["bayesame"], unique, short=True) == "no paper number"


def test_in_the_non_unique_regime_the_paper_method_ignores_its_batch_options():
    """MuSR's 50 % reference samples are in the non-unique regime (B < N − N0): selection is uniformly random,
    so the pair strategy, myopic or not, picks exactly the items plain bayesame-paper picks with the same seed."""
    matrix = datasets.load("musr")
    config = BacktestConfig(methods=("bayesame-paper",), regime="interpolation", ref_fraction=0.5, n_seeds=2)
    assert paper_regimes(matrix, config) == ["non-unique", "non-unique"]
    ref = matrix.select_models(sample_references(backtest_split(matrix, config).pool, 0.5, 0))
    plain = BayesAMEPaper(ref, seed=5)
    nonmyopic = BayesAMEPaper(ref, seed=5, batch_strategy="pair", batch_size=2, myopic=False)
    pair = BayesAMEPaper(ref, seed=5, batch_strategy="pair")
    greedy = BayesAMEPaper(ref, seed=5)
    truth = matrix.model_scores(backtest_split(matrix, config).targets[0])
    for _ in range(20):
        item = plain.select()
        assert nonmyopic.select() == item
        batch = pair.select_batch(2)
        assert list(batch) == list(greedy.select_batch(2))
        for m, items in ((plain, [item]), (nonmyopic, [item]), (pair, batch), (greedy, batch)):
            for i in items:
                m.observe(i, float(truth[i]))
    assert nonmyopic.estimate().mean == plain.estimate().mean


def test_ifeval_interpolation_is_in_the_unique_regime():
    # the regime column must be able to say "unique": IFEval interpolation is (paper §5.1; Table 1's runs)
    config = BacktestConfig(methods=("bayesame-paper",), regime="interpolation", ref_fraction=0.5, n_seeds=2)
    assert paper_regimes(datasets.load("ifeval"), config) == ["unique", "unique"]


@pytest.fixture
def spied_configs(monkeypatch):
    """The BacktestConfig of every backtest the command runs (the runs themselves are real)."""
    import activeeval.experiments.runner as runner_module

    seen: list[BacktestConfig] = []
    original = runner_module.run_backtest

    def spy(matrix, config, **kwargs):
        seen.append(config)
        return original(matrix, config, **kwargs)

    monkeypatch.setattr(runner_module, "run_backtest", spy)
    return seen


def test_end_to_end_json_files_and_the_runs_it_plans(tmp_path, spied_configs):
    out = tmp_path / "t2"
    r = run("reproduce", "table2", "--seeds", "1", "--targets", "2", "--datasets", "ifeval", "--workers", "1",
            "--no-progress", "--json", "--out", str(out), "--format", "csv")
    assert r.exit_code == 0, r.output
    payload = json.loads(r.stdout)
    assert set(payload) == {"seeds", "targets", "wall_time_s", "regimes", "rows"}
    assert payload["seeds"] == 1 and payload["targets"] == 2
    assert payload["regimes"] == {"ifeval": {"interpolation": ["unique"], "extrapolation": ["non-unique"]}}
    rows = payload["rows"]
    assert [row["row"] for row in rows] == ["BayesAME", "BayesAME-RS", "|A|=2 myopic", "|A|=2 non-myopic",
                                           "Bayes-AIPW", "bayesame (ours)"]
    for row in rows:
        assert set(row) == {"dataset", "row", "method", "myopic_batch", "ours_interpolation", "paper_interpolation",
                            "ours_extrapolation", "paper_extrapolation", "note"}
        assert row["ours_interpolation"] > 0 and row["ours_extrapolation"] > 0
    by_row = {row["row"]: row for row in rows}
    assert (by_row["|A|=2 myopic"]["paper_interpolation"], by_row["|A|=2 myopic"]["paper_extrapolation"]) == (
        49.99, None)
    assert by_row["bayesame (ours)"]["paper_interpolation"] is None
    # IFEval extrapolation is non-unique: the paper's BayesAME, its RS twin and the non-myopic pair play the same
    # random items with the same seed, so their numbers are equal (bit for bit: same arithmetic)
    extrap = {by_row[k]["ours_extrapolation"] for k in ("BayesAME", "BayesAME-RS", "|A|=2 non-myopic")}
    assert len(extrap) == 1
    # interpolation is unique: active selection, and the pair rows select differently from single items
    assert by_row["|A|=2 myopic"]["ours_interpolation"] != by_row["BayesAME"]["ours_interpolation"]
    assert by_row["|A|=2 non-myopic"]["ours_interpolation"] != by_row["BayesAME"]["ours_interpolation"]
    # two backtests per regime: the single-item rows with the baseline, and the myopic pairs on their own
    assert [(c.regime, c.methods, c.batch_size, c.batch_strategy, c.myopic) for c in spied_configs] == [
        ("interpolation", ("bayesame-paper", "bayesame-paper-rs", TABLE2_NON_MYOPIC, "bayes-aipw", "bayesame",
                           "rs-mean"), 1, "greedy", True),
        ("interpolation", ("bayesame-paper",), 2, "pair", True),
        ("extrapolation", ("bayesame-paper", "bayesame-paper-rs", TABLE2_NON_MYOPIC, "bayes-aipw", "bayesame",
                           "rs-mean"), 1, "greedy", True),
        ("extrapolation", ("bayesame-paper",), 2, "pair", True),
    ]
    assert all(c.ref_fraction == 0.5 and c.n_targets == 2 and c.n_seeds == 1 for c in spied_configs)
    names = {p.name for p in out.iterdir()}
    assert "table2.json" in names
    for prefix in ("ifeval_interpolation_", "ifeval_interpolation_myopic2_", "ifeval_extrapolation_",
                   "ifeval_extrapolation_myopic2_"):
        assert {f"{prefix}{f}" for f in ("runs.csv", "stops.csv", "curves.csv", "cost_accuracy.csv",
                                         "summary.json")} <= names
    written = json.loads((out / "table2.json").read_text())
    assert written["rows"] == rows
    myopic = json.loads((out / "ifeval_interpolation_myopic2_summary.json").read_text())
    assert myopic["methods"]["bayesame-paper"]["ew_irmse"] == by_row["|A|=2 myopic"]["ours_interpolation"]


def test_the_printed_table(spied_configs, monkeypatch):
    rows = {r.key: r for r in TABLE2_ROWS}
    monkeypatch.setattr(tables, "TABLE2_ROWS", (rows["myopic-2"], rows["bayes-aipw"]))  # two rows: quicker
    r = run("reproduce", "table2", "--seeds", "1", "--targets", "2", "--datasets", "ifeval", "--workers", "1",
            "--no-progress")
    assert r.exit_code == 0, r.output
    assert "Table 2 — batch selection (App. B.1), EW-IRMSE, 50 % references, 2 targets; ours: 1 seeds" in r.stdout
    assert "bayesame-paper, myopic |A|=2 (pair)" in r.stdout and "bayes-aipw" in r.stdout
    assert "bayesame-paper-rs" not in r.stdout  # only the two rows asked for
    assert "extrap.: not in the paper; ours random: extrap. 1/1" in r.stdout
    assert ("ifeval: bayesame-paper's regime per seed (B ≥ N − N0: unique): interpolation 1/1 unique; "
            "extrapolation 0/1 unique") in r.stdout


def test_datasets_are_the_papers_and_the_continuous_sets():
    from activeeval.cli.backtest import _table2_datasets

    paper, continuous = _table2_datasets()
    assert paper == ("ifeval", "musr")
    assert "alpacaeval2" in continuous  # bundled; wmt21_* join it when the shared folder is found
    assert all(datasets.info(d).kind == "continuous" for d in continuous)


@pytest.mark.parametrize("flags, message", [
    (("--datasets", "gsm"), "error: --datasets: Table 2 rows exist for ifeval, musr; ours only on the continuous "
                            "sets alpacaeval2"),
    (("--datasets", " , "), "error: --datasets must name at least one dataset: Table 2 rows exist for ifeval, musr"),
    (("--seeds", "0"), "error: --seeds must be a positive integer, got 0"),
    (("--targets", "1"), "error: --targets must be an integer >= 2, got 1"),
    (("--workers", "0"), "error: --workers must be a positive integer, got 0"),
    (("--orders", "mixed"), "error: --orders must be 'shared' or 'independent', got 'mixed'"),
])
def test_bad_flags_are_refused_naming_the_flag(flags, message, spied_configs):
    r = run("reproduce", "table2", "--no-progress", *flags)
    assert r.exit_code == 2
    assert message in r.stderr
    assert spied_configs == []  # refused before anything ran


def test_bad_dataset_names_the_value():
    r = run("reproduce", "table2", "--datasets", "ifeval,gsm")
    assert r.exit_code == 2 and r.stderr.rstrip().endswith("got 'gsm'")

