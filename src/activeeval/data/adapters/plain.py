"""Plain per-item score files: one row per item with an item id and a score.

CSV/TSV (optionally gzipped), Parquet or JSON lines, read by the same table
reader as reference files (:mod:`activeeval.data.io`: the separator a
``.csv`` really uses, strict numbers, no booleans, lists or objects). Column
names are matched case-insensitively against
:data:`activeeval.data.io.ITEM_ALIASES` (item, item_id, doc_id, question_id,
instance_id) and ``SCORE_ALIASES`` (score, value, correct, acc) unless given.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from activeeval.data.adapters._common import ScoreFormat, require_file
from activeeval.data.io import ITEM_ALIASES, SCORE_ALIASES, _file_type, _ids, _read_table, _to_float
from activeeval.exceptions import DataFormatError, DuplicateIdError, InvalidScoresError

__all__ = ["read_item_scores"]


def _pick(columns: list[str], given: str | None, aliases: tuple[str, ...], what: str, path: Path) -> int:
    lower = {c.lower(): j for j, c in reversed(list(enumerate(columns)))}
    if given is not None:
        if given.lower() in lower:
            return lower[given.lower()]
        raise DataFormatError(f"{str(path)!r} has no {what} column {given!r}; columns: {columns}")
    for a in aliases:
        if a in lower:
            return lower[a]
    raise DataFormatError(
        f"{str(path)!r} has no {what} column (looked for {list(aliases)}); columns: {columns}; "
        f"name it with {what}_column=NAME"
    )


def read_item_scores(
    path: str | os.PathLike[str], *, item_column: str | None = None, score_column: str | None = None
) -> dict[str, float]:
    """Item id → score from a plain CSV/TSV/Parquet/JSONL file with one row per item."""
    p = require_file(path, "score file")
    if not p.is_file():
        raise DataFormatError(f"score file {str(p)!r} is a folder; give a .csv, .tsv, .parquet or .jsonl file")
    table = _read_table(p, _file_type(p))
    icol = _pick(table.columns, item_column, ITEM_ALIASES, "item", p)
    scol = _pick(table.columns, score_column, SCORE_ALIASES, "score", p)
    items = _ids(table, icol, p, "item")
    where = f"column {table.columns[scol]!r}"
    scores = _to_float(table.column(scol), lambda k: f"of item {items[k]!r} ({table.row(k)}, {where})", p,
                       typed=table.frame is not None).tolist()
    out: dict[str, float] = {}
    first: dict[str, int] = {}
    for k, (iid, score) in enumerate(zip(items, scores, strict=True)):
        if iid in out:
            raise DuplicateIdError(f"{str(p)!r}: item {iid!r} appears twice ({table.row(first[iid])} and "
                                   f"{table.row(k)}); keep one row per item")
        if math.isnan(score):
            raise InvalidScoresError(f"{str(p)!r}: no score for item {iid!r} ({table.row(k)}, {where}); give every "
                                     "row a score, or leave the item out")
        out[iid], first[iid] = score, k
    return out


FORMAT = ScoreFormat("plain", read_item_scores, frozenset({"item_column", "score_column"}), lambda p: True)
