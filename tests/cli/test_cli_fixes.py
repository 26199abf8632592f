"""Every CLI error names a CLI fix (issue 27, item 7).

Two walks. The static one reads every ``raise`` of the library (its message as
written, formatted values left as ``{}``), turns it into what the command
line prints (:func:`activeeval.cli.common.cli_message`), and fails on a Python
spelling: a keyword of the public Python API (``score_range=``,
``duplicate_models='drop_identical'``, ``overwrite=True``) or a Python call
(``Session.create(...)``, ``.dropna()``, ``(see .model_ids)``). Method options
are not Python spellings: a CLI user writes them too, in ``--method
'bayesame-paper[likelihood=logit]'``. The dynamic walk runs commands whose
messages are put together from several pieces (a hint in a variable, a
wrapped error) and checks what they print.

A raise that the command line cannot reach may keep its Python spelling; each
is listed in :data:`PYTHON_ONLY` with the reason.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import activeeval
from activeeval.cli import app
from activeeval.cli.common import cli_message
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix

SOURCE = Path(activeeval.__file__).parent
runner = CliRunner()


def _api_keywords() -> set[str]:
    """Keyword parameters of the public Python API, minus the methods' options (CLI syntax in --method)."""
    from activeeval import datasets
    from activeeval.data import adapters, io
    from activeeval.experiments import multi_target, protocol, simulate
    from activeeval.experiments import runner as bt_runner
    from activeeval.methods.registry import method_names, method_parameters
    from activeeval.session import Session, report
    from activeeval.session.drivers import runner as s_runner
    from activeeval.session.multi import MultiSession
    from activeeval.session.ranking import RankSession
    from activeeval.session.report import results

    api = [Session.create, Session.open, MultiSession.create, RankSession.create, io.read_scores, io.write_scores,
           datasets.load, datasets.resolve, adapters.read_scores_any, adapters.reference_from_lm_eval,
           adapters.reference_from_helm, adapters.reference_from_alpaca_eval, adapters.reference_from_inspect,
           report.write_report, results.write_results, protocol.BacktestConfig, multi_target.MultiTargetConfig,
           bt_runner.run_backtest, simulate.run_until_stop, s_runner.drive, s_runner.Scorer]
    names = {p for f in api for p in inspect.signature(f).parameters} - {"self", "args", "kwargs", "options"}
    method_options = {p for m in method_names() for p in method_parameters(m)}
    return (names - method_options) | {"overwrite", "score_range", "kind", "missing", "seed", "data_dir"}


KEYWORDS = _api_keywords()
KEYWORD_RE = re.compile(r"(?<![-\w.{\[,])(" + "|".join(sorted(KEYWORDS, key=len, reverse=True)) + r")=(?!=)")
CALL_RE = re.compile(r"[\w}]\.\w+\(|(?<![\w/`])\.\w+\(\)|\(see \.\w+\)")

# file:first words of the message -> why the command line cannot reach it (so it may keep its Python spelling)
PYTHON_ONLY = {
    "data/io.py:item_column and score_column only apply": "layout= is Python's; the CLI reads files with layout auto",
    "data/io.py:{}: JSON files are read as long": "layout= is Python's; the CLI never asks for a wide JSON file",
    "data/io.py:{}: JSON lines are always long": "layout= is Python's; the CLI never asks for a wide JSON file",
    "experiments/checkpoint.py:TaskStore.check(identity) must be called": "a programming error of the runner, which "
    "always checks the store first; no input reaches it",
    "experiments/multi_target.py:a multi-target backtest takes": "the CLI checks --multi-target's flags first",
    "experiments/multi_target.py:correlation={} contradicts": "the CLI builds the config with one correlation",
    "experiments/ranking_eval.py:the joint method {} ranks given": "the rank backtest always passes the models",
    "experiments/simulate.py:rule must be a stopping rule": "the CLI passes rules it built",
    "methods/base.py:reference must be a ScoreMatrix": "the CLI builds every method on a matrix it read",
    "methods/multi.py:pass seed= to the multi-target method": "sessions refuse seed in --method brackets first",
}


def _template(node: ast.AST) -> str | None:
    """A message as written: f-string values become ``{}``, the branches of ``a if c else b`` are joined."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template(node.left), _template(node.right)
        return None if left is None and right is None else (left or "{}") + (right or "{}")
    if isinstance(node, ast.IfExp):
        return " | ".join(t for t in (_template(node.body), _template(node.orelse)) if t)
    return None


def raise_sites() -> list[tuple[str, int, str]]:
    """(module, line, message template) of every raise of an exception built with a message."""
    out = []
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
                text = _template(node.exc.args[0])
                if text:
                    out.append((path.relative_to(SOURCE).as_posix(), node.lineno, text))
    return out


def python_spellings(message: str) -> list[str]:
    return KEYWORD_RE.findall(message) + CALL_RE.findall(message)


def test_the_walk_finds_python_spellings() -> None:
    """The detector fails on the spellings the issue found, and passes their flags."""
    for text in ("pass duplicate_models='drop_identical'", "use kind='continuous'", "create one with Session.create()"
                 " first", "pass score_range=(low, high)", "call .dropna() to drop", "known models (see .model_ids)"):
        assert python_spellings(text), text
    for text in ("pass --duplicate-models drop-identical", "e.g. --method 'bayesame-paper[noise=learned]'",
                 "--model-args 'pretrained={model}'", "write key=value"):
        assert not python_spellings(text), text
    assert len(raise_sites()) > 400  # the walk reads the whole library


def test_every_raise_the_cli_can_reach_names_cli_fixes() -> None:
    offenders, allowed = [], set()
    for module, line, text in raise_sites():
        found = python_spellings(cli_message(ValueError(text.replace("{}", "X"))))  # a value where one is formatted
        if not found:
            continue
        key = next((k for k in PYTHON_ONLY if module == k.split(":")[0] and text.startswith(k.split(":", 1)[1])), None)
        if key is not None:
            allowed.add(key)
            continue
        offenders.append(f"{module}:{line}: {found}: {cli_message(ValueError(text.replace('{}', 'X')))[:160]}")
    assert offenders == [], "messages a CLI user would read with Python spellings:\n" + "\n".join(offenders)
    assert allowed == set(PYTHON_ONLY), f"stale entries of PYTHON_ONLY: {set(PYTHON_ONLY) - allowed}"


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    rng = np.random.default_rng(0)
    m = ScoreMatrix((rng.random((6, 30)) < 0.5).astype(float), [f"m{j}" for j in range(6)],
                    [f"q{i}" for i in range(30)], name="ref")
    ref = write_scores(m, tmp_path / "ref.csv")
    dup = tmp_path / "dup.csv"
    lines = ref.read_text().splitlines()
    dup.write_text("\n".join([*lines, lines[1]]) + "\n")
    wide = tmp_path / "wide.csv"
    wide.write_text("model,q0,q1,q2\na,0.5,0.25,1\nb,0,1,0.75\nc,1,0,0\n")
    big = tmp_path / "big.csv"
    big.write_text("model,q0,q1,q2\na,50,25,100\nb,0,100,75\nc,10,0,0\n")
    session = tmp_path / "s.aeval"
    assert invoke("session", "new", session, "--reference", ref, "--method", "rs-mean", "--seed", 0).exit_code == 0
    moved = tmp_path / "moved.aeval"
    assert invoke("session", "new", moved, "--reference", write_scores(m, tmp_path / "gone.csv"), "--method",
                  "rs-mean").exit_code == 0
    (tmp_path / "gone.csv").unlink()
    return {"ref": ref, "dup": dup, "wide": wide, "big": big, "session": session, "moved": moved,
            "dir": tmp_path}


CASES = {
    "repeated model": (["session", "new", "{dir}/a.aeval", "--reference", "{dup}"], "--duplicate-models"),
    "scores 0-100": (["session", "new", "{dir}/a.aeval", "--reference", "{big}"], "--score-range"),
    "binary kind, continuous scores": (["session", "new", "{dir}/a.aeval", "--reference", "{wide}", "--kind",
                                        "binary"], "--kind continuous"),
    "no such session": (["session", "status", "{dir}/none.aeval"], "activeeval session new"),
    "reference moved": (["session", "status", "{moved}"], "--reference"),
    "unknown item": (["session", "record", "{session}", "zz", "1"], "item"),
    "unknown target model": (["run", "--session", "{dir}/t.aeval", "--reference", "{ref}", "--target", "m77"],
                             "activeeval datasets --models"),
    "report over a file": (["session", "report", "{session}", "--out", "{ref}"], "choose another path"),
    "export over a file": (["session", "export", "{session}", "--out", "{wide}"], "--force"),
    "unknown method option": (["session", "new", "{dir}/a.aeval", "--reference", "{ref}", "--method",
                               "bayesame-paper[nosie=learned]"], "did you mean 'noise'"),
    "seed in brackets": (["session", "new", "{dir}/a.aeval", "--reference", "{ref}", "--method", "bayesame[seed=3]"],
                         "--seed"),
    "bad missing policy": (["session", "new", "{dir}/a.aeval", "--reference", "{ref}", "--missing", "rows"],
                           "--missing"),
    "bad stopping rule": (["session", "new", "{dir}/a.aeval", "--reference", "{ref}", "--epsilon2", "0"],
                          "--epsilon"),
    "prior weights on the default": (["session", "new", "{dir}/a.aeval", "--reference", "{ref}", "--prior-weights",
                                      "{ref}"], "--method bayesame-paper"),
    "read options on a dataset": (["session", "new", "{dir}/a.aeval", "--reference", "mmlu", "--kind", "binary"],
                                  "--kind"),
    "log samples without lm-eval": (["run", "--session", "{dir}/r.aeval", "--reference", "{ref}", "--scorer",
                                     "echo {{item_id}}", "--log-samples"], "--harness lm-eval"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_commands_print_flags_not_python(case: str, files: dict[str, Path]) -> None:
    args, flag = CASES[case]
    r = invoke(*(a.format(**files) for a in args))
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert flag in r.stderr, r.stderr
    assert python_spellings(r.stderr) == [], r.stderr
