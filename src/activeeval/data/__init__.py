"""Data layer: the ScoreMatrix, file readers and writers, bundled datasets.

``read_scores`` and ``write_scores`` are imported on first use. A CSV or TSV
file is read without pandas (``io._factorize_text``); Parquet and JSONL files
are read through pandas, imported then.
"""

from __future__ import annotations

from typing import Any

from activeeval.data.matrix import DropReport, ScoreMatrix

__all__ = ["DropReport", "ScoreMatrix", "read_scores", "write_scores"]


def __getattr__(name: str) -> Any:
    if name in ("read_scores", "write_scores"):
        from activeeval.data import io

        return getattr(io, name)
    raise AttributeError(f"module 'activeeval.data' has no attribute {name!r}")
