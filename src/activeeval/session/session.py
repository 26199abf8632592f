"""Ask/tell evaluation sessions backed by a crash-safe SQLite journal.

A session evaluates one target model: it says which items to score next
(:meth:`Session.ask`), records the scores the user's harness produced
(:meth:`Session.tell`) and reports the estimate and whether to stop
(:meth:`Session.status`). Every event goes to an append-only journal that is
committed on every call, and the method's state is rebuilt by replaying that
journal, so a session reopened after a crash, or by another process, asks
exactly what the original would have asked.

>>> from activeeval.session import Session
>>> s = Session.create("run.aeval", reference="mmlu", epsilon2=0.05, seed=0)  # doctest: +SKIP
>>> [item.item_id for item in s.ask(2)]                                       # doctest: +SKIP
['mmlu-00412', 'mmlu-00007']
>>> s.tell("mmlu-00412", 1.0)                                                 # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import (
    ActiveEvalError,
    ConfigurationError,
    DuplicateObservationError,
    StorageError,
    UnknownDatasetError,
)
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate
from activeeval.methods.registry import make_method
from activeeval.session.storage import DEFAULT_TIMEOUT, Event, Journal, ReferenceMismatchError, now_iso

__all__ = ["Session", "AskedItem", "SessionStatus", "reference_summary"]


@dataclass(frozen=True)
class AskedItem:
    """An item handed out by :meth:`Session.ask`.

    Attributes
    ----------
    item_id : str
        The id to score (and to pass back to :meth:`Session.tell`).
    index : int
        Column of the item in the reference matrix.
    metadata : dict
        What the reference data says about the item; currently
        ``reference_mean``, the mean score of the reference models on it.
    """

    item_id: str
    index: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"item_id": self.item_id, "index": self.index, **dict(self.metadata)}


@dataclass(frozen=True)
class SessionStatus:
    """A snapshot of a session (see :meth:`Session.status`)."""

    estimate: Estimate
    pending: tuple[str, ...]
    stop_reason: str | None
    level: float = 0.95

    @property
    def stop(self) -> bool:
        return self.stop_reason is not None

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.estimate.ci(self.level)
        return {
            "estimate": self.estimate.mean,
            "ci_low": lo,
            "ci_high": hi,
            "std": self.estimate.std,
            "n_used": self.estimate.n_observed,
            "n_items": self.estimate.n_items,
            "pending": list(self.pending),
            "stop": self.stop,
            "stop_reason": self.stop_reason,
        }


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reference_summary(matrix: ScoreMatrix) -> dict[str, Any]:
    """What the journal stores about the reference, to say what changed on a mismatch."""
    return {
        "name": matrix.name,
        "n_models": matrix.n_models,
        "n_items": matrix.n_items,
        "kind": matrix.kind,
        "score_range": list(matrix.score_range) if matrix.score_range is not None else None,
        "model_ids_sha": _sha(json.dumps(matrix.model_ids)),
        "item_ids_sha": _sha(json.dumps(matrix.item_ids)),
        "fingerprint": matrix.fingerprint(),
    }


def _what_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    parts = []
    if old.get("n_models") != new["n_models"] or old.get("model_ids_sha") != new["model_ids_sha"]:
        parts.append(f"models {old.get('n_models')} -> {new['n_models']} (model ids differ)")
    if old.get("n_items") != new["n_items"] or old.get("item_ids_sha") != new["item_ids_sha"]:
        parts.append(f"items {old.get('n_items')} -> {new['n_items']} (item ids differ)")
    if old.get("kind") != new["kind"]:
        parts.append(f"kind {old.get('kind')} -> {new['kind']}")
    if old.get("score_range") != new["score_range"]:
        parts.append(f"score range {old.get('score_range')} -> {new['score_range']}")
    return "; ".join(parts) if parts else "same models and items, but some scores differ"


def _resolve_reference(reference: str | os.PathLike[str] | ScoreMatrix) -> tuple[ScoreMatrix, dict[str, Any]]:
    """The matrix and a JSON description of how to load it again."""
    if isinstance(reference, ScoreMatrix):
        return reference, {"type": "matrix", "name": reference.name}
    if not isinstance(reference, (str, os.PathLike)):
        raise ConfigurationError(
            f"reference must be a dataset name, a path to a score file or a ScoreMatrix, "
            f"got {type(reference).__name__}"
        )
    from activeeval import datasets  # data layer; imported lazily to keep start-up fast

    text = os.fspath(reference)
    path = Path(text).expanduser()
    matrix = datasets.resolve(text)
    if path.is_file():
        return matrix, {"type": "file", "path": str(path.resolve())}
    return matrix, {"type": "dataset", "name": matrix.name or text}


def _describe(source: Mapping[str, Any]) -> str:
    if source.get("type") == "file":
        return f"file {source['path']!r}"
    if source.get("type") == "dataset":
        return f"bundled dataset {source['name']!r}"
    return f"an in-memory ScoreMatrix ({source.get('name')!r})"


class Session:
    """An ask/tell evaluation of one target model, stored in one SQLite file.

    Build with :meth:`create` or :meth:`open`, not directly. A session is a
    context manager (closing releases the file). Several ``Session`` objects,
    in one process or several, may use the same file: each operation first
    replays the events others have written.
    """

    def __init__(
        self,
        journal: Journal,
        reference: ScoreMatrix,
        settings: dict[str, Any],
    ) -> None:
        self._journal = journal
        self._reference = reference
        self._settings = settings
        self._method: BaseMethod | None = None
        self._seq = 0
        self._pending: dict[str, int | None] = {}
        self._told: dict[str, float] = {}
        self._rebuild()

    # ------------------------------------------------------------ creation
    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix,
        *,
        method: str = "bayesame",
        epsilon1: float = 0.005,
        epsilon2: float = 0.03,
        window: int = 30,
        max_items: int | None = None,
        seed: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        **method_kwargs: Any,
    ) -> Session:
        """Start a new session file at ``path``.

        Parameters
        ----------
        path : path-like
            The session file to create (must not exist).
        reference : str, path-like or ScoreMatrix
            A bundled dataset name, a score file (both reloaded from there on
            :meth:`open`), or a matrix (then :meth:`open` needs it again as
            ``reference=``). Its fingerprint is stored and checked on open.
        method : str
            A name of :func:`activeeval.methods.registry.make_method`.
        epsilon1, epsilon2, window, max_items : stopping rule
            Algorithm 1 (R̂ range over ``window`` steps ≤ ``epsilon1`` and
            95 % interval width ≤ ``epsilon2``); ``max_items`` is a budget.
        seed : int, optional
            Seeds selection; drawn at random (and stored) when omitted, so
            replaying the journal is always deterministic.
        timeout : float
            Seconds to wait for another process's write lock.
        **method_kwargs
            Further keyword arguments of the method (JSON-serialisable).
        """
        if seed is None:
            seed = secrets.randbelow(2**31)
        if max_items is not None and (int(max_items) != max_items or max_items < 1):
            raise ConfigurationError(f"max_items must be a positive integer, got {max_items!r}")
        kwargs: dict[str, Any] = {
            "epsilon1": epsilon1,
            "epsilon2": epsilon2,
            "window": window,
            "n_max": None if max_items is None else int(max_items),
            "seed": seed,
            **method_kwargs,
        }
        try:
            json.dumps(kwargs)
        except TypeError as exc:
            raise ConfigurationError(
                f"session method arguments must be JSON-serialisable to be stored in the journal ({exc})"
            ) from None
        matrix, source = _resolve_reference(reference)
        make_method(method, matrix, **kwargs)  # validate the configuration before creating any file
        from activeeval import __version__

        meta = {
            "method": method,
            "method_kwargs": kwargs,
            "reference_source": source,
            "reference": reference_summary(matrix),
            "created": now_iso(),
            "library_version": __version__,
        }
        journal = Journal.create(path, meta, timeout=timeout)
        try:
            return cls(journal, matrix, meta)
        except BaseException:
            journal.close()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        reference: str | os.PathLike[str] | ScoreMatrix | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> Session:
        """Reopen a session, reloading its reference data and replaying its journal.

        ``reference`` overrides where the reference data is loaded from (a
        moved file, or a session created from an in-memory matrix); its
        fingerprint must still match the one stored at creation.
        """
        journal = Journal.open(path, timeout=timeout)
        try:
            meta = journal.meta()
            for key in ("method", "method_kwargs", "reference_source", "reference"):
                if key not in meta:
                    raise StorageError(f"session file {str(journal.path)!r} is corrupted: setting {key!r} is missing")
            matrix = cls._load_reference(journal.path, meta, reference)
            return cls(journal, matrix, meta)
        except BaseException:
            journal.close()
            raise

    @staticmethod
    def _load_reference(
        path: Path, meta: Mapping[str, Any], reference: str | os.PathLike[str] | ScoreMatrix | None
    ) -> ScoreMatrix:
        source = meta["reference_source"]
        stored = meta["reference"]
        hint = (
            "pass the original data explicitly: Session.open(path, reference=...) "
            "or `--reference` on the command line"
        )
        if reference is not None:
            matrix, given = _resolve_reference(reference)
            origin = f"the reference passed to open ({_describe(given)})"
        elif source.get("type") == "matrix":
            raise StorageError(
                f"session {str(path)!r} was created from an in-memory ScoreMatrix ({source.get('name')!r}); "
                "open it with Session.open(path, reference=<that matrix>)"
            )
        elif source.get("type") == "file":
            ref_path = Path(source["path"])
            if not ref_path.is_file():
                raise StorageError(
                    f"reference file {str(ref_path)!r} of session {str(path)!r} no longer exists; "
                    f"restore it, or {hint}"
                )
            origin = f"reference file {str(ref_path)!r}"
            try:
                matrix, _ = _resolve_reference(ref_path)
            except ActiveEvalError as exc:
                raise StorageError(f"cannot reload {origin} of session {str(path)!r}: {exc}") from None
        elif source.get("type") == "dataset":
            origin = f"bundled dataset {source['name']!r}"
            try:
                matrix, _ = _resolve_reference(source["name"])
            except UnknownDatasetError as exc:
                raise StorageError(f"cannot reload {origin} of session {str(path)!r}: {exc}; {hint}") from None
        else:
            raise StorageError(f"session file {str(path)!r} is corrupted: unknown reference source {source!r}")
        new = reference_summary(matrix)
        if new["fingerprint"] != stored.get("fingerprint"):
            raise ReferenceMismatchError(
                f"the reference data of session {str(path)!r} changed since the session was created: "
                f"{origin} has fingerprint {new['fingerprint'][:12]}, the session expects "
                f"{str(stored.get('fingerprint'))[:12]} ({_what_changed(stored, new)}). Recorded scores are "
                f"only valid against the original data: restore it and {hint}, or start a new session"
            )
        return matrix

    # -------------------------------------------------------------- replay
    def _new_method(self) -> BaseMethod:
        return make_method(self._settings["method"], self._reference, **self._settings["method_kwargs"])

    def _rebuild(self) -> None:
        """Rebuild the method from scratch by replaying the whole journal."""
        self._method = self._new_method()
        self._seq = 0
        self._pending = {}
        self._told = {}
        self._apply(self._journal.events())

    def _apply(self, events: Iterable[Event]) -> None:
        method = self._method
        assert method is not None  # internal invariant: set by _rebuild
        for ev in events:
            if ev.kind == "tell":
                try:
                    method.observe(ev.item_id, float(ev.score))  # type: ignore[arg-type]
                except ActiveEvalError as exc:
                    self._method = None
                    raise StorageError(
                        f"session file {str(self._journal.path)!r}: journal event {ev.seq} (score {ev.score} for "
                        f"item {ev.item_id!r}) cannot be replayed ({exc}); the file was altered outside activeeval"
                    ) from None
                self._told[ev.item_id] = float(ev.score)  # type: ignore[arg-type]
                self._pending.pop(ev.item_id, None)
            elif ev.item_id not in self._told:
                self._pending.setdefault(ev.item_id, ev.batch)
            self._seq = ev.seq

    def _sync(self, conn: Any = None) -> BaseMethod:
        """Catch up with events written since the last call (by anyone)."""
        if self._method is None:
            self._rebuild()
        else:
            events = Journal.read_events(conn, self._seq) if conn is not None else self._journal.events(self._seq)
            self._apply(events)
        assert self._method is not None
        return self._method

    # ------------------------------------------------------------- ask/tell
    def ask(self, k: int = 1) -> list[AskedItem]:
        """The next ``k`` items to score, recorded as pending.

        Pending items (asked, not yet told) are excluded, and BayesAME
        conditions its choice on them. Raises
        :class:`~activeeval.exceptions.SessionStateError` when every item is
        already recorded or pending.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigurationError(f"k must be a positive integer, got {k!r}")
        with self._journal.write("hand out items") as conn:
            method = self._sync(conn)
            chosen = method.select_batch(int(k), exclude=list(self._pending))
            batch = Journal.next_batch(conn)
            ids = [method.item_ids[i] for i in chosen]
            seqs = [Journal.insert(conn, "ask", iid, None, batch) for iid in ids]
        for iid, seq in zip(ids, seqs):
            self._pending[iid] = batch
            self._seq = seq
        means = method.reference.scores.mean(axis=0)
        return [AskedItem(iid, int(i), {"reference_mean": float(means[i])}) for iid, i in zip(ids, chosen)]

    def tell(self, item_id: str | int, score: float) -> bool:
        """Record the target's ``score`` on ``item_id`` (committed before returning).

        Returns True if recorded, False if the same score was already
        recorded for this item (a no-op). Raises, writing nothing:
        :class:`~activeeval.exceptions.UnknownItemError`,
        :class:`~activeeval.exceptions.InvalidScoresError` /
        :class:`~activeeval.exceptions.ScoreOutOfRangeError`, or
        :class:`~activeeval.exceptions.DuplicateObservationError` for a
        different score on an item already recorded.
        """
        return self.tell_many([(item_id, score)])[0] == 1

    def tell_many(self, observations: Iterable[tuple[str | int, float]]) -> tuple[int, int]:
        """Record several scores in one transaction: all or nothing.

        Every observation is validated before anything is written.
        Returns ``(n_recorded, n_already_recorded)``.
        """
        pairs = list(observations)
        with self._journal.write("record scores") as conn:
            method = self._sync(conn)
            new: list[tuple[int, str, float]] = []
            seen: dict[str, float] = {}
            n_same = 0
            for item, score in pairs:
                idx = method.reference.item_index(item)
                iid = method.item_ids[idx]
                value = method.reference.check_score(score, item=iid)
                old = self._told.get(iid, seen.get(iid))
                if old is not None:
                    if value == old:
                        n_same += 1
                        continue
                    raise DuplicateObservationError(
                        f"item {iid!r} already has score {old:g} recorded; refusing to change it to {value:g} "
                        "(recorded scores are never altered; start a new session to re-score)"
                    )
                idx, value = method.check_observation(idx, value)
                seen[iid] = value
                new.append((idx, iid, value))
            if not new:
                return 0, n_same
            try:
                last = 0
                for idx, iid, value in new:
                    last = Journal.insert(conn, "tell", iid, value, None)
                    method.observe(idx, value)
                    self._told[iid] = value
                    self._pending.pop(iid, None)
            except BaseException:
                # The transaction rolls back; the in-memory state may be ahead of it, so rebuild lazily.
                self._method = None
                raise
            self._seq = last
        return len(new), n_same

    # ---------------------------------------------------------------- views
    @property
    def path(self) -> Path:
        return self._journal.path

    @property
    def reference(self) -> ScoreMatrix:
        return self._reference

    @property
    def settings(self) -> dict[str, Any]:
        """A copy of the stored configuration."""
        return json.loads(json.dumps(self._settings))

    @property
    def pending(self) -> tuple[str, ...]:
        self._sync()
        return tuple(self._pending)

    @property
    def observations(self) -> tuple[tuple[str, float], ...]:
        """Recorded (item_id, score) pairs in the order they were recorded."""
        self._sync()
        return tuple(self._told.items())

    @property
    def trajectory(self) -> tuple[Estimate, ...]:
        """The estimate after each recorded score, oldest first."""
        return self._sync().trajectory

    @property
    def item_ids(self) -> tuple[str, ...]:
        return self._sync().item_ids

    def estimate(self) -> Estimate:
        return self._sync().estimate()

    def stop_reason(self) -> str | None:
        return self._sync().stop_reason()

    def status(self) -> SessionStatus:
        """Estimate, interval, items used, pending items and the stopping rule."""
        method = self._sync()
        return SessionStatus(method.estimate(), tuple(self._pending), method.stop_reason())

    def history(self) -> list[dict[str, Any]]:
        """Every journal event, oldest first, as plain dicts."""
        return [
            {"seq": e.seq, "kind": e.kind, "item_id": e.item_id, "score": e.score, "batch": e.batch, "time": e.created}
            for e in self._journal.events()
        ]

    def close(self) -> None:
        self._journal.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, method={self._settings['method']!r}, n_used={len(self._told)})"

