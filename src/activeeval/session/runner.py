"""Drive a scorer until a session's stopping rule is met.

A scorer scores a batch of items: :class:`Scorer` runs an external command
once per item, or :class:`~activeeval.session.lm_eval_harness.LmEvalHarness`
runs lm-evaluation-harness on exactly the batch's documents.

The command is run without a shell (``shlex.split``), with ``{item_id}``
(and, in a ranking or multi-target session, ``{model}``: the model's or
target's name) replaced in every argument; the last non-empty line of its
standard output must be the score. With ``jobs > 1`` the commands of a batch
run concurrently (in a multi-target session, across targets too:
:func:`drive_multi`).

Scores are recorded in the order the items were asked, so the journal (and
hence the estimate) does not depend on which scorer finishes first, and an
interrupted run that is started again continues exactly where it stopped:
items asked but not recorded are scored first, then the loop goes on. On
Ctrl-C the running commands are stopped, every score already obtained is
recorded, and :class:`KeyboardInterrupt` propagates (the CLI prints
"interrupted: N scores recorded, re-run to resume" and exits 130).
"""

from __future__ import annotations

import shlex
import subprocess
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from activeeval.exceptions import ActiveEvalError, ConfigurationError, InvalidScoresError
from activeeval.session.multi import MultiSession
from activeeval.session.ranking import RankSession
from activeeval.session.session import Session

__all__ = ["ScorerError", "BatchScorer", "Scorer", "Interrupted", "drive", "drive_multi", "drive_ranking",
           "check_jobs"]

PLACEHOLDER = "{item_id}"
MODEL_PLACEHOLDER = "{model}"


class ScorerError(ActiveEvalError):
    """The scorer failed, timed out or printed no number."""


class BatchScorer(Protocol):
    """Scores items; a failure of one item is returned in its place, not raised."""

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]: ...

    def stop(self) -> None:
        """Stop whatever is running (on Ctrl-C)."""


def check_jobs(jobs: object) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigurationError(f"--jobs (jobs=) must be a positive integer, got {jobs!r}")
    return jobs


@dataclass(frozen=True)
class Scorer:
    """A scoring command template such as ``"python score.py --item {item_id}"``.

    ``needs_model`` (ranking sessions): the template must also have ``{model}``.
    """

    template: str
    timeout: float | None = None
    jobs: int = 1
    needs_model: bool = False
    _running: set = field(default_factory=set, compare=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.template)
        except ValueError as exc:
            raise ConfigurationError(f"cannot parse scorer command {self.template!r}: {exc}") from exc
        if not argv:
            raise ConfigurationError("the scorer command (--scorer) is empty")
        needed = [PLACEHOLDER] + ([MODEL_PLACEHOLDER] if self.needs_model else [])
        for ph in needed:
            if not any(ph in a for a in argv):
                example = "python score.py {model} {item_id}" if self.needs_model else f"python score.py {PLACEHOLDER}"
                raise ConfigurationError(
                    f"scorer command {self.template!r} has no {ph} placeholder; "
                    + ("the model and the item" if self.needs_model else "the item")
                    + f" to score are passed there, e.g. '{example}'"
                )
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigurationError(f"--timeout (timeout=) must be a positive number of seconds, got {self.timeout}")
        check_jobs(self.jobs)

    def argv(self, item_id: str, model: str | None = None) -> list[str]:
        out = [a.replace(PLACEHOLDER, item_id) for a in shlex.split(self.template)]
        return [a.replace(MODEL_PLACEHOLDER, model) for a in out] if model is not None else out

    def __call__(self, item_id: str, model: str | None = None) -> float:
        argv = self.argv(item_id, model)
        shown = shlex.join(argv)
        what = f"item {item_id!r}" + (f" of model {model!r}" if model is not None else "")
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except FileNotFoundError as exc:
            raise ScorerError(f"scorer for {what}: command not found: {argv[0]!r} (in {shown!r})") from exc
        except OSError as exc:
            raise ScorerError(f"scorer for {what} could not start: {shown!r} ({exc})") from exc
        with self._lock:
            self._running.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            proc.communicate()
            raise ScorerError(f"scorer for {what} timed out after {self.timeout:g} s: {shown!r}") from exc
        finally:
            with self._lock:
                self._running.discard(proc)
        if proc.returncode != 0:
            tail = " | ".join(line for line in stderr.strip().splitlines()[-3:])
            raise ScorerError(
                f"scorer failed on {what}: {shown!r} exited with code {proc.returncode}"
                + (f"; stderr: {tail}" if tail else "")
            )
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        try:
            return float(lines[-1])
        except (IndexError, ValueError) as exc:
            got = repr(lines[-1][:80]) if lines else "nothing"
            raise ScorerError(
                f"scorer printed no number for {what}: {shown!r} printed {got} on stdout; "
                "the last line of its output must be the score"
            ) from exc

    def _one(self, model: str | None, item_id: str) -> float | ScorerError:
        try:
            return self(item_id, model)
        except ScorerError as exc:
            return exc

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        return self.score_pairs([(model, i) for i in item_ids])

    def score_pairs(self, pairs: Sequence[tuple[str | None, str]]) -> list[float | ScorerError]:
        """Score (model, item id) pairs (``jobs`` at a time); one score or ScorerError per pair, in order."""
        if self.jobs == 1 or len(pairs) == 1:
            out: list[float | ScorerError] = []
            try:
                for model, i in pairs:
                    out.append(self._one(model, i))
            except KeyboardInterrupt:
                raise Interrupted(out) from None
            return out
        pool = ThreadPoolExecutor(max_workers=min(self.jobs, len(pairs)))
        futures: list[Future] = [pool.submit(self._one, model, i) for model, i in pairs]
        try:
            return [f.result() for f in futures]
        except KeyboardInterrupt:
            raise Interrupted([f.result() if f.done() and not f.cancelled() else None for f in futures]) from None
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    def stop(self) -> None:
        with self._lock:
            for proc in list(self._running):
                proc.kill()


def _record(session: Session | MultiSession, item_id: str, score: float, target: str | None = None) -> None:
    try:
        if target is None:
            session.tell(item_id, score)  # type: ignore[call-arg]
        else:
            session.tell(target, item_id, score)  # type: ignore[call-arg]
    except InvalidScoresError as exc:
        of = "" if target is None else f" of target {target!r}"
        raise ScorerError(f"the scorer gave an invalid score for item {item_id!r}{of}: {exc}") from exc


def drive(
    session: Session,
    scorer: BatchScorer | Callable[[str], float],
    *,
    jobs: int = 1,
    on_record: Callable[[Session], None] | None = None,
) -> str:
    """Ask ``jobs`` items at a time, score them, tell, until the stopping rule is met; return the stop reason.

    On a :class:`ScorerError` every score obtained so far is recorded first
    (in ask order), then the error is raised; on Ctrl-C likewise, then
    :class:`KeyboardInterrupt` is raised again.
    """
    check_jobs(jobs)
    if not hasattr(scorer, "score_many"):
        scorer = _Plain(scorer)  # a plain callable item_id -> score
    while True:
        reason = session.stop_reason()
        if reason is not None:
            return reason
        budget = session.stopping_settings["max_items"]
        size = int(jobs) if budget is None else max(1, min(int(jobs), budget - len(session.observations)))
        batch: Sequence[str] = session.pending or [a.item_id for a in session.ask(size)]
        try:
            results = scorer.score_many(batch)
        except KeyboardInterrupt as exc:
            scorer.stop()
            _record_all(session, batch, getattr(exc, "partial", ()), on_record)
            raise
        failure = _record_all(session, batch, results, on_record)
        if failure is not None:
            raise failure


def _record_all(
    session: Any, batch: Sequence[str] | Sequence[tuple[str, str]], results: Sequence[float | ScorerError | None],
    on_record: Callable[[Any], None] | None,
) -> ScorerError | None:
    """Record every score of ``results`` (in ask order; None = not scored); the first failure, if any.

    ``batch`` holds item ids, or (target, item id) pairs of a multi-target session.
    """
    failure: ScorerError | None = None
    for asked, result in zip(batch, results):
        if result is None:
            continue
        if isinstance(result, ScorerError):
            failure = failure or result
            continue
        target, iid = asked if isinstance(asked, tuple) else (None, asked)
        _record(session, iid, result, target)
        if on_record is not None:
            on_record(session)
    return failure


def _score_pairs(scorer: BatchScorer, pairs: Sequence[tuple[str, str]]) -> list[float | ScorerError | None]:
    """Score (target, item) pairs: at once with a scorer that takes pairs, else target by target (in ask order)."""
    if hasattr(scorer, "score_pairs"):
        return scorer.score_pairs(pairs)
    results: list[float | ScorerError | None] = [None] * len(pairs)
    groups: dict[str, list[int]] = {}
    for n, (target, _) in enumerate(pairs):
        groups.setdefault(target, []).append(n)
    for target, where in groups.items():
        try:
            out = scorer.score_many([pairs[n][1] for n in where], model=target)
        except KeyboardInterrupt as exc:
            for n, r in zip(where, getattr(exc, "partial", ())):
                results[n] = r
            raise Interrupted(results) from None
        for n, r in zip(where, out):
            results[n] = r
    return results


def drive_multi(
    session: MultiSession,
    scorer: BatchScorer | Callable[[str, str], float],
    *,
    jobs: int = 1,
    on_record: Callable[[MultiSession], None] | None = None,
) -> str:
    """Ask ``jobs`` (target, item) pairs at a time, score them, tell, until every target has stopped.

    Returns the session's stop reason. The scorer gets the target as
    ``model``; pairs asked and not recorded are scored first. On a
    :class:`ScorerError` or Ctrl-C every score obtained is recorded first (in
    ask order), as in :func:`drive`.
    """
    check_jobs(jobs)
    if not hasattr(scorer, "score_many"):
        scorer = _PlainPairs(scorer)  # a plain callable (target, item_id) -> score
    while True:
        reason = session.stop_reason()
        if reason is not None:
            return reason
        batch = list(session.pending) or [tuple(p) for p in session.ask(int(jobs))]
        try:
            results = _score_pairs(scorer, batch)
        except KeyboardInterrupt as exc:
            scorer.stop()
            _record_all(session, batch, getattr(exc, "partial", ()), on_record)
            raise
        failure = _record_all(session, batch, results, on_record)
        if failure is not None:
            raise failure


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a batch; ``partial`` holds the results obtained so far (None where not scored)."""

    def __init__(self, partial: Sequence[float | ScorerError | None]) -> None:
        super().__init__()
        self.partial = list(partial)


@dataclass(frozen=True)
class _Plain:
    func: Callable[[str], float]

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        out: list[float | ScorerError] = []
        for iid in item_ids:
            try:
                out.append(float(self.func(iid)))
            except ScorerError as exc:
                out.append(exc)
        return out

    def stop(self) -> None:
        pass


@dataclass(frozen=True)
class _PlainPairs:
    func: Callable[[str, str], float]

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        return _Plain(lambda iid: self.func(str(model), iid)).score_many(item_ids)

    def stop(self) -> None:
        pass


def drive_ranking(session: RankSession, scorer: BatchScorer, *, jobs: int = 1,
                  on_record: Callable[[RankSession], None] | None = None) -> str:
    """Ask the ranking session for (model, item), score it, tell, until the ranking is done; the stop reason.

    The ranker asks one pair at a time. With ``jobs > 1``, whenever the asked
    pair has no score yet it is scored together with up to ``jobs - 1`` pairs
    the ranker is likely to ask next (:meth:`RankSession.lookahead`); those
    scores wait in memory until asked, so the journal — and the ranking — is
    what ``jobs=1`` gives with a deterministic scorer (a score never asked is
    dropped). A failure of the scorer on the asked pair raises
    :class:`ScorerError` (it stays pending, and is scored first when the
    session is driven again); Ctrl-C stops the scorer, records the asked
    pair's score if it came, and raises :class:`KeyboardInterrupt`.
    """
    check_jobs(jobs)
    ahead: dict[tuple[str, str], float] = {}
    while True:
        asked = session.ask()
        if asked is None:
            return str(session.stop_reason())
        key = (asked.model, asked.item_id)
        if key in ahead:
            result: float | ScorerError | None = ahead.pop(key)
        else:
            pairs = [key] + [p for p in session.lookahead(jobs - 1) if p not in ahead] if jobs > 1 else [key]
            try:
                results = _score_pairs(scorer, pairs)
            except KeyboardInterrupt as exc:
                scorer.stop()
                first = (getattr(exc, "partial", None) or [None])[0]
                if first is not None and not isinstance(first, ScorerError):
                    _tell_ranked(session, asked, first)
                raise
            result = results[0]
            ahead.update((p, r) for p, r in zip(pairs[1:], results[1:]) if isinstance(r, float))
        if isinstance(result, ScorerError):
            raise result
        _tell_ranked(session, asked, float(result))  # type: ignore[arg-type]
        if on_record is not None:
            on_record(session)


def _tell_ranked(session: RankSession, asked: Any, score: float) -> None:
    try:
        session.tell(asked.model, asked.item_id, score)
    except InvalidScoresError as exc:
        raise ScorerError(
            f"the scorer gave an invalid score for item {asked.item_id!r} of model {asked.model!r}: {exc}"
        ) from exc
