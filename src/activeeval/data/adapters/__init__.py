"""Read scores written by evaluation harnesses.

* one model's per-item scores, to record in a session:
  :func:`read_lm_eval_samples`, :func:`read_helm_per_instance_stats`,
  :func:`read_alpaca_eval_annotations`, :func:`read_inspect_log` (Inspect AI
  ``.eval``/``.json`` logs), :func:`read_item_scores` (plain
  CSV/TSV/Parquet/JSONL with item and score columns), or
  :func:`read_scores_any` which picks one by format name or file name;
* several models' scores as a reference :class:`~activeeval.data.matrix.ScoreMatrix`:
  :func:`reference_from_lm_eval`, :func:`reference_from_helm`,
  :func:`reference_from_alpaca_eval`, :func:`reference_from_inspect` (plain wide/long files:
  :func:`activeeval.data.io.read_scores`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from activeeval.data.adapters._common import ScoreFormat
from activeeval.data.adapters.alpaca_eval import read_alpaca_eval_annotations, reference_from_alpaca_eval
from activeeval.data.adapters.helm import read_helm_per_instance_stats, reference_from_helm
from activeeval.data.adapters.inspect_eval import read_inspect_log, reference_from_inspect
from activeeval.data.adapters.lm_eval import read_lm_eval_samples, reference_from_lm_eval
from activeeval.data.adapters.plain import read_item_scores
from activeeval.exceptions import ConfigurationError

__all__ = [
    "FORMATS",
    "detect_format",
    "read_alpaca_eval_annotations",
    "read_helm_per_instance_stats",
    "read_inspect_log",
    "read_item_scores",
    "read_lm_eval_samples",
    "read_scores_any",
    "reference_from_alpaca_eval",
    "reference_from_helm",
    "reference_from_inspect",
    "reference_from_lm_eval",
]

# The adapters, in the order detection tries them (plain matches anything): adding a format is its module,
# with a FORMAT, plus its line here.
_ADAPTERS = ("helm", "lm_eval", "alpaca_eval", "inspect_eval", "plain")


def _formats() -> dict[str, ScoreFormat]:
    import importlib

    found = [importlib.import_module(f"activeeval.data.adapters.{m}").FORMAT for m in _ADAPTERS]
    return {f.name: f for f in found}


FORMATS = tuple(_formats())  # their names, as --format takes them


def detect_format(path: str | os.PathLike[str]) -> str:
    """Format of a score file from its name: samples_*.jsonl → lm-eval, per_instance_stats.json →
    helm, annotations.json → alpaca-eval, *.eval → inspect, anything else → plain."""
    p = Path(path)
    return next(f.name for f in _formats().values() if f.matches(p))


def read_scores_any(path: str | os.PathLike[str], format: str | None = None, **options: Any) -> dict[str, float]:
    """Item id → score of one model, from any supported format.

    ``options`` go to the format's reader: ``metric``, ``task``, ``filter``
    (lm-eval); ``metric``, ``split`` (helm); ``generator``, ``id_by``
    (alpaca-eval); ``score_name``, ``task``, ``value_map`` (inspect);
    ``item_column``, ``score_column`` (plain). Options that are None are
    dropped.
    """
    fmt = format or detect_format(path)
    opts = {k: v for k, v in options.items() if v is not None}
    formats = _formats()
    if fmt not in formats:
        raise ConfigurationError(f"unknown score file format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    chosen = formats[fmt]
    extra = sorted(set(opts) - chosen.options)
    if extra:
        raise ConfigurationError(
            f"option(s) {extra} do not apply to format {fmt!r} (it takes {sorted(chosen.options)})")
    return chosen.read(path, **opts)
