"""Data layer: the ScoreMatrix, file readers and writers, bundled datasets."""

from __future__ import annotations

from activeeval.data.io import read_scores, write_scores
from activeeval.data.matrix import DropReport, ScoreMatrix

__all__ = ["DropReport", "ScoreMatrix", "read_scores", "write_scores"]
