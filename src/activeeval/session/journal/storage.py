"""The session journal: one SQLite file per session.

Layout (``FORMAT_VERSION`` 2):

* ``meta(key TEXT PRIMARY KEY, value TEXT)``: JSON values written once at
  creation: the session kind, the method spec and its keyword arguments (seed
  included), how to reload the reference data and its fingerprint, creation
  time, library version, and ``checksum``, a SHA-256 of all the others.
* ``events(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind, target, item_id,
  score, batch, created, chain)``: append-only. ``kind`` is ``'ask'`` (an
  item handed out, score NULL) or ``'tell'`` (a recorded score); ``target``
  is the model evaluated ('' in a single-target session, the model id in a
  ranking session). A partial unique index makes a second ``tell`` of one
  (target, item) impossible at the database level, whoever writes it.
  ``chain`` is a hash chain: SHA-256 of the previous row's chain and this
  row's values, so a row altered, removed or reordered outside activeeval is
  detected when the journal is read.
* ``changes(seq, after_event, settings, created, chain)``: changes of the
  stopping rule or budget made on resume (``--epsilon2``, ``--max-items``),
  as JSON, each after the event ``after_event``; checksummed like events.

Files written by earlier versions may also hold a table ``snapshots`` (a
pickle of the rebuilt state): it is never read. Snapshots now live in the
user cache, as data (:mod:`activeeval.session.journal.snapshot`), so a session file
holds nothing that could run code.

Every value is stored so that it reads back exactly as it was hashed
(:func:`storable_score`, :func:`storable_text`): a score is a finite float,
-0.0 stored as 0.0; ids are text UTF-8 can encode. Rows written before that
rule with a score of -0.0 (hashed on ``repr(-0.0)``, read back as 0.0) still
verify.

Version 1 files (no ``target``/``chain`` columns, no ``changes`` table, WAL
mode) are still read and written; the missing table is created by the first
write that needs it.

Durability and concurrency: rollback-journal mode with ``synchronous=FULL`` (a
committed ``tell`` survives a crash of the process and of the machine); every
write runs in ``BEGIN IMMEDIATE`` so two processes serialise their writes
instead of losing one; a connection waits ``timeout`` seconds for the lock and
then raises :class:`StorageError` naming the file. Read-only opens
(``readonly=True``) use SQLite's read-only mode: they never create, convert or
change a file (a WAL-mode reader would leave ``-wal``/``-shm`` files behind,
which is why new files use the rollback journal). Every open runs
``PRAGMA quick_check`` and verifies the checksums, so a damaged file gives a
clean "corrupted" error instead of wrong numbers or a traceback.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from activeeval.exceptions import (  # the two errors are defined there and stay importable from here
    CorruptedSessionError,
    InvalidScoresError,
    ReferenceMismatchError,
    StorageError,
)

__all__ = [
    "FORMAT_VERSION",
    "Change",
    "CorruptedSessionError",
    "Event",
    "Journal",
    "ReferenceMismatchError",
    "Transaction",
]

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
DEFAULT_TIMEOUT = 10.0
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('ask', 'tell')),
    target TEXT NOT NULL DEFAULT '',
    item_id TEXT NOT NULL,
    score REAL,
    batch INTEGER,
    created TEXT NOT NULL,
    chain TEXT NOT NULL,
    CHECK ((kind = 'tell') = (score IS NOT NULL))
);
CREATE UNIQUE INDEX one_tell_per_item ON events(target, item_id) WHERE kind = 'tell';
"""
# Tables a version-1 file lacks; created (IF NOT EXISTS) by the first write that needs them.
_CHANGES_SCHEMA = """
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, after_event INTEGER NOT NULL, settings TEXT NOT NULL,
    created TEXT NOT NULL, chain TEXT NOT NULL
)"""


@dataclass(frozen=True)
class Event:
    """One journal row."""

    seq: int
    kind: str
    item_id: str
    score: float | None
    batch: int | None
    created: str
    target: str = ""


@dataclass(frozen=True)
class Change:
    """A change of settings (stopping rule, budget) recorded after event ``after_event``."""

    seq: int
    after_event: int
    settings: dict[str, Any]
    created: str


def storable_score(score: float, item_id: str = "") -> float:
    """``score`` as the journal stores it: a finite float, and 0.0 for -0.0.

    Every row's checksum is computed on the values it stores, so a value
    must read back exactly as written: SQLite returns -0.0 as 0.0 (the score
    column stores whole numbers as integers), and cannot store NaN at all.
    """
    where = f" for item {item_id!r}" if item_id else ""
    try:
        value = float(score)
    except (TypeError, ValueError) as exc:
        raise InvalidScoresError(f"score{where} is not a number: {score!r}") from exc
    if not math.isfinite(value):
        raise InvalidScoresError(f"score{where} is {value}; scores must be finite numbers")
    return value + 0.0  # -0.0 + 0.0 == +0.0; every other value is unchanged


def storable_text(what: str, text: object) -> str:
    """An id (item id, target) as the journal stores it: a str that UTF-8 can encode (SQLite's text)."""
    if not isinstance(text, str):
        raise StorageError(f"{what} {text!r} is a {type(text).__name__}, not a string; ids are stored as text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise StorageError(
            f"{what} {text!r} is not valid Unicode text (it holds the lone surrogate U+{ord(bad):04X} at "
            f"position {exc.start}) and cannot be stored in a session file; fix the id where it comes from"
        ) from exc
    return str.__str__(text)  # a str subclass as a plain str (its repr is what the checksum hashes)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _digest(*parts: object) -> str:
    return hashlib.sha256("\x1f".join(map(repr, parts)).encode()).hexdigest()[:32]


def _meta_checksum(rows: dict[str, str]) -> str:
    return _digest(*(f"{k}={rows[k]}" for k in sorted(rows) if k != "checksum"))


class Journal:
    """An open session file. Use :meth:`create` or :meth:`open`.

    Hands out immutable :class:`Event` records and plain dicts, never the
    connection: writes go through the :class:`Transaction` of :meth:`write`.
    """

    def __init__(self, path: Path, conn: sqlite3.Connection, timeout: float, readonly: bool) -> None:
        self.path = path
        self._conn = conn
        self.timeout = timeout
        self.readonly = readonly
        self._version = 0
        self._columns: set[str] = set()
        self._tables: set[str] = set()
        self._chain_seq = 0  # events verified so far (the chain is checked once per row and connection)
        self._chain_last = ""

    # ----------------------------------------------------------- lifecycle
    @classmethod
    def create(cls, path: str | os.PathLike[str], meta: dict[str, Any], *, timeout: float = DEFAULT_TIMEOUT) -> Journal:
        p = cls.check_creatable(path)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.creating")
        with contextlib.suppress(OSError):  # a leftover of a crashed creation by a process of the same id
            tmp.unlink()
        # Build the file under a temporary name and rename it into place, so a
        # crash during creation never leaves a half-initialised session behind.
        try:
            conn = sqlite3.connect(tmp, timeout=timeout, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = DELETE")
                conn.executescript(_SCHEMA + ";" + _CHANGES_SCHEMA)
                conn.execute("BEGIN IMMEDIATE")
                rows = {k: json.dumps(v, sort_keys=True) for k, v in {"format_version": FORMAT_VERSION, **meta}.items()}
                rows["checksum"] = json.dumps(_meta_checksum(rows))
                conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", list(rows.items()))
                conn.execute("COMMIT")
            finally:
                conn.close()
            # link() refuses to overwrite, so a session created concurrently is never clobbered.
            os.link(tmp, p)
        except FileExistsError as exc:
            raise StorageError(
                f"session file {str(p)!r} already exists (created concurrently); open it instead"
            ) from exc
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot create session file {str(p)!r} in folder {str(p.parent)!r}: {exc}; check that "
                               "the folder is writable and has free space") from exc
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        return cls.open(p, timeout=timeout)

    @staticmethod
    def check_creatable(path: str | os.PathLike[str]) -> Path:
        """``path`` as a Path if a new session file can be created there (StorageError naming why not)."""
        p = Path(path)
        if p.exists():
            raise StorageError(
                f"session file {str(p)!r} already exists; open it (Session.open / `activeeval session status`) "
                "or choose another path"
            )
        if not p.parent.exists():
            raise StorageError(f"cannot create session file {str(p)!r}: folder {str(p.parent)!r} does not exist")
        if not os.access(p.parent, os.W_OK):
            raise StorageError(f"cannot create session file {str(p)!r}: folder {str(p.parent)!r} is not writable "
                               "(read-only); choose a folder you can write to")
        return p

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, timeout: float = DEFAULT_TIMEOUT, readonly: bool = False) -> Journal:
        p = Path(path)
        if not p.is_file():
            raise StorageError(
                f"no session file {str(p)!r}; create one with Session.create(...) or `activeeval session new`"
            )
        try:
            with open(p, "rb") as fh:
                head = fh.read(100)
        except OSError as exc:
            raise StorageError(f"cannot read session file {str(p)!r}: {exc}") from exc
        if not head:
            raise StorageError(f"{str(p)!r} is empty (0 bytes), not an activeeval session file; remove it or "
                               "choose another path")
        if not head.startswith(_SQLITE_MAGIC):
            raise StorageError(f"{str(p)!r} is not an activeeval session file, or it is corrupted "
                               "(file is not a database)")
        # A writer that crashed mid-transaction leaves a hot journal: reading then needs SQLite's recovery,
        # which rolls the unfinished write back, so that one read-only open connects read-write (the
        # committed data are unchanged; the journal object still refuses writes).
        hot = readonly and Path(str(p) + "-journal").exists()
        conn = cls._connect(p, timeout, readonly and not hot, wal=len(head) > 19 and head[18:20] == b"\x02\x02")
        journal = cls(p, conn, timeout, readonly)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            if not readonly:
                # New files use the rollback journal; a version-1 (WAL) file is converted on its first write open
                # (if another process has it open, it stays in WAL mode, which works as before).
                with contextlib.suppress(sqlite3.OperationalError):
                    conn.execute("PRAGMA journal_mode = DELETE").fetchone()
                conn.execute("PRAGMA synchronous = FULL")
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if problems != ["ok"]:
                raise CorruptedSessionError(journal._corrupted("; ".join(map(str, problems))))
            journal._tables = {r[0] for r in journal._query("SELECT name FROM sqlite_master WHERE type = 'table'",
                                                             what="read its layout")}
        except StorageError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise journal._locked_or(exc, "open") from exc
        if not {"meta", "events"} <= journal._tables:
            conn.close()
            raise StorageError(
                f"{str(p)!r} is an SQLite file but not an activeeval session (no meta/events tables)"
            )
        try:
            meta = journal.meta()
            version = meta.get("format_version")
            if version not in READABLE_VERSIONS:
                raise StorageError(
                    f"session file {str(p)!r} has format version {version!r}; this activeeval reads versions "
                    f"{', '.join(map(str, READABLE_VERSIONS))} (upgrade activeeval, or finish the session with the "
                    "version that created it)"
                )
            journal._version = int(version)
            journal._columns = {r[1] for r in journal._query("PRAGMA table_info(events)", what="read its layout")}
        except BaseException:
            conn.close()
            raise
        return journal

    @staticmethod
    def _connect(p: Path, timeout: float, readonly: bool, wal: bool) -> sqlite3.Connection:
        try:
            if not readonly:
                return sqlite3.connect(p, timeout=timeout, isolation_level=None)
            uri = p.resolve().as_uri()
            # A WAL-mode (version 1) file with no -wal file holds everything committed; opened as immutable
            # it is read without creating -wal/-shm files. Otherwise SQLite's plain read-only mode.
            wal_file = Path(str(p) + "-wal")
            mode = "immutable=1" if wal and not wal_file.exists() else "mode=ro"
            return sqlite3.connect(f"{uri}?{mode}", uri=True, timeout=timeout, isolation_level=None)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open session file {str(p)!r}: {exc}") from exc

    def close(self) -> None:
        self._conn.close()

    # -------------------------------------------------------------- errors
    def _corrupted(self, detail: str) -> str:
        return (
            f"session file {str(self.path)!r} is corrupted ({detail}); restore it from a copy or backup, or start "
            "a new session (the scores recorded in a damaged file cannot be trusted)"
        )

    def _locked_or(self, exc: sqlite3.Error, what: str) -> StorageError:
        text = str(exc)
        if isinstance(exc, sqlite3.ProgrammingError) and "closed" in text:  # used after close(): the file is whole
            return StorageError(f"session file {str(self.path)!r} was closed by this program before it tried to "
                                f"{what}; open it again (Session.open) and retry: nothing recorded is lost")
        if "locked" in text or "busy" in text:
            return StorageError(
                f"session file {str(self.path)!r} is locked by another process (waited {self.timeout:g} s to {what}); "
                "retry when the other writer is done, or pass a longer timeout"
            )
        if "readonly" in text or "read-only" in text:
            return StorageError(f"session file {str(self.path)!r} is open read-only: cannot {what}")
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            return CorruptedSessionError(self._corrupted(text))
        if "malformed" in text or "corrupt" in text or "decode" in text:
            return CorruptedSessionError(self._corrupted(text))
        return StorageError(f"session file {str(self.path)!r}: cannot {what} ({text})")

    def _query(self, sql: str, args: tuple = (), what: str = "read it", conn: sqlite3.Connection | None = None) -> list:
        try:
            return (conn or self._conn).execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise self._locked_or(exc, what) from exc

    # -------------------------------------------------------------- reads
    def meta(self) -> dict[str, Any]:
        rows = dict(self._query("SELECT key, value FROM meta", what="read its settings"))
        if "checksum" in rows and json.loads(rows["checksum"]) != _meta_checksum(rows):
            raise CorruptedSessionError(self._corrupted("the settings do not match their checksum"))
        try:
            return {k: json.loads(v) for k, v in rows.items() if k != "checksum"}
        except json.JSONDecodeError as exc:
            raise CorruptedSessionError(self._corrupted(f"unreadable settings: {exc}")) from exc

    def _event_sql(self) -> str:
        target = "target" if "target" in self._columns else "''"
        chain = "chain" if "chain" in self._columns else "''"
        return (f"SELECT seq, kind, item_id, score, batch, created, {target}, {chain} FROM events "
                "WHERE seq > ? ORDER BY seq")

    def events(self, after: int = 0) -> list[Event]:
        """Events with ``seq > after``, in order; the hash chain of every row not yet seen is verified."""
        return self._events(after, None)

    def _events(self, after: int, conn: sqlite3.Connection | None) -> list[Event]:
        chained = "chain" in self._columns
        start = min(after, self._chain_seq) if chained else after
        rows = self._query(self._event_sql(), (start,), "read its events", conn)
        out = []
        for seq, kind, item_id, score, batch, created, target, chain in rows:
            if chained and seq > self._chain_seq:
                # Rows come in order from the last verified one, so each is checked against its predecessor.
                if chain != _digest(self._chain_last, seq, kind, target, item_id, score, batch, created) and not (
                    # earlier versions stored -0.0 as given: the row was hashed on repr(-0.0), but SQLite reads it
                    # back as 0.0; such a row is intact, and its score is 0.0
                    score == 0.0 and chain == _digest(self._chain_last, seq, kind, target, item_id, -0.0, batch,
                                                      created)
                ):
                    raise CorruptedSessionError(self._corrupted(f"journal event {seq} does not match its checksum"))
                self._chain_seq, self._chain_last = seq, chain
            if seq > after:
                out.append(Event(seq, kind, item_id, score, batch, created, target))
        return out

    def changes(self, after: int = 0) -> list[Change]:
        """Settings changes with ``seq > after``, in order (checksums verified)."""
        return self._changes(after, None)

    def _changes(self, after: int, conn: sqlite3.Connection | None) -> list[Change]:
        if "changes" not in self._tables:
            return []
        rows = self._query(
            "SELECT seq, after_event, settings, created, chain FROM changes WHERE seq > ? ORDER BY seq",
            (after,), "read its settings changes", conn,
        )
        out = []
        for seq, after_event, settings, created, chain in rows:
            if chain != _digest(seq, after_event, settings, created):
                raise CorruptedSessionError(self._corrupted(f"settings change {seq} does not match its checksum"))
            try:
                out.append(Change(seq, after_event, json.loads(settings), created))
            except json.JSONDecodeError as exc:
                raise CorruptedSessionError(self._corrupted(f"settings change {seq}: {exc}")) from exc
        return out

    # ------------------------------------------------------------- writes
    @contextlib.contextmanager
    def write(self, what: str) -> Iterator[Transaction]:
        """A write transaction (BEGIN IMMEDIATE ... COMMIT), rolled back on any error: a :class:`Transaction`
        with the reads and appends a session makes under the lock. ``what`` names the operation in errors."""
        with self._transaction(what) as conn:
            yield Transaction(self, conn)

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        if self.readonly:
            raise StorageError(f"session file {str(self.path)!r} was opened read-only: cannot {what}")
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._locked_or(exc, what) from exc
        try:
            yield self._conn
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise self._locked_or(exc, what) from exc
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")
            raise self._locked_or(exc, what) from exc

    def _insert(
        self, conn: sqlite3.Connection, kind: str, item_id: str, score: float | None, batch: int | None,
        target: str = "",
    ) -> Event:
        item_id, target = storable_text("item id", item_id), storable_text("target", target)
        score = None if score is None else storable_score(score, item_id)
        batch = None if batch is None else int(batch)
        created = now_iso()
        if "chain" not in self._columns:  # version 1
            if target:
                raise StorageError(f"session file {str(self.path)!r} (format version 1) has no targets")
            cur = conn.execute(
                "INSERT INTO events(kind, item_id, score, batch, created) VALUES (?, ?, ?, ?, ?)",
                (kind, item_id, score, batch, created),
            )
            assert cur.lastrowid is not None  # set by every INSERT
            return Event(int(cur.lastrowid), kind, item_id, score, batch, created, target)
        # The chain continues from the last row, which the caller has replayed (and so verified) under this lock.
        last = conn.execute("SELECT seq, chain FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        prev = last[1] if last else ""
        seq = (last[0] if last else 0) + 1  # rows are never deleted
        chain = _digest(prev, seq, kind, target, item_id, score, batch, created)
        conn.execute(
            "INSERT INTO events(seq, kind, target, item_id, score, batch, created, chain) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (seq, kind, target, item_id, score, batch, created, chain),
        )
        return Event(seq, kind, item_id, score, batch, created, target)

    def _insert_change(self, conn: sqlite3.Connection, after_event: int, settings: dict[str, Any]) -> int:
        conn.execute(_CHANGES_SCHEMA)
        self._tables.add("changes")
        after_event = int(after_event)  # hashed on its repr: a plain int, as it reads back
        created = now_iso()
        text = json.dumps(settings, sort_keys=True)
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
        seq = int(row[0]) + 1
        conn.execute(
            "INSERT INTO changes(seq, after_event, settings, created, chain) VALUES (?, ?, ?, ?, ?)",
            (seq, after_event, text, created, _digest(seq, after_event, text, created)),
        )
        return seq


class Transaction:
    """What a session does inside one write transaction of a :class:`Journal` (from :meth:`Journal.write`).

    Reads see the file as it is under the lock (so a session first catches up
    with what other processes wrote, then appends); appends are committed
    together when the ``with`` block ends, or not at all.
    """

    def __init__(self, journal: Journal, conn: sqlite3.Connection) -> None:
        self._journal = journal
        self._conn = conn
        self.written = 0  # rows appended so far (rolled back with the transaction if it fails)

    def events(self, after: int = 0) -> list[Event]:
        """As :meth:`Journal.events`, under the lock."""
        return self._journal._events(after, self._conn)

    def changes(self, after: int = 0) -> list[Change]:
        """As :meth:`Journal.changes`, under the lock."""
        return self._journal._changes(after, self._conn)

    def append(self, kind: str, item_id: str, score: float | None = None, batch: int | None = None,
               target: str = "") -> Event:
        """Append one event ("ask" with its batch, or "tell" with its score); returns it as stored.

        The returned event holds the values exactly as they read back from the file (a score of -0.0 is
        stored as 0.0): fold that into the session's state, not the value given.
        """
        self.written += 1
        return self._journal._insert(self._conn, kind, item_id, score, batch, target)

    def append_change(self, after_event: int, settings: dict[str, Any]) -> int:
        """Record changed settings (the stopping rule) after event ``after_event``; returns the change's seq."""
        self.written += 1
        return self._journal._insert_change(self._conn, after_event, settings)

    def next_batch(self) -> int:
        """The number of the next batch of asks (1 for the first)."""
        row = self._conn.execute("SELECT COALESCE(MAX(batch), 0) FROM events WHERE kind = 'ask'").fetchone()
        return int(row[0]) + 1
