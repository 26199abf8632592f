"""Read and write score matrices: wide or long tables in CSV, Parquet or JSONL.

*Wide* files have one row per model: the first column holds the model id and
every other column is an item; an empty cell is a missing score. *Long* files
have one row per (model, item) pair with columns ``model, item, score`` (common
aliases such as ``model_id``, ``doc_id`` or ``correct`` are accepted); pairs
that are absent, or present with an empty score, are missing. Missing scores
become NaN in the :class:`~activeeval.data.matrix.ScoreMatrix`.

Every problem with a file raises an :class:`~activeeval.exceptions.ActiveEvalError`
whose message names the file, the problem and the fix.
"""

from __future__ import annotations

import csv
import decimal
import gzip
import io
import json
import math
import numbers
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from activeeval._files import atomic_output
from activeeval.data.matrix import ScoreKind, ScoreMatrix, parse_score_text
from activeeval.exceptions import (
    ActiveEvalError,
    ConfigurationError,
    DataFormatError,
    DuplicateIdError,
    InvalidScoresError,
    template_of,
)

__all__ = ["ITEM_ALIASES", "MODEL_ALIASES", "SCORE_ALIASES", "read_prior_weights", "read_scores", "write_scores"]


class _LazyPandas:
    """pandas, imported on first use: a session command that needs no file costs no pandas import (~0.2 s)."""

    def __getattr__(self, name: str):
        import pandas

        return getattr(pandas, name)


pd = _LazyPandas()


def _factorize_text(values: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """Codes and distinct values of strings, in order of first appearance: ``pandas.factorize`` for text that holds
    no missing value, without importing pandas (a quarter of a second at a session's start; tens of ns a cell)."""
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.intp, count=len(values))
    return codes, list(index)

Layout = Literal["wide", "long"]
DuplicatePolicy = Literal["error", "drop_identical"]
FileFormat = Literal["csv", "tsv", "parquet", "jsonl"]

# Accepted column names of a long file, in order of preference (compared case-insensitively).
MODEL_ALIASES = ("model", "model_id", "model_name")
ITEM_ALIASES = ("item", "item_id", "doc_id", "question_id", "instance_id")
SCORE_ALIASES = ("score", "value", "correct", "acc")

# Cell texts read as a missing score (compared after strip() and lower()).
_MISSING_TEXT = frozenset({"", "na", "nan", "n/a", "null", "none"})
_BOOL_TEXT = frozenset({"true", "false"})  # refused as scores: say 1 or 0
_SUFFIXES: dict[str, FileFormat] = {
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
}
_SUPPORTED = ".csv, .csv.gz, .tsv(.gz), .parquet/.pq, .jsonl(.gz) or .json (one JSON object per line)"
_PARQUET_HINT = 'install it with: pip install "activeeval[parquet]"'


# --------------------------------------------------------------------- formats
@dataclass(frozen=True)
class _FileType:
    fmt: FileFormat
    gzipped: bool
    stem: str


def _file_type(path: Path) -> _FileType:
    name = path.name
    gzipped = name.lower().endswith(".gz")
    base = name[:-3] if gzipped else name
    suffix = Path(base).suffix.lower()
    fmt = _SUFFIXES.get(suffix)
    if fmt is None or (gzipped and fmt == "parquet"):
        shown = Path(name).suffix if not suffix else suffix + (".gz" if gzipped else "")
        raise DataFormatError(
            f"{path}: unsupported file type {shown or '(no suffix)'!r}; score files must end in {_SUPPORTED}"
        )
    return _FileType(fmt, gzipped, base[: len(base) - len(suffix)])


@contextmanager
def _open_text(path: Path, gzipped: bool) -> Iterator[IO[str]]:
    """Open a (possibly gzipped) UTF-8 text file; a BOM, as Excel writes it, is skipped."""
    raw = gzip.open(path, "rb") if gzipped else open(path, "rb")
    try:
        yield io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
    finally:
        raw.close()


def _read_error(path: Path, exc: BaseException) -> DataFormatError:
    """A low-level reading failure as a DataFormatError that names the fix."""
    if isinstance(exc, UnicodeDecodeError):
        return DataFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8")
    if isinstance(exc, (gzip.BadGzipFile, EOFError)):
        return DataFormatError(f"{path}: not a valid gzip file ({exc}); re-compress it or remove the .gz suffix")
    return DataFormatError(f"{path}: cannot read the file ({exc})")


# ---------------------------------------------------------------- raw tables
@dataclass
class _Table:
    """Columns of a file before interpretation: a header and a 2-D block of cells.

    ``cells`` is an ndarray of shape (n_rows, n_columns), object dtype for text
    formats; ``frame`` (Parquet / JSONL) gives typed columns instead.
    """

    columns: list[str]
    cells: np.ndarray | None = None
    frame: pd.DataFrame | None = None
    rows: str = "data row"  # what a row is called in messages: "line" of a JSONL file, ...
    positions: list[int] | None = None  # the number of each row in the file (default: 1, 2, ...)

    def row(self, k: int) -> str:
        """The ``k``-th row (0-based) as messages name it: ``data row 3``, ``line 7``."""
        return f"{self.rows} {self.positions[k] if self.positions is not None else k + 1}"

    @property
    def n_rows(self) -> int:
        return len(self.frame) if self.frame is not None else self.cells.shape[0]  # type: ignore[union-attr]

    def take(self, cols: Sequence[int]) -> np.ndarray:
        """Cells of the given columns, ndarray of shape (n_rows, len(cols))."""
        if self.frame is not None:
            return self.frame.iloc[:, list(cols)].to_numpy()
        return self.cells[:, list(cols)]  # type: ignore[index]

    def column(self, col: int) -> np.ndarray:
        return self.take([col])[:, 0]


def _check_header(path: Path, columns: Sequence[str]) -> None:
    for j, c in enumerate(columns):
        if not str(c).strip():
            raise DataFormatError(
                f"{path}: column {j + 1} has an empty name in the header; give every column a name "
                "(the model id column, then one column per item id)"
            )
    seen: dict[str, int] = {}
    for j, c in enumerate(columns):
        if c in seen:
            n = list(columns).count(c)
            raise DuplicateIdError(
                f"{path}: column {c!r} appears {n} times in the header (columns {seen[c] + 1} and {j + 1}); "
                "each item must have exactly one column: merge or rename the duplicates"
            )
        seen[c] = j


# Separators a delimited file may use instead of the one its suffix says (tried only when that one finds a
# single column: a semicolon-separated .csv from a European spreadsheet, a tab-separated .csv, ...).
_SEPARATORS = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "'|'", ":": "colons"}


def _delimiter(path: Path, ftype: _FileType) -> str:
    """The file's separator: the suffix's (comma, or tab for .tsv), unless with it the header is one column
    and :class:`csv.Sniffer` finds another separator that splits it."""
    expected = "\t" if ftype.fmt == "tsv" else ","
    with _open_text(path, ftype.gzipped) as f:
        sample = f.read(1 << 16)
    lines = [line for line in sample.split("\n") if line.strip()][:50]
    others = "".join(d for d in _SEPARATORS if d != expected)
    try:
        if not lines or len(next(csv.reader(lines[:1], delimiter=expected))) != 1:
            return expected
        found = csv.Sniffer().sniff("\n".join(lines), delimiters=others).delimiter
        return found if len(next(csv.reader(lines[:1], delimiter=found))) > 1 else expected
    except csv.Error:  # no other separator found, or a header the full read will report
        return expected


def _read_delimited(path: Path, ftype: _FileType) -> _Table:
    rows: list[list[str]] = []
    try:
        delimiter = _delimiter(path, ftype)
        with _open_text(path, ftype.gzipped) as f:
            reader = csv.reader(f, delimiter=delimiter, strict=True)
            header: list[str] | None = None
            for row in reader:
                if not row or (len(row) == 1 and not row[0].strip()):
                    continue  # blank line
                if header is None:
                    header = row
                    continue
                if len(row) != len(header):
                    raise DataFormatError(
                        f"{path}: line {reader.line_num} has {len(row)} fields but the header has {len(header)}; "
                        f"every row needs the same columns as the header (quote fields that contain "
                        f"{_SEPARATORS[delimiter]}, leave a missing score as an empty field)"
                    )
                rows.append(row)
    except csv.Error as exc:
        raise DataFormatError(
            f"{path}: malformed CSV near line {reader.line_num} ({exc}); check the quoting of that line"
        ) from exc
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise _read_error(path, exc) from exc
    if header is None:
        raise DataFormatError(
            f"{path}: the file is empty; expected a header line (model id column, then item ids) and one row per model"
        )
    _check_header(path, header)
    cells = np.empty((len(rows), len(header)), dtype=object)
    if rows:
        cells[:] = rows
    return _Table(list(header), cells=cells)


def _import_parquet(path: Path):  # returns the pyarrow.parquet module
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise DataFormatError(f"{path}: reading or writing Parquet needs pyarrow; {_PARQUET_HINT}") from exc
    return pq


def _read_parquet(path: Path) -> _Table:
    pq = _import_parquet(path)
    import pyarrow as pa

    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise DataFormatError(f"{path}: not a valid Parquet file ({exc}); re-export it or use CSV") from exc
    columns = [str(c) for c in table.schema.names]
    if not columns:
        raise DataFormatError(f"{path}: the Parquet file has no columns; expected a model id column and item columns")
    _check_header(path, columns)
    try:
        frame = table.to_pandas()
    except (ValueError, TypeError, NotImplementedError, pa.ArrowException) as exc:
        raise DataFormatError(f"{path}: cannot convert the Parquet table ({exc}); store ids as strings and scores "
                              "as numbers") from exc
    return _Table(columns, frame=frame, rows="row")


def _read_jsonl(path: Path, ftype: _FileType) -> _Table:
    records: list[dict] = []
    try:
        with _open_text(path, ftype.gzipped) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise _read_error(path, exc) from exc
    if text.lstrip().startswith("["):  # a .json file holding one array of records
        try:
            loaded = json.loads(text)
        except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
            raise DataFormatError(f"{path}: invalid JSON ({exc}); fix the file or write one object per line") from exc
        numbered = list(enumerate(loaded, start=1))
        where = "record"
    else:
        numbered = []
        # split("\n"), not splitlines(): U+2028 and friends may appear raw inside JSON strings.
        for lineno, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((lineno, json.loads(line)))
            except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
                raise DataFormatError(
                    f"{path}: line {lineno} is not valid JSON ({getattr(exc, 'msg', exc)}); a JSONL file has one "
                    "JSON object per line"
                ) from exc
        where = "line"
    for n, rec in numbered:
        if not isinstance(rec, dict):
            raise DataFormatError(
                f"{path}: {where} {n} is {type(rec).__name__}, not a JSON object; write one "
                '{"model": ..., "item": ..., "score": ...} object per line'
            )
        records.append(rec)
    if not records:
        raise DataFormatError(f"{path}: the file is empty; expected one {{model, item, score}} JSON object per line")
    columns = list(dict.fromkeys(k for rec in records for k in rec))
    frame = pd.DataFrame.from_records(records, columns=columns).astype(object)
    return _Table([str(c) for c in columns], frame=frame, rows=where, positions=[n for n, _ in numbered])


def _read_table(path: Path, ftype: _FileType) -> _Table:
    """The columns of a CSV/TSV, Parquet or JSON file, before interpretation."""
    if ftype.fmt == "jsonl":
        return _read_jsonl(path, ftype)
    if ftype.fmt == "parquet":
        return _read_parquet(path)
    return _read_delimited(path, ftype)


# ------------------------------------------------------------- cell values
_SCORE_FIX = "scores must be numbers (0/1 for binary benchmarks), with an empty cell or null for a missing score"
_DECIMAL_COMMA = re.compile(r"[+-]?[0-9]+,[0-9]+")
_NO_BOOLEANS = "not a score: write 1 for true and 0 for false"


def _unfit(value: object) -> str | None:
    """Why a cell of a typed file (Parquet, JSON) can be neither a score nor an id: a boolean, a list, an
    object, ...; None when it is a string, a number or null."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, (bool, np.bool_)):
        return f"a boolean ({str(bool(value)).lower()})"
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        return None
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple, np.ndarray)):
        return "a list"
    return f"a {type(value).__name__}"


def _check_typed(values: np.ndarray, path: Path, what: str, describe: Callable[[int], str], fix: str,
                 error: type[ActiveEvalError] = InvalidScoresError) -> None:
    """Refuse a non-scalar or boolean cell of a typed file, naming its row and column (before factorize(),
    which cannot hash a list and takes True for 1)."""
    flat = values.ravel()
    if not {type(v) for v in flat} <= {str, float, int, type(None)}:
        for k, v in enumerate(flat):
            problem = _unfit(v)
            if problem is not None:
                if what == "score" and isinstance(v, (bool, np.bool_)):
                    problem += f", {_NO_BOOLEANS}"
                shown = json.dumps(bool(v)) if isinstance(v, (bool, np.bool_)) else repr(
                    v.tolist() if isinstance(v, np.ndarray) else v)
                raise error(f"{path}: {what} {shown[:80]} {describe(k)} is {problem}; {fix}")


def _parse_score(value: object) -> float | str:
    """A cell as a float (NaN = missing), or why it is not a score."""
    if value is None:
        return math.nan
    if isinstance(value, (bool, np.bool_)):
        return f"is a boolean, {_NO_BOOLEANS}"
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        try:
            return float(value)
        except OverflowError:
            return "is too large to be a finite number"
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _MISSING_TEXT:
            return math.nan
        if low in _BOOL_TEXT:
            return f"is a boolean, {_NO_BOOLEANS}"
        try:
            return parse_score_text(value)
        except InvalidScoresError as exc:
            hint = " (a decimal comma? write 0.5, not 0,5)" if _DECIMAL_COMMA.fullmatch(value.strip()) else ""
            return f"{exc.reason}{hint}"  # type: ignore[attr-defined]
    return f"is {_unfit(value)}, not a number"


def _to_float(cells: np.ndarray, describe: Callable[[int], str], path: Path, typed: bool) -> np.ndarray:
    """Cells as floats; ``describe(flat_index)`` names a bad cell (its row and column) for the message.

    ``typed``: the cells come from a Parquet or JSON file, so they may be booleans, lists or objects.
    """
    if cells.dtype.kind == "b" and cells.size:
        raise InvalidScoresError(f"{path}: score {json.dumps(bool(cells.flat[0]))} {describe(0)} is a boolean, "
                                 f"{_NO_BOOLEANS}")
    if cells.dtype.kind in "iuf":
        return cells.astype(float)
    flat = cells.ravel()
    if typed:
        _check_typed(flat, path, "score", describe, _SCORE_FIX)
    # Parse each distinct cell once: binary data has only a handful. A text file's cells are all strings.
    codes, uniques = (pd.factorize(flat, use_na_sentinel=True) if typed else _factorize_text(flat.tolist()))
    table = np.empty(len(uniques) + 1)
    table[-1] = math.nan  # code -1: None / NaN cells
    for k, u in enumerate(uniques):
        value = _parse_score(u)
        if isinstance(value, str):
            at = int(np.flatnonzero(codes == k)[0])
            raise InvalidScoresError(f"{path}: score {u!r} {describe(at)} {value}; {_SCORE_FIX}")
        table[k] = value
    return table[codes].reshape(cells.shape)


def _ids(table: _Table, col: int, path: Path, what: str) -> list[str]:
    """The ids of column ``col``: strings, or numbers written as text; never empty."""
    values = table.column(col)
    where = f"column {table.columns[col]!r}"
    if table.frame is not None:
        _check_typed(values, path, f"{what} id", lambda k: f"in {table.row(k)}, {where},",
                     f"{what} ids must be strings or numbers", DataFormatError)
    out: list[str] = []
    for k, v in enumerate(values.tolist()):
        if v is None or (isinstance(v, float) and math.isnan(v)) or not str(v).strip():
            raise DataFormatError(f"{path}: empty {what} id in {table.row(k)} ({where}); every row needs a {what} id")
        out.append(str(v))
    return out


# ------------------------------------------------------------------ layouts
def _find_column(path: Path, columns: list[str], role: str, explicit: str | None, aliases: Sequence[str]) -> int:
    """Index of the ``role`` column: the ``explicit`` name, else the first alias present."""
    if explicit is not None:
        if explicit not in columns:
            raise DataFormatError(
                f"{path}: {role}_column={explicit!r} is not a column of the file; its columns are "
                f"{columns[:10]}{' ...' if len(columns) > 10 else ''}"
            )
        return columns.index(explicit)
    lowered = [c.strip().lower() for c in columns]
    for alias in aliases:
        if alias in lowered:
            return lowered.index(alias)
    raise DataFormatError(
        f"{path}: no {role} column in this long file (columns: {columns[:10]}); name one of "
        f"{list(aliases)} or pass {role}_column=NAME"
    )


def _is_long(columns: list[str]) -> bool:
    lowered = {c.strip().lower() for c in columns}
    return all(lowered & set(aliases) for aliases in (MODEL_ALIASES, ITEM_ALIASES, SCORE_ALIASES))


def _wide_matrix(
    path: Path, table: _Table, model_column: str | None, duplicate_models: DuplicatePolicy, **matrix_kw: object
) -> ScoreMatrix:
    columns = table.columns
    m_col = _find_column(path, columns, "model", model_column, ()) if model_column else 0
    item_cols = [j for j in range(len(columns)) if j != m_col]
    if not item_cols:
        raise DataFormatError(
            f"{path}: the header has a single column ({str(columns[0])[:60]!r}), so there are no item columns; a wide "
            "file has a model id column followed by one column per item, a long file model, item and score "
            "columns, separated by commas (.csv), tabs (.tsv) or semicolons"
        )
    if table.n_rows == 0:
        raise DataFormatError(f"{path}: the header has no rows below it; add one row of scores per model")
    model_ids = _ids(table, m_col, path, "model")
    item_ids = [columns[j] for j in item_cols]
    n_items = len(item_ids)
    scores = _to_float(
        table.take(item_cols),
        lambda at: f"of model {model_ids[at // n_items]!r} on item {item_ids[at % n_items]!r} "
        f"({table.row(at // n_items)})",
        path, typed=table.frame is not None,
    )
    keep = _unique_rows(path, model_ids, scores, duplicate_models)
    if len(keep) < len(model_ids):
        scores, model_ids = scores[keep], [model_ids[k] for k in keep]
    return ScoreMatrix(scores, model_ids, item_ids, **matrix_kw)  # type: ignore[arg-type]


def _unique_rows(path: Path, model_ids: list[str], scores: np.ndarray, policy: DuplicatePolicy) -> list[int]:
    """Rows to keep: all of them, or the first of each group of identical repeated rows."""
    rows_of: dict[str, list[int]] = {}
    for k, m in enumerate(model_ids):
        rows_of.setdefault(m, []).append(k)
    dup = {m: rows for m, rows in rows_of.items() if len(rows) > 1}
    if not dup:
        return list(range(len(model_ids)))
    if policy == "drop_identical":
        differ = {
            m: rows
            for m, rows in dup.items()
            if not all(np.array_equal(scores[rows[0]], scores[r], equal_nan=True) for r in rows[1:])
        }
        if not differ:
            return [rows[0] for rows in rows_of.values()]
        dup, what = differ, "with different scores "
    else:
        what = ""
    m, rows = next(iter(dup.items()))
    more = f" and {len(dup) - 1} more id(s) repeat" if len(dup) > 1 else ""
    fix = "merge or rename them" + (
        "" if policy == "drop_identical" else " (duplicate_models='drop_identical' keeps one of identical rows)"
    )
    raise DuplicateIdError(
        f"{path}: model id {m!r} appears in {len(rows)} rows {what}(data rows {[r + 1 for r in rows[:5]]}){more}; "
        f"each model must have exactly one row: {fix}"
    )


def _long_matrix(
    path: Path,
    table: _Table,
    model_column: str | None,
    item_column: str | None,
    score_column: str | None,
    **matrix_kw: object,
) -> ScoreMatrix:
    cols = table.columns
    m_col = _find_column(path, cols, "model", model_column, MODEL_ALIASES)
    i_col = _find_column(path, cols, "item", item_column, ITEM_ALIASES)
    s_col = _find_column(path, cols, "score", score_column, SCORE_ALIASES)
    if len({m_col, i_col, s_col}) < 3:
        raise ConfigurationError(
            f"model_column, item_column and score_column must be three different columns of {path}, got "
            f"{cols[m_col]!r}, {cols[i_col]!r}, {cols[s_col]!r}"
        )
    if table.n_rows == 0:
        raise DataFormatError(f"{path}: the header has no rows below it; add one row per (model, item) score")
    models = _ids(table, m_col, path, "model")
    items = _ids(table, i_col, path, "item")
    values = _to_float(
        table.column(s_col),
        lambda k: f"of model {models[k]!r} on item {items[k]!r} ({table.row(k)}, column {cols[s_col]!r})",
        path, typed=table.frame is not None,
    )
    # Ids in order of first appearance, so the matrix follows the file.
    m_codes, model_ids = _factorize_text(models)
    i_codes, item_ids = _factorize_text(items)
    _check_long_duplicates(path, m_codes, i_codes, values, models, items)
    scores = np.full((len(model_ids), len(item_ids)), math.nan)
    scores[m_codes, i_codes] = values
    return ScoreMatrix(scores, list(model_ids), list(item_ids), **matrix_kw)  # type: ignore[arg-type]


def _check_long_duplicates(
    path: Path, m_codes: np.ndarray, i_codes: np.ndarray, values: np.ndarray, models: list[str], items: list[str]
) -> None:
    """Repeated (model, item) rows are fine if they agree; conflicting ones are an error."""
    key = m_codes.astype(np.int64) * (int(i_codes.max()) + 1) + i_codes
    order = np.argsort(key, kind="stable")
    same_key = key[order][1:] == key[order][:-1]
    if not same_key.any():
        return
    a, b = values[order][:-1], values[order][1:]
    differ = same_key & ~((a == b) | (np.isnan(a) & np.isnan(b)))
    if differ.any():
        k = int(np.flatnonzero(differ)[0])
        first, second = int(order[k]), int(order[k + 1])
        raise DuplicateIdError(
            f"{path}: model {models[first]!r} has two different scores for item {items[first]!r} "
            f"({a[k]:g} in data row {first + 1}, {b[k]:g} in data row {second + 1}); "
            "keep one row per (model, item) pair"
        )


# ------------------------------------------------------------------- public
def read_scores(
    path: str | Path,
    *,
    layout: Layout | None = None,
    kind: ScoreKind | None = None,
    score_range: tuple[float, float] | None = (0.0, 1.0),
    name: str | None = None,
    model_column: str | None = None,
    item_column: str | None = None,
    score_column: str | None = None,
    duplicate_models: DuplicatePolicy = "error",
) -> ScoreMatrix:
    """Read a score matrix from a wide or long CSV, Parquet or JSONL file.

    Parameters
    ----------
    path : str or Path
        ``.csv``, ``.csv.gz``, ``.tsv(.gz)``, ``.parquet``/``.pq`` (needs
        ``pip install "activeeval[parquet]"``), ``.jsonl``, ``.jsonl.gz`` or
        ``.json`` (JSON lines, or one array of records).
    layout : {"wide", "long"} or None
        ``None`` detects it: JSON files are always long; a table is long when
        its header has a model, an item and a score column (by the aliases
        below, or when ``item_column``/``score_column`` is given), else wide.
        Wide: one row per model, first column = model id, other columns =
        item ids. Long: one row per (model, item, score).
    kind : {"binary", "continuous"} or None
        Inferred when None: binary if every score is 0 or 1.
    score_range : (float, float) or None
        Valid score bounds, default (0, 1); None for unbounded scores.
    name : str, optional
        Name of the matrix; defaults to the file name without its suffixes.
    model_column, item_column, score_column : str, optional
        Column names of a long file when they are not one of
        ``MODEL_ALIASES`` (model, model_id, model_name), ``ITEM_ALIASES``
        (item, item_id, doc_id, question_id, instance_id) or ``SCORE_ALIASES``
        (score, value, correct, acc), matched case-insensitively.
        ``model_column`` also names the model id column of a wide file
        (default: the first column).
    duplicate_models : {"error", "drop_identical"}
        What to do when a wide file repeats a model id: raise (default), or
        keep the first of rows whose scores are identical (leaderboard
        exports often repeat a model); repeats with different scores are
        always an error. Long files accept repeated (model, item) rows that
        agree.

    Returns
    -------
    ScoreMatrix
        Scores of shape (n_models, n_items) in file order (long files: order
        of first appearance); missing scores are NaN. Empty cells and the
        texts NA, NaN, null and None are missing. A score must be a number
        written plainly (``1``, ``0.5``, ``1e-3``): booleans (``true``, a
        JSON ``true``, a Parquet bool column), ``1_0``, a decimal comma, a
        list or an object are refused, naming the row and column. A ``.csv``
        separated by semicolons, tabs or ``|`` (or a ``.tsv`` by commas) is
        read with the separator it uses.

    Raises
    ------
    DataFormatError
        Missing, empty or malformed file, unsupported suffix, missing columns,
        or Parquet without pyarrow.
    DuplicateIdError
        A model or item id repeated in a wide file, or conflicting scores for
        one (model, item) pair in a long file.
    InvalidScoresError
        A non-numeric or out-of-range score, or kind='binary' with a non 0/1
        score; an id that is neither a string nor a number.
    """
    if layout not in (None, "wide", "long"):
        raise ConfigurationError(f"layout must be 'wide', 'long' or None (auto-detect), got {layout!r}")
    path = Path(path)
    ftype = _file_type(path)
    if not path.is_file():
        hint = "it is a directory" if path.is_dir() else "no such file"
        raise DataFormatError(f"{path}: cannot read scores, {hint}; check the path (relative to {Path.cwd()})")
    if duplicate_models not in ("error", "drop_identical"):
        raise ConfigurationError(f"duplicate_models must be 'error' or 'drop_identical', got {duplicate_models!r}")
    if layout == "wide" and (item_column or score_column):
        raise ConfigurationError(
            "item_column and score_column only apply to long files; drop them or pass layout='long' "
            f"(got layout='wide' for {path})"
        )
    if ftype.fmt == "jsonl" and layout == "wide":
        raise DataFormatError(f"{path}: JSON files are read as long (model, item, score) records; pass layout='long'")
    table = _read_table(path, ftype)
    if layout is None:
        explicit_long = item_column is not None or score_column is not None
        layout = "long" if ftype.fmt == "jsonl" or explicit_long or _is_long(table.columns) else "wide"
    matrix_kw = {"kind": kind, "score_range": score_range, "name": name if name is not None else ftype.stem}
    try:
        if layout == "long":
            return _long_matrix(path, table, model_column, item_column, score_column, **matrix_kw)
        return _wide_matrix(path, table, model_column, duplicate_models, **matrix_kw)
    except InvalidScoresError as exc:
        if str(exc).startswith(str(path)):
            raise
        raise type(exc)(f"{path}: {template_of(exc)}") from exc


def _format_score(value: float) -> str:
    if math.isnan(value):
        return ""
    if value.is_integer() and abs(value) < 1e15:
        return f"{value:.0f}"  # "1", and "-0" for negative zero
    return repr(value)  # shortest text that reads back to the same float


def _model_header(matrix: ScoreMatrix) -> str:
    # The first column's name must not clash with an item id, or the header would repeat.
    taken = set(matrix.item_ids)
    return next(c for c in ("model", "model_id", "model_name", "_model") if c not in taken)


def _long_records(matrix: ScoreMatrix) -> Iterator[tuple[str, str, float]]:
    scores = matrix.scores.tolist()
    for m, row in zip(matrix.model_ids, scores, strict=True):
        for i, s in zip(matrix.item_ids, row, strict=True):
            yield m, i, s


@contextmanager
def _open_write(path: Path, gzipped: bool) -> Iterator[IO[str]]:
    handle = open(path, "wb")
    # No file name and mtime=0 in the gzip header: the same scores give the same bytes.
    raw = gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0) if gzipped else handle
    try:
        with io.TextIOWrapper(raw, encoding="utf-8", newline="") as f:
            yield f
    finally:
        raw.close()
        handle.close()


def write_scores(
    matrix: ScoreMatrix, path: str | Path, *, layout: Layout | None = None, overwrite: bool = False,
    protected: Sequence[str | Path] = (),
) -> Path:
    """Write ``matrix`` to a CSV, CSV.gz, TSV, Parquet or JSONL file.

    Parameters
    ----------
    matrix : ScoreMatrix
        The scores to write.
    path : str or Path
        Output file; the suffix picks the format as in :func:`read_scores`.
    layout : {"wide", "long"} or None
        ``None`` (default): wide for CSV/TSV/Parquet, long for JSONL (the only
        layout JSON supports). Long files hold every (model, item) pair in
        matrix order, with an empty / null score for a missing one, so the
        order of ids survives the round trip.
    overwrite : bool
        Replace an existing file (default: refuse it). An SQLite database
        (a session file) is never overwritten.
    protected : sequence of paths
        Files never to write over, even with ``overwrite`` (the files the
        matrix was read from, say).

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    ConfigurationError
        ``path`` exists (without ``overwrite``), is protected, or its folder
        does not exist.
    StorageError
        The file could not be written (no permission, a full disk); the
        file at ``path``, if any, is left as it was.

    Notes
    -----
    The file is written to a temporary file beside ``path`` and renamed over
    it when complete (:mod:`activeeval._files`): never half-written.
    ``read_scores(path, kind=matrix.kind, score_range=matrix.score_range)``
    gives back a matrix with the same ids, order and scores (same
    :meth:`~ScoreMatrix.fingerprint`); without ``kind`` the kind is inferred.
    """
    if not isinstance(matrix, ScoreMatrix):
        raise ConfigurationError(f"matrix must be a ScoreMatrix, got {type(matrix).__name__}")
    if layout not in (None, "wide", "long"):
        raise ConfigurationError(f"layout must be 'wide', 'long' or None (auto), got {layout!r}")
    path = Path(path)
    ftype = _file_type(path)
    if ftype.fmt == "jsonl" and layout == "wide":
        raise DataFormatError(f"{path}: JSON lines are always long; pass layout='long' or write a .csv/.parquet file")
    layout = layout or ("long" if ftype.fmt == "jsonl" else "wide")
    if ftype.fmt == "parquet":
        _import_parquet(path)
    with atomic_output(path, overwrite=overwrite, protected=protected, what="score file") as tmp:
        if ftype.fmt == "parquet":
            _write_parquet(matrix, tmp, layout)
        elif ftype.fmt == "jsonl":
            with _open_write(tmp, ftype.gzipped) as f:
                for m, i, s in _long_records(matrix):
                    f.write(json.dumps({"model": m, "item": i, "score": None if math.isnan(s) else s}) + "\n")
        else:
            with _open_write(tmp, ftype.gzipped) as f:
                writer = csv.writer(f, delimiter="\t" if ftype.fmt == "tsv" else ",", lineterminator="\n")
                if layout == "wide":
                    writer.writerow([_model_header(matrix), *matrix.item_ids])
                    for m, row in zip(matrix.model_ids, matrix.scores.tolist(), strict=True):
                        writer.writerow([m, *map(_format_score, row)])
                else:
                    writer.writerow(["model", "item", "score"])
                    writer.writerows((m, i, _format_score(s)) for m, i, s in _long_records(matrix))
    return path


def _write_parquet(matrix: ScoreMatrix, path: Path, layout: Layout) -> None:
    pq = _import_parquet(path)
    import pyarrow as pa

    if layout == "wide":
        columns = {_model_header(matrix): pa.array(matrix.model_ids, pa.string())}
        columns.update({item: pa.array(matrix.scores[:, j], pa.float64()) for j, item in enumerate(matrix.item_ids)})
    else:
        columns = {
            "model": pa.array(np.repeat(matrix.model_ids, matrix.n_items).tolist(), pa.string()),
            "item": pa.array(list(matrix.item_ids) * matrix.n_models, pa.string()),
            "score": pa.array(matrix.scores.ravel(), pa.float64()),
        }
    pq.write_table(pa.table(columns), path)


def read_prior_weights(path: str | os.PathLike[str]) -> dict[str, float]:
    """Metadata prior weights (BayesAME App. B.2), one per reference model: ``{model id: weight}``.

    ``path`` is a JSON object ``{"model": weight, ...}`` (``.json``) or a
    CSV/TSV table with a header naming the columns ``model`` and ``weight``
    (``.tsv`` or a tab in the header: tab-separated). Weights must be finite
    numbers ≥ 0; each model once. Whether the models are the reference's is
    checked where the weights are used. Raises :class:`DataFormatError`
    naming the file, the line and the fix.
    """
    path = Path(path).expanduser()
    fix = "write one 'model,weight' row per reference model (or a JSON object {\"model\": weight})"
    if not path.is_file():
        raise DataFormatError(f"prior weights file {str(path)!r} does not exist; {fix}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"cannot read the prior weights file {str(path)!r} ({exc})") from exc
    rows: list[tuple[str, object, str]] = []  # (model, value, where)
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
            raise DataFormatError(f"prior weights file {str(path)!r} is not valid JSON ({exc}); {fix}") from exc
        if not isinstance(data, dict):
            raise DataFormatError(f"prior weights file {str(path)!r} must hold a JSON object {{model: weight}}, "
                                  f"got {type(data).__name__}")
        rows = [(str(k), v, f"key {k!r}") for k, v in data.items()]
    else:
        lines = text.splitlines()
        delimiter = "\t" if path.suffix.lower() == ".tsv" or (lines and "\t" in lines[0]) else ","
        reader = csv.reader(lines, delimiter=delimiter)
        header = [c.strip().lower() for c in next(reader, [])]
        if "model" not in header or "weight" not in header:
            raise DataFormatError(f"prior weights file {str(path)!r} needs a header with the columns model and "
                                  f"weight, got {header!r}; {fix}")
        i_model, i_weight = header.index("model"), header.index("weight")
        for line_no, cells in enumerate(reader, start=2):
            if not any(c.strip() for c in cells):
                continue
            if len(cells) <= max(i_model, i_weight):
                raise DataFormatError(f"prior weights file {str(path)!r}, line {line_no}: expected the columns "
                                      f"{', '.join(header)}, got {cells!r}")
            rows.append((cells[i_model].strip(), cells[i_weight].strip(), f"line {line_no}"))
    if not rows:
        raise DataFormatError(f"prior weights file {str(path)!r} has no weights; {fix}")
    out: dict[str, float] = {}
    for model, value, where in rows:
        try:  # a text strictly (no '1_0', which float() reads as 10); a boolean is no weight
            weight = (parse_score_text(value) if isinstance(value, str)
                      else math.nan if isinstance(value, bool) else float(value))  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            weight = math.nan
        if not math.isfinite(weight) or weight < 0:
            raise DataFormatError(f"prior weights file {str(path)!r}, {where}: the weight of {model!r} must be a "
                                  f"number >= 0, got {value!r}")
        if model in out:
            raise DataFormatError(f"prior weights file {str(path)!r}, {where}: model {model!r} is given twice")
        out[model] = weight
    return out
