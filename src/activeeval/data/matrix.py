"""ScoreMatrix: per-item scores of several models on one benchmark.

Rows are models, columns are items (the layout of the files in the wild).
Missing entries are NaN; they are real in public data (a model that was not
scored on an item) and are handled by an explicit, reported policy
(:meth:`ScoreMatrix.dropna`), never silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from activeeval.exceptions import (
    ConfigurationError,
    DuplicateIdError,
    InvalidScoresError,
    MissingScoresError,
    ScoreOutOfRangeError,
    UnknownItemError,
    UnknownModelError,
)

__all__ = ["DropReport", "ScoreKind", "ScoreMatrix", "parse_score_text"]

ScoreKind = Literal["binary", "continuous"]
DropAxis = Literal["models", "items", "auto"]


# An ordinary decimal number in ASCII digits: 1, -0, 0.5, .5, 1e-3, +2.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_score_text(text: str) -> float:
    """A score written as text, read strictly: an ordinary decimal number such as ``1``, ``0.5``, ``-0`` or
    ``1e-3``, surrounding whitespace allowed.

    Python's ``float`` also reads ``1_0`` (as 10), ``nan``, ``inf`` and non-ASCII digits (``'١'`` as 1); none of
    them is taken for a score. Raises :class:`InvalidScoresError` whose ``reason`` says what is wrong with the
    text (``"is not a number"``, ...); its message is the text followed by the reason.
    """
    s = text.strip()
    if _NUMBER.fullmatch(s):
        value = float(s)
        if math.isfinite(value):
            return value
        reason = "is too large to be a finite number"
    elif s.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        reason = "is not a finite number (a score must be finite)"
    elif "_" in s:
        reason = "is not a number (digit separators '_' are not allowed in a score)"
    else:
        reason = "is not a number"
    err = InvalidScoresError(f"{s[:80]!r} {reason}")
    err.reason = reason  # type: ignore[attr-defined]
    raise err


def _duplicates(ids: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    dup: list[str] = []
    for x in ids:
        if x in seen and x not in dup:
            dup.append(x)
        seen.add(x)
    return dup


@dataclass(frozen=True)
class DropReport:
    """What :meth:`ScoreMatrix.dropna` removed, and why.

    Attributes
    ----------
    axis : {"models", "items", "none"}
        What was dropped.
    dropped_models, dropped_items : tuple of str
        Ids of the removed models / items.
    n_missing : int
        Number of missing entries in the matrix before dropping.
    """

    axis: str
    dropped_models: tuple[str, ...] = ()
    dropped_items: tuple[str, ...] = ()
    n_missing: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.dropped_models or self.dropped_items)

    def summary(self) -> str:
        """One line for humans, e.g. for a warning or the CLI."""
        if not self.changed:
            return "no missing scores; nothing dropped"
        parts = []
        if self.dropped_models:
            shown = ", ".join(self.dropped_models[:5])
            more = f" and {len(self.dropped_models) - 5} more" if len(self.dropped_models) > 5 else ""
            parts.append(f"dropped {len(self.dropped_models)} model(s) with missing scores ({shown}{more})")
        if self.dropped_items:
            shown = ", ".join(self.dropped_items[:5])
            more = f" and {len(self.dropped_items) - 5} more" if len(self.dropped_items) > 5 else ""
            parts.append(f"dropped {len(self.dropped_items)} item(s) with missing scores ({shown}{more})")
        return f"{self.n_missing} missing reference score(s): " + "; ".join(parts)


@dataclass(frozen=True, eq=False)
class ScoreMatrix:
    """Per-item scores of ``n_models`` models on ``n_items`` items.

    Parameters
    ----------
    scores : array_like of shape (n_models, n_items)
        Scores; NaN marks a missing entry. Infinite values are rejected.
    model_ids, item_ids : sequence of str
        Unique ids of the rows and the columns.
    kind : {"binary", "continuous"}, optional
        Inferred when omitted: binary if every present score is 0 or 1.
    score_range : (float, float) or None, optional
        Bounds of a valid score. Default (0, 1), the range of every bundled
        benchmark; ``None`` for unbounded scores. Scores outside it are an
        error (fix the data or pass a wider ``score_range``).
    name : str, optional
        A label used in messages and reports.

    Notes
    -----
    The matrix is immutable: the array is copied and made read-only, and every
    transformation returns a new matrix.
    """

    scores: np.ndarray
    model_ids: tuple[str, ...]
    item_ids: tuple[str, ...]
    kind: ScoreKind = "continuous"
    score_range: tuple[float, float] | None = (0.0, 1.0)
    name: str | None = None
    _item_index: dict[str, int] = field(init=False, repr=False, compare=False)
    _model_index: dict[str, int] = field(init=False, repr=False, compare=False)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)
    _n_missing: int | None = field(default=None, init=False, repr=False, compare=False)

    def __init__(
        self,
        scores: object,
        model_ids: Iterable[object] | None = None,
        item_ids: Iterable[object] | None = None,
        kind: ScoreKind | None = None,
        score_range: tuple[float, float] | None = (0.0, 1.0),
        name: str | None = None,
    ) -> None:
        label = f"score matrix {name!r}" if name else "score matrix"
        try:
            arr = np.array(scores, dtype=float, copy=True)
        except (TypeError, ValueError) as exc:
            raise InvalidScoresError(
                f"{label}: scores are not numeric ({exc}); give a 2-D array of numbers, NaN for missing"
            ) from exc
        if arr.ndim != 2:
            raise InvalidScoresError(
                f"{label}: scores must be 2-D (models x items), got shape {arr.shape}"
            )
        n_models, n_items = arr.shape
        if isinstance(model_ids, str) or isinstance(item_ids, str):
            raise ConfigurationError(f"{label}: model_ids and item_ids must be sequences of ids, not one string")
        mids = tuple(str(m) for m in (model_ids if model_ids is not None else (f"model{j}" for j in range(n_models))))
        iids = tuple(str(i) for i in (item_ids if item_ids is not None else (f"item{i}" for i in range(n_items))))
        if len(mids) != n_models:
            raise InvalidScoresError(f"{label}: {len(mids)} model ids for {n_models} rows of scores")
        if len(iids) != n_items:
            raise InvalidScoresError(f"{label}: {len(iids)} item ids for {n_items} columns of scores")
        if dup := _duplicates(mids):
            raise DuplicateIdError(
                f"{label}: duplicate model id(s) {dup[:5]}; each model must appear once (merge or rename the rows)"
            )
        if dup := _duplicates(iids):
            raise DuplicateIdError(
                f"{label}: duplicate item id(s) {dup[:5]}; each item must appear once (merge or rename the columns)"
            )
        if np.isinf(arr).any():
            r, c = np.argwhere(np.isinf(arr))[0]
            raise InvalidScoresError(
                f"{label}: infinite score for model {mids[r]!r} on item {iids[c]!r}; "
                "scores must be finite (use an empty cell / NaN for a missing score)"
            )
        if score_range is not None:
            try:
                lo, hi = (float(v) for v in score_range)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"score_range must be a pair (low, high) of numbers or None, got {score_range!r}"
                ) from exc
            if not lo < hi:
                raise ConfigurationError(f"score_range must be (low, high) with low < high, got {score_range}")
            bad = (arr < lo) | (arr > hi)
            if bad.any():
                r, c = np.argwhere(bad)[0]
                raise ScoreOutOfRangeError(
                    f"{label}: score {arr[r, c]:g} of model {mids[r]!r} on item {iids[c]!r} is outside the "
                    f"score range [{lo:g}, {hi:g}]; fix the data or pass score_range=(low, high) "
                    "(None for unbounded scores)"
                )
            score_range = (lo, hi)
        present = arr[~np.isnan(arr)]
        is_binary = bool(np.all((present == 0.0) | (present == 1.0)))
        if kind is None:
            kind = "binary" if is_binary and present.size else "continuous"
        elif kind == "binary" and not is_binary:
            bad_val = present[(present != 0.0) & (present != 1.0)][0]
            raise InvalidScoresError(
                f"{label}: kind='binary' but a score is {bad_val:g}; binary scores must be 0 or 1 "
                "(use kind='continuous')"
            )
        elif kind not in ("binary", "continuous"):
            raise ConfigurationError(f"kind must be 'binary' or 'continuous', got {kind!r}")
        arr.setflags(write=False)
        object.__setattr__(self, "scores", arr)
        object.__setattr__(self, "model_ids", mids)
        object.__setattr__(self, "item_ids", iids)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "score_range", score_range)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_item_index", {s: i for i, s in enumerate(iids)})
        object.__setattr__(self, "_model_index", {s: j for j, s in enumerate(mids)})

    @classmethod
    def _from_parts(
        cls, scores: np.ndarray, model_ids: Sequence[str], item_ids: Sequence[str], kind: ScoreKind,
        score_range: tuple[float, float] | None, name: str | None, fingerprint: str, n_missing: int | None = None,
    ) -> ScoreMatrix:
        """A matrix from the parts of one built (and validated) before, e.g. a cached copy of a parsed file.

        The scores are not checked again (nor counted, when ``n_missing`` is given); the shape, the ids'
        uniqueness and the kind are (ValueError: the parts do not make a matrix).
        """
        mids, iids = tuple(map(str, model_ids)), tuple(map(str, item_ids))
        item_index, model_index = {s: i for i, s in enumerate(iids)}, {s: j for j, s in enumerate(mids)}
        if (scores.dtype != np.float64 or scores.shape != (len(mids), len(iids)) or len(item_index) != len(iids)
                or len(model_index) != len(mids) or kind not in ("binary", "continuous")):
            raise ValueError("these parts do not make a valid score matrix")
        self = object.__new__(cls)
        scores.setflags(write=False)
        for attr, value in (("scores", scores), ("model_ids", mids), ("item_ids", iids), ("kind", kind),
                            ("score_range", None if score_range is None else tuple(map(float, score_range))),
                            ("name", name), ("_item_index", item_index), ("_model_index", model_index),
                            ("_fingerprint", str(fingerprint)),
                            ("_n_missing", None if n_missing is None else int(n_missing))):
            object.__setattr__(self, attr, value)
        return self

    # ------------------------------------------------------------------ basics
    @property
    def n_models(self) -> int:
        return self.scores.shape[0]

    @property
    def n_items(self) -> int:
        return self.scores.shape[1]

    @property
    def shape(self) -> tuple[int, int]:
        return self.scores.shape

    @property
    def n_missing(self) -> int:
        """Missing (NaN) scores (counted once: the scores never change; 0.2 s at 24 M cells)."""
        n_missing = self._n_missing
        if n_missing is None:
            n_missing = int(np.isnan(self.scores).sum())
            object.__setattr__(self, "_n_missing", n_missing)
        return n_missing

    @property
    def has_missing(self) -> bool:
        return self.n_missing > 0

    def __repr__(self) -> str:
        label = f"{self.name!r}, " if self.name else ""
        return (
            f"ScoreMatrix({label}{self.n_models} models x {self.n_items} items, {self.kind}, "
            f"range={self.score_range}, missing={self.n_missing})"
        )

    def __len__(self) -> int:
        return self.n_models

    def model_index(self, model: str) -> int:
        """Row of ``model``; :class:`UnknownModelError` if it is not here."""
        try:
            return self._model_index[str(model)]
        except KeyError as exc:
            raise UnknownModelError(
                f"unknown model {model!r} in {self._label()}; known models include "
                f"{list(self.model_ids[:5])} (see .model_ids)"
            ) from exc

    def item_index(self, item: str | int) -> int:
        """Column of ``item`` (an item id, or an integer index that is checked)."""
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if 0 <= int(item) < self.n_items:
                return int(item)
            raise UnknownItemError(
                f"item index {int(item)} is out of range for {self._label()} with {self.n_items} items "
                f"(valid: 0..{self.n_items - 1}, or an item id)"
            )
        try:
            return self._item_index[str(item)]
        except KeyError as exc:
            raise UnknownItemError(
                f"unknown item {item!r} in {self._label()}; item ids look like "
                f"{list(self.item_ids[:3])} (see .item_ids)"
            ) from exc

    def _label(self) -> str:
        return f"score matrix {self.name!r}" if self.name else "the score matrix"

    def model_scores(self, model: str) -> np.ndarray:
        """Scores of one model, ndarray of shape (n_items,)."""
        return self.scores[self.model_index(model)]

    def mean_scores(self) -> np.ndarray:
        """Full-benchmark score of each model (mean over its present items), shape (n_models,)."""
        return np.nanmean(self.scores, axis=1)

    # ------------------------------------------------------- transformations
    def _replace(self, scores: np.ndarray, model_ids: Sequence[str], item_ids: Sequence[str]) -> ScoreMatrix:
        return ScoreMatrix(scores, model_ids, item_ids, kind=self.kind, score_range=self.score_range, name=self.name)

    def select_models(self, models: Iterable[str]) -> ScoreMatrix:
        """A matrix with only ``models``, in the given order."""
        rows = [self.model_index(m) for m in models]
        return self._replace(self.scores[rows], [self.model_ids[r] for r in rows], self.item_ids)

    def drop_models(self, models: Iterable[str]) -> ScoreMatrix:
        """A matrix without ``models`` (each must exist)."""
        drop = {self.model_index(m) for m in models}
        keep = [j for j in range(self.n_models) if j not in drop]
        return self._replace(self.scores[keep], [self.model_ids[j] for j in keep], self.item_ids)

    def select_items(self, items: Iterable[str | int]) -> ScoreMatrix:
        cols = [self.item_index(i) for i in items]
        return self._replace(self.scores[:, cols], self.model_ids, [self.item_ids[c] for c in cols])

    def drop_items(self, items: Iterable[str | int]) -> ScoreMatrix:
        drop = {self.item_index(i) for i in items}
        keep = [i for i in range(self.n_items) if i not in drop]
        return self._replace(self.scores[:, keep], self.model_ids, [self.item_ids[i] for i in keep])

    def dropna(self, axis: DropAxis = "models") -> tuple[ScoreMatrix, DropReport]:
        """Remove missing entries by dropping whole models or whole items.

        Parameters
        ----------
        axis : {"models", "items", "auto"}
            ``"models"`` (default) drops reference models with any missing
            score, so the benchmark's item set (what R* averages over) stays
            whole. ``"items"`` drops items with any missing score.
            ``"auto"`` drops models unless that would leave fewer than 2 or
            fewer than half of them, in which case it drops items.

        Returns
        -------
        matrix : ScoreMatrix
            Complete matrix (no NaN).
        report : DropReport
            What was dropped; ``report.changed`` is False for a complete matrix.
        """
        if axis not in ("models", "items", "auto"):
            raise ConfigurationError(f"dropna axis must be 'models', 'items' or 'auto', got {axis!r}")
        n_missing = self.n_missing
        if n_missing == 0:
            return self, DropReport(axis="none")
        missing = np.isnan(self.scores)
        bad_models = missing.any(axis=1)
        bad_items = missing.any(axis=0)
        if axis == "auto":
            kept = int((~bad_models).sum())
            axis = "models" if kept >= 2 and kept >= self.n_models / 2 else "items"
        if axis == "models":
            keep = np.flatnonzero(~bad_models)
            if keep.size < 2:
                raise MissingScoresError(
                    f"{self._label()}: only {keep.size} model(s) have no missing scores; "
                    "use dropna(axis='items') to drop the incomplete items instead"
                )
            out = self._replace(self.scores[keep], [self.model_ids[j] for j in keep], self.item_ids)
            report = DropReport("models", tuple(self.model_ids[j] for j in np.flatnonzero(bad_models)), (), n_missing)
        else:
            keep = np.flatnonzero(~bad_items)
            if keep.size < 2:
                raise MissingScoresError(
                    f"{self._label()}: only {keep.size} item(s) have no missing scores; "
                    "use dropna(axis='models') to drop the incomplete models instead"
                )
            out = self._replace(self.scores[:, keep], self.model_ids, [self.item_ids[i] for i in keep])
            report = DropReport("items", (), tuple(self.item_ids[i] for i in np.flatnonzero(bad_items)), n_missing)
        return out, report

    def require_complete(self, what: str = "reference scores") -> None:
        """Raise :class:`MissingScoresError` if any entry is missing."""
        if self.has_missing:
            r, c = np.argwhere(np.isnan(self.scores))[0]
            raise MissingScoresError(
                f"{self._label()}: {self.n_missing} missing {what} (first: model {self.model_ids[r]!r}, "
                f"item {self.item_ids[c]!r}); call .dropna() to drop incomplete models or items"
            )

    def check_score(self, score: float, *, item: str | None = None) -> float:
        """Validate one new score against this benchmark's kind and range.

        Returns the score as a float; raises :class:`InvalidScoresError`
        (NaN/inf/non-numeric) or :class:`ScoreOutOfRangeError`.
        """
        where = f" for item {item!r}" if item is not None else ""
        if isinstance(score, str):  # as typed on a command line: strictly (no '1_0', no 'nan')
            try:
                value = parse_score_text(score)
            except InvalidScoresError as exc:
                raise InvalidScoresError(
                    f"score{where} is {score.strip()[:80]!r}, which {exc.reason}") from None
        else:
            try:
                value = float(score)
            except (TypeError, ValueError) as exc:
                raise InvalidScoresError(f"score{where} is not a number: {score!r}") from exc
        if not np.isfinite(value):
            raise InvalidScoresError(f"score{where} is {value}; scores must be finite numbers")
        if self.kind == "binary" and value not in (0.0, 1.0):
            raise ScoreOutOfRangeError(
                f"score{where} is {value:g} but {self._label()} is binary; record 0 or 1 "
                "(or load the references with kind='continuous')"
            )
        if self.score_range is not None:
            lo, hi = self.score_range
            if not lo <= value <= hi:
                raise ScoreOutOfRangeError(
                    f"score{where} is {value:g}, outside the score range [{lo:g}, {hi:g}] of {self._label()}; "
                    "rescale it, or load the references with a wider score_range"
                )
        return value

    # ------------------------------------------------------------ conversion
    def to_pandas(self):
        """Wide DataFrame: index = model ids, columns = item ids."""
        import pandas as pd

        return pd.DataFrame(np.array(self.scores), index=pd.Index(self.model_ids, name="model"), columns=self.item_ids)

    def fingerprint(self) -> str:
        """SHA-256 of ids, kind, range and scores: identifies the data exactly (computed once: they never change)."""
        fingerprint = self._fingerprint
        if fingerprint is None:
            import hashlib

            h = hashlib.sha256()
            h.update(repr((self.model_ids, self.item_ids, self.kind, self.score_range)).encode())
            # numpy's stub gives ndarray its __buffer__ only for Python >= 3.12 (checked as 3.10): a stub limitation.
            h.update(np.ascontiguousarray(self.scores))  # type: ignore[arg-type]
            fingerprint = h.hexdigest()
            object.__setattr__(self, "_fingerprint", fingerprint)
        return fingerprint
