"""What the dashboard shows, as JSON-ready dicts, read through the public session API only.

Every session file is opened once, read-only (:func:`activeeval.session.base.open_session`
with ``readonly=True``: SQLite's read-only mode, which takes a shared lock only
for the instant of each read and never writes, so a running ``activeeval run``
is never locked out), and kept open: each later read first applies only the
events written since, as any session does.

Nothing here imports a web library; :mod:`activeeval.dashboard.server` serves
these dicts. A :class:`Board` is not thread-safe: the server calls it from one
thread.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from activeeval.exceptions import ActiveEvalError

__all__ = ["SUFFIX", "Board", "find_sessions", "session_id"]

SUFFIX = ".aeval"  # the session files a folder is searched for
READ_TIMEOUT = 2.0  # seconds a read waits for a writer's commit before it says "busy" (and is retried next poll)


def session_id(path: Path) -> str:
    """A stable id for a session file (its resolved path, hashed): for URLs, never a path from the client."""
    return hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]


def find_sessions(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Session files given, and the ``*.aeval`` files under folders given (recursively), in order, once each."""
    out: dict[Path, None] = {}
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            for f in sorted(p.rglob(f"*{SUFFIX}")):
                if f.is_file():
                    out.setdefault(f.resolve(), None)
        elif p.is_file():
            out.setdefault(p.resolve(), None)
    return list(out)


def _clean(value: Any) -> Any:
    """Plain JSON: NaN/inf become None, numpy scalars numbers, tuples lists."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float) or hasattr(value, "item"):
        v = value.item() if hasattr(value, "item") else value
        return (v if math.isfinite(v) else None) if isinstance(v, float) else v
    return value


def _trajectory(estimates: Iterable[Any]) -> list[dict[str, Any]]:
    out = []
    for e in estimates:
        lo, hi = e.ci()
        out.append({"n": int(e.n_observed), "mean": e.mean, "lo": lo, "hi": hi, "width": hi - lo})
    return out


class Board:
    """The sessions under some paths, each opened read-only once and read again on every call."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        self.paths = [str(p) for p in paths]
        self._open: dict[Path, Any] = {}

    def close(self) -> None:
        for s in self._open.values():
            s.close()
        self._open.clear()

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ sessions
    def _files(self) -> dict[str, Path]:
        return {session_id(p): p for p in find_sessions(self.paths)}

    def _session(self, path: Path) -> Any:
        if path not in self._open:
            from activeeval.session.base import open_session

            self._open[path] = open_session(path, readonly=True, timeout=READ_TIMEOUT)
        return self._open[path]

    def _drop(self, path: Path) -> None:
        s = self._open.pop(path, None)
        if s is not None:
            s.close()

    def sessions(self) -> list[dict[str, Any]]:
        """One summary per session found (new files appear, removed ones go)."""
        files = self._files()
        for gone in set(self._open) - set(files.values()):
            self._drop(gone)
        return [self._read(sid, path, full=False) for sid, path in files.items()]

    def detail(self, sid: str) -> dict[str, Any] | None:
        """Everything shown for one session, or None if no session has that id."""
        path = self._files().get(sid)
        if path is None:
            return None
        return self._read(sid, path, full=True)

    def _read(self, sid: str, path: Path, full: bool) -> dict[str, Any]:
        head: dict[str, Any] = {"id": sid, "path": str(path), "name": path.name}
        try:
            s = self._session(path)
            head.update(_header(s))
            head.update(_single(s, full) if s.KIND == "single" else _multi(s, full) if s.KIND == "multi"
                        else _rank(s, full))
        except Exception as exc:
            self._drop(path)  # reopened on the next read (a busy file, a reference put back, ...)
            text = str(exc) if isinstance(exc, ActiveEvalError) else f"{type(exc).__name__}: {exc}"
            head["error"] = " ".join(text.split())
        return _clean(head)


# ---------------------------------------------------------------- per kind
def _header(s: Any) -> dict[str, Any]:
    st = s.settings
    ref = st.get("reference") or {}
    return {"kind": s.KIND, "label": s.label, "method": st.get("method_spec", st.get("method")),
            "created": st.get("created"), "reference": {"name": ref.get("name"), "n_models": ref.get("n_models"),
                                                         "n_items": ref.get("n_items")}}


def _single(s: Any, full: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"status": s.status().to_dict()}
    if full:
        out["stopping"] = s.stopping_settings
        out["trajectory"] = _trajectory(s.trajectory)
        out["items"] = [{"item_id": iid, "score": v} for iid, v in s.observations]
    return out


def _multi(s: Any, full: bool) -> dict[str, Any]:
    status = s.status()
    d = status.to_dict()
    out: dict[str, Any] = {"stop": d["stop"], "stop_reason": d["stop_reason"], "running": d["running"],
                           "n_used": d["n_used"], "targets": {}}
    items: dict[str, list[dict[str, Any]]] = {t: [] for t in s.targets}
    if full:
        out["stopping"] = s.stopping_settings
        for t, iid, v in s.observations:
            items[t].append({"item_id": iid, "score": v})
    for t, st in status.targets.items():
        entry: dict[str, Any] = {"status": st.to_dict()}
        if full:
            entry["trajectory"] = _trajectory(s.trajectory(t))
            entry["items"] = items[t]
        out["targets"][t] = entry
    return out


def _rank(s: Any, full: bool) -> dict[str, Any]:
    status = s.status()
    d = status.to_dict()
    out: dict[str, Any] = {
        "stop": d["stop"], "stop_reason": d["stop_reason"], "gamma": d["gamma"], "ties": d["ties"],
        "cost_spent": d["cost_spent"], "budget": d["budget"], "n_used": sum(d["items_per_model"].values()),
        "ranking": d["ranking"],
        "adjacent_pairs": d["adjacent_pairs"], "pending": d["pending"],
    }
    if full:
        order = list(status.result.ranking)
        out["matrix"] = {"models": order,
                         "p": [[None if a == b else status.result.confidence(a, b) for b in order]
                               for a in order]}
        out["items"] = [{"model": e["model"], "item_id": e["item_id"], "score": e["score"]}
                        for e in s.history() if e["kind"] == "tell"]
    return out
