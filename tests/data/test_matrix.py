"""ScoreMatrix: validation messages, lookups, transformations, dropna, fingerprint."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from activeeval import datasets
from activeeval.data.matrix import DropReport, ScoreMatrix
from activeeval.exceptions import (
    ConfigurationError,
    DuplicateIdError,
    InvalidScoresError,
    MissingScoresError,
    ScoreOutOfRangeError,
    UnknownItemError,
    UnknownModelError,
)

NAN = float("nan")


def tiny(**kw: object) -> ScoreMatrix:
    """3 models x 4 items; m1 misses i2, m2 misses i0 and i2."""
    scores = [[1, 0, 1, 1], [0, 1, NAN, 1], [NAN, 1, NAN, 0]]
    return ScoreMatrix(scores, ["m0", "m1", "m2"], ["i0", "i1", "i2", "i3"], **kw)


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"scores": [["a", 1]]}, InvalidScoresError, r"score matrix 'x': scores are not numeric .*NaN for missing"),
        ({"scores": [1.0, 0.0]}, InvalidScoresError, r"scores must be 2-D \(models x items\), got shape \(2,\)"),
        ({"scores": [[1, 0]], "model_ids": ["a", "b"]}, InvalidScoresError, r"2 model ids for 1 rows of scores"),
        ({"scores": [[1, 0]], "item_ids": ["a"]}, InvalidScoresError, r"1 item ids for 2 columns of scores"),
        (
            {"scores": [[1], [0]], "model_ids": ["a", "a"]},
            DuplicateIdError,
            r"duplicate model id\(s\) \['a'\]; each model must appear once \(merge or rename the rows\)",
        ),
        (
            {"scores": [[1, 0]], "item_ids": ["q", "q"]},
            DuplicateIdError,
            r"duplicate item id\(s\) \['q'\]; each item must appear once \(merge or rename the columns\)",
        ),
        (
            {"scores": [[0.5, np.inf]], "score_range": None},
            InvalidScoresError,
            r"infinite score for model 'model0' on item 'item1'; scores must be finite",
        ),
        (
            {"scores": [[0.5]], "score_range": (1, 0)},
            ConfigurationError,
            r"score_range must be \(low, high\) with low < high, got \(1, 0\)",
        ),
        (
            {"scores": [[0.5, 2.0]]},
            ScoreOutOfRangeError,
            (
                r"score 2 of model 'model0' on item 'item1' is outside the score range \[0, 1\]; "
                r"fix the data or pass score_range"
            ),
        ),
        (
            {"scores": [[0.5, 1.0]], "kind": "binary"},
            InvalidScoresError,
            r"kind='binary' but a score is 0.5; binary scores must be 0 or 1 \(use kind='continuous'\)",
        ),
        (
            {"scores": [[1.0]], "kind": "ordinal"},
            ConfigurationError,
            r"kind must be 'binary' or 'continuous', got 'ordinal'",
        ),
    ],
)
def test_constructor_errors_name_the_problem(kwargs: dict, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        ScoreMatrix(**{"name": "x", **kwargs})


def test_errors_are_value_errors_for_generic_handlers() -> None:
    with pytest.raises(ValueError):
        ScoreMatrix([[2.0]])


@pytest.mark.parametrize(
    ("scores", "kind"),
    [([[0, 1], [1, 1]], "binary"), ([[0, 0.5], [1, 1]], "continuous"), ([[NAN, NAN]], "continuous")],
)
def test_kind_is_inferred(scores: list, kind: str) -> None:
    assert ScoreMatrix(scores).kind == kind


def test_defaults_ids_range_and_missing() -> None:
    m = tiny(name="t")
    assert m.shape == (3, 4) and m.n_models == 3 and m.n_items == 4 and len(m) == 3
    assert m.n_missing == 3 and m.has_missing
    assert m.score_range == (0.0, 1.0)
    assert ScoreMatrix([[0.1]]).model_ids == ("model0",) and ScoreMatrix([[0.1]]).item_ids == ("item0",)
    assert repr(m) == "ScoreMatrix('t', 3 models x 4 items, binary, range=(0.0, 1.0), missing=3)"
    assert ScoreMatrix([[5.0, -3.0]], score_range=None).score_range is None


def test_matrix_is_immutable_and_copies_its_input() -> None:
    source = np.array([[0.0, 1.0]])
    m = ScoreMatrix(source)
    source[0, 0] = 1.0
    assert m.scores[0, 0] == 0.0
    with pytest.raises(ValueError, match="read-only"):
        m.scores[0, 0] = 1.0


# ------------------------------------------------------------------- lookups
def test_lookups_and_their_errors() -> None:
    m = tiny(name="t")
    assert m.model_index("m1") == 1 and m.item_index("i3") == 3 and m.item_index(np.int64(2)) == 2
    np.testing.assert_array_equal(m.model_scores("m0"), [1, 0, 1, 1])
    with pytest.raises(UnknownModelError, match=r"unknown model 'zz' in score matrix 't'; known models include"):
        m.model_index("zz")
    with pytest.raises(UnknownItemError, match=r"unknown item 'zz' in score matrix 't'; item ids look like"):
        m.item_index("zz")
    with pytest.raises(UnknownItemError, match=r"item index 4 is out of range for score matrix 't' with 4 items"):
        m.item_index(4)
    assert str(UnknownModelError("plain")) == "plain"  # KeyError would add quotes


def test_selections_keep_order_kind_and_name() -> None:
    m = tiny(name="t")
    s = m.select_models(["m2", "m0"]).select_items(["i3", 1])
    assert s.model_ids == ("m2", "m0") and s.item_ids == ("i3", "i1") and s.kind == "binary" and s.name == "t"
    np.testing.assert_array_equal(s.scores, [[0, 1], [1, 0]])
    d = m.drop_models(["m1"]).drop_items(["i0"])
    assert d.model_ids == ("m0", "m2") and d.item_ids == ("i1", "i2", "i3")
    np.testing.assert_allclose(m.mean_scores(), [0.75, 2 / 3, 0.5])


# -------------------------------------------------------------------- dropna
def test_dropna_items_and_auto() -> None:
    m = tiny()
    by_item, report = m.dropna("items")
    assert by_item.item_ids == ("i1", "i3") and by_item.n_missing == 0
    assert report == DropReport("items", (), ("i0", "i2"), 3)
    assert report.summary() == "3 missing reference score(s): dropped 2 item(s) with missing scores (i0, i2)"
    # Only m0 is complete, so "auto" falls back to dropping items.
    assert m.dropna("auto")[1].axis == "items"


def test_dropna_models_keeps_the_item_set() -> None:
    m = ScoreMatrix([[1, 0, 1], [0, 1, 1], [NAN, 1, 0]], ["a", "b", "c"], ["x", "y", "z"])
    out, report = m.dropna()  # default axis="models"
    assert out.model_ids == ("a", "b") and out.item_ids == m.item_ids
    assert report.changed and report.dropped_models == ("c",) and report.n_missing == 1
    assert report.summary() == "1 missing reference score(s): dropped 1 model(s) with missing scores (c)"


def test_dropna_on_a_complete_matrix_is_a_no_op() -> None:
    m = ScoreMatrix([[1, 0], [0, 1]])
    out, report = m.dropna()
    assert out is m and not report.changed and report.axis == "none"
    assert report.summary() == "no missing scores; nothing dropped"


def test_dropna_errors() -> None:
    m = tiny(name="t")
    with pytest.raises(
        MissingScoresError,
        match=r"score matrix 't': only 1 model\(s\) have no missing scores; use dropna\(axis='items'\)",
    ):
        m.dropna("models")
    all_items_bad = ScoreMatrix([[NAN, 1, 1], [1, NAN, 1], [1, 1, NAN]])
    with pytest.raises(
        MissingScoresError, match=r"only 0 item\(s\) have no missing scores; use dropna\(axis='models'\)"
    ):
        all_items_bad.dropna("items")
    with pytest.raises(ConfigurationError, match=r"dropna axis must be 'models', 'items' or 'auto', got 'rows'"):
        m.dropna("rows")  # type: ignore[arg-type]


def test_summary_shortens_long_lists() -> None:
    report = DropReport("models", tuple(f"m{j}" for j in range(7)), (), 9)
    assert report.summary().endswith("(m0, m1, m2, m3, m4 and 2 more)")


def test_require_complete() -> None:
    tiny().dropna("items")[0].require_complete()
    with pytest.raises(
        MissingScoresError,
        match=r"3 missing reference scores \(first: model 'm1', item 'i2'\); call .dropna\(\)",
    ):
        tiny().require_complete()


def test_dropna_on_real_alpacaeval2_drops_six_models() -> None:
    ref = datasets.load("alpacaeval2")
    out, report = ref.dropna(axis="models")
    assert report.n_missing == 10 and len(report.dropped_models) == 6
    assert out.shape == (51, 805) and out.n_missing == 0 and out.kind == "continuous"
    assert set(report.dropped_models).isdisjoint(out.model_ids)
    by_item, item_report = ref.dropna(axis="items")
    assert by_item.shape == (57, 797) and len(item_report.dropped_items) == 8


def test_dropna_on_real_mmlu_pro() -> None:
    ref = datasets.load("mmlu_pro")
    out, report = ref.dropna(axis="auto")
    assert report.axis == "models" and out.shape == (26, 12032) and report.n_missing == 1713
    assert report.dropped_models == ("DeepSeek-Coder-V2", "gemini-1.5-flash-002", "gemini-1.5-pro-002")


@settings(max_examples=50, deadline=None)
@given(
    hnp.arrays(
        float,
        st.tuples(st.integers(2, 6), st.integers(2, 6)),
        elements=st.sampled_from([0.0, 1.0, NAN]),
    )
)
def test_dropna_property_removes_exactly_the_incomplete_rows_or_columns(scores: np.ndarray) -> None:
    m = ScoreMatrix(scores)
    missing = np.isnan(scores)
    for axis, bad in (("models", missing.any(axis=1)), ("items", missing.any(axis=0))):
        if missing.any() and (~bad).sum() < 2:
            with pytest.raises(MissingScoresError):
                m.dropna(axis)  # type: ignore[arg-type]
            continue
        out, _ = m.dropna(axis)  # type: ignore[arg-type]
        assert out.n_missing == 0
        expected = scores[~bad] if axis == "models" else scores[:, ~bad]
        np.testing.assert_array_equal(out.scores, expected)


# --------------------------------------------------------------- check_score
@pytest.mark.parametrize(
    ("score", "error", "message"),
    [
        ("x", InvalidScoresError, r"score for item 'q' is 'x', which is not a number"),
        (NAN, InvalidScoresError, r"score for item 'q' is nan; scores must be finite numbers"),
        (0.5, ScoreOutOfRangeError, r"score for item 'q' is 0.5 but score matrix 't' is binary; record 0 or 1"),
    ],
)
def test_check_score_errors(score: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        tiny(name="t").check_score(score, item="q")  # type: ignore[arg-type]


def test_check_score_range() -> None:
    m = ScoreMatrix([[0.2, 0.4]], name="c")
    assert m.check_score(1) == 1.0
    with pytest.raises(ScoreOutOfRangeError, match=re.escape("score is 1.5, outside the score range [0, 1] of score")):
        m.check_score(1.5)


# ---------------------------------------------------------------- conversion
def test_to_pandas() -> None:
    frame = tiny().to_pandas()
    assert list(frame.index) == ["m0", "m1", "m2"] and frame.index.name == "model"
    assert list(frame.columns) == ["i0", "i1", "i2", "i3"] and frame.isna().sum().sum() == 3


def test_fingerprint_is_stable_and_sensitive() -> None:
    a, b = tiny(), tiny(name="other name")
    assert a.fingerprint() == b.fingerprint()  # the name is a label, not data
    assert len(a.fingerprint()) == 64
    changed_score = ScoreMatrix(np.nan_to_num(a.scores), a.model_ids, a.item_ids)
    changed_ids = ScoreMatrix(a.scores, ["x", "m1", "m2"], a.item_ids)
    changed_kind = tiny(kind="continuous")
    fingerprints = {m.fingerprint() for m in (a, changed_score, changed_ids, changed_kind)}
    assert len(fingerprints) == 4
    assert datasets.load("gsm").fingerprint() == datasets.load("gsm").fingerprint()
