"""Data layer: the ScoreMatrix, file readers and writers, bundled datasets.

``read_scores`` and ``write_scores`` are imported on first use: they need
pandas, which the rest of the data layer does not.
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
