"""Finished tasks of a backtest on disk: what an interrupted run keeps, and what a re-run resumes from.

A backtest is a set of independent tasks whose results depend only on their
coordinates (:func:`activeeval.experiments.runner.run_task`: one method and
one seed; a ranking backtest: one seed and fold). Given a folder
(``checkpoint=`` in Python, ``--out DIR`` on the command line, which keeps
them in ``DIR/tasks``), each finished task is written there as one file —
arrays as ``.npz`` (read back without pickle), records as JSON — by writing a
temporary file, syncing it and renaming it into place, so that a task file is
whole or absent whatever stops the run (Ctrl-C, ``kill -9``, a power cut).
``run.json`` says which run the folder belongs to (the data's fingerprint and
every setting); a run with other settings is refused, and a run with the same
ones skips the tasks it finds, so its result equals an uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from activeeval.exceptions import ConfigurationError, StorageError

__all__ = ["MANIFEST", "BacktestInterrupted", "TaskStore", "plain_json"]

FORMAT = 1
MANIFEST = "run.json"


def plain_json(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples become lists, keys strings): what a manifest is compared as."""
    return json.loads(json.dumps(value, sort_keys=True))


def _write_atomically(path: Path, write: Any) -> None:
    """Call ``write(file)`` on a temporary file beside ``path``, sync it, and rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if hasattr(os, "O_DIRECTORY"):  # the rename itself survives a power cut once the folder is synced
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


class BacktestInterrupted(KeyboardInterrupt):
    """Ctrl-C during a backtest: ``done`` of ``total`` tasks had finished (kept in ``checkpoint``, if one was given)."""

    def __init__(self, done: int, total: int, checkpoint: Path | None) -> None:
        super().__init__(done, total, checkpoint)
        self.done, self.total, self.checkpoint = done, total, checkpoint


def _differences(a: Mapping[str, Any], b: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The keys (dotted into nested mappings) whose values differ between ``a`` and ``b``."""
    out = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            out.extend(_differences(x, y, f"{prefix}{key}."))
        elif x != y:
            out.append(prefix + key)
    return out


class TaskStore:
    """One folder of finished tasks of one run (see the module docstring).

    ``identity`` is a JSON-able description of the run, given here or to
    :meth:`check` by the code that runs it; ``flag`` names the option that
    chose the folder in error messages (``--out`` for the CLI).
    """

    def __init__(self, folder: str | os.PathLike[str], identity: Mapping[str, Any] | None = None, *,
                 flag: str = "checkpoint=") -> None:
        self.folder = Path(folder).expanduser()
        self.flag = flag
        self.identity: dict[str, Any] | None = None
        if identity is not None:
            self.check(identity)

    def check(self, identity: Mapping[str, Any]) -> None:
        """Take ``identity`` as this folder's run; raise if the folder holds another run's tasks, or other files."""
        ident = plain_json({"format": FORMAT, **identity})
        manifest = self.folder / MANIFEST
        if manifest.exists():
            try:
                stored = json.loads(manifest.read_text())
            except (OSError, ValueError) as exc:
                raise StorageError(f"{self.flag} {str(self.folder)!r}: cannot read {MANIFEST} ({exc}); choose a new "
                                   "folder") from exc
            if stored != ident:
                raise ConfigurationError(
                    f"{self.flag} {str(self.folder)!r} holds the finished tasks of another run (it differs in "
                    f"{', '.join(_differences(stored, ident))}); re-run the command that started it to resume it, or "
                    "choose a new folder")
        elif self.folder.exists() and any(self.folder.iterdir()):
            raise ConfigurationError(
                f"{self.flag} {str(self.folder)!r} is not empty and holds no {MANIFEST}; choose a new folder")
        self.identity = ident

    def names(self) -> list[str]:
        """The tasks stored, by name (temporary files of a write that was cut short are not tasks)."""
        if not self.folder.is_dir():
            return []
        return sorted(p.stem for p in self.folder.iterdir()
                      if p.suffix in (".npz", ".json") and p.name != MANIFEST and not p.name.startswith("."))

    def _prepare(self) -> None:
        """Create the folder and its manifest with the first task (so a run that fails at once leaves nothing)."""
        if self.identity is None:
            raise ValueError("TaskStore.check(identity) must be called before tasks are saved")
        manifest = self.folder / MANIFEST
        if not manifest.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            _write_atomically(manifest, lambda fh: fh.write((json.dumps(self.identity, indent=1) + "\n").encode()))

    def save_arrays(self, name: str, **arrays: np.ndarray) -> None:
        self._prepare()
        # As Any: numpy's stub types savez's keywords as its allow_pickle flag, which no array name here is.
        stored: dict[str, Any] = arrays
        _write_atomically(self.folder / f"{name}.npz", lambda fh: np.savez(fh, **stored))

    def load_arrays(self, name: str) -> dict[str, np.ndarray]:
        path = self.folder / f"{name}.npz"
        try:
            with np.load(path, allow_pickle=False) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise StorageError(f"{self.flag} {str(self.folder)!r}: cannot read task file {path.name} ({exc}); "
                               "delete it and re-run to compute that task again") from exc

    def save_json(self, name: str, record: Mapping[str, Any]) -> None:
        self._prepare()
        text = json.dumps(record, allow_nan=True)
        _write_atomically(self.folder / f"{name}.json", lambda fh: fh.write(text.encode()))

    def load_json(self, name: str) -> dict[str, Any]:
        path = self.folder / f"{name}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise StorageError(f"{self.flag} {str(self.folder)!r}: cannot read task file {path.name} ({exc}); "
                               "delete it and re-run to compute that task again") from exc

