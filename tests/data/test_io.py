"""read_scores / write_scores: round trips in every format and every bad-input message."""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activeeval.data import ScoreMatrix, read_scores, write_scores
from activeeval.exceptions import (
    ConfigurationError,
    DataFormatError,
    DuplicateIdError,
    InvalidScoresError,
    ScoreOutOfRangeError,
)

NAN = float("nan")
SUFFIXES = [".csv", ".csv.gz", ".tsv", ".parquet", ".pq", ".jsonl", ".jsonl.gz", ".json"]


def awkward() -> ScoreMatrix:
    """Ids that need quoting or look numeric, an item called 'model', floats that need 17 digits, NaNs."""
    scores = [[0.1, 1 / 3, NAN, 1.0], [NAN, 0.0, 2e-9, 0.7071067811865476], [1.0, NAN, NAN, 0.5]]
    return ScoreMatrix(
        scores,
        ["org/model,v1", '7B "chat"', "007"],
        ["model", "q 1", "ü-item", "42"],
        kind="continuous",
        name="awkward",
    )


def write_text(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- round trips
@pytest.mark.parametrize("suffix", SUFFIXES)
@pytest.mark.parametrize("layout", ["wide", "long"])
def test_round_trip_is_exact(tmp_path: Path, suffix: str, layout: str) -> None:
    matrix = awkward()
    path = tmp_path / f"scores{suffix}"
    if layout == "wide" and suffix.startswith((".jsonl", ".json")):
        with pytest.raises(DataFormatError, match=r"JSON lines are always long; pass layout='long'"):
            write_scores(matrix, path, layout="wide")
        return
    assert write_scores(matrix, path, layout=layout) == path  # type: ignore[arg-type]
    back = read_scores(path, kind=matrix.kind, score_range=matrix.score_range)
    assert back.model_ids == matrix.model_ids and back.item_ids == matrix.item_ids
    np.testing.assert_array_equal(back.scores, matrix.scores)  # exact, NaN where NaN
    assert back.fingerprint() == matrix.fingerprint()
    assert back.name == "scores"  # the file name without its suffixes


def test_default_layout_is_wide_for_tables_and_long_for_json(tmp_path: Path) -> None:
    m = ScoreMatrix([[1, 0], [0, NAN]], ["a", "b"], ["x", "y"])
    csv_text = write_scores(m, tmp_path / "w.csv").read_text()
    assert csv_text == "model,x,y\na,1,0\nb,0,\n"
    lines = write_scores(m, tmp_path / "l.jsonl").read_text().splitlines()
    assert json.loads(lines[-1]) == {"model": "b", "item": "y", "score": None}
    assert len(lines) == 4  # missing pairs are written as null, so the id order survives


def test_kind_is_inferred_when_not_given(tmp_path: Path) -> None:
    path = write_scores(ScoreMatrix([[1, 0], [0, 1]], kind="continuous"), tmp_path / "b.csv")
    assert read_scores(path).kind == "binary"
    assert read_scores(path, kind="continuous").kind == "continuous"


def test_gzip_output_is_byte_identical_across_writes(tmp_path: Path) -> None:
    a = write_scores(awkward(), tmp_path / "a.csv.gz").read_bytes()
    b = write_scores(awkward(), tmp_path / "b.csv.gz").read_bytes()
    assert a == b


ids = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=8).filter(str.strip)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.data(),
    n_models=st.integers(1, 4),
    n_items=st.integers(1, 5),
    layout=st.sampled_from(["wide", "long"]),
)
def test_round_trip_property_csv(tmp_path: Path, data: st.DataObject, n_models: int, n_items: int, layout: str) -> None:
    model_ids = data.draw(st.lists(ids, min_size=n_models, max_size=n_models, unique=True))
    item_ids = data.draw(st.lists(ids, min_size=n_items, max_size=n_items, unique=True))
    cell = st.one_of(st.just(NAN), st.floats(0, 1, allow_nan=False))
    scores = [data.draw(st.lists(cell, min_size=n_items, max_size=n_items)) for _ in range(n_models)]
    matrix = ScoreMatrix(scores, model_ids, item_ids, kind="continuous")
    path = write_scores(matrix, tmp_path / "p.csv.gz", layout=layout, overwrite=True)  # type: ignore[arg-type]
    back = read_scores(path, layout=layout, kind="continuous")  # type: ignore[arg-type]
    assert back.fingerprint() == matrix.fingerprint()


# ---------------------------------------------------------------- long files
def test_long_file_missing_pairs_become_nan_in_first_appearance_order(tmp_path: Path) -> None:
    path = write_text(tmp_path / "l.csv", "model,item,score\nb,q2,1\nb,q1,0\na,q1,1\na,q3,\n")
    m = read_scores(path)
    assert m.model_ids == ("b", "a") and m.item_ids == ("q2", "q1", "q3")
    np.testing.assert_array_equal(m.scores, [[1, 0, NAN], [NAN, 1, NAN]])
    assert m.n_missing == 3 and m.kind == "binary" and m.name == "l"


@pytest.mark.parametrize(
    "text",
    [
        "model_id,doc_id,acc\nm,i,1\nn,i,0\n",
        "Model_Name,Question_ID,Correct\nm,i,1\nn,i,0\n",
        "model,instance_id,value\nm,i,1\nn,i,0\n",
        "item_id,score,model\ni,1,m\ni,0,n\n",
    ],
)
def test_long_column_aliases(tmp_path: Path, text: str) -> None:
    m = read_scores(write_text(tmp_path / "a.csv", text))
    assert m.model_ids == ("m", "n") and m.item_ids == ("i",)
    np.testing.assert_array_equal(m.scores, [[1], [0]])


def test_long_with_explicit_columns_and_extra_columns(tmp_path: Path) -> None:
    text = "sys,prompt,passed,subject\nA,p1,1,x\nA,p2,0,x\nB,p1,1.0,y\n"
    path = write_text(tmp_path / "t.csv", text)
    m = read_scores(path, model_column="sys", item_column="prompt", score_column="passed")
    np.testing.assert_array_equal(m.scores, [[1, 0], [1, NAN]])
    write_text(path, text.replace("A,p2,0", "A,p2,False"))  # a boolean is no score (on a 0-100 scale, true = 1?)
    with pytest.raises(InvalidScoresError, match=r"score 'False' of model 'A' on item 'p2' \(data row 2, column "
                       r"'passed'\) is a boolean, not a score: write 1 for true and 0 for false"):
        read_scores(path, model_column="sys", item_column="prompt", score_column="passed")


def test_jsonl_long_with_numeric_ids_nulls_and_a_json_array(tmp_path: Path) -> None:
    records = [
        {"model_id": "a", "question_id": 70, "correct": 1},
        {"model_id": "b", "question_id": 71, "correct": None},
    ]
    lines = write_text(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records) + "\n\n")
    array = write_text(tmp_path / "r.json", json.dumps(records))
    for path in (lines, array):
        m = read_scores(path)
        assert m.model_ids == ("a", "b") and m.item_ids == ("70", "71")
        np.testing.assert_array_equal(m.scores, [[1, NAN], [NAN, NAN]])


def test_agreeing_duplicate_long_rows_are_accepted(tmp_path: Path) -> None:
    path = write_text(tmp_path / "d.csv", "model,item,score\na,x,1\na,x,1\na,y,\na,y,\n")
    np.testing.assert_array_equal(read_scores(path).scores, [[1, NAN]])


def test_auto_detect_keeps_a_three_column_wide_file_wide(tmp_path: Path) -> None:
    m = read_scores(write_text(tmp_path / "w.csv", "model,q1,q2\na,1,0\n"))
    assert m.item_ids == ("q1", "q2")


# ----------------------------------------------------------------- wide files
def test_wide_missing_tokens_bom_blank_lines_and_model_column(tmp_path: Path) -> None:
    path = tmp_path / "w.csv"
    path.write_bytes("\ufeffq1,name,q2,q3\n\n1,a,NA,nan\n 0 ,b,null,\n\n".encode())
    m = read_scores(path, model_column="name")
    assert m.model_ids == ("a", "b") and m.item_ids == ("q1", "q2", "q3")
    np.testing.assert_array_equal(m.scores, [[1, NAN, NAN], [0, NAN, NAN]])


def test_tsv(tmp_path: Path) -> None:
    m = read_scores(write_text(tmp_path / "w.tsv", "model\tq,1\na\t0.5\n"))
    assert m.item_ids == ("q,1",) and m.scores[0, 0] == 0.5


def test_wide_duplicate_rows_can_be_dropped_when_identical(tmp_path: Path) -> None:
    path = write_text(tmp_path / "w.csv", "model,x,y\na,1,\nb,0,1\na,1,\n")
    with pytest.raises(
        DuplicateIdError,
        match=re.escape(
            "model id 'a' appears in 2 rows (data rows [1, 3]); each model must have exactly one row: merge or "
            "rename them (duplicate_models='drop_identical' keeps one of identical rows)"
        ),
    ):
        read_scores(path)
    m = read_scores(path, duplicate_models="drop_identical")
    assert m.model_ids == ("a", "b")
    conflicting = write_text(tmp_path / "c.csv", "model,x\na,1\na,0\n")
    with pytest.raises(
        DuplicateIdError, match=r"model id 'a' appears in 2 rows with different scores \(data rows \[1, 2\]\)"
    ):
        read_scores(conflicting, duplicate_models="drop_identical")


# -------------------------------------------------------------- bad input
BAD_FILES = [
    # (file name, content, error, message)
    ("empty.csv", "", DataFormatError, r"empty.csv: the file is empty; expected a header line"),
    ("blank.csv", "\n\n", DataFormatError, r"the file is empty"),
    ("header.csv", "model,a,b\n", DataFormatError, r"the header has no rows below it; add one row of scores per model"),
    ("noitems.csv", "model\na\n", DataFormatError, r"no item columns; a wide file has a model id column followed by"),
    (
        "long_row.csv",
        "model,a,b\nm,1,0\nn,1,0,1\n",
        DataFormatError,
        r"long_row.csv: line 3 has 4 fields but the header has 3; every row needs the same columns",
    ),
    ("short_row.csv", "model,a,b\nm,1\n", DataFormatError, r"line 2 has 2 fields but the header has 3"),
    (
        "quote.csv",
        'model,a\n"m,1\n',
        DataFormatError,
        r"quote.csv: malformed CSV near line \d+ \(.*\); check the quoting",
    ),
    (
        "text.csv",
        "model,a,b\nm1,1,0\nm2,0,yes\n",
        InvalidScoresError,
        r"text.csv: score 'yes' of model 'm2' on item 'b' \(data row 2\) is not a number; scores must be numbers",
    ),
    ("underscore.csv", "model,a\nm,1_0\n", InvalidScoresError,
     r"score '1_0' of model 'm' on item 'a' \(data row 1\) is not a number \(digit"),
    (
        "dupmodel.csv",
        "model,a\nm,1\nn,0\nm,0\n",
        DuplicateIdError,
        r"dupmodel.csv: model id 'm' appears in 2 rows \(data rows \[1, 3\]\); each model must have exactly one row",
    ),
    (
        "dupitem.csv",
        "model,a,b,a\nm,1,0,1\n",
        DuplicateIdError,
        r"dupitem.csv: column 'a' appears 2 times in the header \(columns 2 and 4\); each item must have exactly one",
    ),
    ("noname.csv", "model,a,,b\nm,1,0,1\n", DataFormatError, r"column 3 has an empty name in the header"),
    ("nomodel.csv", "model,a\n,1\n", DataFormatError,
     r"empty model id in data row 1 \(column 'model'\); every row needs"),
    (
        "range.csv",
        "model,a\nm,1.5\n",
        ScoreOutOfRangeError,
        r"range.csv: score matrix 'range': score 1.5 of model 'm' on item 'a' is outside the score range \[0, 1\]",
    ),
    (
        "conflict.csv",
        "model,item,score\nm,q,1\nn,q,1\nm,q,0\n",
        DuplicateIdError,
        r"model 'm' has two different scores for item 'q' \(1 in data row 1, 0 in data row 3\); keep one row per",
    ),
    (
        "badline.jsonl",
        '{"model": "m", "item": "q", "score": 1}\n{"model": "m", \n',
        DataFormatError,
        r"badline.jsonl: line 2 is not valid JSON \(.*\); a JSONL file has one JSON object per line",
    ),
    ("list.jsonl", "1\n[2]\n", DataFormatError, r"list.jsonl: line 1 is int, not a JSON object"),
    ("records.json", '[{"model": "m", "item": "q", "score": 1}, 2]', DataFormatError, r"record 2 is int, not a JSON"),
    ("notobj.jsonl", '"m"\n', DataFormatError, r"line 1 is str, not a JSON object"),
    ("empty.jsonl", "\n", DataFormatError, r"empty.jsonl: the file is empty; expected one \{model, item, score\}"),
    (
        "noitem.jsonl",
        '{"model": "m", "question": "q", "score": 1}\n',
        DataFormatError,
        (
            r"no item column in this long file \(columns: \['model', 'question', 'score'\]\); name one of "
            r"\['item', 'item_id', 'doc_id', 'question_id', 'instance_id'\] or pass item_column=NAME"
        ),
    ),
    (
        "noid.jsonl",
        '{"model": "m", "item": "q", "score": 1}\n{"item": "r", "score": 0}\n',
        DataFormatError,
        r"empty model id in line 2 \(column 'model'\)",
    ),
    ("array.json", "[1, ", DataFormatError, r"array.json: invalid JSON \(.*\); fix the file"),
]


@pytest.mark.parametrize(("name", "content", "error", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_files_have_clear_messages(tmp_path: Path, name: str, content: str, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        read_scores(write_text(tmp_path / name, content))


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"nope.csv: cannot read scores, no such file; check the path"):
        read_scores(tmp_path / "nope.csv")
    folder = tmp_path / "dir.csv"
    folder.mkdir()
    with pytest.raises(DataFormatError, match=r"dir.csv: cannot read scores, it is a directory"):
        read_scores(folder)


@pytest.mark.parametrize(
    ("name", "shown"),
    [("s.xlsx", ".xlsx"), ("scores", "(no suffix)"), ("s.txt.gz", ".txt.gz"), ("s.parquet.gz", ".parquet.gz")],
)
def test_unsupported_suffix(tmp_path: Path, name: str, shown: str) -> None:
    pattern = rf"unsupported file type '{re.escape(shown)}'; score files must end in \.csv, \.csv\.gz"
    with pytest.raises(DataFormatError, match=pattern):
        read_scores(write_text(tmp_path / name, "model,a\nm,1\n"))


def test_broken_gzip_utf8_and_parquet(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"fake.csv.gz: not a valid gzip file .*remove the .gz suffix"):
        read_scores(write_text(tmp_path / "fake.csv.gz", "model,a\nm,1\n"))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("model,a\nmodèle,1\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match=r"latin.csv: not UTF-8 text .*; save it as UTF-8"):
        read_scores(latin)
    with pytest.raises(DataFormatError, match=r"bad.parquet: not a valid Parquet file .*; re-export it or use CSV"):
        read_scores(write_text(tmp_path / "bad.parquet", "model,a\n"))
    truncated = tmp_path / "cut.csv.gz"
    truncated.write_bytes(gzip.compress(b"model,a\n" + b"m,1\n" * 50)[:25])
    with pytest.raises(DataFormatError, match=r"cut.csv.gz: not a valid gzip file"):
        read_scores(truncated)


def test_parquet_without_pyarrow_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_scores(awkward(), tmp_path / "s.parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # makes `import pyarrow` raise ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    hint = re.escape('needs pyarrow; install it with: pip install "activeeval[parquet]"')
    with pytest.raises(DataFormatError, match=hint):
        read_scores(path)
    with pytest.raises(DataFormatError, match=hint):
        write_scores(awkward(), tmp_path / "t.parquet")


def test_wide_parquet_with_a_text_cell_names_it(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "mixed.parquet"
    pq.write_table(pa.table({"model": ["a", "b"], "x": [1.0, 0.0], "y": ["1", "oops"]}), path)
    with pytest.raises(InvalidScoresError, match=r"score 'oops' of model 'b' on item 'y' \(row 2\) is not a number"):
        read_scores(path)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"layout": "tall"}, ConfigurationError, r"layout must be 'wide', 'long' or None \(auto-detect\), got 'tall'"),
        (
            {"duplicate_models": "merge"},
            ConfigurationError,
            r"duplicate_models must be 'error' or 'drop_identical', got 'merge'",
        ),
        (
            {"layout": "wide", "item_column": "q"},
            ConfigurationError,
            r"item_column and score_column only apply to long files; drop them or pass layout='long'",
        ),
        ({"model_column": "who"}, DataFormatError, r"model_column='who' is not a column of the file; its columns are"),
        (
            {"layout": "long", "model_column": "model", "item_column": "model"},
            ConfigurationError,
            r"model_column, item_column and score_column must be three different columns",
        ),
        ({"layout": "long"}, DataFormatError, r"no item column in this long file"),
        ({"kind": "binary"}, InvalidScoresError, r"w.csv: .*kind='binary' but a score is 0.5"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, error: type, message: str) -> None:
    path = write_text(tmp_path / "w.csv", "model,a,score\nm,0.5,1\n")
    with pytest.raises(error, match=message):
        read_scores(path, **kwargs)


def test_json_cannot_be_read_wide(tmp_path: Path) -> None:
    path = write_text(tmp_path / "r.jsonl", '{"model": "m", "item": "q", "score": 1}\n')
    with pytest.raises(
        DataFormatError, match=r"JSON files are read as long \(model, item, score\) records; pass layout='long'"
    ):
        read_scores(path, layout="wide")


def test_write_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"matrix must be a ScoreMatrix, got list"):
        write_scores([[1.0]], tmp_path / "x.csv")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"layout must be 'wide', 'long' or None \(auto\), got 'tall'"):
        write_scores(awkward(), tmp_path / "x.csv", layout="tall")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"cannot write score file '.*x.csv': folder '.*missing' does not "
                       "exist; create it first"):
        write_scores(awkward(), tmp_path / "missing" / "x.csv")
    with pytest.raises(DataFormatError, match=r"unsupported file type '.xlsx'"):
        write_scores(awkward(), tmp_path / "x.xlsx")


# ------------------------------------------------ what a reader cannot represent (issue 24, item 5)
@pytest.mark.parametrize("sep", [";", "\t", "|"])
def test_a_csv_with_another_separator_is_read_with_it(tmp_path: Path, sep: str) -> None:
    comma = read_scores(write_text(tmp_path / "c.csv", "model,q 1,q2\nm0,1,0.5\nm1,,0\n"))
    other = read_scores(write_text(tmp_path / "o.csv", "model,q 1,q2\nm0,1,0.5\nm1,,0\n".replace(",", sep)))
    assert other.fingerprint() == comma.fingerprint()
    assert read_scores(write_text(tmp_path / "c.tsv", "model,q 1,q2\nm0,1,0.5\nm1,,0\n")).fingerprint() == (
        comma.fingerprint())


def test_a_decimal_comma_is_named(tmp_path: Path) -> None:
    path = write_text(tmp_path / "eu.csv", "model;q1;q2\nm0;0,5;1\n")
    with pytest.raises(InvalidScoresError, match=r"score '0,5' of model 'm0' on item 'q1' \(data row 1\) is not a "
                       r"number \(a decimal comma\? write 0.5, not 0,5\)"):
        read_scores(path)


def test_a_single_column_names_the_separators(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match=r"the header has a single column \('models'\), so there are no item "
                       r"columns; .* separated by commas \(.csv\), tabs \(.tsv\) or semicolons"):
        read_scores(write_text(tmp_path / "one.csv", "models\nm0\nm1\n"))


JSON_CELLS = [
    ('"score": [1]', InvalidScoresError, r"score \[1\] of model 'm' on item 'q' \(line 2, column 'score'\) is a list"),
    ('"score": {"v": 1}', InvalidScoresError, r"score \{'v': 1\} .*\(line 2, column 'score'\) is an object"),
    ('"score": true', InvalidScoresError,
     r"score true of model 'm' on item 'q' \(line 2, column 'score'\) is a boolean \(true\), not a score: write 1"),
    ('"score": "true"', InvalidScoresError, r"score 'true' .* is a boolean, not a score: write 1 for true and 0"),
    ('"score": "1_0"', InvalidScoresError, r"score '1_0' .* is not a number \(digit separators"),
    ('"score": 1e400', InvalidScoresError, r"infinite score for model 'm' on item 'q'"),
    ('"score": ' + "9" * 5000, DataFormatError, r"line 2 is not valid JSON \(Exceeds the limit"),
    ('"model": {"x": "m0"}', DataFormatError,
     r"model id \{'x': 'm0'\} in line 2, column 'model', is an object; model ids must be strings or numbers"),
    ('"item": [1, 2]', DataFormatError, r"item id \[1, 2\] in line 2, column 'item', is a list"),
    ('"item": false', DataFormatError, r"item id false in line 2, column 'item', is a boolean \(false\)"),
]


@pytest.mark.parametrize(("cell", "error", "message"), JSON_CELLS, ids=[c[0][:20] for c in JSON_CELLS])
def test_json_values_that_are_no_scores_or_ids_name_line_and_field(tmp_path: Path, cell: str, error: type,
                                                                   message: str) -> None:
    base = {"model": '"m"', "item": '"q"', "score": "1"}
    key = cell.split(":")[0].strip('"')
    record = "{" + ", ".join(f'"{k}": {v}' for k, v in base.items() if k != key) + ", " + cell + "}"
    path = write_text(tmp_path / "x.jsonl", '{"model": "m", "item": "p", "score": 1}\n' + record + "\n")
    with pytest.raises(error, match=message):
        read_scores(path)


def test_parquet_list_struct_and_bool_columns_are_refused(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    cases = [
        ({"model": ["a", "b"], "q1": pa.array([[1], [0]])}, InvalidScoresError,
         r"score \[1\] of model 'a' on item 'q1' \(row 1\) is a list"),
        ({"model": ["a", "b"], "item": ["x", "y"], "score": pa.array([{"v": 1}, {"v": 0}])}, InvalidScoresError,
         r"score \{'v': 1\} .*\(row 1, column 'score'\) is an object"),
        ({"model": ["a", "b"], "q1": [True, False]}, InvalidScoresError,
         r"score true of model 'a' on item 'q1' \(row 1\) is a boolean, not a score"),
        ({"model": ["a", "b"], "q1": [1.0, 0.0], "q2": [False, True]}, InvalidScoresError,
         r"on item 'q2' \(row 1\) is a boolean"),
        ({"model": pa.array([["a"], ["b"]]), "q1": [1.0, 0.0]}, DataFormatError,
         r"model id \['a'\] in row 1, column 'model', is a list"),
    ]
    for k, (columns, error, message) in enumerate(cases):
        pq.write_table(pa.table(columns), tmp_path / f"{k}.parquet")
        with pytest.raises(error, match=message):
            read_scores(tmp_path / f"{k}.parquet")
