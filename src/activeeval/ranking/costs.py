"""Per-item costs of the models being ranked: checking them, and reading a costs file (JSON or CSV)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from activeeval.data.matrix import parse_score_text
from activeeval.exceptions import ConfigurationError, DataFormatError


def check_costs(costs: Mapping[str, float] | None, models: Sequence[str]) -> dict[str, float]:
    """Relative per-item cost of each model (default 1 for all). Every model needs a finite cost > 0."""
    if costs is None:
        return {m: 1.0 for m in models}
    missing = [m for m in models if m not in costs]
    if missing:
        raise ConfigurationError(
            f"costs are missing for model(s) {missing}; give a positive cost for every model to rank"
        )
    out = {}
    for m in models:
        value = costs[m]
        try:  # a text strictly (no '1_0', which float() reads as 10); a boolean is no cost
            c = parse_score_text(value) if isinstance(value, str) else (
                math.nan if isinstance(value, bool) else float(value))
        except (TypeError, ValueError, OverflowError):
            c = float("nan")
        if not (math.isfinite(c) and c > 0):
            raise ConfigurationError(f"cost of model {m!r} must be a positive number, got {costs[m]!r}")
        out[m] = c
    return out


def load_costs(path: str | Path) -> dict[str, float]:
    """Read relative costs: a JSON object {model: cost} or a CSV/TSV of ``model,cost`` rows (header optional)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigurationError(f"costs file {str(p)!r} does not exist; give a JSON or CSV file of model,cost")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"cannot read the costs file {str(p)!r} ({exc}); save it as UTF-8 text") from exc
    if p.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
            raise DataFormatError(f"costs file {str(p)!r} is not valid JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise DataFormatError(f"costs file {str(p)!r} must hold a JSON object {{model: cost}}")
        return {str(k): v for k, v in data.items()}
    first = text.splitlines()[0] if text.strip() else ""
    delim = "\t" if "\t" in first else ","
    out: dict[str, Any] = {}
    for i, row in enumerate(csv.reader(text.splitlines(), delimiter=delim)):
        if not row or not "".join(row).strip():
            continue
        if len(row) != 2:
            raise DataFormatError(f"costs file {str(p)!r} line {i + 1}: expected 'model,cost', got {row}")
        model, cost = row[0].strip(), row[1].strip()
        if i == 0:
            try:
                parse_score_text(cost)
            except ValueError:
                continue  # header row
        out[model] = cost
    return out
