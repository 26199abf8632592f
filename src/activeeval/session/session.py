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

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, option
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate
from activeeval.methods.registry import make_method
from activeeval.session.base import (
    JournalSession,
    StoppingChanges,
    method_options_of,
    new_seed,
    positive_k,
    prior_weights_option,
    resolve_method,
)
from activeeval.session.journal.storage import DEFAULT_TIMEOUT, Event, Transaction
from activeeval.session.reference import ReadSettings, reference_summary
from activeeval.settings import takes_settings
from activeeval.stopping import (
    DEFAULT_STOP,
    Condition,
    StopRule,
    conditions_of,
    stop_reason,
)

__all__ = ["AskedItem", "RecordSummary", "Session", "SessionStatus", "reference_summary"]


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
    """Where a session stands (see :meth:`Session.status`).

    ``conditions`` are the stopping conditions against their thresholds
    (window filled, R̂ range ≤ ε1, interval width ≤ ε2, budget); the stop
    holds when every "precision" condition is met, or the budget is.
    ``estimate.notes`` say when to doubt the interval (e.g. the target lies
    outside the references' range and the estimate is now design-based).
    """

    estimate: Estimate
    pending: tuple[str, ...]
    stop_reason: str | None
    level: float = 0.95
    conditions: tuple[Condition, ...] = ()

    @property
    def stop(self) -> bool:
        return self.stop_reason is not None

    @property
    def clipped(self) -> bool:
        """Whether the interval shown (``estimate.ci``: clipped to the scores the benchmark can still reach) is
        narrower than the normal interval, whose width (``estimate.width``) the stopping rule reads."""
        lo, hi = self.estimate.ci(self.level)
        return hi - lo < self.estimate.width(self.level) - 1e-9

    @property
    def waiting_for(self) -> tuple[Condition, ...]:
        """The conditions that hold the stop back (empty once stopped)."""
        if self.stop:
            return ()
        return tuple(c for c in self.conditions if not c.met)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.estimate.ci(self.level)
        return {
            "estimate": self.estimate.mean,
            "ci_low": lo,
            "ci_high": hi,
            "std": self.estimate.std,
            "shift": self.estimate.shift,
            "n_used": self.estimate.n_observed,
            "n_items": self.estimate.n_items,
            "pending": list(self.pending),
            "stop": self.stop,
            "stop_reason": self.stop_reason,
            "conditions": [c.to_dict() for c in self.conditions],
            "waiting_for": [c.name for c in self.waiting_for],
            "clipped": self.clipped,
            "notes": list(self.estimate.notes),
        }


@dataclass(frozen=True)
class RecordSummary:
    """What :meth:`Session.record` did: scores recorded, already there, and skipped (never handed out)."""

    recorded: int
    already: int
    skipped: tuple[str, ...] = ()
    unknown: int = 0


class Session(StoppingChanges, JournalSession):
    """An ask/tell evaluation of one target model, stored in one SQLite file.

    Build with :meth:`create` or :meth:`open`, not directly. A session is a
    context manager (closing releases the file). Several ``Session`` objects,
    in one process or several, may use the same file: each operation first
    replays the events others have written.
    """

    KIND = "single"

    # ------------------------------------------------------------ creation
    @classmethod
    @takes_settings
    def create(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix,
        *,
        method: str = "bayesame",
        stop: StopRule = DEFAULT_STOP,
        seed: int | None = None,
        missing: str = "models",
        read: ReadSettings = ReadSettings(),
        label: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cache: bool = True,
        prior_weights: Mapping[str, float] | str | os.PathLike[str] | None = None,
        progress: Callable[[str], None] | None = None,
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
            A method of the registry, optionally with options in brackets:
            ``"bayesame"``, ``"bayesame-paper[noise=learned]"`` (as ``--method``).
        stop : StopRule
            The stopping rule (:class:`~activeeval.stopping.StopRule`; its
            fields are also keywords: ``epsilon1``, ``epsilon2``, ``window``,
            ``max_items``): Algorithm 1 (R̂ range over ``window`` steps ≤
            ``epsilon1`` and 95 % interval width ≤ ``epsilon2``); ``max_items``
            is a budget. Changeable later with :meth:`change_settings`.
        seed : int, optional
            Seeds selection; drawn at random (and stored) when omitted, so
            replaying the journal is always deterministic.
        missing : {"models", "items"}
            Missing reference scores: drop the reference models that miss any
            (the default; the item set stays whole) or the items.
        read : ReadSettings
            How to read a reference *file* (:class:`~activeeval.session.reference.ReadSettings`;
            its fields are also keywords: ``kind``, ``score_range``,
            ``duplicate_models``, ``exclude_models``).
        kind, score_range, duplicate_models
            (fields of ``read``) How to read a reference *file* (see :func:`activeeval.read_scores`):
            ``"binary"``/``"continuous"``, ``(low, high)`` (e.g. ``(0, 100)``
            for chrF), and ``"error"`` or ``"drop-identical"`` for a model id
            repeated with identical rows. Stored, and used again on open.
        exclude_models : sequence of str, optional
            (a field of ``read``) Reference models to leave out (``--exclude-models a,b``): e.g. the
            model being evaluated, when the reference holds it. Stored, and
            applied again on open; the fingerprint is that of what is left.
        label : str, optional
            The name of the model being evaluated (shown in status and reports).
        timeout : float
            Seconds to wait for another process's write lock.
        cache : bool
            Keep the parsed reference file and snapshots of the rebuilt state
            in the user cache (:mod:`activeeval.user_cache`), so later opens
            are fast; False uses none (as ``activeeval --no-cache``).
        prior_weights : mapping or path, optional
            Metadata prior weights (BayesAME App. B.2), one per reference
            model: ``{model: weight}`` or a file (CSV/TSV with columns
            model,weight, or JSON), as ``--prior-weights``. Stored with the
            session (the method's ``weights=``); only for methods that have
            that option (``bayesame-paper``, ``bayesame-paper-rs``).
        progress : callable, optional
            Called with a short text as each step of the creation starts
            (reading the reference, fitting the method), for a progress display.
        **method_kwargs
            Further options of the method (JSON-serialisable), as in brackets.
        """
        name, options, spec = resolve_method(method, method_kwargs)
        weights = prior_weights_option(name, prior_weights)
        if weights is not None:
            if "weights" in options:
                raise ConfigurationError(f"give the prior weights once: {option('prior_weights')} or the "
                                         "method's option weights=, not both")
            options = {**options, "weights": weights}  # stored with the options, kept out of the spec label
        meta = {"method": name, "method_spec": spec, "method_kwargs": {"seed": new_seed(seed), **options},
                "stopping": stop.to_dict(), "missing": missing, "label": label}
        return cls._create_journal(path, reference, meta, read.options(), timeout, cache, progress)

    # -------------------------------------------------------------- replay
    def _fresh_state(self) -> BaseMethod:
        return make_method(self._settings["method"], self._prepared_reference(), **method_options_of(self._settings))

    def _observe(self, state: BaseMethod, ev: Event) -> None:
        state.observe(ev.item_id, float(ev.score))  # type: ignore[arg-type]

    def _asked(self, state: BaseMethod, ev: Event) -> None:
        note = getattr(state, "note_drawn", None)
        if note is not None:  # the draw again, with the items pending when it was made
            note(ev.item_id, [iid for _, iid in self._pending])

    def _method(self, tx: Transaction | None = None) -> BaseMethod:
        return self._sync(tx)

    # ------------------------------------------------------------- ask/tell
    def ask(self, k: int = 1) -> list[AskedItem]:
        """The next ``k`` items to score, recorded as pending.

        Pending items (asked, not yet told) are excluded, and methods that
        choose by what is known condition their choice on them. Raises
        :class:`~activeeval.exceptions.SessionStateError` when every item is
        already recorded or pending.
        """
        k = positive_k(k)
        with self._handing_out("hand out items") as (method, asks):
            chosen = method.select_batch(k, exclude=[iid for _, iid in self._pending])
            asks.extend(("", method.item_ids[i]) for i in chosen)
        means = method.reference.scores.mean(axis=0)
        return [AskedItem(iid, int(i), {"reference_mean": float(means[i])})
                for (_, iid), i in zip(asks, chosen, strict=True)]

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
        recorded, already, _, _ = self._record_scores([("", i, s) for i, s in observations], include_unasked=True)
        return recorded, already

    def record(
        self, scores: Mapping[str, float] | Iterable[tuple[str, float]], *, include_unasked: bool = False
    ) -> RecordSummary:
        """Record the scores of items handed out by :meth:`ask` (all others too with ``include_unasked``).

        For a results file that covers more than was asked (``record --from``;
        ``--all`` is ``include_unasked=True``): scores of items never handed
        out are skipped (and counted) so that the active choice of items is
        not bypassed; items not in the reference are skipped too (counted in
        ``unknown``), unless ``include_unasked``, where they are an error.
        All or nothing, like :meth:`tell_many`.
        """
        return RecordSummary(*self._record_scores(self._rows("", scores), include_unasked))

    def _check_new(self, state: BaseMethod, target: str, idx: int, value: float) -> float:
        return state.check_observation(idx, value)[1]

    # ---------------------------------------------------------------- views
    @property
    def pending(self) -> tuple[str, ...]:
        self._sync()
        return tuple(iid for _, iid in self._pending)

    @property
    def observations(self) -> tuple[tuple[str, float], ...]:
        """Recorded (item_id, score) pairs in the order they were recorded."""
        self._sync()
        return tuple((iid, score) for (_, iid), score in self._told.items())

    @property
    def trajectory(self) -> tuple[Estimate, ...]:
        """The estimate after each recorded score, oldest first."""
        return self._method().trajectory

    @property
    def item_ids(self) -> tuple[str, ...]:
        return self._method().item_ids

    @property
    def method(self) -> BaseMethod:
        """The rebuilt method (read it; change it only through :meth:`tell`)."""
        return self._method()

    def estimate(self) -> Estimate:
        return self._method().estimate()

    def stop_reason(self) -> str | None:
        """Why to stop now ("precision", "budget", "exhausted"), or None, under the rule in force."""
        return stop_reason(self.stopping_rule(), self._method())

    def status(self) -> SessionStatus:
        """Estimate, interval, items used, pending items, and each stopping condition against its threshold."""
        method = self._method()
        rule = self.stopping_rule()
        return SessionStatus(
            method.estimate(), tuple(iid for _, iid in self._pending), self.stop_reason(),
            conditions=conditions_of(rule, method.trajectory),
        )

    def __repr__(self) -> str:
        return f"Session({str(self.path)!r}, method={self._settings['method']!r}, n_used={len(self._told)})"
