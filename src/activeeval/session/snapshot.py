"""A stored snapshot of a session's rebuilt state, so reopening a large session is fast.

A session's state is a deterministic function of its settings and its
recorded scores (DESIGN.md), so it can always be rebuilt by replaying the
journal; at scale that costs seconds per command (building the method on a
20 000-item reference alone can take longer than the target of one command).
A snapshot is a pickle of the rebuilt state (any method, or a ranking
session's methods), stored in the session file with

* ``upto``: the last journal event folded into it;
* ``key``: a SHA-256 of everything the state depends on: the session kind,
  the method spec and keyword arguments, the targets, the reference
  fingerprint, a digest of every recorded score up to ``upto`` (in order),
  the activeeval source code, and the Python and NumPy versions;
* ``checksum``: a SHA-256 of the pickle itself.

It is used only when the key recomputed from the journal matches and the
checksum verifies; otherwise the session falls back to the replay, which
gives the same state (tested for every registered method). So a snapshot can
never change a result, only the time it takes to get it. Snapshots are
written only by commands that write anyway (creating, handing out items,
recording scores), and only once rebuilding took longer than
:data:`SNAPSHOT_AFTER_SECONDS`; read-only commands never write one.

Like any pickle, a snapshot runs code when it is loaded: open session files
only from sources you trust (as you would a notebook or a pickle file).
"""

from __future__ import annotations

import functools
import hashlib
import json
import pickle
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["SNAPSHOT_AFTER_SECONDS", "TellDigest", "snapshot_key", "dump_state", "load_state", "code_fingerprint",
           "pickled_size"]

SNAPSHOT_FORMAT = 1
# Write a snapshot once rebuilding (building the method and replaying scores) took longer than this.
SNAPSHOT_AFTER_SECONDS = 0.25
# Reading and unpickling a snapshot runs at about 300 MB/s here (29 MB: 0.05 s SQLite read + 0.06 s
# unpickle, benchmarks/bench_session.py); a snapshot is kept only if loading it should take at most half
# the rebuild it saves (a method that caches a large matrix may be cheaper to rebuild than to load).
LOAD_BYTES_PER_SECOND = 300e6


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the installed activeeval package (a changed method invalidates snapshots)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


class TellDigest:
    """A running digest of recorded scores, in journal order."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def add(self, seq: int, target: str, item_id: str, score: float) -> None:
        self._h.update(f"{seq}\x1f{target}\x1f{item_id}\x1f{float(score)!r}\n".encode())

    def hexdigest(self) -> str:
        return self._h.copy().hexdigest()


def snapshot_key(settings: Mapping[str, Any], tells: str) -> str:
    """The key a snapshot must carry to stand for the state after the tells digested in ``tells``."""
    import numpy as np

    payload = {
        "snapshot_format": SNAPSHOT_FORMAT,
        "kind": settings.get("kind", "single"),
        "method": settings.get("method"),
        "method_kwargs": settings.get("method_kwargs"),
        "targets": settings.get("targets"),
        "missing": settings.get("missing"),
        "reference": (settings.get("reference") or {}).get("fingerprint"),
        "code": code_fingerprint(),
        "python": sys.version,
        "numpy": np.__version__,
        "tells": tells,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def pickled_size(state: Any) -> int | None:
    """Bytes the pickle of ``state`` would take, without making it (large arrays are only counted)."""
    sizes: list[int] = []

    def count(buffer: pickle.PickleBuffer) -> bool:
        sizes.append(buffer.raw().nbytes)
        return False  # false = out of band: counted, not copied into the pickle

    try:
        head = pickle.dumps(state, protocol=5, buffer_callback=count)
    except Exception:  # noqa: BLE001 - a state that does not pickle just gets no snapshot
        return None
    return len(head) + sum(sizes)


def dump_state(state: Any, rebuild_seconds: float = float("inf")) -> tuple[bytes, str] | None:
    """The pickle of ``state`` and its checksum; None if it does not pickle or would not pay for itself.

    ``rebuild_seconds`` is what rebuilding the state cost; the snapshot is made only when loading it
    should take at most half of that (see :data:`LOAD_BYTES_PER_SECOND`).
    """
    size = pickled_size(state)
    if size is None or size / LOAD_BYTES_PER_SECOND > rebuild_seconds / 2:
        return None
    data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
    return data, hashlib.sha256(data).hexdigest()


def load_state(data: bytes, checksum: str, where: str) -> Any | None:
    """The unpickled state, or None (with a warning) if the stored bytes are damaged."""
    if hashlib.sha256(data).hexdigest() != checksum:
        warnings.warn(
            f"{where}: the stored snapshot is damaged (checksum mismatch); rebuilding the state from the journal "
            "instead (nothing recorded is affected)",
            UserWarning,
            stacklevel=3,
        )
        return None
    try:
        return pickle.loads(data)  # noqa: S301 - the session file's own cache, checked above
    except Exception:  # noqa: BLE001 - an unloadable cache is rebuilt
        return None
