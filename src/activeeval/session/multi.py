"""Several target models evaluated together in one crash-safe session.

A :class:`MultiSession` evaluates T target models on one reference with a
multi-target method (:mod:`activeeval.methods.multi`): a joint one (a
registry name with :func:`~activeeval.methods.registry.is_multi_target`,
e.g. ``"bayesame-multi"``), or any single-target method run once per target
(:class:`~activeeval.methods.multi.Independent`). :meth:`MultiSession.ask`
hands out (target, item) pairs, :meth:`MultiSession.tell` records a
target's score on an item, and one stopping rule is applied to each target
(``stop_reason(rule, method.view(target))``): a target that has stopped is
asked no more, and the session is done when every target has stopped.

Like the other sessions, every event (with its target) is committed to the
SQLite journal before the call returns and the state is rebuilt by replaying
the journal (or from a snapshot), so a session reopened after a crash asks
exactly what the original would have.

>>> from activeeval.session.multi import MultiSession
>>> s = MultiSession.create("run.aeval", "mmlu", ["org/a", "org/b"], max_items=50, seed=0)  # doctest: +SKIP
>>> [(p.target, p.item_id) for p in s.ask(2)]                                             # doctest: +SKIP
[('org/a', 'mmlu-00412'), ('org/b', 'mmlu-00007')]
>>> s.tell("org/a", "mmlu-00412", 1.0)                                                    # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, SessionStateError, UnknownModelError, option, template_of
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import Independent, MultiTargetMethod, target_names
from activeeval.methods.registry import is_multi_target, resolve_factory
from activeeval.session.base import (
    JournalSession,
    StoppingChanges,
    method_options_of,
    new_seed,
    positive_k,
    resolve_method,
)
from activeeval.session.journal.storage import DEFAULT_TIMEOUT, Event
from activeeval.session.reference import ReadSettings
from activeeval.session.session import RecordSummary, SessionStatus
from activeeval.settings import takes_settings
from activeeval.stopping import (
    DEFAULT_STOP,
    StoppingRule,
    StopRule,
    conditions_of,
    stop_reason,
)

__all__ = ["AskedPair", "MultiSession", "MultiStatus"]


@dataclass(frozen=True)
class AskedPair:
    """A (target, item) pair handed out by :meth:`MultiSession.ask`; unpacks as ``target, item_id``.

    ``metadata`` is what the reference says about the item (``reference_mean``), as for one target.
    """

    target: str
    item_id: str
    index: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __iter__(self) -> Iterator[str]:
        return iter((self.target, self.item_id))

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "item_id": self.item_id, "index": self.index, **dict(self.metadata)}


@dataclass(frozen=True)
class MultiStatus:
    """Where each target stands (a :class:`~activeeval.session.SessionStatus` each) and the session overall.

    The session stops when every target has stopped; ``covariance`` is the
    method's T×T posterior covariance of the targets' full-benchmark scores
    (diagonal for :class:`~activeeval.methods.multi.Independent`).
    """

    targets: Mapping[str, SessionStatus]
    covariance: tuple[tuple[float, ...], ...] = ()

    @property
    def stop(self) -> bool:
        return all(st.stop for st in self.targets.values())

    @property
    def stop_reason(self) -> str | None:
        """None while a target is running; else the targets' reasons (distinct, in target order)."""
        if not self.stop:
            return None
        reasons = [str(st.stop_reason) for st in self.targets.values()]
        return ", ".join(dict.fromkeys(reasons))

    @property
    def running(self) -> tuple[str, ...]:
        """The targets that have not stopped (the ones :meth:`MultiSession.ask` hands out)."""
        return tuple(t for t, st in self.targets.items() if not st.stop)

    @property
    def pending(self) -> tuple[tuple[str, str], ...]:
        return tuple((t, iid) for t, st in self.targets.items() for iid in st.pending)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stop": self.stop,
            "stop_reason": self.stop_reason,
            "running": list(self.running),
            "n_used": sum(st.estimate.n_observed for st in self.targets.values()),
            "pending": [{"target": t, "item_id": iid} for t, iid in self.pending],
            "targets": {t: st.to_dict() for t, st in self.targets.items()},
            "covariance": [list(row) for row in self.covariance],
        }


class MultiSession(StoppingChanges, JournalSession):
    """An ask/tell evaluation of several target models, stored in one SQLite file (see the module docstring).

    Build with :meth:`create` or :meth:`open`, not directly; several objects,
    in one process or several, may use the same file.
    """

    KIND = "multi"

    # ------------------------------------------------------------ creation
    @classmethod
    @takes_settings
    def create(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix,
        targets: Sequence[str],
        *,
        method: str = "bayesame",
        stop: StopRule = DEFAULT_STOP,
        seed: int | None = None,
        missing: str = "models",
        read: ReadSettings = ReadSettings(),
        label: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cache: bool = True,
        progress: Callable[[str], None] | None = None,
        **method_kwargs: Any,
    ) -> MultiSession:
        """Start a new session file at ``path`` evaluating ``targets`` (their names).

        ``method`` is a joint multi-target method (``"bayesame-multi"``, with
        its options in brackets) or any single-target method spec, run once
        per target (:class:`~activeeval.methods.multi.Independent`). The
        stopping rule (``stop``, or its fields ``epsilon1``, ``epsilon2``,
        ``window``, ``max_items``: a budget per target) applies to each target. The other parameters
        are those of :meth:`activeeval.session.Session.create`.
        """
        try:
            names = list(target_names(targets))
        except ConfigurationError as exc:
            raise ConfigurationError(f"{template_of(exc)} (give the target models as "
                                     f"{option('targets', repr(['a', 'b', 'c']), 'a,b,c')})") from exc
        name, options, spec = resolve_method(method, method_kwargs, reserved={"targets": option("targets")})
        meta = {"method": name, "method_spec": spec, "method_kwargs": {"seed": new_seed(seed), **options},
                "targets": names, "stopping": stop.to_dict(), "missing": missing, "label": label}
        return cls._create_journal(path, reference, meta, read.options(), timeout, cache, progress)

    # -------------------------------------------------------------- replay
    def _fresh_state(self) -> MultiTargetMethod:
        options = method_options_of(self._settings)
        seed = options.pop("seed")
        name, targets = self._settings["method"], self._settings["targets"]
        if is_multi_target(name):
            joint = resolve_factory(name)(self._prepared_reference(), targets, seed=seed, **options)
            return cast(MultiTargetMethod, joint)  # a multi-target name's factory builds one
        return Independent(self._prepared_reference(), targets, method=name, seed=seed, **options)

    def _observe(self, state: MultiTargetMethod, ev: Event) -> None:
        state.observe(ev.target, ev.item_id, float(ev.score))  # type: ignore[arg-type]

    def _target_key(self, state: MultiTargetMethod, target: Any) -> str:
        try:
            return state.targets[state.target_index(target)]
        except ConfigurationError as exc:
            raise UnknownModelError(
                f"unknown target {target!r} in session {str(self.path)!r}; its targets are {', '.join(state.targets)}"
                f" (name one with {option('target', repr('NAME'), 'NAME')})"
            ) from exc

    def _check_new(self, state: MultiTargetMethod, target: str, idx: int, value: float) -> float:
        return state.check_observation(target, idx, value)[2]

    # ------------------------------------------------------------- stopping
    def _reasons(self, method: MultiTargetMethod, rule: StoppingRule) -> dict[str, str | None]:
        return {t: stop_reason(rule, method.view(t)) for t in method.targets}

    def _room(self, method: MultiTargetMethod) -> dict[str, int | None]:
        """How many more pairs each running target may be handed out (None: no budget); stopped ones left out."""
        budget = self._stopping["max_items"]
        waiting: dict[str, int] = {}
        for t, _ in self._pending:
            waiting[t] = waiting.get(t, 0) + 1
        return {
            t: None if budget is None else max(0, budget - method.n_observed_of(t) - waiting.get(t, 0))
            for t, reason in self._reasons(method, self._rule()).items() if reason is None
        }

    # ------------------------------------------------------------ ask/tell
    def ask(self, k: int = 1) -> list[AskedPair]:
        """Up to ``k`` (target, item) pairs to score next, recorded as pending.

        Only targets that have not stopped are asked, and none beyond its
        budget (``max_items``, counting its pending items); pending pairs are
        never handed out again. Returns an empty list once every target has
        stopped; raises :class:`~activeeval.exceptions.SessionStateError` when
        the running targets have nothing left to hand out (every item, or the
        rest of the budget, is pending: record those scores first).
        """
        k = positive_k(k)
        with self._handing_out("hand out items") as (method, asks):
            room = self._room(method)
            active = [t for t, r in room.items() if r is None or r > 0]
            if not room:
                return []
            if not active:
                raise SessionStateError(
                    f"the running targets ({', '.join(room)}) have their whole budget pending; record the pending "
                    f"scores first (the session's status lists them), or raise the budget with {option('max_items')}"
                )
            chosen: list[tuple[str, int]] = []
            for t, i in method.select_batch(k, exclude=list(self._pending), active=active):
                name = method.targets[t]
                left = room[name]
                if left is None or left > 0:
                    chosen.append((name, i))
                    room[name] = None if left is None else left - 1
            asks.extend((t, method.item_ids[i]) for t, i in chosen)
        means = method.reference.scores.mean(axis=0)
        return [AskedPair(t, method.item_ids[i], int(i), {"reference_mean": float(means[i])}) for t, i in chosen]

    def tell(self, target: str, item_id: str | int, score: float) -> bool:
        """Record ``target``'s ``score`` on ``item_id`` (committed before returning).

        Returns True if recorded, False if the same score was already
        recorded (a no-op). Raises, writing nothing, for an unknown target
        (:class:`~activeeval.exceptions.UnknownModelError`) or item, an
        invalid score, or a different score on an item already recorded.
        """
        return self.tell_many([(target, item_id, score)])[0] == 1

    def tell_many(self, observations: Iterable[tuple[str, str | int, float]]) -> tuple[int, int]:
        """Record several (target, item, score) in one transaction, all or nothing: (n_recorded, n_already)."""
        recorded, already, _, _ = self._record_scores(list(observations), include_unasked=True)
        return recorded, already

    def record(
        self, target: str, scores: Mapping[str, float] | Iterable[tuple[str, float]], *,
        include_unasked: bool = False,
    ) -> RecordSummary:
        """Record one target's scores from a results file (``record --target T --from``), all or nothing.

        As :meth:`activeeval.session.Session.record`: scores of items not
        handed out to ``target`` are skipped (and counted) unless
        ``include_unasked``.
        """
        return RecordSummary(*self._record_scores(self._rows(target, scores), include_unasked))

    # ---------------------------------------------------------------- views
    @property
    def targets(self) -> tuple[str, ...]:
        return tuple(self._settings["targets"])

    @property
    def method(self) -> MultiTargetMethod:
        """The rebuilt multi-target method (read it; change it only through :meth:`tell`)."""
        return self._sync()

    @property
    def item_ids(self) -> tuple[str, ...]:
        return self._sync().item_ids

    @property
    def pending(self) -> tuple[tuple[str, str], ...]:
        """(target, item id) pairs handed out and not yet recorded, in the order they were asked."""
        self._sync()
        return tuple(self._pending)

    @property
    def observations(self) -> tuple[tuple[str, str, float], ...]:
        """Recorded (target, item id, score) in the order they were recorded."""
        self._sync()
        return tuple((t, iid, score) for (t, iid), score in self._told.items())

    def trajectory(self, target: str) -> tuple[Estimate, ...]:
        """The target's estimate after each of its recorded scores, oldest first."""
        method = self._sync()
        return method.trajectory(self._target_key(method, target))

    def estimate(self, target: str) -> Estimate:
        method = self._sync()
        return method.estimate(self._target_key(method, target))

    def estimates(self) -> dict[str, Estimate]:
        method = self._sync()
        return dict(zip(method.targets, method.estimates(), strict=True))

    def stop_reasons(self) -> dict[str, str | None]:
        """Each target's reason to stop ("precision", "budget", "exhausted") or None, under the rule in force."""
        return self._reasons(self._sync(), self.stopping_rule())

    def stop_reason(self) -> str | None:
        """None while a target is running; once every target has stopped, their reasons (as :class:`MultiStatus`)."""
        return self.status().stop_reason

    def status(self) -> MultiStatus:
        """Each target's estimate, interval, items used, pending items and stopping conditions; the overall stop."""
        method = self._sync()
        rule = self.stopping_rule()
        reasons = self._reasons(method, rule)
        per = {}
        for t in method.targets:
            view = method.view(t)
            pending = tuple(iid for (pt, iid) in self._pending if pt == t)
            per[t] = SessionStatus(view.estimate(), pending, reasons[t],
                                   conditions=conditions_of(rule, view.trajectory))
        cov = tuple(tuple(float(x) for x in row) for row in np.asarray(method.covariance()))
        return MultiStatus(per, cov)

    def __repr__(self) -> str:
        return (f"MultiSession({str(self.path)!r}, method={self._settings['method']!r}, targets={list(self.targets)},"
                f" n_used={len(self._told)})")
