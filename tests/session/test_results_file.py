"""The results file (issue 27, item 2): written when a session stops and on `session export`, valid against its
JSON Schema, self-describing, the same header as `session status --json`, never over a file it was not asked for."""

from __future__ import annotations

import json

import jsonschema
import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.exceptions import ConfigurationError
from activeeval.session import Session
from activeeval.session.multi import MultiSession
from activeeval.session.report.results import SCHEMA_VERSION, header, results, results_path, schema, write_results

runner = CliRunner()


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def validate(document: dict) -> None:
    jsonschema.Draft202012Validator.check_schema(schema())
    jsonschema.validate(document, schema(), cls=jsonschema.Draft202012Validator)


def _run(s, truth: dict[str, float]) -> None:
    while not s.status().stop:
        for a in s.ask(1):
            s.tell(a.item_id, truth[a.item_id])


def test_a_stopped_session_s_results_are_valid_and_describe_everything(tmp_path, math_ref_file, math_split) -> None:
    ref, truth = math_split
    with Session.create(tmp_path / "s.aeval", math_ref_file, method="rs-mean", max_items=7, seed=3, label="m",
                        exclude_models=[ref.model_ids[0]]) as s:
        _run(s, truth)
        doc = results(s, scorer={"command": "python score.py {item_id}"})
        observations = s.observations
    validate(doc)
    assert doc["schema_version"] == SCHEMA_VERSION and doc["stopped"] and doc["stop_reason"] == "budget"
    assert doc["method"] == {"name": "rs-mean", "spec": "rs-mean", "options": {}} and doc["seed"] == 3
    assert set(doc["activeeval"]["dependencies"]) >= {"numpy", "scipy", "pandas"}
    r = doc["reference"]
    assert r["n_models"] == ref.n_models - 1 and r["n_items"] == ref.n_items and len(r["fingerprint"]) == 64
    assert ref.model_ids[0] not in r["models"] and len(r["models"]) == ref.n_models - 1
    assert r["source"]["read"] == {"exclude_models": [ref.model_ids[0]]}
    assert doc["stopping_rule"] == {"epsilon1": 0.005, "epsilon2": 0.03, "window": 30, "max_items": 7, "level": 0.95}
    (res,) = doc["results"]
    assert res["model"] == "m" and res["n_used"] == 7 and res["ci_low"] <= res["estimate"] <= res["ci_high"]
    assert [(x["item_id"], x["score"]) for x in res["samples"]] == list(observations)  # every score, in order
    assert doc["scorer"] == {"command": "python score.py {item_id}"}


def test_a_multi_target_session_has_one_result_per_target(tmp_path, math_split) -> None:
    ref, truth = math_split
    with MultiSession.create(tmp_path / "m.aeval", ref, ["a", "b"], method="rs-mean", max_items=4, seed=0) as s:
        while not s.status().stop:
            for t, item in s.ask(2):
                s.tell(t, item, truth[item])
        doc = results(s)
    validate(doc)
    assert [r["model"] for r in doc["results"]] == ["a", "b"] and all(r["n_used"] == 4 for r in doc["results"])
    assert doc["session"]["kind"] == "multi" and doc["reference"]["source"] == {"type": "matrix", "name": "math"}


def test_the_results_file_is_replaced_only_by_the_same_session(tmp_path, math_split) -> None:
    ref, truth = math_split
    out = tmp_path / "r.json"
    with Session.create(tmp_path / "a.aeval", ref, method="rs-mean", max_items=3, seed=0) as a, \
            Session.create(tmp_path / "b.aeval", ref, method="rs-mean", max_items=3, seed=1) as b:
        _run(a, truth)
        write_results(a, out)
        first = out.read_text()
        a.change_settings(max_items=5)
        _run(a, truth)
        write_results(a, out)  # the same session's newer results replace its older ones
        assert json.loads(out.read_text())["results"][0]["n_used"] == 5 and out.read_text() != first
        with pytest.raises(ConfigurationError, match="exists; pass overwrite=True"):
            write_results(b, out)  # another session's results are not replaced unless asked
        write_results(b, out, overwrite=True)
        with pytest.raises(ConfigurationError, match="is a file this command reads"):
            write_results(b, tmp_path / "b.aeval", overwrite=True)  # never the session file itself


def test_status_json_carries_the_header_and_export_writes_the_file(tmp_path, math_ref_file) -> None:
    f = tmp_path / "s.aeval"
    assert invoke("session", "new", f, "--reference", math_ref_file, "--method", "rs-mean", "--seed", 2).exit_code == 0
    r = invoke("session", "status", f, "--json")
    assert r.exit_code == 0, r.output
    status = json.loads(r.stdout)
    with Session.open(f, readonly=True) as s:
        head = header(s)
    assert {k: status[k] for k in head} == json.loads(json.dumps(head))
    assert status["estimate"] is not None and status["stopping"]["epsilon2"] == 0.03  # the status as before
    r = invoke("session", "export", f)
    assert r.exit_code == 0, r.output
    doc = json.loads(results_path(f).read_text())
    validate(doc)
    assert r.stdout == f"wrote {results_path(f)}\n" and doc["stopped"] is False and doc["results"][0]["n_used"] == 0
    other = tmp_path / "notes.json"
    other.write_text("{}")
    r = invoke("session", "export", f, "--out", other)
    assert r.exit_code == 2 and r.stderr == (f"error: results file '{other}' exists; pass --force to overwrite it, or "
                                             "choose another path\n")
    assert other.read_text() == "{}"
    assert invoke("session", "export", f, "--out", other, "--force").exit_code == 0


def test_the_record_that_meets_the_stopping_rule_writes_the_results(tmp_path, math_ref_file, math_split) -> None:
    _, truth = math_split
    f = tmp_path / "s.aeval"
    assert invoke("session", "new", f, "--reference", math_ref_file, "--method", "rs-mean", "--max-items", 2,
                  "--seed", 0).exit_code == 0
    r = invoke("session", "next", f, "--k", 2)
    first, second = r.stdout.split()
    r = invoke("session", "record", f, first, truth[first])
    assert r.exit_code == 0 and "wrote" not in r.stdout and not results_path(f).exists()
    r = invoke("session", "record", f, second, truth[second])
    assert r.exit_code == 0 and r.stdout.endswith(f"wrote {results_path(f)} (the results: settings, estimate, "
                                                  "interval and every score)\n")
    validate(json.loads(results_path(f).read_text()))


def test_a_foreign_file_where_the_results_go_is_left_alone_with_a_note(tmp_path, math_ref_file, math_split) -> None:
    _, truth = math_split
    f = tmp_path / "s.aeval"
    results_path(f).write_text("mine")
    assert invoke("session", "new", f, "--reference", math_ref_file, "--method", "rs-mean", "--max-items", 1,
                  "--seed", 0).exit_code == 0
    item = invoke("session", "next", f).stdout.strip()
    r = invoke("session", "record", f, item, truth[item])
    assert r.exit_code == 0 and "stop: yes (budget)" in r.stdout
    assert "note: the stopping rule is met, but the results file was not written" in r.stderr
    assert "pass --force" in r.stderr and results_path(f).read_text() == "mine"


def test_a_ranking_session_has_no_results_file(tmp_path, math_split) -> None:
    from activeeval.session.ranking import RankSession

    ref, _ = math_split
    with RankSession.create(tmp_path / "r.aeval", ref, ["x", "y"], method="rs-mean", seed=0) as s:
        with pytest.raises(ConfigurationError, match="ranking session; results files are for evaluation sessions"):
            results(s)
