"""Harness adapters on small fixture files that follow the real formats.

Format sources (the fixtures under ``fixtures/`` copy their structure):

* lm-evaluation-harness ``--log_samples``: EleutherAI/lm-evaluation-harness,
  ``lm_eval/evaluator.py`` (the ``example`` dict: ``doc_id``, ``doc``,
  ``target``, ``arguments``, ``resps``, ``filtered_resps`` updated with the
  task's per-document metrics such as ``acc`` / ``exact_match``; newer
  versions add ``filter``, ``metrics``, ``doc_hash``, ``prompt_hash``,
  ``target_hash`` and write one line per document and filter) and
  ``lm_eval/loggers/evaluation_tracker.py`` (file names
  ``samples_<task>_<date_id>.jsonl`` and ``results_<date_id>.json`` under
  ``<output_path>/<model_name_sanitized>/``, ``arguments`` rewritten as
  ``{"gen_args_0": {"arg_0": ...}}``; ``model_name`` and ``config.model_args``
  in the results file). The ``gpt2`` fixture follows the older layout.
* HELM: stanford-crfm/helm, ``src/helm/benchmark/metrics/metric.py``
  (``PerInstanceStats``: ``instance_id``, ``perturbation``,
  ``train_trial_index``, ``stats``) and ``src/helm/benchmark/metrics/statistic.py``
  (``Stat``: ``name`` = ``MetricName(name, split, sub_split, perturbation)``,
  ``count``, ``sum``, ``sum_squared``, ``min``, ``max``, ``mean``,
  ``variance``, ``stddev``), written to ``per_instance_stats.json`` next to
  ``run_spec.json`` (``adapter_spec.model``) in each run folder.
* AlpacaEval: tatsu-lab/alpaca_eval, ``README.md`` (annotations records:
  ``instruction``, ``output_1``, ``generator_1``, ``output_2``,
  ``generator_2``, ``annotator``, ``preference``) and
  ``src/alpaca_eval/metrics/glm_winrate.py`` (``preference`` in [1, 2], 0 a
  tie counted as 1.5; win score = preference − 1).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from activeeval.data.adapters import (
    detect_format,
    read_alpaca_eval_annotations,
    read_helm_per_instance_stats,
    read_item_scores,
    read_lm_eval_samples,
    read_scores_any,
    reference_from_alpaca_eval,
    reference_from_helm,
    reference_from_lm_eval,
)
from activeeval.exceptions import ConfigurationError, DataFormatError, DuplicateIdError, InvalidScoresError

FIX = Path(__file__).parent / "fixtures"
LM = FIX / "lm_eval"
PYTHIA = LM / "EleutherAI__pythia-160m"
ARC = PYTHIA / "samples_arc_easy_2024-06-12T09-41-27.118306.jsonl"
GSM = PYTHIA / "samples_gsm8k_2024-06-12T09-41-27.118306.jsonl"


# ---------------------------------------------------------------- lm-eval
def test_lm_eval_samples_file() -> None:
    assert read_lm_eval_samples(ARC) == {"0": 1.0, "1": 0.0, "2": 1.0, "3": 1.0, "4": 0.0}
    assert read_lm_eval_samples(ARC, "acc_norm") == {"0": 1.0, "1": 0.0, "2": 0.0, "3": 1.0, "4": 0.0}


def test_lm_eval_folder_uses_newest_run_and_task_ids() -> None:
    # The 2024-01-01 re-run of arc_easy (all zeros) is superseded by the newer file.
    assert read_lm_eval_samples(PYTHIA, task="arc_easy")["0"] == 1.0
    both = read_lm_eval_samples(PYTHIA, "exact_match", task="gsm8k", filter="strict-match")
    assert both == {"0": 1.0, "1": 0.0, "2": 0.0}
    with pytest.raises(ConfigurationError, match=r"2 tasks found \(\['arc_easy', 'gsm8k'\]\)"):
        read_lm_eval_samples(PYTHIA, id_format="{doc_id}")


def test_lm_eval_filters_and_metric_errors() -> None:
    assert read_lm_eval_samples(GSM, "exact_match", filter="flexible-extract") == {"0": 1.0, "1": 1.0, "2": 0.0}
    with pytest.raises(DataFormatError, match=r"has several filters \['flexible-extract', 'strict-match'\]"):
        read_lm_eval_samples(GSM, "exact_match")
    with pytest.raises(DataFormatError, match="has no lines with filter 'none'"):
        read_lm_eval_samples(GSM, "exact_match", filter="none")
    with pytest.raises(DataFormatError,
                       match=r"has no metric 'exact_match' in any line; metrics present: \['acc', 'acc_norm'\]"):
        read_lm_eval_samples(ARC, "exact_match")


def test_lm_eval_bad_files(tmp_path) -> None:
    f = tmp_path / "samples_x_2024-01-01T00-00-00.jsonl"
    f.write_text('{"doc_id": 0, "acc": 1}\n{"doc_id": 0, "acc": 0}\n')
    with pytest.raises(DuplicateIdError, match="line 2: doc_id 0 appears twice"):
        read_lm_eval_samples(f)
    f.write_text('{"doc_id": 0, "acc": 1}\nnot json\n')
    with pytest.raises(DataFormatError, match="line 2 is not valid JSON"):
        read_lm_eval_samples(f)
    f.write_text('{"id": 0, "acc": 1}\n')
    with pytest.raises(DataFormatError, match="line 1 has no 'doc_id'; is this an lm-eval samples file"):
        read_lm_eval_samples(f)
    f.write_text('{"doc_id": 0, "acc": "yes"}\n')
    with pytest.raises(InvalidScoresError, match=r"doc_id 0, acc\): score 'yes' is not a number"):
        read_lm_eval_samples(f)
    f.write_text('{"doc_id": 0, "acc": true}\n{"doc_id": 1, "acc": false}\n')
    assert read_lm_eval_samples(f) == {"0": 1.0, "1": 0.0}
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataFormatError, match="no samples_<task>_<timestamp>.jsonl files under"):
        read_lm_eval_samples(tmp_path / "empty")


def test_reference_from_lm_eval() -> None:
    m = reference_from_lm_eval([PYTHIA, LM / "gpt2"], "arc_easy")
    assert m.model_ids == ("EleutherAI/pythia-160m", "gpt2")  # model_name, then model_args pretrained=
    assert m.item_ids == ("0", "1", "2", "3", "4")
    assert m.kind == "binary" and m.name == "arc_easy"
    np.testing.assert_array_equal(m.scores[0], [1, 0, 1, 1, 0])
    np.testing.assert_array_equal(m.scores[1, :4], [0, 1, 0, 1])
    assert math.isnan(m.scores[1, 4])  # gpt2 has no line for doc 4: missing, not zero


# -------------------------------------------------------------------- HELM
def test_helm_per_instance_stats() -> None:
    run = FIX / "helm" / "run_gpt2"
    # Perturbed entries and perturbed stats are ignored; id14 averages its two train trials.
    assert read_helm_per_instance_stats(run) == {"id12": 1.0, "id13": 0.0, "id14": 0.5, "id15": 1.0}
    assert read_helm_per_instance_stats(run / "per_instance_stats.json", "quasi_exact_match")["id14"] == 0.5
    with pytest.raises(DataFormatError, match=r"has no unperturbed stat 'f1_score'; stats present: \['exact_match'"):
        read_helm_per_instance_stats(run, "f1_score")
    with pytest.raises(DataFormatError, match="for split 'valid'"):
        read_helm_per_instance_stats(run, split="valid")


def test_helm_reference_and_model_names(tmp_path) -> None:
    m = reference_from_helm([FIX / "helm" / "run_gpt2", FIX / "helm" / "run_llama"])
    assert m.model_ids == ("openai/gpt2", "meta/llama-7b")
    assert m.item_ids == ("id12", "id13", "id14", "id15")
    assert m.kind == "continuous"  # id14 averages two trials to 0.5
    # Without run_spec.json the model comes from the run folder's name.
    d = tmp_path / "mmlu_subject=anatomy,method=multiple_choice_joint,model=openai_gpt2"
    shutil.copytree(FIX / "helm" / "run_gpt2", d)
    (d / "run_spec.json").unlink()
    assert reference_from_helm([d]).model_ids == ("openai_gpt2",)


def test_helm_bad_files(tmp_path) -> None:
    f = tmp_path / "per_instance_stats.json"
    f.write_text(json.dumps({"not": "a list"}))
    with pytest.raises(DataFormatError, match="is not a HELM per_instance_stats.json"):
        read_helm_per_instance_stats(f)
    f.write_text(json.dumps([{"instance_id": "a"}]))
    with pytest.raises(DataFormatError, match="entry 0 has no instance_id/stats"):
        read_helm_per_instance_stats(f)
    (tmp_path / "x").mkdir()
    with pytest.raises(DataFormatError, match="no per_instance_stats.json in HELM run folder"):
        read_helm_per_instance_stats(tmp_path / "x")


# -------------------------------------------------------------- AlpacaEval
def test_alpaca_eval_annotations() -> None:
    scores = read_alpaca_eval_annotations(FIX / "alpaca_eval" / "my-model" / "annotations.json")
    # 1 -> 0 (baseline wins), 2 -> 1, weighted 1.7312 -> 0.7312, 0 (tie) -> 0.5, null (failed) left out.
    assert scores == pytest.approx({"item000": 0.0, "item001": 1.0, "item002": 0.7312, "item003": 0.5})
    by_text = read_alpaca_eval_annotations(FIX / "alpaca_eval" / "my-model" / "annotations.json", id_by="instruction")
    assert list(by_text)[:2] == ["Instruction number 0", "Instruction number 1"]


def test_alpaca_eval_reference_and_errors(tmp_path) -> None:
    m = reference_from_alpaca_eval(
        [FIX / "alpaca_eval" / "my-model" / "annotations.json", FIX / "alpaca_eval" / "other-model" / "annotations.json"]
    )
    assert m.model_ids == ("my-model", "other-model") and m.kind == "continuous"
    assert m.item_ids == ("item000", "item001", "item002", "item003", "item004")
    assert math.isnan(m.scores[0, 4])
    np.testing.assert_allclose(m.scores[1], [1.0, 0.0, 0.25, 0.5, 0.9])
    f = tmp_path / "annotations.json"
    f.write_text(json.dumps([{"instruction": "x", "generator_2": "g", "preference": 2.5}]))
    with pytest.raises(InvalidScoresError, match=r"preference 2.5 is outside \[1, 2\] \(and is not 0, a tie\)"):
        read_alpaca_eval_annotations(f)
    f.write_text(json.dumps([{"instruction": "x", "output_1": "a"}]))
    with pytest.raises(DataFormatError, match="record 0 has no 'instruction'/'preference'"):
        read_alpaca_eval_annotations(f)
    f.write_text(json.dumps([{"instruction": "x", "generator_2": g, "preference": 1} for g in ("a", "b")]))
    with pytest.raises(DataFormatError, match=r"several models \['a', 'b'\]; choose one with generator="):
        read_alpaca_eval_annotations(f)
    assert read_alpaca_eval_annotations(f, generator="b") == {"item000": 0.0}


# ------------------------------------------------------------------- plain
def test_plain_files(tmp_path) -> None:
    (tmp_path / "a.csv").write_text("Item_ID,Score\nq1,1\nq2,0.25\nq3,1e0\n")
    assert read_item_scores(tmp_path / "a.csv") == {"q1": 1.0, "q2": 0.25, "q3": 1.0}
    (tmp_path / "b.jsonl").write_text('{"doc_id": 7, "correct": 0}\n{"doc_id": 8, "correct": 1}\n')
    assert read_item_scores(tmp_path / "b.jsonl") == {"7": 0.0, "8": 1.0}
    (tmp_path / "semi.csv").write_text("item;score\nq1;1\nq2;0.5\n")  # a spreadsheet's semicolons
    assert read_item_scores(tmp_path / "semi.csv") == {"q1": 1.0, "q2": 0.5}
    for name, text, message in [
        ("t.csv", "item,score\nq1,true\n", r"score 'true' of item 'q1' \(data row 1, column 'score'\) is a boolean"),
        ("t.jsonl", '{"item": "q1", "score": false}\n',
         r"score false of item 'q1' \(line 1, column 'score'\) is a boolean \(false\), not a score: write 1"),
        ("l.jsonl", '\n{"item": "q1", "score": [1]}\n',
         r"score \[1\] of item 'q1' \(line 2, column 'score'\) is a list"),
        ("u.csv", "item,score\nq1,1_0\n", r"score '1_0' .* is not a number \(digit separators"),
    ]:
        (tmp_path / name).write_text(text)
        with pytest.raises(InvalidScoresError, match=message):
            read_item_scores(tmp_path / name)
    (tmp_path / "o.jsonl").write_text('{"item": {"id": "q1"}, "score": 1}\n')
    with pytest.raises(DataFormatError, match=r"item id \{'id': 'q1'\} in line 1, column 'item', is an object"):
        read_item_scores(tmp_path / "o.jsonl")
    (tmp_path / "c.csv").write_text("id,s\nq1,1\n")
    with pytest.raises(DataFormatError, match=r"has no item column \(looked for .*\); columns: \['id', 's'\]"):
        read_item_scores(tmp_path / "c.csv")
    assert read_item_scores(tmp_path / "c.csv", item_column="id", score_column="s") == {"q1": 1.0}
    (tmp_path / "d.csv").write_text("item,score\nq1,1\nq1,0\n")
    with pytest.raises(DuplicateIdError, match=r"item 'q1' appears twice \(data row 1 and data row 2\)"):
        read_item_scores(tmp_path / "d.csv")
    (tmp_path / "e.csv").write_text("item,score\nq1,\n")
    with pytest.raises(InvalidScoresError, match=r"no score for item 'q1' \(data row 1, column 'score'\)"):
        read_item_scores(tmp_path / "e.csv")


def test_plain_parquet(tmp_path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    pd.DataFrame({"item": ["a", "b"], "score": [0.5, 1.0]}).to_parquet(tmp_path / "s.parquet")
    assert read_item_scores(tmp_path / "s.parquet") == {"a": 0.5, "b": 1.0}


def test_detect_format_and_dispatch() -> None:
    assert detect_format(ARC) == "lm-eval"
    assert detect_format(PYTHIA) == "lm-eval"
    assert detect_format(FIX / "helm" / "run_gpt2") == "helm"
    assert detect_format(FIX / "helm" / "run_gpt2" / "per_instance_stats.json") == "helm"
    assert detect_format(FIX / "alpaca_eval" / "my-model" / "annotations.json") == "alpaca-eval"
    assert detect_format("scores.csv") == "plain"
    assert read_scores_any(ARC, metric="acc_norm", task=None)["2"] == 0.0
    with pytest.raises(ConfigurationError, match=r"option\(s\) \['split'\] do not apply to format 'lm-eval'"):
        read_scores_any(ARC, split="test")
    with pytest.raises(ConfigurationError, match="unknown score file format 'lm_eval'"):
        read_scores_any(ARC, "lm_eval")


def test_cli_records_harness_output_into_a_session(tmp_path) -> None:
    """End to end: HELM runs of two models as the reference, a third run recorded with --from."""
    from typer.testing import CliRunner

    from activeeval.cli import app
    from activeeval.data.io import write_scores

    ref = write_scores(reference_from_helm([FIX / "helm" / "run_gpt2", FIX / "helm" / "run_llama"]), tmp_path / "r.csv")
    runner = CliRunner()
    f = tmp_path / "s.aeval"
    assert runner.invoke(app, ["session", "new", str(f), "--reference", str(ref), "--method", "rs-mean"]).exit_code == 0
    r = runner.invoke(app, ["session", "record", str(f), "--from", str(FIX / "helm" / "run_llama")])
    assert r.exit_code == 0 and "recorded 0 score(s)" in r.stdout and "skipped 4 not handed out" in r.stdout
    r = runner.invoke(app, ["session", "record", str(f), "--from", str(FIX / "helm" / "run_llama"), "--all"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("recorded 4 score(s) from")
    status = json.loads(runner.invoke(app, ["session", "status", str(f), "--json"]).stdout)
    assert status["estimate"] == pytest.approx(0.5) and status["stop"] is True  # all 4 items: exact
    r = runner.invoke(app, ["session", "record", str(f), "--from", str(ARC), "--metric", "acc", "--all"])
    assert r.exit_code == 2 and "unknown item '0'" in r.stderr


def test_cli_reference_build_from_helm_and_alpaca_eval(tmp_path) -> None:
    """`activeeval reference build --from helm|alpaca-eval` writes the matrix the Python readers build."""
    from typer.testing import CliRunner

    from activeeval.cli import app
    from activeeval.data.io import read_scores

    runner = CliRunner()
    runs = [str(FIX / "helm" / "run_gpt2"), str(FIX / "helm" / "run_llama")]
    out = tmp_path / "helm.csv"
    r = runner.invoke(app, ["reference", "build", "--from", "helm", *runs, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"wrote {out}: 2 models x 4 items")
    assert r.stdout.rstrip().endswith("(HELM metric exact_match; item ids are its instance ids)")
    expected = reference_from_helm(runs)
    got = read_scores(out)
    assert got.model_ids == expected.model_ids and got.item_ids == expected.item_ids
    assert (got.scores == expected.scores).all()
    files = [str(p) for p in sorted((FIX / "alpaca_eval").glob("*/annotations.json"))]
    out2 = tmp_path / "ae.csv"
    r = runner.invoke(app, ["reference", "build", "--from", "alpaca-eval", *files, "--out", str(out2)])
    assert r.exit_code == 0, r.output
    assert "(AlpacaEval win probabilities; item ids by index)" in r.stdout
    out2_items = read_scores(out2).n_items
    r = runner.invoke(app, ["reference", "build", "--from", "helm", *runs, "--out", str(out)])
    assert r.exit_code == 2 and r.stderr == (
        f"error: --out {str(out)!r} exists; pass --force to overwrite it, or choose another path\n")
    before = out.read_bytes()
    r = runner.invoke(app, ["reference", "build", "--from", "alpaca-eval", *files, "--out", files[0], "--force"])
    assert r.exit_code == 2 and "a file this command reads; refusing to write over it even with --force" in r.stderr
    r = runner.invoke(app, ["reference", "build", "--from", "alpaca-eval", *files, "--out", str(out), "--force"])
    assert r.exit_code == 0 and out.read_bytes() != before and read_scores(out).n_items == out2_items
    r = runner.invoke(app, ["reference", "build", "--from", "helm", *runs, "--task", "x", "--out", str(tmp_path / "a.csv")])
    assert r.exit_code == 2 and r.stderr == "error: --task do not apply to --from helm (it takes --metric, --split)\n"
    r = runner.invoke(app, ["reference", "build", "--from", "lm-eval", runs[0], "--out", str(tmp_path / "b.csv")])
    assert r.exit_code == 2 and r.stderr.startswith("error: --from lm-eval needs --task")
    r = runner.invoke(app, ["reference", "build", "--from", "openai", runs[0], "--out", str(tmp_path / "c.csv")])
    assert r.exit_code == 2
    assert r.stderr == "error: --from must be one of lm-eval, helm, alpaca-eval, inspect, got 'openai'\n"
