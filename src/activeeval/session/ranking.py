"""Ranking several new models with a crash-safe session (the adaptive ranker of ``activeeval rank``).

A :class:`RankSession` holds one method per ranked model, all on the same
reference, and the ranker's settings (γ, warm-up, budget, per-model costs).
:meth:`RankSession.ask` returns the (model, item) the ranker wants scored
next (:func:`activeeval.ranking.next_step`), recorded as pending;
:meth:`RankSession.tell` records its score. Like a single-target session,
every event is committed to the SQLite journal before the call returns, the
state is rebuilt by replay (or from a snapshot), and a reopened session asks
exactly what the original would have. The ranker is sequential: it decides
the next model from every score so far, so one (model, item) is pending at
a time.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, UnknownModelError, option
from activeeval.methods.base import BaseMethod
from activeeval.methods.registry import is_multi_target, make_method, sharing_factory
from activeeval.ranking import (
    RankResult,
    RankStop,
    check_costs,
    check_models,
    check_pairing,
    is_confident,
    joint_targets,
    next_item,
    next_step,
    rank_result,
)
from activeeval.session.base import JournalSession, new_seed, resolve_method
from activeeval.session.journal.storage import DEFAULT_TIMEOUT, Event
from activeeval.session.reference import ReadSettings
from activeeval.settings import takes_settings

if TYPE_CHECKING:
    from activeeval.methods.multi import MultiTargetMethod

__all__ = ["RankAsk", "RankSession", "RankStatus", "RankStop"]  # RankStop: activeeval.ranking's


@dataclass(frozen=True)
class RankAsk:
    """The (model, item) to score next."""

    model: str
    item_id: str
    index: int

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "item_id": self.item_id, "index": self.index}


@dataclass(frozen=True)
class RankStatus:
    """The ranking as it stands, the pairwise confidence of adjacent models, ties, and whether to stop."""

    result: RankResult
    stop_reason: str | None
    pending: tuple[tuple[str, str], ...]
    budget: float
    pairs: tuple[dict[str, Any], ...] = field(default=())

    @property
    def stop(self) -> bool:
        return self.stop_reason is not None

    def to_dict(self) -> dict[str, Any]:
        d = self.result.to_dict()
        d["stop_reason"] = self.stop_reason
        d["stop"] = self.stop
        d["pending"] = [{"model": m, "item_id": i} for m, i in self.pending]
        d["budget"] = None if math.isinf(self.budget) else self.budget
        d["adjacent_pairs"] = list(self.pairs)
        return d


class _Methods(dict):
    """One method per ranked model; its frozen options are the (shared) first method's, for the session file."""

    def frozen_options(self) -> dict:
        return next(iter(self.values())).frozen_options()


class RankSession(JournalSession):
    """A crash-safe adaptive ranking of several models (see the module docstring)."""

    KIND = "rank"

    @classmethod
    @takes_settings
    def create(
        cls,
        path: str | os.PathLike[str],
        reference: str | os.PathLike[str] | ScoreMatrix,
        models: Sequence[str],
        *,
        method: str = "cat",
        stop: RankStop = RankStop(),
        costs: Mapping[str, float] | None = None,
        seed: int | None = None,
        pairing: str = "own",
        missing: str = "models",
        read: ReadSettings = ReadSettings(),
        label: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cache: bool = True,
        **method_kwargs: Any,
    ) -> RankSession:
        """Start a ranking session of ``models`` (new models, scored by your harness) against ``reference``.

        ``method`` is a registry spec (``"cat"``, ``"bayesame-paper[noise=learned]"``, ...; a joint multi-target
        method such as ``"bayesame-multi"`` ranks on the models' joint posterior); ``stop`` (:class:`RankStop`,
        or its fields ``gamma``, ``min_items``, ``budget_per_model`` as keywords) when the ranking is done:
        ``budget_per_model`` sets the total budget to that many items per model times the sum of the costs
        (None: no budget). ``read`` (:class:`~activeeval.session.reference.ReadSettings`, or its fields as
        keywords) is how a reference file is read, as for :meth:`activeeval.session.Session.create`.
        ``pairing="partner"`` makes the item choice pair-aware (:func:`activeeval.ranking.next_item`).
        """
        targets = check_models(models)
        cost_map = check_costs(costs, targets)
        budget = None if stop.budget_per_model is None else float(stop.budget_per_model) * sum(cost_map.values())
        name, options, spec = resolve_method(method, method_kwargs)
        meta = {
            "method": name, "method_spec": spec, "method_kwargs": {"seed": new_seed(seed), **options},
            "targets": targets, "costs": cost_map, "gamma": stop.gamma, "min_items": stop.min_items,
            "budget": budget, "missing": missing, "label": label, "pairing": check_pairing(pairing),
        }
        return cls._create_journal(path, reference, meta, read.options(), timeout, cache)

    # -------------------------------------------------------------- replay
    def _fresh_state(self) -> dict[str, BaseMethod]:
        ref = self._prepared_reference()
        kw = self._settings["method_kwargs"]
        name, targets = self._settings["method"], list(self._settings["targets"])
        if is_multi_target(name):  # one joint method, each model one side of it (activeeval.ranking.joint)
            if "targets" in kw:
                raise ConfigurationError(
                    f"method {name!r}: its targets are the models ranked ({option('models')}); drop targets=")
            joint = cast("MultiTargetMethod", make_method(name, ref, targets=targets, **kw))  # a multi-target name
            return _Methods(joint_targets(joint, targets))
        make = sharing_factory(name, ref, **kw)  # reference-only state derived once
        return _Methods({m: make() for m in targets})

    TARGET_NOUN = "model"
    NEVER_ALTERED = "recorded scores are never altered"

    def _target_key(self, state: dict[str, BaseMethod], target: Any) -> str:
        if target not in state:
            raise UnknownModelError(
                f"model {target!r} is not ranked in session {str(self.path)!r}; its models: {', '.join(self.models)}"
            )
        return target

    def _reference_of(self, state: dict[str, BaseMethod], target: str) -> ScoreMatrix:
        return state[target].reference

    def _check_new(self, state: dict[str, BaseMethod], target: str, idx: int, value: float) -> float:
        return state[target].check_observation(idx, value)[1]

    def _observe(self, state: dict[str, BaseMethod], ev: Event) -> None:
        if ev.target not in state:
            raise UnknownModelError(f"model {ev.target!r} is not ranked in this session")
        state[ev.target].observe(ev.item_id, float(ev.score))  # type: ignore[arg-type]

    # -------------------------------------------------------------- views
    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self._settings["targets"])

    @property
    def n_scored(self) -> int:
        """Scores recorded so far, over all models."""
        self._sync()
        return len(self._told)

    @property
    def methods(self) -> dict[str, BaseMethod]:
        return dict(self._sync())

    def _budget(self) -> float:
        b = self._settings.get("budget")
        return math.inf if b is None else float(b)

    def _counts(self, methods: Mapping[str, BaseMethod]) -> dict[str, int]:
        return {m: methods[m].n_observed for m in self.models}

    def _step(self, methods: Mapping[str, BaseMethod]):
        s = self._settings
        return next_step(self.models, methods, self._counts(methods), s["costs"], gamma=s["gamma"],
                         min_items=s["min_items"], budget=self._budget())

    def _pending_pairs(self) -> list[tuple[str, str]]:
        return [(m, iid) for m, iid in self._pending]

    def stop_reason(self) -> str | None:
        """Why the ranking is done ("confident", "budget", "exhausted"), or None while a model needs scores."""
        methods = self._sync()
        if self._pending:
            return None
        return self._step(methods).reason

    # ------------------------------------------------------------ ask/tell
    def ask(self) -> RankAsk | None:
        """The (model, item) to score next, recorded as pending; the pending one again until it is told.

        None once the ranking is done (see :meth:`stop_reason`).
        """
        with self._handing_out("hand out an item") as (methods, asks):
            if self._pending:
                model, iid = next(iter(self._pending))
                return RankAsk(model, iid, methods[model].reference.item_index(iid))
            step = self._step(methods)
            if step.model is None:
                return None
            partner = methods[step.partner].observed_items if step.partner is not None else ()
            idx = next_item(methods[step.model], partner, pairing=self._settings.get("pairing", "own"))
            asks.append((step.model, methods[step.model].item_ids[idx]))
        return RankAsk(*asks[0], idx)

    def lookahead(self, n: int) -> list[tuple[str, str]]:
        """Up to ``n`` (model, item id) pairs the ranker is likely to ask after what is pending; records nothing.

        One pair per model (a model's next item depends on its next score):
        each model's next item as things stand, in the order the ranker would
        reach the models if no score changed an estimate. A driver with
        several scorer slots scores them while it waits (``rank --jobs``,
        :func:`~activeeval.session.drivers.runner.drive_ranking`); the ranker still
        asks one pair at a time, so the journal is the same as without.
        """
        methods = self._sync()
        s = self._settings
        counts = self._counts(methods)
        seen = set()
        for model, _ in self._pending:
            counts[model] += 1
            seen.add(model)
        out: list[tuple[str, str]] = []
        for _ in range(2 * len(self.models)):
            if len(out) >= n:
                break
            step = next_step(self.models, methods, counts, s["costs"], gamma=s["gamma"], min_items=s["min_items"],
                             budget=self._budget())
            if step.model is None:
                break
            counts[step.model] += 1
            if step.model in seen:
                continue
            seen.add(step.model)
            partner = methods[step.partner].observed_items if step.partner is not None else ()
            idx = next_item(methods[step.model], partner, pairing=s.get("pairing", "own"))
            out.append((step.model, methods[step.model].item_ids[idx]))
        return out

    def tell(self, model: str, item_id: str | int, score: float) -> bool:
        """Record ``model``'s score on ``item_id``; False if that same score is already recorded.

        Raises, writing nothing, for an unknown model or item, an invalid
        score, or a different score on an item already recorded.
        """
        return self._record_scores([(model, item_id, score)], include_unasked=True, what="record a score")[0] == 1

    def status(self) -> RankStatus:
        """The current ranking with each adjacent pair's confidence, the ties, and the stop reason."""
        methods = self._sync()
        s = self._settings
        asked: dict[str, list[int]] = {m: [] for m in self.models}
        for (m, iid), _ in self._told.items():
            asked[m].append(methods[m].reference.item_index(iid))
        reason = self.stop_reason()
        res = rank_result(self.models, methods, s["costs"], asked, reason or "running", gamma=s["gamma"])
        pairs = []
        for hi, lo in zip(res.ranking[:-1], res.ranking[1:], strict=True):
            p = res.confidence(hi, lo)
            pairs.append({"higher": hi, "lower": lo, "confidence": p, "decided": is_confident(p, s["gamma"])})
        return RankStatus(res, reason, tuple(self._pending_pairs()), self._budget(), tuple(pairs))

    def __repr__(self) -> str:
        return f"RankSession({str(self.path)!r}, models={list(self.models)}, n_scored={len(self._told)})"
