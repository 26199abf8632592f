"""Writing the files and folders a user names, safely (every ``--out``, ``write_scores``, ``write_report``).

Three rules, for every command and function that writes a path it is given:

* **Nothing is overwritten unless asked**: an existing file is refused
  unless ``overwrite=True`` (``--force`` on the command line).
* **Some files are never overwritten**, even when asked: the ones the call
  reads (a session file and its reference, a command's inputs, with
  symbolic links, relative paths and hard links resolved; anything inside
  an input folder), their SQLite side files, and any SQLite database (a
  session file, most likely).
* **Nothing is left half-written**: the content goes to a temporary file in
  the same folder, is flushed to disk, and only then renamed over the path
  (an atomic step on POSIX and Windows), so a full disk or a crash leaves
  the old file, or none, never a truncated one.

A folder of results (``backtest --out DIR``) follows the same rules:
:func:`output_folder` writes a new folder beside it and renames it into
place; an existing folder is replaced only when asked and only if it is one
activeeval wrote (it holds :data:`RESULTS_MARKER`) — a folder of other files
is never written into or deleted.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from activeeval.exceptions import ConfigurationError, StorageError

__all__ = ["RESULTS_MARKER", "atomic_output", "check_output", "check_output_folder", "output_folder"]

RESULTS_MARKER = ".activeeval-results"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SIDE_FILES = ("-journal", "-wal", "-shm")

PathLike = str | os.PathLike[str]


def _same(a: Path, b: Path) -> bool:
    """The same file: equal once resolved (symbolic links, '..'), or one inode (a hard link)."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _protecting(path: Path, protected: Iterable[PathLike | None]) -> Path | None:
    """The protected file ``path`` is (or is a side file of, or lies in, for a protected folder), if any."""
    for p in protected:
        if p is None:
            continue
        base = Path(p).expanduser()
        if base.is_dir() and path.resolve().is_relative_to(base.resolve()):
            return base
        for candidate in (base, *(base.with_name(base.name + s) for s in _SIDE_FILES)):
            if _same(path, candidate):
                return base
    return None


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def check_output(path: PathLike, *, overwrite: bool = False, protected: Iterable[PathLike | None] = (),
                 what: str = "output file") -> Path:
    """The path to write, after the checks above; a :class:`ConfigurationError` naming the problem otherwise.

    Raises before anything is written, so a caller can check its output before long work.
    """
    out = Path(path).expanduser()
    shown = repr(str(out))
    guarded = _protecting(out, protected)
    if guarded is not None and guarded.is_dir():
        raise ConfigurationError(
            f"{what} {shown} lies in {str(guarded)!r}, a folder this command reads; refusing to write there even "
            "with overwrite=True: choose another path")
    if guarded is not None:
        same = "" if str(guarded) == str(out) else f" (that is {str(guarded)!r})"
        raise ConfigurationError(
            f"{what} {shown}{same} is a file this command reads; refusing to write over it even with "
            "overwrite=True: choose another path")
    if out.is_dir():
        raise ConfigurationError(f"{what} {shown} is a folder; give the path of a file to write")
    if not out.parent.is_dir():
        raise ConfigurationError(f"cannot write {what} {shown}: folder {str(out.parent)!r} does not exist; create "
                                 "it first")
    if out.exists() or out.is_symlink():
        if _is_sqlite(out):
            raise ConfigurationError(
                f"{what} {shown} exists and is an SQLite database (an activeeval session file?); refusing to write "
                "over it even with overwrite=True: choose another path")
        if not overwrite:
            raise ConfigurationError(f"{what} {shown} exists; pass overwrite=True to overwrite it, or choose "
                                     "another path")
    return out


@contextmanager
def atomic_output(path: PathLike, *, overwrite: bool = False, protected: Iterable[PathLike | None] = (),
                  what: str = "output file") -> Iterator[Path]:
    """Check ``path`` (:func:`check_output`), then yield a temporary path beside it for the caller to write.

    When the block ends without an error, the temporary file is flushed to disk and renamed over ``path``
    (keeping an overwritten file's permissions); on an error it is removed and ``path`` is left as it was.
    The temporary name ends with ``path``'s own name, so suffix-based writers pick the same format. An
    :class:`OSError` (a full disk, no permission) becomes a :class:`StorageError` naming the path.
    """
    protected = list(protected)
    out = check_output(path, overwrite=overwrite, protected=protected, what=what)
    tmp = out.with_name(f".tmp-{secrets.token_hex(4)}-{out.name}")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))  # the umask's permissions
        try:
            yield tmp
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            check_output(out, overwrite=overwrite, protected=protected, what=what)  # still true after the work?
            if out.exists():
                os.chmod(tmp, stat.S_IMODE(out.stat().st_mode))
            os.replace(tmp, out)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise StorageError(
            f"cannot write {what} {str(out)!r} ({exc.strerror or exc}); nothing was changed there: check that the "
            "folder is writable and the disk has space") from exc
    _sync_folder(out.parent)


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def check_output_folder(path: PathLike, *, overwrite: bool = False, what: str = "output folder",
                        resumable: str | None = None) -> Path:
    """The results folder to write: new, empty, or (with ``overwrite``) one activeeval wrote before.

    ``resumable``: the name of a folder inside it where an unfinished run of the command keeps its finished
    work until the results are written (``backtest --out DIR``: ``DIR/tasks``); it is not counted as a file
    of the folder (the command checks it is its own) and goes when the results replace the folder.
    """
    out = Path(path).expanduser()
    shown = repr(str(out))
    if not out.exists() and not out.is_symlink():
        return out
    if not out.is_dir() or out.is_symlink():
        raise ConfigurationError(f"{what} {shown} exists and is not a folder; choose a new folder")
    entries = [e for e in out.iterdir() if not (e.name == resumable and e.is_dir() and not e.is_symlink())]
    if not entries:
        return out
    if (out / RESULTS_MARKER).is_file():
        if overwrite:
            return out
        raise ConfigurationError(
            f"{what} {shown} holds the results of an earlier run; pass overwrite=True to replace them, or choose a "
            "new folder")
    raise ConfigurationError(
        f"{what} {shown} is a folder of other files ({len(entries)} entries) that activeeval did not write; choose "
        "a new folder (nothing is written into or over such a folder, even with overwrite=True)")


@contextmanager
def output_folder(path: PathLike, *, overwrite: bool = False, what: str = "output folder",
                  resumable: str | None = None) -> Iterator[Path]:
    """Yield a temporary folder beside ``path`` to fill; when the block succeeds it becomes ``path``.

    An earlier results folder at ``path`` (``overwrite=True``), or the ``resumable`` work of an unfinished
    run in it (:func:`check_output_folder`), is replaced only once the new one is complete; on an error the
    temporary folder is removed and ``path`` is left as it was.
    """
    out = check_output_folder(path, overwrite=overwrite, what=what, resumable=resumable)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".tmp-{secrets.token_hex(4)}-{out.name}")
        tmp.mkdir()
    except OSError as exc:
        raise StorageError(f"cannot create {what} {str(out)!r} ({exc.strerror or exc})") from exc
    try:
        yield tmp
        (tmp / RESULTS_MARKER).write_text("written by activeeval; asked to overwrite, it may replace this folder\n")
        check_output_folder(out, overwrite=overwrite, what=what, resumable=resumable)
        old = None
        if out.exists():
            old = out.with_name(f".old-{secrets.token_hex(4)}-{out.name}")
            os.rename(out, old)
        os.rename(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        raise StorageError(f"cannot write {what} {str(out)!r} ({exc.strerror or exc}); check that the disk has "
                           "space") from exc
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
