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

It is written to a temporary file and renamed into place (a reader sees the
old entry or the new one, never half of one). An entry that is damaged
(its CRC-32: the check is for damage, such as a disk error or a file cut
short; it is no seal, and needs none, since nothing in an entry is run and
every use checks its key), of another format, or stored under another kind or key is
ignored: the caller derives the data again and stores them anew. Writing
never fails a command (a read-only or full disk just means no cache). The
folder is kept under :data:`MAX_BYTES`, dropping the entries read least
recently; deleting it at any time is safe (a running command keeps the
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
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(functools.partial(fh.read, 1 << 22), b""):
            h.update(block)
    return h.hexdigest()


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
    used after the checksum has been verified.
    """
    path = _path(kind, entry_key)
    if path is None:
        return None
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size < _HEAD:
                return None
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)
    except (OSError, ValueError):
        return None
    try:
        entry = _decode(buf, kind, entry_key)
    except Exception:
        entry = None
    if entry is None:
        with contextlib.suppress(BufferError):  # (arrays made before the problem showed keep it open until freed)
            buf.close()
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # read recently: kept longest when the folder is trimmed
    return entry


def _decode(buf: mmap.mmap, kind: str, entry_key: str) -> Entry | None:
    view = memoryview(buf)
    try:
        if bytes(view[:8]) != _MAGIC or zlib.crc32(view[16:]) != int.from_bytes(view[8:16], "little"):
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
    for spec, block in zip(specs, blocks):
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
