"""The session journal: one SQLite file per session.

Layout (``FORMAT_VERSION`` 1):

* ``meta(key TEXT PRIMARY KEY, value TEXT)``: JSON values written once at
  creation: the method name and its keyword arguments (seed included), how to
  reload the reference data and its fingerprint, creation time, library
  version.
* ``events(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind, item_id, score, batch,
  created)``: append-only. ``kind`` is ``'ask'`` (an item handed out, score
  NULL) or ``'tell'`` (a recorded score). A partial unique index makes a
  second ``tell`` of one item impossible at the database level, whoever
  writes it.

Durability and concurrency: WAL journal mode with ``synchronous=FULL`` (a
committed ``tell`` survives a crash of the process and of the machine); every
write runs in ``BEGIN IMMEDIATE`` so two processes serialise their writes
instead of losing one; a connection waits ``timeout`` seconds for the lock and
then raises :class:`StorageError` naming the file. Rows are never updated or
deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from activeeval.exceptions import StorageError

__all__ = ["Event", "Journal", "FORMAT_VERSION", "ReferenceMismatchError"]

FORMAT_VERSION = 1
DEFAULT_TIMEOUT = 10.0

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('ask', 'tell')),
    item_id TEXT NOT NULL,
    score REAL,
    batch INTEGER,
    created TEXT NOT NULL,
    CHECK ((kind = 'tell') = (score IS NOT NULL))
);
CREATE UNIQUE INDEX one_tell_per_item ON events(item_id) WHERE kind = 'tell';
"""


class ReferenceMismatchError(StorageError):
    """The reference data changed since the session was created."""


@dataclass(frozen=True)
class Event:
    """One journal row."""

    seq: int
    kind: str
    item_id: str
    score: float | None
    batch: int | None
    created: str


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


class Journal:
    """An open session file. Use :meth:`create` or :meth:`open`.

    Hands out immutable :class:`Event` records and plain dicts, never the
    connection.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, timeout: float) -> None:
        self.path = path
        self._conn = conn
        self.timeout = timeout

    # ----------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, path: str | os.PathLike[str], meta: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT) -> Journal:
        p = Path(path)
        if p.exists():
            raise StorageError(
                f"session file {str(p)!r} already exists; open it (Session.open / `activeeval session status`) "
                "or choose another path"
            )
        if not p.parent.exists():
            raise StorageError(f"cannot create session file {str(p)!r}: folder {str(p.parent)!r} does not exist")
        tmp = p.with_name(f".{p.name}.{os.getpid()}.creating")
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        # Build the file under a temporary name and rename it into place, so a
        # crash during creation never leaves a half-initialised session behind.
        try:
            conn = sqlite3.connect(tmp, timeout=timeout, isolation_level=None)
            try:
                conn.executescript(_SCHEMA)
                conn.execute("BEGIN IMMEDIATE")
                rows = {"format_version": FORMAT_VERSION, **meta}
                conn.executemany(
                    "INSERT INTO meta(key, value) VALUES (?, ?)",
                    [(k, json.dumps(v, sort_keys=True)) for k, v in rows.items()],
                )
                conn.execute("COMMIT")
            finally:
                conn.close()
            # link() refuses to overwrite, so a session created concurrently is never clobbered.
            os.link(tmp, p)
        except FileExistsError:
            raise StorageError(
                f"session file {str(p)!r} already exists (created concurrently); open it instead"
            ) from None
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot create session file {str(p)!r}: {exc}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        return cls.open(p, timeout=timeout)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT) -> Journal:
        p = Path(path)
        if not p.is_file():
            raise StorageError(
                f"no session file {str(p)!r}; create one with Session.create(...) or `activeeval session new`"
            )
        try:
            conn = sqlite3.connect(p, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open session file {str(p)!r}: {exc}") from None
        journal = cls(p, conn, timeout)
        try:
            conn.execute("PRAGMA busy_timeout = %d" % int(timeout * 1000))
            conn.execute("PRAGMA journal_mode = WAL").fetchone()
            conn.execute("PRAGMA synchronous = FULL")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.OperationalError as exc:
            conn.close()
            raise journal._locked_or(exc, "open") from None
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StorageError(
                f"{str(p)!r} is not an activeeval session file, or it is corrupted ({exc})"
            ) from None
        if not {"meta", "events"} <= tables:
            conn.close()
            raise StorageError(
                f"{str(p)!r} is an SQLite file but not an activeeval session (no meta/events tables)"
            )
        meta = journal.meta()
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            conn.close()
            raise StorageError(
                f"session file {str(p)!r} has format version {version!r}; this activeeval reads version "
                f"{FORMAT_VERSION} (upgrade activeeval, or finish the session with the version that created it)"
            )
        return journal

    def close(self) -> None:
        self._conn.close()

    # -------------------------------------------------------------- errors
    def _locked_or(self, exc: sqlite3.Error, what: str) -> StorageError:
        text = str(exc)
        if "locked" in text or "busy" in text:
            return StorageError(
                f"session file {str(self.path)!r} is locked by another process (waited {self.timeout:g} s to {what}); "
                "retry when the other writer is done, or pass a longer timeout"
            )
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            return StorageError(f"session file {str(self.path)!r} is corrupted or not a session ({text})")
        return StorageError(f"session file {str(self.path)!r}: cannot {what} ({text})")

    # -------------------------------------------------------------- reads
    def meta(self) -> dict[str, Any]:
        try:
            rows = self._conn.execute("SELECT key, value FROM meta").fetchall()
            return {k: json.loads(v) for k, v in rows}
        except (sqlite3.Error, json.JSONDecodeError) as exc:
            if isinstance(exc, sqlite3.Error):
                raise self._locked_or(exc, "read its settings") from None
            raise StorageError(f"session file {str(self.path)!r} has corrupted settings ({exc})") from None

    def events(self, after: int = 0) -> list[Event]:
        """Events with ``seq > after``, in order."""
        try:
            rows = self._conn.execute(
                "SELECT seq, kind, item_id, score, batch, created FROM events WHERE seq > ? ORDER BY seq", (after,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise self._locked_or(exc, "read its events") from None
        return [Event(*r) for r in rows]

    # ------------------------------------------------------------- writes
    @contextlib.contextmanager
    def write(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE ... COMMIT); rolled back on any error."""
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._locked_or(exc, what) from None
        try:
            yield self._conn
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise self._locked_or(exc, what) from None

    @staticmethod
    def insert(conn: sqlite3.Connection, kind: str, item_id: str, score: float | None, batch: int | None) -> int:
        cur = conn.execute(
            "INSERT INTO events(kind, item_id, score, batch, created) VALUES (?, ?, ?, ?, ?)",
            (kind, item_id, score, batch, now_iso()),
        )
        return int(cur.lastrowid)

    @staticmethod
    def read_events(conn: sqlite3.Connection, after: int) -> list[Event]:
        rows = conn.execute(
            "SELECT seq, kind, item_id, score, batch, created FROM events WHERE seq > ? ORDER BY seq", (after,)
        ).fetchall()
        return [Event(*r) for r in rows]

    @staticmethod
    def next_batch(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT COALESCE(MAX(batch), 0) FROM events WHERE kind = 'ask'").fetchone()
        return int(row[0]) + 1
