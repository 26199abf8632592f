"""Plain per-item score files: one row per item with an item id and a score.

CSV/TSV (optionally gzipped), Parquet or JSON lines. Column names are matched
case-insensitively against :data:`activeeval.data.io.ITEM_ALIASES` (item,
item_id, doc_id, question_id, instance_id) and ``SCORE_ALIASES`` (score,
value, correct, acc) unless given.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from activeeval.data.adapters._common import ScoreFormat, require_file, to_score
from activeeval.data.io import ITEM_ALIASES, SCORE_ALIASES
from activeeval.exceptions import DataFormatError, DuplicateIdError

__all__ = ["read_item_scores"]


def _pick(columns: list[str], given: str | None, aliases: tuple[str, ...], what: str, path: Path) -> str:
    lower = {c.lower(): c for c in columns}
    if given is not None:
        if given.lower() in lower:
            return lower[given.lower()]
        raise DataFormatError(f"{str(path)!r} has no {what} column {given!r}; columns: {columns}")
    for a in aliases:
        if a in lower:
            return lower[a]
    raise DataFormatError(
        f"{str(path)!r} has no {what} column (looked for {list(aliases)}); columns: {columns}; "
        f"name it with --{what}-column"
    )


def read_item_scores(
    path: str | os.PathLike[str], *, item_column: str | None = None, score_column: str | None = None
) -> dict[str, float]:
    """Item id → score from a plain CSV/TSV/Parquet/JSONL file with one row per item."""
    p = require_file(path, "score file")
    name = p.name.lower().removesuffix(".gz")
    try:
        if name.endswith((".parquet", ".pq")):
            df = pd.read_parquet(p)
        elif name.endswith((".jsonl", ".ndjson", ".json")):
            # precise_float: pandas' default float parser is off by an ulp on many numbers (1/3 among them)
            df = pd.read_json(p, lines=not name.endswith(".json") or _is_lines(p), dtype=False, precise_float=True)
        elif name.endswith((".tsv", ".tab")):
            df = pd.read_csv(p, sep="\t", dtype=str, keep_default_na=False)
        elif name.endswith(".csv"):
            df = pd.read_csv(p, dtype=str, keep_default_na=False)
        else:
            raise DataFormatError(
                f"cannot tell the format of {str(p)!r} from its name; use .csv, .tsv, .parquet, .jsonl or .json"
            )
    except (ValueError, OSError, ImportError) as exc:
        if isinstance(exc, DataFormatError):
            raise
        raise DataFormatError(f"cannot read {str(p)!r}: {exc}") from exc
    cols = [str(c) for c in df.columns]
    icol = _pick(cols, item_column, ITEM_ALIASES, "item", p)
    scol = _pick(cols, score_column, SCORE_ALIASES, "score", p)
    out: dict[str, float] = {}
    for row, (iid, raw) in enumerate(zip(df[icol], df[scol]), start=2 if name.endswith((".csv", ".tsv")) else 1):
        iid = str(iid)
        if iid in out:
            raise DuplicateIdError(f"{str(p)!r} row {row}: item {iid!r} appears twice")
        value = raw
        if isinstance(raw, str):
            text = raw.strip().lower()
            value = {"true": True, "false": False}.get(text, raw)
            if not isinstance(value, bool):
                try:
                    value = float(text)
                except ValueError:
                    value = raw
        out[iid] = to_score(value, f"{str(p)!r} row {row} (item {iid!r})")
    return out


def _is_lines(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(64).lstrip()
    return not head.startswith(b"[")


FORMAT = ScoreFormat("plain", read_item_scores, frozenset({"item_column", "score_column"}), lambda p: True)
