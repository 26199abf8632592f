"""Fuzzing the readers (issue 24, item 7): any CSV / JSONL / Parquet file gives a value or a clean ActiveEvalError.

Shapes: wide and long layouts, odd ids, missing values, non-scalars, booleans, other separators, encodings,
empty files. Each file is read as a reference (``read_scores``, with the layout detected and forced) and as one
model's results (``read_item_scores``, what ``session record --from`` reads). Bounded: a few hundred examples.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from activeeval.data.adapters import read_item_scores
from activeeval.data.io import read_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ActiveEvalError

FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

NAMES = st.sampled_from(["model", "item", "score", "model_id", "doc_id", "correct", "value", "q1", "q2", "x", ""])
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8) | st.sampled_from(
    ["1", "0", "0.5", "-0", "1e-3", "1_0", "nan", "inf", "true", "False", "NA", "", " ", "0,5", "١", "{model}",
     "a;b", "a\tb", '"', "\n", "1e400"])
SCALAR = (st.none() | st.booleans() | st.integers(-(10**30), 10**30) | st.floats() | TEXT)
JSON_VALUE = st.recursive(SCALAR, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=2),
                          max_leaves=4)
ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1"])


def _read_everything(path: Path) -> None:
    """Every reader, every way: a value or an ActiveEvalError, never another exception."""
    for call in (lambda: read_scores(path), lambda: read_scores(path, layout="long"),
                 lambda: read_scores(path, layout="wide", score_range=None), lambda: read_item_scores(path)):
        try:
            out = call()
        except ActiveEvalError:
            continue
        if isinstance(out, ScoreMatrix):
            assert not (out.scores == math.inf).any()
        else:
            assert all(isinstance(k, str) and math.isfinite(v) for k, v in out.items())


def _write(path: Path, text: str, encoding: str, gz: bool) -> Path:
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError:
        data = text.encode("utf-8", errors="replace")
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data, mtime=0)
    path.write_bytes(data)
    return path


@FUZZ
@given(header=st.lists(NAMES | TEXT, max_size=5), rows=st.lists(st.lists(TEXT, max_size=6), max_size=6),
       sep=st.sampled_from([",", ";", "\t", "|"]), quoted=st.booleans(), suffix=st.sampled_from([".csv", ".tsv"]),
       encoding=ENCODINGS, gz=st.booleans())
def test_any_delimited_file(tmp_path: Path, header: list[str], rows: list[list[str]], sep: str, quoted: bool,
                            suffix: str, encoding: str, gz: bool) -> None:
    if quoted:
        buf = io.StringIO()
        csv.writer(buf, delimiter=sep, lineterminator="\n").writerows([header, *rows])
        text = buf.getvalue()
    else:
        text = "".join(sep.join(r) + "\n" for r in [header, *rows] if r or header)
    _read_everything(_write(tmp_path / f"f{suffix}", text, encoding, gz))


@FUZZ
@given(records=st.lists(st.dictionaries(NAMES, JSON_VALUE, max_size=4) | JSON_VALUE, max_size=5),
       array=st.booleans(), garbage=st.sampled_from(["", "{", "]", "\x00", "[1,", "\ufeff"]),
       suffix=st.sampled_from([".jsonl", ".json"]), encoding=ENCODINGS, gz=st.booleans())
def test_any_json_file(tmp_path: Path, records: list, array: bool, garbage: str, suffix: str, encoding: str,
                       gz: bool) -> None:
    if array:
        text = json.dumps(records) + garbage
    else:
        text = "".join(json.dumps(r) + "\n" for r in records) + garbage
    _read_everything(_write(tmp_path / f"f{suffix}", text, encoding, gz and suffix == ".jsonl"))


def _column(kind: str, values: list) -> object:
    pa = pytest.importorskip("pyarrow")
    if kind == "string":
        return pa.array([None if v is None else str(v) for v in values], pa.string())
    if kind == "float":
        return pa.array([v if isinstance(v, float) else None for v in values], pa.float64())
    if kind == "int":
        return pa.array([v if isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**62 else None
                         for v in values], pa.int64())
    if kind == "bool":
        return pa.array([v if isinstance(v, bool) else None for v in values], pa.bool_())
    if kind == "list":
        return pa.array([[1, 2] if v else None for v in values], pa.list_(pa.int64()))
    if kind == "struct":
        return pa.array([{"v": 1.0} if v else None for v in values], pa.struct([("v", pa.float64())]))
    return pa.nulls(len(values))


@FUZZ
@given(columns=st.lists(st.tuples(NAMES | TEXT, st.sampled_from(["string", "float", "int", "bool", "list", "struct",
                                                                "null"])), max_size=5),
       values=st.lists(SCALAR, min_size=0, max_size=5))
def test_any_parquet_file(tmp_path: Path, columns: list[tuple[str, str]], values: list) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    arrays = [_column(kind, values) for _, kind in columns]
    table = pa.Table.from_arrays(arrays, names=[name for name, _ in columns]) if columns else pa.table({})
    pq.write_table(table, tmp_path / "f.parquet")
    _read_everything(tmp_path / "f.parquet")


def test_empty_and_odd_files(tmp_path: Path) -> None:
    for name, data in [("e.csv", b""), ("e.jsonl", b""), ("e.json", b"[]"), ("e.parquet", b""), ("b.csv", b"\xff\xfe"),
                       ("n.csv", b"model,q\x00\nm,1\n"), ("g.csv.gz", b"not gzip"), ("z.jsonl.gz", gzip.compress(b""))]:
        (tmp_path / name).write_bytes(data)
        _read_everything(tmp_path / name)


@FUZZ
@given(data=st.dictionaries(TEXT, JSON_VALUE, max_size=4) | JSON_VALUE, suffix=st.sampled_from([".json", ".csv"]),
       rows=st.lists(st.lists(TEXT, max_size=3), max_size=4), encoding=ENCODINGS)
def test_any_weights_or_costs_file(tmp_path: Path, data: object, suffix: str, rows: list[list[str]],
                                   encoding: str) -> None:
    """The two small side files (prior weights, ranking costs): a value or a clean error too."""
    from activeeval.data.io import read_prior_weights
    from activeeval.ranking.costs import check_costs, load_costs

    text = json.dumps(data) if suffix == ".json" else "".join(",".join(r) + "\n" for r in rows)
    path = _write(tmp_path / f"w{suffix}", text, encoding, gz=False)
    for call in (lambda: read_prior_weights(path), lambda: check_costs(load_costs(path), list(load_costs(path)))):
        try:
            call()
        except ActiveEvalError:
            pass


@FUZZ
@given(st.lists(TEXT, max_size=40))
def test_text_cells_are_factorized_as_pandas_does(values: list[str]) -> None:
    """The CSV reader's factorize (no pandas import) gives pandas.factorize's codes and distinct values, in order of
    first appearance, for any text cells (a text file has no missing cell: an empty field is the text "")."""
    import numpy as np
    import pandas as pd

    from activeeval.data.io import _factorize_text

    codes, uniques = _factorize_text(values)
    expected_codes, expected_uniques = pd.factorize(np.array(values, dtype=object), use_na_sentinel=True)
    assert codes.dtype == np.intp and codes.tolist() == expected_codes.tolist()
    assert uniques == list(expected_uniques)
