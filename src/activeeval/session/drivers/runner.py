"""Drive a scorer until a session's stopping rule is met.

A scorer scores a batch of items: :class:`Scorer` runs an external command
once per item, or :class:`~activeeval.session.drivers.lm_eval_harness.LmEvalHarness`
runs lm-evaluation-harness on exactly the batch's documents.

The command is run without a shell (``shlex.split``), with ``{item_id}``
(and, in a ranking or multi-target session, ``{model}``: the model's or
target's name) replaced in every argument, in one pass (an item id that
contains the text ``{model}`` is passed as it is); the last non-empty line of
its standard output must be the score, an ordinary decimal number
(:func:`~activeeval.data.matrix.parse_score_text`: no ``1_0``, no ``nan``).
With ``jobs > 1`` the commands of a batch run concurrently (in a multi-target
session, across targets too: :func:`drive_multi`).

No scorer can hang or crash a run: each command runs in its own process group
(its own session, with no terminal input); after ``timeout`` seconds
(:data:`DEFAULT_TIMEOUT` unless given) the whole group is killed and its pipes
are abandoned, so a grandchild that keeps them open cannot hold the run. Its
output is decoded as UTF-8 with replacement (only the last 64 KiB of standard
output and 8 KiB of standard error are kept). A call that fails, times out or
prints no number leaves its item pending; every other score of the batch is
recorded.

Scores are recorded in the order the items were asked, so the journal (and
hence the estimate) does not depend on which scorer finishes first, and an
interrupted run that is started again continues exactly where it stopped:
items asked but not recorded are scored first, then the loop goes on. On
Ctrl-C the running commands are stopped, every score already obtained is
recorded, and :class:`KeyboardInterrupt` propagates (the CLI prints
"interrupted: N scores recorded, re-run to resume" and exits 130).
"""

from __future__ import annotations

import os
import re
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from activeeval.data.matrix import parse_score_text
from activeeval.exceptions import (
    ConfigurationError,
    DuplicateObservationError,
    InvalidScoresError,
    ScorerError,  # defined there, importable from here as before
    UnknownItemError,
    option,
    template_of,
)
from activeeval.session.multi import MultiSession
from activeeval.session.ranking import RankSession
from activeeval.session.session import Session

__all__ = [
    "DEFAULT_TIMEOUT",
    "BatchScorer",
    "Interrupted",
    "Scorer",
    "ScorerError",
    "check_jobs",
    "drive",
    "drive_multi",
    "drive_ranking",
]

PLACEHOLDER = "{item_id}"
MODEL_PLACEHOLDER = "{model}"
_PLACEHOLDERS = re.compile(re.escape(PLACEHOLDER) + "|" + re.escape(MODEL_PLACEHOLDER))

# Seconds one scorer call may take. An item scored by a model through an API or a local GPU takes seconds to
# a few minutes; ten minutes without an answer is a hung call, not a slow one. 0 / None: no limit.
DEFAULT_TIMEOUT = 600.0
# After the command exits, how long its output may still arrive (from a grandchild that holds the pipes).
_EXIT_GRACE = 0.5
_KEEP_STDOUT, _KEEP_STDERR = 64 * 1024, 8 * 1024
_POSIX = os.name == "posix"


class BatchScorer(Protocol):
    """Scores items; a failure of one item is returned in its place, not raised."""

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]: ...

    def stop(self) -> None:
        """Stop whatever is running (on Ctrl-C)."""


def check_jobs(jobs: object) -> int:
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigurationError(f"{option('jobs')} must be a positive integer, got {jobs!r}")
    return jobs


@dataclass(frozen=True)
class Scorer:
    """A scoring command template such as ``"python score.py --item {item_id}"``.

    ``timeout``: seconds one call may take (default :data:`DEFAULT_TIMEOUT`; None or 0: no limit).
    ``needs_model`` (ranking sessions): the template must also have ``{model}``.
    """

    template: str
    timeout: float | None = DEFAULT_TIMEOUT
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
            raise ConfigurationError(f"the scorer command ({option('scorer')}) is empty")
        needed = [PLACEHOLDER] + ([MODEL_PLACEHOLDER] if self.needs_model else [])
        for ph in needed:
            if not any(ph in a for a in argv):
                example = "python score.py {model} {item_id}" if self.needs_model else f"python score.py {PLACEHOLDER}"
                raise ConfigurationError(
                    f"scorer command {self.template!r} has no {ph} placeholder; "
                    + ("the model and the item to score are" if self.needs_model else "the item to score is")
                    + f" passed there, e.g. '{example}'"
                )
        t = self.timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t < float("inf")):
            raise ConfigurationError(
                f"{option('timeout')} must be a number of seconds >= 0 (0: no limit), got {self.timeout!r}")
        check_jobs(self.jobs)

    def argv(self, item_id: str, model: str | None = None) -> list[str]:
        """The command for one item: each placeholder replaced in one pass (values are never re-read)."""
        values = {PLACEHOLDER: item_id, MODEL_PLACEHOLDER: model}

        def fill(m: re.Match[str]) -> str:
            value = values[m.group()]
            return value if value is not None else m.group()

        return [_PLACEHOLDERS.sub(fill, a) for a in shlex.split(self.template)]

    def __call__(self, item_id: str, model: str | None = None) -> float:
        argv = self.argv(item_id, model)
        shown = shlex.join(argv)
        what = f"item {item_id!r}" + (f" of model {model!r}" if model is not None else "")
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=_POSIX)
        except FileNotFoundError as exc:
            raise ScorerError(f"scorer for {what}: command not found: {argv[0]!r} (in {shown!r})") from exc
        except OSError as exc:
            raise ScorerError(f"scorer for {what} could not start: {shown!r} ({exc})") from exc
        with self._lock:
            self._running.add(proc)
        try:
            stdout, stderr, finished = _collect(proc, self.timeout or None)
        finally:
            with self._lock:
                self._running.discard(proc)
        if not finished:
            raise ScorerError(f"scorer for {what} timed out after {self.timeout:g} s (its processes were killed; "
                              f"a longer {option('timeout')} allows more): {shown!r}")
        if proc.returncode != 0:
            tail = " | ".join(line for line in stderr.strip().splitlines()[-3:])
            raise ScorerError(
                f"scorer failed on {what}: {shown!r} exited with code {proc.returncode}"
                + (f"; stderr: {tail}" if tail else "")
            )
        lines = [line.strip() for line in stdout.splitlines() if line.strip()]
        if not lines:
            raise ScorerError(f"scorer printed no number for {what}: {shown!r} printed nothing on stdout; "
                              "the last line of its output must be the score")
        try:
            return parse_score_text(lines[-1])
        except InvalidScoresError as exc:
            raise ScorerError(
                f"scorer printed no number for {what}: {shown!r} printed {lines[-1][:80]!r} on stdout, which "
                f"{exc.reason}; the last line of its output must be the score"  # type: ignore[attr-defined]
            ) from None

    def _one(self, model: str | None, item_id: str) -> float | ScorerError:
        return _plain_score(lambda iid: self(iid, model), item_id)

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
        futures: list[Future] = [Future() for _ in pairs]
        try:
            _start_workers(self._one, pairs, futures, self.jobs)
            return [f.result() for f in futures]
        except KeyboardInterrupt:
            for f in futures:
                f.cancel()  # not started yet: never started (a running one finishes, or stop() kills it)
            raise Interrupted([f.result() if f.done() and not f.cancelled() and f.exception() is None else None
                               for f in futures]) from None

    def stop(self) -> None:
        with self._lock:
            for proc in list(self._running):
                _kill_group(proc)


def _start_workers(func: Callable[..., Any], calls: Sequence[tuple[Any, ...]], futures: Sequence[Future],
                   jobs: int) -> None:
    """Run ``func(*calls[k])`` into ``futures[k]`` on up to ``jobs`` daemon threads; returns at once.

    Not a ThreadPoolExecutor: its worker threads are joined when the interpreter exits, and a Ctrl-C landing
    while it starts one (``Thread.start`` waits for the thread) can leave a worker it never registered waiting
    on its queue for ever, so the process hangs after the interrupt. Here every future exists before any thread
    starts, a cancelled future is skipped, and daemon threads never hold the exit.
    """
    todo = iter(range(len(calls)))
    lock = threading.Lock()

    def work() -> None:
        while True:
            with lock:
                k = next(todo, None)
            if k is None:
                return
            f = futures[k]
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(func(*calls[k]))
            except BaseException as exc:  # delivered to the caller through the future
                f.set_exception(exc)

    for _ in range(min(jobs, len(calls))):
        threading.Thread(target=work, name="activeeval-scorer", daemon=True).start()


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the command and every process it started in its group (it runs in a session of its own)."""
    try:
        if _POSIX:
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows: the command alone
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def _collect(proc: subprocess.Popen, timeout: float | None) -> tuple[str, str, bool]:
    """Read the command's output until it exits (and its pipes close), or the timeout kills it.

    Returns (stdout, stderr, finished); both texts are the tails kept, decoded with replacement. Returns
    within ``timeout`` + about 0.5 s whatever the command's children do: after the command exits, output
    is read for at most ``_EXIT_GRACE`` seconds more, and on a timeout the group is killed and the pipes
    are abandoned (closed unread).
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    # keyed by the two pipes (IO objects; Popen's stubs say Optional, the caller opens both with PIPE)
    tails: dict[Any, bytearray] = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    keep: dict[Any, int] = {proc.stdout: _KEEP_STDOUT, proc.stderr: _KEEP_STDERR}
    finished = True
    if not _POSIX:  # pragma: no cover - no select() on Windows pipes
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err, finished = b"", b"", False
        tails = {proc.stdout: bytearray(out[-_KEEP_STDOUT:]), proc.stderr: bytearray(err[-_KEEP_STDERR:])}
    else:
        exited_at: float | None = None
        with selectors.DefaultSelector() as sel:
            for pipe in tails:
                sel.register(pipe, selectors.EVENT_READ)
            while sel.get_map():
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > _EXIT_GRACE:
                    break  # exited; whoever still holds the pipes is not the scorer's answer
                if exited_at is None and deadline is not None and now >= deadline:
                    finished = False
                    break
                wait = 0.05 if deadline is None or exited_at is not None else min(0.05, deadline - now)
                for key, _ in sel.select(wait):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        sel.unregister(key.fileobj)
                        continue
                    tail = tails[key.fileobj]
                    tail += chunk
                    if len(tail) > 2 * keep[key.fileobj]:
                        del tail[: len(tail) - keep[key.fileobj]]
        if not finished:
            _kill_group(proc)
    for pipe in tails:
        pipe.close()
    if finished and deadline is not None:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # closed its output but did not exit
            _kill_group(proc)
            finished = False
    if not finished or deadline is None:
        proc.wait()
    out, err = (bytes(tails[p][-keep[p]:]).decode("utf-8", errors="replace") for p in (proc.stdout, proc.stderr))
    return out, err, finished


# What telling one score may raise that concerns that score alone (the item stays pending; the batch goes on).
_REFUSED = (InvalidScoresError, DuplicateObservationError, UnknownItemError)


def _record(session: Session | MultiSession, item_id: str, score: float, target: str | None = None) -> None:
    try:
        if target is None:
            cast(Session, session).tell(item_id, score)
        else:
            cast(MultiSession, session).tell(target, item_id, score)
    except _REFUSED as exc:
        of = "" if target is None else f" of target {target!r}"
        raise ScorerError(f"the scorer gave an invalid score for item {item_id!r}{of}: {template_of(exc)}") from exc


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
    batch_scorer = cast(BatchScorer, scorer)

    def next_batch() -> Sequence[str]:
        budget = session.stopping_settings["max_items"]
        size = int(jobs) if budget is None else max(1, min(int(jobs), budget - len(session.observations)))
        return session.pending or [a.item_id for a in session.ask(size)]

    return _drive_loop(session, batch_scorer, next_batch, batch_scorer.score_many, on_record)


def _drive_loop(
    session: Any, scorer: BatchScorer, next_batch: Callable[[], Sequence[Any]],
    score: Callable[[Any], Sequence[float | ScorerError | None]], on_record: Callable[[Any], None] | None,
) -> str:
    """Until the session stops: take the next batch (pending first), score it, record every score obtained.

    On a scorer failure the batch's other scores are recorded, then it is raised; on Ctrl-C the scorer is
    stopped, what it had scored is recorded, and the interrupt goes on. Returns the session's stop reason.
    """
    while True:
        reason = session.stop_reason()
        if reason is not None:
            return reason
        batch = next_batch()
        try:
            results = score(batch)
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
    for asked, result in zip(batch, results, strict=True):
        if result is None:
            continue
        if isinstance(result, ScorerError):
            failure = failure or result
            continue
        target, iid = asked if isinstance(asked, tuple) else (None, asked)
        try:
            _record(session, iid, result, target)
        except ScorerError as exc:  # this score refused: the others are recorded all the same
            failure = failure or exc
            continue
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
            for n, r in zip(where, getattr(exc, "partial", ()), strict=False):
                results[n] = r
            raise Interrupted(results) from None
        for n, r in zip(where, out, strict=False):
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
    batch_scorer = cast(BatchScorer, scorer)

    def next_batch() -> list[tuple[str, str]]:
        return list(session.pending) or [(p.target, p.item_id) for p in session.ask(int(jobs))]

    return _drive_loop(session, batch_scorer, next_batch, lambda batch: _score_pairs(batch_scorer, batch), on_record)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a batch; ``partial`` holds the results obtained so far (None where not scored)."""

    def __init__(self, partial: Sequence[float | ScorerError | None]) -> None:
        super().__init__()
        self.partial = list(partial)


def _plain_score(func: Callable[[str], Any], item_id: str) -> float | ScorerError:
    """A Python scorer's score for one item (a text strictly, as a command's output), or its failure."""
    try:
        value = func(item_id)
        return parse_score_text(value) if isinstance(value, str) else float(value)
    except ScorerError as exc:
        return exc
    except Exception as exc:
        err = ScorerError(f"scorer for item {item_id!r} failed: {type(exc).__name__}: {template_of(exc)}")
        err.__cause__ = exc
        return err


@dataclass(frozen=True)
class _Plain:
    func: Callable[[str], float]

    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        out: list[float | ScorerError] = []
        try:
            for iid in item_ids:
                out.append(_plain_score(self.func, iid))
        except KeyboardInterrupt:
            raise Interrupted(out) from None
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
            ahead.update((p, r) for p, r in zip(pairs[1:], results[1:], strict=False) if isinstance(r, float))
        if isinstance(result, ScorerError):
            raise result
        _tell_ranked(session, asked, float(result))  # type: ignore[arg-type]
        if on_record is not None:
            on_record(session)


def _tell_ranked(session: RankSession, asked: Any, score: float) -> None:
    try:
        session.tell(asked.model, asked.item_id, score)
    except _REFUSED as exc:
        raise ScorerError(
            f"the scorer gave an invalid score for item {asked.item_id!r} of model {asked.model!r}: {template_of(exc)}"
        ) from exc
