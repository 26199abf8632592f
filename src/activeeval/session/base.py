"""What single-target and ranking sessions share: the journal, the reference, replay and snapshots.

A journal session's state (one method, or one method per ranked model) is a
deterministic function of its settings and its recorded scores. It is
rebuilt on open by replaying the journal, starting from a stored snapshot
when one is valid (:mod:`activeeval.session.journal.snapshot`), and kept in step with
other processes writing the same file: every operation first applies the
events written since it last looked.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from activeeval import user_cache
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import (
    ActiveEvalError,
    ConfigurationError,
    CorruptedSessionError,
    DuplicateObservationError,
    StorageError,
    UnknownItemError,
    option,
)
from activeeval.methods.registry import check_method_spec, method_spec
from activeeval.session.journal import snapshot as snap
from activeeval.session.journal.storage import (
    DEFAULT_TIMEOUT,
    Event,
    Journal,
    Transaction,
    now_iso,
    storable_text,
)
from activeeval.session.reference import apply_missing, load_reference, resolve_reference
from activeeval.stopping import StoppingRule, StopRule, default_rule

__all__ = [
    "JournalSession",
    "StoppingChanges",
    "check_stopping",
    "method_options_of",
    "new_seed",
    "open_session",
    "positive_k",
    "prior_weights_option",
    "resolve_method",
    "stopping_of",
]

# Options of a method spec that a session sets itself, with the session option that sets them (the CLI prints
# its flag: activeeval.exceptions.option).
SESSION_OPTIONS = {
    "seed": option("seed"),
    "epsilon1": option("epsilon1"),
    "epsilon2": option("epsilon2"),
    "window": option("window"),
    "max_items": option("max_items"),
    "n_max": option("max_items"),
    "stopping": "/".join(option(k) for k in ("epsilon1", "epsilon2", "window", "max_items")),
    "missing": option("missing"),
}
STOPPING_KEYS = ("epsilon1", "epsilon2", "window", "max_items")
# Session files written before the stopping rule left the methods stored it among the method's options,
# with the budget spelled n_max (also in their recorded changes): read them as they are, never rewritten.
_LEGACY_KEYS = {"epsilon1": "epsilon1", "epsilon2": "epsilon2", "window": "window", "n_max": "max_items"}


def stopping_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The stopping settings stored at creation (``settings["stopping"]``; older files: the method options)."""
    if "stopping" in settings:
        return {k: settings["stopping"].get(k) for k in STOPPING_KEYS}
    kw = settings["method_kwargs"]
    return {new: kw.get(old) for old, new in _LEGACY_KEYS.items()}


# The default BayesAME stores what it derived from the reference (its fit and calibration) and, since issue 25,
# the two options that issue added; a file written before has neither: it replays with the values it was made with
# (today's defaults too, but a default may change; a stored session must not).
_BAYESAME_BEFORE_25 = {"calibrate_by": "pooled", "warmup": 0}
# and the design-based floor they were made with, before stop 39 made "effective" the default
_BAYESAME_BEFORE_39 = {"floor": "wilson"}
# and the design-based interval's shape, stored since stop 45 (the only shape before it)
_BAYESAME_BEFORE_45 = {"interval": "symmetric"}
# and the switch threshold, stored since stop 46 made 1 the default (1.96 before: the 95 % interval's own test)
_BAYESAME_BEFORE_46 = {"switch_z": 1.959963984540054}


def method_options_of(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The method's constructor options: the stored ones without the stopping settings older files kept there."""
    options = {k: v for k, v in settings["method_kwargs"].items() if k not in _LEGACY_KEYS}
    if settings.get("method") in ("bayesame", "bayesame-rs") and "hyperparameters" in options:
        if "calibrate_by" not in options:
            options = {**_BAYESAME_BEFORE_25, **options}
        if "floor" not in options:
            options = {**_BAYESAME_BEFORE_39, **options}
        if "interval" not in options:
            options = {**_BAYESAME_BEFORE_45, **options}
        if "switch_z" not in options:
            options = {**_BAYESAME_BEFORE_46, **options}
    return options

# The module of each session kind, imported when a file of that kind is opened.
_KIND_MODULES = {"single": "activeeval.session.session", "rank": "activeeval.session.ranking",
                 "multi": "activeeval.session.multi"}
# How to open a file of each kind (for the error on opening it as another kind).
_KIND_HINTS = {
    "single": "open it with `activeeval session` / Session.open",
    "rank": "open it with `activeeval rank` / RankSession.open",
    "multi": "open it with `activeeval session` / MultiSession.open",
}

Key = tuple[str, str]  # (target, item id); target is '' in a single-target session


def positive_k(k: Any) -> int:
    """``ask``'s ``k``: how many to hand out, a positive integer."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigurationError(f"{option('k')} must be a positive integer, got {k!r}")
    return int(k)


def new_seed(seed: int | None) -> int:
    """The seed to store: the given one, or one drawn at random (so a replay is always deterministic)."""
    if seed is None:
        return secrets.randbelow(2**31)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigurationError(f"{option('seed')} must be a non-negative integer, got {seed!r}")
    return int(seed)


def resolve_method(spec: str, kwargs: Mapping[str, Any] | None = None, reserved: Mapping[str, str] | None = None
                   ) -> tuple[str, dict[str, Any], str]:
    """``"bayesame-paper[noise=learned]"`` + keyword options → (registry name, options, canonical spec).

    Options may come from the brackets or from ``kwargs`` (not both for one
    key); options the session sets itself (seed, stopping rule, missing
    policy, and ``reserved``: option → the session option that sets it, as
    :func:`~activeeval.exceptions.option` names it) are refused with the option that sets them, and unknown
    ones with the method's options
    listed. Values are checked when the method is built.
    """
    if not isinstance(spec, str):
        raise ConfigurationError(f"{option('method')} must be a method name or spec string, got {spec!r}")
    flags = {**SESSION_OPTIONS, **(reserved or {})}
    reserved = {key: f"the session; use {flag} instead" for key, flag in flags.items()}
    name, options = check_method_spec(spec, reserved, kwargs)
    try:
        json.dumps(options)
    except TypeError as exc:
        raise ConfigurationError(
            f"session method options must be JSON-serialisable to be stored in the journal ({exc})"
        ) from exc
    return name, options, method_spec(name, options)


def prior_weights_option(name: str, prior_weights: Mapping[str, float] | str | os.PathLike[str] | None
                         ) -> dict[str, float] | None:
    """The metadata prior weights (App. B.2) to store with a session: ``{model: weight}``, or None.

    ``prior_weights`` is a mapping or a file (:func:`~activeeval.data.io.read_prior_weights`: CSV/TSV with
    columns model,weight, or JSON). Only methods with a ``weights`` option take them (the paper's
    ``bayesame-paper``, ``bayesame-paper-rs``); the method checks, when it is built, that they name
    exactly its reference models.
    """
    if prior_weights is None:
        return None
    from activeeval.methods.registry import method_parameters

    if "weights" not in method_parameters(name):
        why = (" (its kernel and interval are fitted and calibrated on the reference models themselves, each "
               "predicted from the others, which a fixed weight per model does not fit)") if name == "bayesame" else ""
        raise ConfigurationError(
            f"{option('prior_weights')} sets the metadata-weighted prior of the paper's BayesAME (App. B.2); "
            f"method {name!r} has no such prior{why}: use {option('method', repr('bayesame-paper'), 'bayesame-paper')}"
            " (or bayesame-paper-rs)")
    if isinstance(prior_weights, Mapping):
        weights = {str(k): v for k, v in prior_weights.items()}
        for model, value in weights.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not 0 <= value < float("inf"):
                raise ConfigurationError(
                    f"{option('prior_weights')}: the weight of {model!r} must be a number >= 0, got {value!r}")
        return {k: float(v) for k, v in weights.items()}
    from activeeval.data.io import read_prior_weights

    return read_prior_weights(prior_weights)


def check_stopping(epsilon1: float, epsilon2: float, window: int, max_items: int | None) -> StoppingRule:
    """The stopping rule of these settings (:class:`~activeeval.stopping.StopRule`); ConfigurationError naming the
    option for a bad value."""
    return StopRule(epsilon1, epsilon2, window, max_items).rule()


class JournalSession(ABC):
    """Base of :class:`~activeeval.session.Session` and :class:`~activeeval.session.ranking.RankSession`.

    Subclasses say how to build a fresh state (:meth:`_fresh_state`) and how a
    recorded score changes it (:meth:`_observe`).
    """

    KIND = "single"
    KINDS: ClassVar[dict[str, type[JournalSession]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "KIND" in vars(cls):  # a session kind of its own (not a helper base)
            JournalSession.KINDS[cls.KIND] = cls

    def __init__(
        self,
        journal: Journal,
        settings: dict[str, Any],
        *,
        reference: ScoreMatrix | None = None,
        override: str | os.PathLike[str] | ScoreMatrix | None = None,
        prepared: ScoreMatrix | None = None,
        state: Any = None,
        build_seconds: float = 0.0,
        cache: bool = True,
    ) -> None:
        self._journal = journal
        self._settings = settings
        self._cache = bool(cache)  # keep the parsed reference and snapshots in the user cache
        self._raw_reference = reference  # loaded (and checked) on first use
        self._override = override
        self._prepared = prepared
        self._state: Any = None
        self._seq = 0
        self._change_seq = 0
        self._stopping = stopping_of(settings)
        self._pending: dict[Key, int | None] = {}
        self._told: dict[Key, float] = {}
        self._digest = snap.TellDigest()
        self._cost = 0.0  # seconds spent building/replaying since the state's last snapshot
        self._rebuild(state, build_seconds)
        self._maybe_snapshot()

    # ------------------------------------------------------------ creation
    @classmethod
    def _create_journal(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix,
        meta: dict[str, Any],
        read_options: Mapping[str, Any] | None,
        timeout: float,
        cache: bool,
        progress: Callable[[str], None] | None = None,
    ) -> Any:
        """Resolve the reference, build the state once (validating everything), write the file; the session.

        ``progress(text)`` is told each step as it starts.
        """
        from activeeval import __version__

        Journal.check_creatable(path)  # before the work of building the method (checked again when creating)
        if meta.get("label") is not None and not isinstance(meta["label"], str):
            raise ConfigurationError(f"{option('label')} must be text, got {type(meta['label']).__name__}")
        say = progress or (lambda text: None)
        say("reading the reference")
        matrix, source = resolve_reference(reference, read_options, cache=cache)
        for what, ids in (("item id", matrix.item_ids), ("target", meta.get("targets") or ())):
            for text in ids:  # what the journal will store, checked before the file exists
                storable_text(what, text)
        meta = {
            "kind": cls.KIND,
            **meta,
            "reference_source": source,
            "reference": _summary(matrix),
            "created": now_iso(),
            "library_version": __version__,
        }
        start = time.perf_counter()
        probe = cls.__new__(cls)
        probe._settings = meta
        probe._prepared = apply_missing(matrix, meta.get("missing", "models"))
        ref = probe._prepared
        say(f"fitting {meta.get('method_spec', meta['method'])} on {ref.n_models} reference models x {ref.n_items} "
            "items")
        with user_cache.disabled(not cache):  # what it derives from the reference alone is kept there too
            state = probe._fresh_state()  # validates the method and its options before any file exists
        frozen = getattr(state, "frozen_options", None)
        if callable(frozen) and "method_kwargs" in meta:
            # what the method derived from the reference alone (the default BayesAME's kernel fit and
            # calibration): stored, so that reopening the session replays without computing it again
            meta["method_kwargs"] = {**frozen(), **meta["method_kwargs"]}
        built = time.perf_counter() - start
        journal = Journal.create(path, meta, timeout=timeout)
        try:
            return cls(journal, journal.meta(), reference=matrix, prepared=probe._prepared, state=state,
                       build_seconds=built, cache=cache)
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
        readonly: bool = False,
        cache: bool = True,
    ) -> Any:
        """Reopen a session: its reference data (fingerprint checked), and its state (snapshot and replay).

        ``reference`` overrides where the reference data is loaded from (a
        moved file, or a session created from an in-memory matrix); its
        fingerprint must still match the one stored at creation.
        ``readonly=True`` opens the file without any write (``ask``/``tell``
        then refuse); the file is never created, converted or changed.
        ``cache=False`` uses no user cache (:mod:`activeeval.user_cache`): the
        reference file is parsed and the state rebuilt from the journal.
        """
        return cls._open_journal(path, reference, timeout, readonly, cache)

    @classmethod
    def _open_journal(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix | None,
        timeout: float,
        readonly: bool,
        cache: bool = True,
    ) -> Any:
        journal = Journal.open(path, timeout=timeout, readonly=readonly)
        try:
            meta = journal.meta()
            for key in ("method", "method_kwargs", "reference_source", "reference"):
                if key not in meta:
                    raise CorruptedSessionError(
                        f"session file {str(journal.path)!r} is corrupted: setting {key!r} is missing"
                    )
            kind = meta.get("kind", "single")
            if cls is JournalSession and kind in _KIND_MODULES:
                importlib.import_module(_KIND_MODULES[kind])  # registers the class (only the kind needed)
                return cls.KINDS[kind](journal, meta, override=reference, cache=cache)
            if kind != cls.KIND:
                raise StorageError(
                    f"{str(journal.path)!r} is a {kind} session, not a {cls.KIND} one; "
                    + _KIND_HINTS.get(kind, _KIND_HINTS["single"])
                )
            return cls(journal, meta, override=reference, cache=cache)
        except BaseException:
            journal.close()
            raise

    # -------------------------------------------------------- the reference
    @property
    def reference(self) -> ScoreMatrix:
        """The reference data as loaded (checked against the fingerprint stored at creation)."""
        if self._raw_reference is None:
            self._raw_reference = load_reference(self._journal.path, self._settings, self._override,
                                                 cache=self._cache)
        return self._raw_reference

    def _prepared_reference(self) -> ScoreMatrix:
        """The reference the methods see: the missing-score policy applied."""
        if self._prepared is None:
            self._prepared = apply_missing(self.reference, self._settings.get("missing", "models"))
        return self._prepared

    # -------------------------------------------------------------- replay
    @abstractmethod
    def _fresh_state(self) -> Any:
        """A new state (method or ranker) built on the prepared reference, before any score."""

    @abstractmethod
    def _observe(self, state: Any, ev: Event) -> None:
        """Fold one recorded score (a journal ``tell`` event) into ``state``."""

    def _snapshot_slot(self) -> str:
        """The user-cache key of this session file's snapshot (one slot per file, replaced as it goes on)."""
        return user_cache.key("snapshot", str(self.path.resolve()), self._settings)

    def _externals(self) -> dict[str, Any]:
        """What a snapshot refers to by name instead of holding it: the reference the methods are built on."""
        prepared = self._prepared_reference()
        return {"reference": prepared, "reference.scores": prepared.scores}

    def _from_snapshot(self, events: list[Event]) -> tuple[Any, int]:
        """(state, upto) from a valid snapshot in the user cache, or (None, 0)."""
        entry = user_cache.load("snapshot", self._snapshot_slot()) if self._cache else None
        if entry is None:
            return None, 0
        upto, key = entry.meta.get("upto"), entry.meta.get("key")
        if type(upto) is not int or (events[-1].seq if events else 0) < upto:
            return None, 0  # the journal is shorter than the snapshot: it does not belong to this file
        digest = snap.TellDigest()
        for ev in events:
            if ev.seq > upto:
                break
            if ev.kind == "tell":
                digest.add(ev.seq, ev.target, ev.item_id, float(ev.score))  # type: ignore[arg-type]
        if snap.snapshot_key(self._settings, digest.hexdigest()) != key:
            return None, 0  # stale (other code, settings or scores): rebuild
        externals = self._externals()  # loads and checks the reference
        try:
            return snap.decode_state(entry.meta.get("state"), entry.arrays, externals), upto
        except Exception:
            return None, 0

    def _rebuild(self, state: Any = None, build_seconds: float = 0.0) -> None:
        """Rebuild the state: from ``state`` (just built), a valid snapshot, or from scratch; then replay."""
        events = self._journal.events()
        upto = 0
        if state is None:
            state, upto = self._from_snapshot(events)
        self._state, self._seq, self._snapshot_upto = state, 0, upto  # upto 0: not from a snapshot
        self._stopping, self._change_seq = stopping_of(self._settings), 0
        self._pending, self._told, self._digest = {}, {}, snap.TellDigest()
        self._cost = build_seconds
        if self._state is None:
            start = time.perf_counter()
            self.reference  # noqa: B018 - load and check it before building anything on it
            with user_cache.disabled(not self._cache):
                self._state = self._fresh_state()
            self._cost += time.perf_counter() - start
        self._apply(events, replay_after=upto)  # adds the time of every score it replays
        self._apply_changes(self._journal.changes())

    def _apply(self, events: Iterable[Event], replay_after: int = -1) -> None:
        for ev in events:
            key = (ev.target, ev.item_id)
            if ev.kind == "tell":
                if ev.seq > replay_after:
                    start = time.perf_counter()
                    try:
                        self._observe(self._state, ev)
                    except ActiveEvalError as exc:
                        self._state = None
                        raise CorruptedSessionError(
                            f"session file {str(self.path)!r}: journal event {ev.seq} (score {ev.score} for "
                            f"item {ev.item_id!r}) cannot be replayed ({exc}); the file was altered outside activeeval"
                        ) from exc
                    self._cost += time.perf_counter() - start
                self._told[key] = float(ev.score)  # type: ignore[arg-type]
                self._digest.add(ev.seq, ev.target, ev.item_id, float(ev.score))  # type: ignore[arg-type]
                self._pending.pop(key, None)
            elif key not in self._told:
                if ev.seq > replay_after and key not in self._pending:
                    self._asked(self._state, ev)
                self._pending.setdefault(key, ev.batch)
            self._seq = ev.seq

    def _asked(self, state: Any, ev: Event) -> None:
        """An item handed out, replayed from the journal, before it joins the pending items (the state may
        register the draw again: :meth:`activeeval.methods.bayesame.BayesAME.note_drawn`). Nothing by default."""

    def _apply_changes(self, changes: Iterable[Any]) -> None:
        for ch in changes:
            self._stopping.update({_LEGACY_KEYS.get(k, k): v for k, v in ch.settings.items()
                                   if _LEGACY_KEYS.get(k, k) in STOPPING_KEYS})
            self._change_seq = ch.seq

    def _sync(self, tx: Transaction | None = None) -> Any:
        """Catch up with events (and settings changes) written since the last call, by anyone (inside ``tx``
        when given, so that what is appended next follows what was read under the same lock)."""
        if self._state is None:
            self._rebuild()
        else:
            source = self._journal if tx is None else tx
            self._apply(source.events(self._seq))
            self._apply_changes(source.changes(self._change_seq))
        return self._state

    def _maybe_snapshot(self) -> None:
        """Keep the state as a snapshot in the user cache once rebuilding it has become slow."""
        if not self._cache or self._state is None or self._cost <= snap.SNAPSHOT_AFTER_SECONDS:
            return
        try:
            graph, arrays = snap.encode_state(self._state, self._externals())
        except snap.Unencodable:
            graph = None
        if graph is None or not snap.worth_storing(arrays, self._cost):
            self._cost = 0.0  # not worth storing (or not data): do not try again after every write
            return
        key = snap.snapshot_key(self._settings, self._digest.hexdigest())
        meta = {"upto": self._seq, "key": key, "state": graph}
        if user_cache.store("snapshot", self._snapshot_slot(), meta, arrays):
            self._cost = 0.0

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[Transaction]:
        """A write transaction of the journal (see :meth:`Journal.write`), for operations that update the
        in-memory state as they append. If the transaction fails after an append (even at its COMMIT), the file
        is rolled back and the state may be ahead of it: it is rebuilt from the file on next use."""
        tx = None
        try:
            with self._journal.write(what) as tx:
                yield tx
        except BaseException:
            if tx is not None and tx.written:
                self._state = None
            raise

    # --------------------------------------------------------------- asks
    @contextlib.contextmanager
    def _handing_out(self, what: str) -> Iterator[tuple[Any, list[tuple[str, str]]]]:
        """Choose what to ask under the journal's write lock: yields (the state, a list to fill with (target,
        item id) pairs). The pairs are written as one batch of asks, then pending; nothing is written for none."""
        asks: list[tuple[str, str]] = []
        with self._write(what) as tx:
            yield self._sync(tx), asks
            if asks:
                batch = tx.next_batch()
                seqs = [tx.append("ask", iid, batch=batch, target=t).seq for t, iid in asks]
        if asks:
            for key, seq in zip(asks, seqs, strict=True):
                self._pending[key] = batch
                self._seq = seq
            self._maybe_snapshot()

    # ------------------------------------------------------------- scores
    # How a refused change of a recorded score names the target, and what it advises.
    TARGET_NOUN: ClassVar[str] = "target"
    NEVER_ALTERED: ClassVar[str] = "recorded scores are never altered; start a new session to re-score"

    def _target_key(self, state: Any, target: Any) -> str:
        """The journal's target of a score given for ``target`` (raises for an unknown one)."""
        return ""

    def _reference_of(self, state: Any, target: str) -> ScoreMatrix:
        """The reference that checks ``target``'s scores (its method's)."""
        return state.reference

    def _check_new(self, state: Any, target: str, idx: int, value: float) -> float:
        """Validate a new observation without recording it (the method's own check); the value to record."""
        raise NotImplementedError

    @staticmethod
    def _rows(target: str, scores: Mapping[Any, float] | Iterable[tuple[Any, float]]) -> list[tuple[str, Any, float]]:
        """(target, item, score) rows of one target's scores, given as a mapping or as (item, score) pairs."""
        pairs = scores.items() if isinstance(scores, Mapping) else scores
        return [(target, item, score) for item, score in pairs]

    def _record_scores(
        self, rows: Iterable[tuple[Any, str | int, float]], include_unasked: bool, what: str = "record scores"
    ) -> tuple[int, int, tuple[str, ...], int]:
        """Record (target, item, score) rows in one transaction, all or nothing.

        Every row is validated before anything is written. Without
        ``include_unasked``, rows of items not handed out to their target (or
        not in the reference) are skipped. The same score again is a no-op; a
        different one is refused. Returns (recorded, already recorded,
        skipped item ids, how many of them are not in the reference).
        """
        skipped: list[str] = []
        n_unknown = n_same = 0
        with self._write(what) as tx:
            state = self._sync(tx)
            new: list[tuple[str, str, float]] = []
            seen: dict[Key, float] = {}
            for target, item, score in rows:
                target = self._target_key(state, target)
                ref = self._reference_of(state, target)
                if not include_unasked:
                    try:
                        idx = ref.item_index(item)
                    except UnknownItemError:
                        n_unknown += 1
                        skipped.append(str(item))
                        continue
                    key = (target, ref.item_ids[idx])
                    if key not in self._pending and key not in self._told:
                        skipped.append(key[1])
                        continue
                idx = ref.item_index(item)
                iid = ref.item_ids[idx]
                value = ref.check_score(score, item=iid)
                key = (target, iid)
                old = self._told.get(key, seen.get(key))
                if old is not None:
                    if value == old:
                        n_same += 1
                        continue
                    of = f" of {self.TARGET_NOUN} {target!r}" if target else ""
                    raise DuplicateObservationError(
                        f"item {iid!r}{of} already has score {old:g} recorded; refusing to change it to {value:g} "
                        f"({self.NEVER_ALTERED})"
                    )
                value = self._check_new(state, target, idx, value)
                seen[key] = value
                new.append((target, iid, value))
            for target, iid, value in new:
                ev = tx.append("tell", iid, value, target=target)
                self._observe(state, ev)  # the event as stored, exactly as a replay will see it
                self._told[(target, iid)] = ev.score  # type: ignore[assignment]
                self._digest.add(ev.seq, target, iid, ev.score)  # type: ignore[arg-type]
                self._pending.pop((target, iid), None)
                self._seq = ev.seq
        if new:
            self._maybe_snapshot()
        return len(new), n_same, tuple(skipped), n_unknown

    # ------------------------------------------------------------- changes
    def _record_change(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Record changed stopping settings (only those that differ); returns what changed."""
        with self._write("change the settings") as tx:
            self._sync(tx)
            new = {k: v for k, v in changes.items() if v is not None and self._stopping.get(k) != v}
            if new:
                merged = {**self._stopping, **new}
                check_stopping(merged["epsilon1"], merged["epsilon2"], merged["window"], merged["max_items"])
                self._change_seq = tx.append_change(self._seq, new)
                self._stopping = merged
        return new

    def stopping_rule(self) -> StoppingRule:
        """The stopping rule in force (the creation settings, with any changes recorded since)."""
        self._sync()
        return self._rule()

    def _rule(self) -> StoppingRule:
        """The stopping rule of the settings as last synced (no read of the file)."""
        s = self._stopping
        return default_rule(s["epsilon1"], s["epsilon2"], s["window"], s["max_items"])

    @property
    def stopping_settings(self) -> dict[str, Any]:
        """epsilon1, epsilon2, window and max_items in force."""
        self._sync()
        return dict(self._stopping)

    # ---------------------------------------------------------------- views
    @property
    def path(self) -> Path:
        return self._journal.path

    @property
    def settings(self) -> dict[str, Any]:
        """A copy of the stored configuration (as created; see :attr:`stopping_settings` for changes)."""
        return json.loads(json.dumps(self._settings))

    @property
    def label(self) -> str | None:
        return self._settings.get("label")

    def history(self) -> list[dict[str, Any]]:
        """Every journal event and settings change, oldest first, as plain dicts."""
        out: list[dict[str, Any]] = []
        changes = list(self._journal.changes())
        for e in self._journal.events():
            while changes and changes[0].after_event < e.seq:
                out.append(_change_dict(changes.pop(0)))
            row = {"seq": e.seq, "kind": e.kind, "item_id": e.item_id, "score": e.score, "batch": e.batch,
                   "time": e.created}
            if self.KIND != "single":
                row["model"] = e.target
            out.append(row)
        out.extend(_change_dict(c) for c in changes)
        return out

    def close(self) -> None:
        self._journal.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class StoppingChanges:
    """What sessions held by a stopping rule (one target, or each of several) add: changing the rule later."""

    def change_settings(
        self,
        *,
        epsilon1: float | None = None,
        epsilon2: float | None = None,
        window: int | None = None,
        max_items: int | None = None,
    ) -> dict[str, Any]:
        """Change the stopping rule or the budget; recorded in the journal. Returns what changed.

        The method's state does not depend on these, so the scores recorded
        stay valid; ``status`` applies the new rule at once.
        """
        return self._record_change(  # type: ignore[attr-defined]
            {"epsilon1": epsilon1, "epsilon2": epsilon2, "window": window, "max_items": max_items})


def _change_dict(c: Any) -> dict[str, Any]:
    return {"seq": None, "kind": "set", "item_id": "", "score": None, "batch": None, "time": c.created,
            "settings": {_LEGACY_KEYS.get(k, k): v for k, v in c.settings.items()}}


def _summary(matrix: ScoreMatrix) -> dict[str, Any]:
    from activeeval.session.reference import reference_summary

    return reference_summary(matrix)


def open_session(
    path: str | os.PathLike[str],
    *,
    reference: str | os.PathLike[str] | ScoreMatrix | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    readonly: bool = False,
    cache: bool = True,
) -> JournalSession:
    """Open a session file of any kind: a :class:`Session` or a ranking :class:`RankSession`."""
    return JournalSession._open_journal(path, reference, timeout, readonly, cache)
