"""AlpacaEval annotations.

``alpaca_eval --model_outputs ...`` saves the judge's verdicts in
``results/<model>/<annotator>/annotations.json``: a JSON list, one record per
instruction::

    {"instruction": "...", "output_1": "...", "generator_1": "gpt4_1106_preview",
     "output_2": "...", "generator_2": "<model>", "annotator": "weighted_alpaca_eval_gpt4_turbo",
     "preference": 1.73, "raw_completion": ..., "time_per_example": ..., "price_per_example": ...}

``output_1`` is the baseline, ``output_2`` the evaluated model. ``preference``
is in [1, 2]: 1 = baseline preferred, 2 = model preferred; weighted
annotators give a probability in between; 0 marks a tie (AlpacaEval counts it
as 1.5); a missing/null preference is an annotation that failed. The score of
the model on an instruction is its win probability ``preference - 1`` ∈ [0, 1].

Item ids: ``"item{index:03d}"`` by position in the file (the layout of the
bundled ``alpacaeval2`` matrix, whose columns follow the 805 instructions of
the AlpacaEval set in order), or the instruction text with
``id_by="instruction"``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any, Literal

from activeeval.data.adapters._common import ScoreFormat, matrix_from_rows, read_json, require_file, to_score
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, DuplicateIdError, InvalidScoresError, option

__all__ = ["preference_to_score", "read_alpaca_eval_annotations", "reference_from_alpaca_eval"]

IdBy = Literal["index", "instruction"]


def preference_to_score(preference: Any, where: str = "preference") -> float:
    """AlpacaEval preference p ∈ [1, 2] (0 = tie) → win score p − 1 ∈ [0, 1]; NaN when missing."""
    if preference is None or (isinstance(preference, float) and math.isnan(preference)):
        return math.nan
    p = to_score(preference, where)
    if p == 0.0:
        return 0.5  # a tie, as AlpacaEval scores it
    if not 1.0 <= p <= 2.0:
        raise InvalidScoresError(f"{where}: preference {p:g} is outside [1, 2] (and is not 0, a tie)")
    return p - 1.0


def _records(path: str | os.PathLike[str]) -> tuple[str, list[dict[str, Any]]]:
    p = require_file(path, "AlpacaEval annotations file")
    data = read_json(p)
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise DataFormatError(f"{str(p)!r} is not an AlpacaEval annotations.json (expected a JSON list of objects)")
    for pos, r in enumerate(data):
        if "preference" not in r or "instruction" not in r:
            raise DataFormatError(
                f"{str(p)!r} record {pos} has no 'instruction'/'preference'; is this an AlpacaEval annotations.json?"
            )
    return str(p), data


def _read(path: str | os.PathLike[str], generator: str | None, id_by: IdBy) -> tuple[str, dict[str, float], int]:
    if id_by not in ("index", "instruction"):
        raise ConfigurationError(f"id_by must be 'index' or 'instruction', got {id_by!r}")
    name, data = _records(path)
    generators = sorted({str(r.get("generator_2")) for r in data})
    if generator is None:
        if len(generators) > 1:
            raise DataFormatError(
                f"{name!r} holds annotations of several models {generators[:10]}; choose one with "
                f"{option('generator', '...', 'NAME')}"
            )
        generator = generators[0] if generators else "model"
    out: dict[str, float] = {}
    n_missing = 0
    pos = -1
    for r in data:
        if str(r.get("generator_2")) != generator:
            continue
        pos += 1
        iid = f"item{pos:03d}" if id_by == "index" else str(r["instruction"])
        if iid in out:
            raise DuplicateIdError(f"{name!r}: instruction {iid[:60]!r} appears twice for {generator!r}")
        score = preference_to_score(r["preference"], f"{name!r} record {pos} ({iid[:40]!r})")
        if math.isnan(score):
            n_missing += 1
            continue
        out[iid] = score
    if not out and pos < 0:
        raise DataFormatError(f"{name!r} has no annotations for generator {generator!r}; generators: {generators}")
    return generator, out, n_missing


def read_alpaca_eval_annotations(
    path: str | os.PathLike[str], *, generator: str | None = None, id_by: IdBy = "index"
) -> dict[str, float]:
    """One model's win scores (``preference - 1``) from an AlpacaEval ``annotations.json``.

    Annotations without a preference (failed judge calls) are left out.
    """
    return _read(path, generator, id_by)[1]


def reference_from_alpaca_eval(
    paths: Iterable[str | os.PathLike[str]], *, id_by: IdBy = "index", name: str | None = None
) -> ScoreMatrix:
    """A reference ScoreMatrix from several models' ``annotations.json`` (model = ``generator_2``)."""
    rows = []
    for path in paths:
        generator, scores, _ = _read(path, None, id_by)
        rows.append((generator, scores))
    if not rows:
        raise ConfigurationError("reference_from_alpaca_eval needs at least one annotations file")
    return matrix_from_rows(rows, name=name or "alpaca_eval", score_range=(0.0, 1.0), kind="continuous")


FORMAT = ScoreFormat("alpaca-eval", read_alpaca_eval_annotations, frozenset({"generator", "id_by"}),
                     lambda p: p.name.lower() == "annotations.json")
