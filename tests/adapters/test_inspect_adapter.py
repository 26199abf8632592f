"""The pure parts of the Inspect adapter and driver: score values, epochs, errors, sample-id selectors.

Reading real ``.eval``/``.json`` logs and running Inspect is tested end to end
in tests/integration/test_inspect_e2e.py; these need no Inspect installed.
"""

from __future__ import annotations

import math
from fnmatch import fnmatch

import pytest

from activeeval.data.adapters.inspect_eval import (
    SampleScores,
    parse_value_map,
    scores_from_samples,
    to_number,
)
from activeeval.exceptions import ConfigurationError, DataFormatError, InvalidScoresError
from activeeval.session.drivers.inspect_harness import _key, _selector, _value, parse_args


@pytest.mark.parametrize(("value", "number"), [
    ("C", 1.0), ("I", 0.0), ("P", 0.5), ("N", 0.0), ("yes", 1.0), ("False", 0.0), ("0.25", 0.25), (True, 1.0),
    (False, 0.0), (3, 3.0), (0.75, 0.75),
])
def test_values_map_as_inspect_maps_them(value, number) -> None:
    assert to_number(value, "here") == number


def test_value_map_overrides_and_unknown_strings_name_the_fix() -> None:
    assert to_number("P", "here", {"P": 0.0}) == 0.0
    assert to_number("A", "here", {"A": 0.25}) == 0.25
    with pytest.raises(InvalidScoresError, match=r"score value 'maybe' is not a number nor one of C, P, I, N; give it "
                                                 r"a number with value_map='maybe=1'"):
        to_number("maybe", "here")
    for bad in (math.nan, math.inf, None, [1, 0]):
        with pytest.raises(InvalidScoresError, match="is not a number"):
            to_number(bad, "here")


def test_a_scorer_with_several_values_needs_a_key() -> None:
    value = {"grade": "C", "length": 0.3}
    assert to_number(value, "here", key="grade") == 1.0
    assert to_number(value, "here", key="length") == 0.3
    with pytest.raises(InvalidScoresError, match=r"several values \['grade', 'length'\]; choose one with "
                                                 r"score_name='SCORER/KEY'"):
        to_number(value, "here")
    with pytest.raises(InvalidScoresError, match="has no value 'f1'"):
        to_number(value, "here", key="f1")
    with pytest.raises(InvalidScoresError, match="drop '/grade' from score_name="):
        to_number("C", "here", key="grade")


def test_parse_value_map() -> None:
    assert parse_value_map("P=0, N = 0.5") == {"P": 0.0, "N": 0.5}
    assert parse_value_map({"P": 1}) == {"P": 1.0}
    assert parse_value_map(None) == {}
    for bad in ("P", "=1", "P=x", "P=nan"):
        with pytest.raises(ConfigurationError, match="value_map="):
            parse_value_map(bad)


def test_scores_average_epochs_and_keep_failures_apart() -> None:
    rows = [SampleScores("a", 1, {"match": "C"}), SampleScores("a", 2, {"match": "I"}),
            SampleScores(7, 1, {"match": 1}), SampleScores(7, 2, {"match": "P"}),
            SampleScores("b", 1, {"match": "C"}), SampleScores("b", 2, {}, error="RuntimeError('boom')"),
            SampleScores("c", 1, {}, error="timeout")]
    scores, errors = scores_from_samples(rows, "log")
    assert scores == {"a": 0.5, "7": 0.75}  # sample ids as text; one failed epoch makes the sample a failure
    assert errors == {"b": "RuntimeError('boom')", "c": "timeout"}


def test_the_scorer_is_chosen_when_there_are_several() -> None:
    rows = [SampleScores("a", 1, {"match": "C", "judge": 0.4})]
    with pytest.raises(DataFormatError, match=r"has the scorers \['judge', 'match'\]; choose one with score_name"):
        scores_from_samples(rows, "log")
    assert scores_from_samples(rows, "log", "judge") == ({"a": 0.4}, {})
    with pytest.raises(DataFormatError, match=r"has no scorer 'f1'; scorers present: \['judge', 'match'\]"):
        scores_from_samples(rows, "log", "f1")


def test_selectors_match_exactly_the_sample_asked_for() -> None:
    """Inspect matches sample ids with fnmatch on its normalised form (digit strings as numbers)."""
    def normalise(x):
        if isinstance(x, str) and x.isdigit():
            x = int(x)
        return x if isinstance(x, str) else str(x).zfill(20)

    ids = ["q[1]", "q1", "a*b", "aXb", "what?", "whatX", 7, "007x"]
    for asked in ids:
        hits = [i for i in ids if fnmatch(normalise(i), normalise(_selector(str(asked))))]
        assert hits == [asked]
    assert _key(7) == _key("7") == _key("007") == "7" and _key("q7") == "q7"


def test_key_value_arguments() -> None:
    assert parse_args(["temperature=0", "max-tokens=12", "stop=a,b"], "model_args") == {
        "temperature": "0", "max_tokens": "12", "stop": "a,b"}
    assert [_value(v) for v in ("0", "12", "a,b", "true", "{model}x", "text")] == [0, 12, ["a", "b"], True,
                                                                                    "{model}x", "text"]
    with pytest.raises(ConfigurationError, match=r"task_args= takes KEY=VALUE, got 'n' \(e.g. task_args="):
        parse_args(["n"], "task_args")


def test_a_logs_samples_are_read_in_the_tasks_dataset_order(monkeypatch, tmp_path) -> None:
    """Inspect writes samples as they finish (concurrently: any order); the reference's items follow the task's
    dataset order, so the same logs give the same item order and fingerprint every time (a test of real logs
    failed now and then on it)."""
    from types import SimpleNamespace

    from activeeval.data.adapters import inspect_eval

    def sample(i: str, epoch: int) -> SimpleNamespace:
        return SimpleNamespace(id=i, epoch=epoch, scores={"match": SimpleNamespace(value="C")}, error=None)

    finished = [sample("q10", 1), sample("q2", 2), sample("q0", 1), sample("q2", 1), sample("extra", 1)]
    header = SimpleNamespace(eval=SimpleNamespace(task="quiz", model="m", created="2026",
                                                  dataset=SimpleNamespace(sample_ids=["q0", "q2", "q10"])))
    fake = SimpleNamespace(read_eval_log=lambda path, header_only: header,
                           read_eval_log_sample_summaries=lambda path: finished)
    monkeypatch.setattr(inspect_eval, "import_inspect_log", lambda: fake)
    log = inspect_eval._read_log(tmp_path / "x.eval")
    assert [(s.id, s.epoch) for s in log.samples] == [("q0", 1), ("q2", 1), ("q2", 2), ("q10", 1), ("extra", 1)]
