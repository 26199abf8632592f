"""Shared helpers of the harness adapters."""

from __future__ import annotations

import gzip
import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import DataFormatError, DuplicateIdError, InvalidScoresError

__all__ = ["ScoreFormat", "iter_jsonl", "matrix_from_rows", "read_json", "require_file", "to_score"]


@dataclass(frozen=True)
class ScoreFormat:
    """One harness output format, as an adapter module declares it (its ``FORMAT``).

    ``read(path, **options)`` gives one model's ``{item_id: score}``;
    ``options`` are the keyword options it takes; ``matches(path)`` says
    whether a file (or folder) looks like this format, for detection.
    """

    name: str
    read: Callable[..., dict[str, float]]
    options: frozenset[str]
    matches: Callable[[Path], bool]


def require_file(path: str | os.PathLike[str], what: str) -> Path:
    p = Path(path).expanduser()
    if not p.exists():
        raise DataFormatError(f"{what} {str(p)!r} does not exist")
    return p


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-empty line; DataFormatError naming the line otherwise."""
    with _open(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataFormatError(f"{str(path)!r} line {lineno} is not valid JSON ({exc.msg})") from exc
            if not isinstance(obj, dict):
                raise DataFormatError(f"{str(path)!r} line {lineno} is not a JSON object")
            yield lineno, obj


def read_json(path: Path) -> Any:
    try:
        with _open(path) as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataFormatError(f"{str(path)!r} is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except OSError as exc:
        raise DataFormatError(f"cannot read {str(path)!r}: {exc}") from exc


def to_score(value: Any, where: str) -> float:
    """A metric value as a float: booleans become 0/1; NaN/inf/non-numbers are errors."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
        if math.isfinite(v):
            return v
        raise InvalidScoresError(f"{where}: score is {v}; scores must be finite")
    raise InvalidScoresError(f"{where}: score {value!r} is not a number (expected a number or true/false)")


def matrix_from_rows(
    rows: Sequence[tuple[str, Mapping[str, float]]],
    *,
    name: str | None,
    score_range: tuple[float, float] | None,
    kind: str | None = None,
) -> ScoreMatrix:
    """One model per row; columns = union of item ids (first-seen order); absent = NaN."""
    seen: dict[str, str] = {}
    for model, _ in rows:
        if model in seen:
            raise DuplicateIdError(
                f"model {model!r} appears twice ({seen[model]} and again); give each model one output folder/file"
            )
        seen[model] = model
    items: dict[str, int] = {}
    for _, scores in rows:
        for iid in scores:
            items.setdefault(iid, len(items))
    arr = np.full((len(rows), len(items)), np.nan)
    for r, (_, scores) in enumerate(rows):
        for iid, s in scores.items():
            arr[r, items[iid]] = s
    return ScoreMatrix(arr, [m for m, _ in rows], list(items), kind=kind, score_range=score_range, name=name)  # type: ignore[arg-type]
