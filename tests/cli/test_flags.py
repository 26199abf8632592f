"""Every Python-only option has a flag (issue 10, items 3-5): method specs, reference read options,
missing-score policy, settings changes on resume, defaults of a plain install, and what the CLI says."""

from __future__ import annotations

import builtins
import json
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.session import Session

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def _matrix(n_models: int = 12, n_items: int = 40, seed: int = 0, scale: float = 1.0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-(rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)))))
    scores = np.round(np.clip(p + 0.1 * rng.normal(size=p.shape), 0, 1) * scale, 3)
    return ScoreMatrix(scores, [f"m{j}" for j in range(n_models)], [f"q{i}" for i in range(n_items)],
                       score_range=(0.0, scale), name="toy")


@pytest.fixture()
def chrf_file(tmp_path: Path) -> Path:
    """Scores on the chrF scale [0, 100]: outside the default (0, 1) range."""
    return write_scores(_matrix(scale=100.0), tmp_path / "chrf.csv")


@pytest.fixture()
def dup_file(tmp_path: Path) -> Path:
    """A wide file that repeats one model's row identically, as leaderboard exports do."""
    m = _matrix()
    path = write_scores(m, tmp_path / "dup.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines, lines[1]]) + "\n")
    return path


@pytest.fixture()
def holes_file(tmp_path: Path) -> Path:
    """Reference scores with holes in two items."""
    m = _matrix()
    scores = np.array(m.scores)
    scores[1, 3] = scores[2, 5] = np.nan
    return write_scores(ScoreMatrix(scores, m.model_ids, m.item_ids, name="holes"), tmp_path / "holes.csv")


# ------------------------------------------------------------ item 3: flags
def test_session_new_takes_a_bracket_method_spec(tmp_path, chrf_file) -> None:
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", chrf_file, "--score-range", 0, 100,
               "--method", "bayesame-paper[noise=learned,refit_every=5]", "--seed", 1)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"created {f}: method bayesame-paper[noise=learned,refit_every=5], reference 'chrf'")
    with Session.open(f) as s:
        assert s.settings["method_kwargs"]["noise"] == "learned" and s.method.noise == "learned"
        assert s.reference.score_range == (0.0, 100.0)
        (a,) = s.ask(1)
        assert s.tell(a.item_id, 57.5) is True  # a chrF score is valid on this scale


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bayesame-paper[nosie=learned]", "error: method 'bayesame-paper[nosie=learned]': bayesame-paper has no "
                                          "option 'nosie' (did you mean 'noise'?); its options are: "),
        ("bayesame[seed=3]", "error: method 'bayesame[seed=3]': 'seed' is set by the session; use --seed "
                             "instead"),
        ("bayesame[epsilon2=0.1]", "error: method 'bayesame[epsilon2=0.1]': 'epsilon2' is set by the session; use "
                                   "--epsilon2 instead"),
        ("bayesam", "error: unknown method 'bayesam' (did you mean 'bayesame'?); choose one of: "),
        ("bayesame-paper[noise=learned", "error: cannot read the method 'bayesame-paper[noise=learned'"),
    ],
)
def test_bad_method_specs_are_refused_with_the_flag(tmp_path, chrf_file, spec, message) -> None:
    for args in (("session", "new", tmp_path / "s.aeval", "--reference", chrf_file),
                 ("run", "--session", tmp_path / "s.aeval", "--reference", chrf_file, "--scorer", "echo {item_id}")):
        r = invoke(*args, "--score-range", 0, 100, "--method", spec)
        assert r.exit_code == 2, r.output
        assert r.stderr.startswith(message), r.stderr
        assert not (tmp_path / "s.aeval").exists()


def test_score_range_and_kind_flags(tmp_path, chrf_file) -> None:
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", chrf_file)
    assert r.exit_code == 2
    assert "outside the score range [0, 1]" in r.stderr and "pass --score-range LOW HIGH" in r.stderr
    assert "score_range=" not in r.stderr  # a command-line user gets the flag, not the Python keyword
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", chrf_file, "--score-range", 100, 0)
    assert r.exit_code == 2 and r.stderr == "error: --score-range LOW HIGH needs low < high, got 100 0\n"
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", chrf_file, "--score-range", 0, 100,
               "--kind", "binary")
    assert r.exit_code == 2 and "--kind binary but a score is" in r.stderr and "(use --kind continuous)" in r.stderr
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", chrf_file, "--kind", "ordinal")
    assert r.exit_code == 2 and r.stderr == "error: --kind must be 'binary' or 'continuous', got 'ordinal'\n"
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", "ifeval", "--kind", "continuous")
    assert r.exit_code == 2
    assert r.stderr == ("error: --kind only apply to a score file; 'ifeval' is a bundled dataset whose kind "
                        "and score range come from its catalog: drop them, or give a score file\n")
    # the read options are stored: reopening reads the file the same way
    assert invoke("session", "new", tmp_path / "b.aeval", "--reference", chrf_file, "--score-range", 0, 100,
                  "--kind", "continuous").exit_code == 0
    r = invoke("session", "status", tmp_path / "b.aeval", "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["n_items"] == 40


def test_duplicate_models_flag(tmp_path, dup_file) -> None:
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", dup_file)
    assert r.exit_code == 2 and "model id 'm0' appears in 2 rows" in r.stderr
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", dup_file, "--duplicate-models", "drop-identical")
    assert r.exit_code == 0 and "(12 models x 40 items)" in r.stdout
    r = invoke("session", "new", tmp_path / "b.aeval", "--reference", dup_file, "--duplicate-models", "keep")
    assert r.exit_code == 2
    assert r.stderr == ("error: --duplicate-models must be 'error' or 'drop-identical', "
                        "got 'keep'\n")
    r = invoke("backtest", "--dataset", dup_file, "--duplicate-models", "drop-identical", "--methods", "rs-mean",
               "--targets", 3, "--seeds", 1, "--workers", 1, "--no-progress", "--json")
    assert r.exit_code == 0, r.output


def test_missing_flag(tmp_path, holes_file) -> None:
    r = invoke("session", "new", tmp_path / "a.aeval", "--reference", holes_file)
    assert r.exit_code == 0 and "note: 2 missing reference score(s): dropped 2 model(s) with missing scores (m1, m2)" \
        in r.stderr
    r = invoke("session", "new", tmp_path / "b.aeval", "--reference", holes_file, "--missing", "items")
    assert r.exit_code == 0 and "dropped 2 item(s) with missing scores (q3, q5)" in r.stderr
    r = invoke("session", "status", tmp_path / "b.aeval", "--json")
    assert json.loads(r.stdout)["n_items"] == 38
    r = invoke("session", "new", tmp_path / "c.aeval", "--reference", holes_file, "--missing", "rows")
    assert r.exit_code == 2 and r.stderr == "error: --missing must be 'models' or 'items', got 'rows'\n"
    r = invoke("demo", "--dataset", holes_file, "--missing", "items", "--max-items", 5, "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["n_items"] == 38


def test_demo_and_backtest_take_method_specs(tmp_path, chrf_file) -> None:
    r = invoke("demo", "--dataset", chrf_file, "--score-range", 0, 100, "--method", "bayesame-paper[noise=learned]",
               "--max-items", 8, "--json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert (out["method"], out["n_used"]) == ("bayesame-paper[noise=learned]", 8)
    r = invoke("demo", "--dataset", chrf_file, "--score-range", 0, 100, "--method", "rs-mean", "--max-items", 8,
               "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["regime"] is None
    r = invoke("demo", "--method", "rs-mean[noise=learned]")
    assert r.exit_code == 2 and "rs-mean has no option 'noise'" in r.stderr
    r = invoke("backtest", "--dataset", chrf_file, "--score-range", 0, 100, "--method",
               "rs-mean,proeval[noise_var=0.05]",
               "--targets", 3, "--seeds", 1, "--workers", 1, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.stdout)["methods"]) == {"rs-mean", "proeval[noise_var=0.05]"}


def test_stopping_rule_changes_on_resume_are_recorded(tmp_path, chrf_file) -> None:
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", chrf_file, "--score-range", 0, 100, "--max-items", 3, "--seed", 0)
    with Session.open(f) as s:
        for a in s.ask(3):
            s.tell(a.item_id, 50)
    assert "stop: yes (budget)" in invoke("session", "status", f).stdout
    r = invoke("session", "set", f, "--max-items", 5, "--epsilon2", 0.5)
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[:2] == ["changed epsilon2: 0.03 -> 0.5 (recorded in the journal)",
                                         "changed max-items: 3 -> 5 (recorded in the journal)"]
    assert "stop: no" in r.stdout
    r = invoke("session", "set", f, "--max-items", 5)
    assert r.stdout.startswith("nothing changed")
    r = invoke("session", "set", f, "--max-items", 0)
    assert r.exit_code == 2 and r.stderr == "error: --max-items must be a positive integer, got 0\n"
    r = invoke("session", "set", f)
    assert r.exit_code == 2 and r.stderr.startswith("error: give at least one of --epsilon1")
    hist = json.loads(invoke("session", "history", f, "--json").stdout)
    assert [e["settings"] for e in hist if e["kind"] == "set"] == [{"epsilon2": 0.5, "max_items": 5}]
    assert invoke("session", "history", f).stdout.count(" set  epsilon2=0.5, max_items=5") == 1
    with Session.open(f) as s:
        assert s.stopping_settings == {"epsilon1": 0.005, "epsilon2": 0.5, "window": 30, "max_items": 5}
        assert s.settings["stopping"]["max_items"] == 3  # the creation settings are never rewritten


# ------------------------------------------------------------ item 4: defaults
def test_backtest_format_defaults_to_csv_without_pyarrow(tmp_path, chrf_file, monkeypatch) -> None:
    import importlib.util

    from activeeval.cli import backtest

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    assert backtest.default_format() == "csv"
    r = invoke("backtest", "--dataset", chrf_file, "--score-range", 0, 100, "--methods", "rs-mean", "--targets", 3,
               "--seeds", 1, "--workers", 1, "--no-progress", "--no-plots", "--out", tmp_path / "out")
    assert r.exit_code == 0, r.output
    names = {p.name for p in (tmp_path / "out").iterdir()}
    assert {"runs.csv", "stops.csv"} <= names and not any(n.endswith(".parquet") for n in names)
    monkeypatch.undo()
    assert backtest.default_format() == "parquet"  # pyarrow is in the test extras


def test_backtest_without_seeds_prints_its_cost_first(chrf_file) -> None:
    r = invoke("backtest", "--dataset", chrf_file, "--score-range", 0, 100, "--methods", "rs-mean", "--targets", 3,
               "--workers", 1, "--no-progress", "--json")
    assert r.exit_code == 0, r.output
    line = r.stderr.splitlines()[0]
    assert re.fullmatch(
        r"backtest: 1 methods x 20 seeds \(--seeds default 20\), 3 targets each; estimated \d+ s \(one seed of each "
        r"method timed: [\d.]+ s CPU, slowest rs-mean [\d.]+ s\); --seeds 200 \(the paper's\) would take about .+",
        line,
    ), line
    assert invoke("backtest", "--dataset", chrf_file, "--seeds", 0).stderr == "error: --seeds must be a positive " \
        "integer, got 0\n"


def test_without_matplotlib_the_report_has_its_chart_and_a_backtest_its_results(tmp_path, chrf_file,
                                                                                 monkeypatch) -> None:
    """A plain install (issue 27, item 6): the report's chart is SVG of its own; a backtest writes its results and
    says why there are no PNG plots, instead of failing after the run."""
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", chrf_file, "--score-range", 0, 100, "--seed", 0, "--label", "my/model")
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "matplotlib", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    r = invoke("session", "report", f, "--out", tmp_path / "r.html")
    assert r.exit_code == 0 and r.stderr == "", r.output
    page = (tmp_path / "r.html").read_text()
    assert "<svg" in page and "target ε2 = 0.03" in page and "<title>activeeval report: my/model</title>" in page
    r = invoke("backtest", "--dataset", chrf_file, "--score-range", 0, 100, "--methods", "rs-mean", "--seeds", 1,
               "--targets", 2, "--out", tmp_path / "bt", "--format", "csv")
    assert r.exit_code == 0, r.output
    assert 'note: no plots: matplotlib is not installed (pip install "activeeval[plot]"); the results are written' \
        in r.stderr
    written = {p.name for p in (tmp_path / "bt").iterdir()}
    assert {"runs.csv", "stops.csv", "curves.csv", "summary.json"} <= written and not any(
        n.endswith(".png") for n in written)


# ------------------------------------------------------------ item 5: say what is happening
def test_status_shows_each_condition_against_its_threshold(tmp_path, chrf_file) -> None:
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", chrf_file, "--score-range", 0, 100, "--seed", 0, "--window", 5,
           "--epsilon2", 40)
    with Session.open(f) as s:
        for a in s.ask(3):
            s.tell(a.item_id, 40)
    r = invoke("session", "status", f)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert lines[1] == "stopping rule: stop when window, stability and width all hold, or the budget is reached"
    assert re.fullmatch(r"  window     items scored +3  >= window 5  not met", lines[2]), lines[2]
    assert re.fullmatch(r"  stability  R-hat range over the window +not yet  <= epsilon1 0.005  not met", lines[3])
    assert re.fullmatch(r"  width      95% interval width +[\d.]+  <= epsilon2 40  (met|not met)", lines[4]), lines[4]
    assert lines[5] == "  budget     none (set one with --max-items)"
    assert lines[6].startswith("waiting for: window, stability")
    st = json.loads(invoke("session", "status", f, "--json").stdout)
    assert [c["name"] for c in st["conditions"]] == ["window", "stability", "width"]
    assert st["conditions"][0] == {"rule": "precision", "name": "window", "value": 3.0, "threshold": 5.0, "met": False}
    assert st["waiting_for"][:2] == ["window", "stability"]
    assert st["stopping"] == {"epsilon1": 0.005, "epsilon2": 40.0, "window": 5, "max_items": None}


def test_status_says_when_the_interval_shown_is_clipped(tmp_path) -> None:
    """The width condition reads the normal interval (before clipping); the status says so where the interval it
    shows is narrower (one item scored: clipped at 1), and not where they agree."""
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", "ifeval", "--seed", 0, "--method", "rs-mean", "--no-forecast")
    with Session.open(f) as s:
        (a,) = s.ask(1)
        s.tell(a.item_id, 1)
    lines = invoke("session", "status", f).stdout.splitlines()
    st = json.loads(invoke("session", "status", f, "--json").stdout)
    width = next(c["value"] for c in st["conditions"] if c["name"] == "width")
    assert st["ci_high"] - st["ci_low"] < width - 1e-6 and st["clipped"]  # clipped at the top
    assert lines[-1] == (f"note: the width is the normal interval's ({width:.4f}); the interval shown, "
                         f"[{st['ci_low']:.4f}, {st['ci_high']:.4f}], is clipped to the scores the benchmark can still "
                         "reach")
    with Session.open(f) as s:
        for a in s.ask(60):
            s.tell(a.item_id, 1 if int(a.item_id[-3:]) % 2 else 0)
    lines = invoke("session", "status", f).stdout.splitlines()
    st = json.loads(invoke("session", "status", f, "--json").stdout)
    width = next(c["value"] for c in st["conditions"] if c["name"] == "width")
    assert abs((st["ci_high"] - st["ci_low"]) - width) < 1e-9 and not st["clipped"]  # near a half: nothing clipped
    assert not any(line.startswith("note: the width") for line in lines)


def test_record_from_records_only_handed_out_items(tmp_path, chrf_file) -> None:
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", chrf_file, "--score-range", 0, 100, "--seed", 0)
    asked = invoke("session", "next", f, "--k", 2).stdout.split()
    others = [f"q{i}" for i in range(40) if f"q{i}" not in asked][:3]
    rows = [*asked, *others, "not-an-item"]
    (tmp_path / "all.csv").write_text("item,score\n" + "".join(f"{i},50\n" for i in rows))
    r = invoke("session", "record", f, "--from", tmp_path / "all.csv")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0] == (
        f"recorded 2 score(s) from {tmp_path / 'all.csv'} (0 already recorded with the same score; skipped 4 not "
        "handed out by `next`, 1 of them not in the reference: record them too with --all)")
    with Session.open(f) as s:
        assert [i for i, _ in s.observations] == asked
    r = invoke("session", "record", f, "--from", tmp_path / "all.csv", "--all")
    assert r.exit_code == 2 and "unknown item 'not-an-item'" in r.stderr
    (tmp_path / "all.csv").write_text("item,score\n" + "".join(f"{i},50\n" for i in rows[:-1]))
    r = invoke("session", "record", f, "--from", tmp_path / "all.csv", "--all")
    assert r.stdout.startswith(f"recorded 3 score(s) from {tmp_path / 'all.csv'} (2 already recorded")
    r = invoke("session", "record", f, "q1", "1", "--all")
    assert r.exit_code == 2 and r.stderr == "error: --all goes with --from FILE\n"


def test_version_and_short_help() -> None:
    from activeeval import __version__

    r = invoke("--version")
    assert r.exit_code == 0 and r.stdout == f"activeeval {__version__}\n"
    for args in (["-h"], ["session", "-h"], ["session", "new", "-h"], ["run", "-h"], ["reference", "build", "-h"]):
        r = invoke(*args)
        assert r.exit_code == 0 and r.stdout.startswith("Usage: "), args


def _all_help() -> dict[str, str]:
    import typer.main

    out = {}
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str]) -> None:  # a click command (click comes with Typer; we do not import it)
        out[" ".join(path) or "activeeval"] = invoke(*path, "--help").stdout
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    return out


def test_help_texts_keep_brackets_name_no_private_files_and_show_defaults_one_way() -> None:
    helps = _all_help()
    assert len(helps) >= 15
    assert "'bayesame,bayesame[selection=random]'" in " ".join(helps["backtest"].split())
    assert "'bayesame[selection=random]'" in " ".join(helps["session new"].split())
    for name, text in helps.items():
        flat = " ".join(text.split())
        # files users lack (SPEC as a word: $INSPECT_LOG_DIR is no file)
        assert not re.search(r"\bSPEC\b", flat) and "../shared" not in flat and ".md" not in flat, name
        assert not re.search(r"\(default[: ]", flat), (name, re.findall(r"\(default[^)]*\)", flat))
        assert "(the default)" not in flat, name
