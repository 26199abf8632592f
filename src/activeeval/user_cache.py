"""The user cache: data derived from inputs, kept between runs as plain arrays and JSON (never pickle).

What is derived from a file alone (a parsed reference matrix) or from a
session's journal (its rebuilt state) is expensive to derive again on every
command, and cheap to keep. This module keeps such data on disk, under a key
the caller computes from everything the data depend on (a file's content
hash, the read options, the code that derived it: :func:`key`,
:func:`file_digest`, :func:`code_fingerprint`). An entry holds a JSON object
and a list of numeric numpy arrays; nothing in it is ever executed.

Where: the folder named by the ``ACTIVEEVAL_CACHE`` environment variable
(``off`` turns the cache off), else the platform's user cache folder
(``$XDG_CACHE_HOME/activeeval`` or ``~/.cache/activeeval`` on Linux,
``~/Library/Caches/activeeval`` on macOS, ``%LOCALAPPDATA%\\activeeval\\Cache``
on Windows). The command line's ``activeeval --no-cache ...`` turns it off for
one command; the library's readers and sessions take ``cache=False``, and
``with user_cache.disabled():`` turns it off for the code inside (what a
session made with ``cache=False`` derives: BayesAME's reference fit and
calibration, :func:`derived`).

An entry is one file, ``<folder>/<kind>/<key>.aec``::

    b"AECACHE2"                      8 bytes
    CRC-32 of everything below       8 bytes, little-endian
    header length                    8 bytes, little-endian
    header                           JSON: kind, key, meta, and each array's dtype, shape, offset
    the arrays' bytes                each at a 64-byte aligned offset

Checking an entry's CRC-32, and hashing the reference file its key is derived from, costs as much as a later
session command's own work when the reference is large (192 MB of float64 and the 48 MB file they were parsed
from: 0.14 s). So each full check is remembered beside the entries (``<folder>/verified/``: the file's size,
modification and change times in ns, inode and device, when it was checked, and for a reference file its
SHA-256): while the file's status is exactly the one it had when it was last checked in full, and that check
is less than a day old, it is not checked again. Any write to a file changes its change time (which no
program can set back), so a file changed in any way is checked again; damage that leaves the status
alone (a disk error) is found by the next full check, within a day. A file changed less than 2 s
before its check is never trusted by its status (a change in the same tick of the file system's clock
would keep the status; FAT's times step by 2 s: "racy" in git's words). An
entry that fails its check is never used, and its record is dropped.

It is written to a temporary file and renamed into place (a reader sees the
old entry or the new one, never half of one). An entry that is damaged
(its CRC-32: the check is for damage, such as a disk error or a file cut
short; it is no seal, and needs none, since nothing in an entry is run and
every use checks its key), of another format, or stored under another kind or key is
ignored: the caller derives the data again and stores them anew. Writing
never fails a command (a read-only or full disk just means no cache). The
folder is kept under :data:`MAX_BYTES`, dropping the entries read least
recently (a read marks an entry at most once an hour, so that its status
stays as it was checked); deleting it at any time is safe (a running command keeps the
entries it has mapped; only cutting a file short in place, which activeeval
never does, would break one).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import mmap
import os
import secrets
import sys
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "CACHE_ENV",
    "MAX_BYTES",
    "Entry",
    "code_fingerprint",
    "derived",
    "disabled",
    "file_digest",
    "key",
    "known_digest",
    "load",
    "root",
    "store",
]

T = TypeVar("T")

CACHE_ENV = "ACTIVEEVAL_CACHE"
OFF = "off"
# Keep the folder under this size (the least recently read entries go first).
MAX_BYTES = 2 * 2**30
_MAGIC = b"AECACHE2"  # 1 had a SHA-256 in place of the CRC
_HEAD = 24  # magic, checksum, header length
_FORMAT = 1
_ALIGN = 64
_SUFFIX = ".aec"
# A file's status recorded at its last full check stands for the check this long (then it is checked again) ...
VERIFY_EVERY_NS = 24 * 3600 * 10**9
# ... unless the file changed less than this before the check (a change in the same tick of the file system's
# clock keeps the status; FAT's times step by 2 s)
_RACY_NS = 2 * 10**9
# A read marks an entry as read (its modification time) when the mark is older than this.
_MARK_AFTER_S = 3600.0
_VERIFIED = "verified"
_FILES = "file-digests"  # (not an identifier: no entry kind has this name)
# Array element kinds an entry may hold: numbers and booleans (no objects, no structured records).
_KINDS = frozenset("biufc")
# False inside `disabled()` (a session made with cache=False): root() is None there, whatever the environment says
_ENABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("activeeval_user_cache", default=True)


@dataclass(frozen=True)
class Entry:
    """A cache entry: the JSON object stored with it, and its arrays in order (writable, owned by the entry)."""

    meta: dict[str, Any]
    arrays: tuple[np.ndarray, ...]


def _default_root() -> Path:
    if sys.platform.startswith("win"):
        base = os.environ.get("LOCALAPPDATA")
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "activeeval" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "activeeval"
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base and os.path.isabs(base) else Path.home() / ".cache") / "activeeval"


def root() -> Path | None:
    """The cache folder (not created here), or None when the cache is off (``ACTIVEEVAL_CACHE=off``, or
    inside :func:`disabled`)."""
    if not _ENABLED.get():
        return None
    value = os.environ.get(CACHE_ENV)
    if value is not None and value.strip().lower() == OFF:
        return None
    if value:
        return Path(value).expanduser()
    try:
        return _default_root()
    except RuntimeError:  # no home folder to put it in
        return None


@contextlib.contextmanager
def disabled(off: bool = True) -> Iterator[None]:
    """No user cache for the code inside (nothing read, nothing written) when ``off``; no change otherwise."""
    token = _ENABLED.set(False) if off else None
    try:
        yield
    finally:
        if token is not None:
            _ENABLED.reset(token)


def key(*parts: Any) -> str:
    """A key for an entry: SHA-256 of the parts as JSON (anything JSON can hold, in a fixed order)."""
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes (what an entry derived from the file is keyed by)."""
    with open(path, "rb") as fh:
        return _sha256(fh)


def _sha256(fh: Any) -> str:
    """SHA-256 of what is left to read of an open file."""
    h = hashlib.sha256()
    for block in iter(functools.partial(fh.read, 1 << 22), b""):
        h.update(block)
    return h.hexdigest()


def known_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, as :func:`file_digest`, without reading the file again when its status is the
    one recorded at its last full hash (less than a day ago; see the module's notes). Without a cache folder,
    :func:`file_digest`."""
    folder = root()
    if folder is None:
        return file_digest(path)
    where = os.path.abspath(path)
    record = folder / _VERIFIED / _FILES / f"{hashlib.sha256(where.encode('utf-8', 'surrogatepass')).hexdigest()}.json"
    with open(path, "rb") as fh:
        now = time.time_ns()
        st = os.fstat(fh.fileno())
        known = _recall(record, st, now)
        if known is not None and known.get("path") == where and _is_digest(known.get("digest")):
            return known["digest"]
        digest = _sha256(fh)
    _remember(record, st, now, path=where, digest=digest)
    return digest


def _is_digest(text: object) -> bool:
    return isinstance(text, str) and len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def _status(st: os.stat_result) -> list[int]:
    """What a file's status must keep for its last full check to stand: size, times of change (ns), identity."""
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev]


def _recall(record: Path, st: os.stat_result, now_ns: int) -> dict[str, Any] | None:
    """The record of the file's last full check, if it stands for a check now (else None: check it in full)."""
    try:
        known = json.loads(record.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(known, dict) or known.get("status") != _status(st):
        return None
    at = known.get("checked_ns")
    if type(at) is not int or not 0 <= now_ns - at < VERIFY_EVERY_NS:
        return None  # a day old (or a clock set back): check in full
    if at - max(st.st_mtime_ns, st.st_ctime_ns) < _RACY_NS:
        return None
    return known


def _remember(record: Path, st: os.stat_result, at_ns: int, **data: Any) -> None:
    """Record a full check of a file whose status was ``st`` at ``at_ns`` (not when it could not be trusted)."""
    if at_ns - max(st.st_mtime_ns, st.st_ctime_ns) < _RACY_NS:
        return
    tmp = record.with_name(f".{record.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"status": _status(st), "checked_ns": at_ns, **data}))
        os.replace(tmp, record)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            tmp.unlink()


def _record_of(path: Path) -> Path:
    """Where the last full check of the entry at ``path`` (``<folder>/<kind>/<key>.aec``) is recorded."""
    return path.parent.parent / _VERIFIED / path.parent.name / f"{path.stem}.json"


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the installed activeeval package (changed code, changed keys)."""
    package = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _path(kind: str, entry_key: str) -> Path | None:
    folder = root()
    if folder is None:
        return None
    if not (kind.isidentifier() and len(entry_key) == 64 and all(c in "0123456789abcdef" for c in entry_key)):
        raise ValueError(f"cache kind {kind!r} / key {entry_key!r}: a name and a SHA-256 hex digest are expected")
    return folder / kind / f"{entry_key}{_SUFFIX}"


def load(kind: str, entry_key: str) -> Entry | None:
    """The entry stored under ``kind``/``entry_key``, or None (no cache, no entry, or an entry not to be trusted).

    The file is mapped, not read: its arrays are private copy-on-write views
    of it (writable; a change never reaches the file), paged in as they are
    used after the checksum has been verified (or its last full check stands:
    the module's notes).
    """
    path = _path(kind, entry_key)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_size < _HEAD:
                return None
            if time.time() - st.st_mtime > _MARK_AFTER_S:
                with contextlib.suppress(OSError):
                    os.utime(path)  # read recently: kept longest when the folder is trimmed
                st = os.fstat(fh.fileno())
            now = time.time_ns()
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None
    record = _record_of(path)
    checked = _recall(record, st, now) is not None
    try:
        entry = _decode(buf, kind, entry_key, verify=not checked)
    except Exception:
        entry = None
    if entry is None:
        with contextlib.suppress(OSError):
            record.unlink()
        with contextlib.suppress(BufferError):  # (arrays made before the problem showed keep it open until freed)
            buf.close()
        return None
    if not checked:
        _remember(record, st, now)
    return entry


def _decode(buf: mmap.mmap, kind: str, entry_key: str, verify: bool = True) -> Entry | None:
    view = memoryview(buf)
    try:
        if bytes(view[:8]) != _MAGIC:
            return None
        if verify and _crc32(view[16:]) != int.from_bytes(view[8:16], "little"):
            return None
    finally:
        view.release()  # (an exported view would keep the map from being closed)
    n = int.from_bytes(buf[16:_HEAD], "little")
    header = json.loads(buf[_HEAD:_HEAD + n].decode("utf-8"))
    if header.get("format") != _FORMAT or header.get("kind") != kind or header.get("key") != entry_key:
        return None  # another format, or a file renamed from another entry
    meta = header["meta"]
    if not isinstance(meta, dict):
        return None
    start = _aligned(_HEAD + n)
    arrays = []
    for spec in header["arrays"]:
        dtype = np.dtype(str(spec["dtype"]))
        shape = tuple(int(d) for d in spec["shape"])
        if dtype.kind not in _KINDS or any(d < 0 for d in shape):
            return None
        count = int(np.prod(shape, dtype=np.int64))
        # frombuffer refuses a count that runs past the end of the buffer
        arrays.append(np.frombuffer(buf, dtype=dtype, count=count, offset=start + int(spec["offset"])).reshape(shape))
    return Entry(meta, tuple(arrays))


def store(kind: str, entry_key: str, meta: Mapping[str, Any], arrays: Sequence[np.ndarray] = ()) -> bool:
    """Store an entry (replacing one under the same key); False, and nothing left behind, if it could not be.

    ``meta`` must be JSON-serialisable; ``arrays`` numeric or boolean (their
    shape and dtype are kept, in C order).
    """
    path = _path(kind, entry_key)
    if path is None:
        return False
    blocks, specs, offset = [], [], 0  # offsets count from the start of the arrays' section
    for a in arrays:
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")
        if a.dtype.kind not in _KINDS:
            raise TypeError(f"cache entries hold numeric arrays only, got dtype {a.dtype}")
        blocks.append(a.reshape(-1).view(np.uint8))
        specs.append({"dtype": a.dtype.str, "shape": list(a.shape), "offset": offset})
        offset = _aligned(offset + a.nbytes)
    text = json.dumps({"format": _FORMAT, "kind": kind, "key": entry_key, "meta": dict(meta), "arrays": specs},
                      allow_nan=True).encode()
    parts: list[Any] = [len(text).to_bytes(8, "little"), text, bytes(_aligned(_HEAD + len(text)) - _HEAD - len(text))]
    position = 0
    for spec, block in zip(specs, blocks, strict=True):
        parts += [bytes(spec["offset"] - position), block]
        position = spec["offset"] + block.nbytes
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(_MAGIC)
            fh.write(crc.to_bytes(8, "little"))
            for part in parts:
                fh.write(part)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    _trim(path.parent.parent, keep=path)
    return True


def derived(
    kind: str,
    entry_key: str,
    compute: Callable[[], T],
    encode: Callable[[T], tuple[Mapping[str, Any], Sequence[np.ndarray]]],
    decode: Callable[[Entry], T],
) -> T:
    """The value stored under ``kind``/``entry_key``, else ``compute()``, stored for the next time.

    ``encode(value)`` gives the entry's JSON object and arrays, ``decode(entry)``
    the value again (exactly: the caller's round trip). An entry that does not
    decode (damaged in a way the checksum cannot see, or of an older layout)
    is not trusted: the value is computed and stored anew.
    """
    entry = load(kind, entry_key)
    if entry is not None:
        try:
            return decode(entry)
        except Exception:
            pass
    value = compute()
    meta, arrays = encode(value)
    store(kind, entry_key, meta, arrays)
    return value


def _crc32(data: Any) -> int:
    return zlib.crc32(data)


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _entries(folder: Path) -> Iterable[tuple[float, int, Path]]:
    for path in folder.glob(f"*/*{_SUFFIX}"):
        with contextlib.suppress(OSError):
            st = path.stat()
            yield st.st_mtime, st.st_size, path


def _trim(folder: Path, keep: Path) -> None:
    """Drop the least recently read entries until the folder holds at most MAX_BYTES (never ``keep``)."""
    entries = sorted(_entries(folder))
    total = sum(size for _, size, _ in entries)
    for _, size, path in entries:
        if total <= MAX_BYTES:
            break
        if path == keep:
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            total -= size
            _record_of(path).unlink()
