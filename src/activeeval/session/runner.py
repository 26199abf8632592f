"""Drive an external scoring command until a session's stopping rule is met.

The command is run once per item, without a shell (``shlex.split``), with
``{item_id}`` replaced by the item's id in every argument; the last non-empty
line of its standard output must be the score. With ``jobs > 1`` the session
is asked for ``jobs`` items at a time and the scorers run concurrently.

Scores are recorded in the order the items were asked, as soon as every
earlier item of the batch is recorded, so the journal (and hence the
estimate) does not depend on which scorer finishes first, and an interrupted
run that is started again continues exactly where it stopped: items asked but
not recorded are scored first, then the loop goes on.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from activeeval.exceptions import ActiveEvalError, ConfigurationError, InvalidScoresError
from activeeval.session.session import Session

__all__ = ["ScorerError", "Scorer", "drive"]

PLACEHOLDER = "{item_id}"


class ScorerError(ActiveEvalError):
    """The scoring command failed, timed out or printed no number."""


@dataclass(frozen=True)
class Scorer:
    """A scoring command template such as ``"python score.py --item {item_id}"``."""

    template: str
    timeout: float | None = None

    def __post_init__(self) -> None:
        try:
            argv = shlex.split(self.template)
        except ValueError as exc:
            raise ConfigurationError(f"cannot parse scorer command {self.template!r}: {exc}") from None
        if not argv:
            raise ConfigurationError("the scorer command is empty")
        if not any(PLACEHOLDER in a for a in argv):
            raise ConfigurationError(
                f"scorer command {self.template!r} has no {PLACEHOLDER} placeholder; the item to score is passed "
                f"there, e.g. 'python score.py {PLACEHOLDER}'"
            )

    def argv(self, item_id: str) -> list[str]:
        return [a.replace(PLACEHOLDER, item_id) for a in shlex.split(self.template)]

    def __call__(self, item_id: str) -> float:
        argv = self.argv(item_id)
        shown = shlex.join(argv)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        except FileNotFoundError:
            raise ScorerError(f"scorer for item {item_id!r}: command not found: {argv[0]!r} (in {shown!r})") from None
        except subprocess.TimeoutExpired:
            raise ScorerError(
                f"scorer for item {item_id!r} timed out after {self.timeout:g} s: {shown!r}"
            ) from None
        except OSError as exc:
            raise ScorerError(f"scorer for item {item_id!r} could not start: {shown!r} ({exc})") from None
        if proc.returncode != 0:
            tail = " | ".join(line for line in proc.stderr.strip().splitlines()[-3:])
            raise ScorerError(
                f"scorer failed on item {item_id!r}: {shown!r} exited with code {proc.returncode}"
                + (f"; stderr: {tail}" if tail else "")
            )
        lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
        try:
            return float(lines[-1])
        except (IndexError, ValueError):
            got = repr(lines[-1][:80]) if lines else "nothing"
            raise ScorerError(
                f"scorer printed no number for item {item_id!r}: {shown!r} printed {got} on stdout; "
                "the last line of its output must be the score"
            ) from None


def _record(session: Session, scorer: Scorer, item_id: str, score: float) -> None:
    try:
        session.tell(item_id, score)
    except InvalidScoresError as exc:
        raise ScorerError(f"scorer {scorer.template!r} gave an invalid score for item {item_id!r}: {exc}") from None


def drive(
    session: Session,
    scorer: Scorer,
    *,
    jobs: int = 1,
    on_record: Callable[[Session], None] | None = None,
) -> str:
    """Ask, score and tell until the stopping rule is met; return the stop reason.

    On a :class:`ScorerError` every score obtained so far is recorded first
    (in ask order), then the error is raised.
    """
    if int(jobs) != jobs or jobs < 1:
        raise ConfigurationError(f"jobs must be a positive integer, got {jobs}")
    with ThreadPoolExecutor(max_workers=int(jobs)) as pool:
        while True:
            reason = session.stop_reason()
            if reason is not None:
                return reason
            batch: Sequence[str] = session.pending or [a.item_id for a in session.ask(int(jobs))]
            futures = [pool.submit(scorer, iid) for iid in batch]
            failure: ScorerError | None = None
            for iid, fut in zip(batch, futures):
                try:
                    score = fut.result()
                except ScorerError as exc:
                    failure = failure or exc
                    continue
                _record(session, scorer, iid, score)
                if on_record is not None:
                    on_record(session)
            if failure is not None:
                raise failure
