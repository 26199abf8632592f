"""Real score matrices that ship with activeeval, and the project's shared data.

The bundled matrices (MIT / Apache-2.0, see ``bundled/ATTRIBUTION.md``) are
read with :mod:`importlib.resources`, so they work from an installed wheel.
Matrices that may not be redistributed (the WMT21 chrF ones) live only in the
project's ``shared/data`` folder; :func:`load` falls back to it when it can
find it (:func:`shared_data_dir`), so tests and benchmarks can use them.
"""

from __future__ import annotations

import difflib
import functools
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from activeeval.data.matrix import ScoreKind, ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, UnknownDatasetError

__all__ = ["SHARED_DATA_ENV", "DatasetInfo", "info", "list_datasets", "load", "read_file", "resolve", "shared_data_dir"]

SHARED_DATA_ENV = "ACTIVEEVAL_SHARED_DATA"
_CATALOG = "catalog.json"


@dataclass(frozen=True)
class DatasetInfo:
    """What one dataset holds and where it comes from.

    Attributes
    ----------
    name : str
        The name to pass to :func:`load`.
    n_models, n_items : int
        Shape of the score matrix (models x items).
    kind : {"binary", "continuous"}
    score_range : (float, float)
    n_missing : int
        Number of missing (NaN) entries.
    description, origin, licence : str
    source : str
        Where exactly the scores were taken from.
    bundled : bool
        True if the file ships with the package; False for a dataset found
        only in the project's shared data folder.
    notes : str
        Caveats of the data, e.g. repeated rows or models with identical scores.
    file : str
        File name inside the bundled (or shared) data folder.
    """

    name: str
    n_models: int
    n_items: int
    kind: ScoreKind
    score_range: tuple[float, float]
    n_missing: int
    description: str
    origin: str
    licence: str
    source: str = ""
    bundled: bool = True
    notes: str = ""
    file: str = ""


# -------------------------------------------------------------- catalogs
@functools.lru_cache(maxsize=1)
def _bundled_catalog() -> dict[str, DatasetInfo]:
    text = resources.files("activeeval.data").joinpath("bundled").joinpath(_CATALOG).read_text(encoding="utf-8")
    out: dict[str, DatasetInfo] = {}
    for e in json.loads(text):
        out[e["name"]] = DatasetInfo(
            name=e["name"],
            n_models=int(e["n_models"]),
            n_items=int(e["n_items"]),
            kind=e["kind"],
            score_range=(float(e["score_range"][0]), float(e["score_range"][1])),
            n_missing=int(e["n_missing"]),
            description=e["description"],
            origin=e["origin"],
            licence=e["licence"],
            source=e.get("source", ""),
            bundled=True,
            notes=e.get("notes", ""),
            file=e["file"],
        )
    return out


@functools.lru_cache(maxsize=4)
def _shared_catalog(folder: Path) -> dict[str, DatasetInfo]:
    """The shared folder's catalog.json (its own format: models/items/score/min/max/missing)."""
    try:
        entries = json.loads((folder / _CATALOG).read_text(encoding="utf-8"))
        return {
            e["name"]: DatasetInfo(
                name=e["name"],
                n_models=int(e["models"]),
                n_items=int(e["items"]),
                kind=e["score"],
                score_range=(float(e["min"]), float(e["max"])),
                n_missing=int(e["missing"]),
                description=e["description"],
                origin="shared data (not bundled)",
                licence="research data, not redistributed",
                source=e.get("source", ""),
                bundled=False,
                file=e["file"],
            )
            for e in entries
        }
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataFormatError(
            f"{folder / _CATALOG}: cannot read the shared data catalog ({exc!r}); fix the file or set "
            f"{SHARED_DATA_ENV} to another folder"
        ) from exc


def shared_data_dir(data_dir: str | os.PathLike[str] | None = None) -> Path | None:
    """The project's shared data folder (``shared/data`` with a ``catalog.json``), or None.

    In order: ``data_dir`` when given, then the ``ACTIVEEVAL_SHARED_DATA``
    environment variable (either must hold a ``catalog.json``), then
    ``<ancestor>/shared/data`` for the ancestors of the installed package (a
    checkout at ``/work/main``, or a virtual environment inside it, finds
    ``/work/shared/data``). Never the current directory: where you stand does
    not change what :func:`load` reads.
    """
    for given, what in ((data_dir, "data_dir"), (os.environ.get(SHARED_DATA_ENV), SHARED_DATA_ENV)):
        if given:
            folder = Path(given).expanduser()
            if not (folder / _CATALOG).is_file():
                raise ConfigurationError(
                    f"{what}={os.fspath(given)!r} has no {_CATALOG}; point it to the folder holding the shared "
                    "score files and their catalog.json, or unset it"
                )
            return folder.resolve()
    here = Path(__file__).resolve().parent
    for ancestor in (here, *here.parents):
        folder = ancestor / "shared" / "data"
        if (folder / _CATALOG).is_file():
            return folder.resolve()
    return None


def _all_known(data_dir: str | os.PathLike[str] | None = None) -> dict[str, DatasetInfo]:
    """Bundled datasets, then the shared folder's others (when it is found)."""
    known = dict(_bundled_catalog())
    folder = shared_data_dir(data_dir)
    if folder is not None:
        for name, entry in _shared_catalog(folder).items():
            known.setdefault(name, entry)
    return known


def _unknown(name: object, known: dict[str, DatasetInfo], *, or_path: bool = False) -> UnknownDatasetError:
    names = sorted(known)
    close = difflib.get_close_matches(str(name).lower(), names, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}? " if close else ""
    lead = f"{name!r} is neither a dataset name nor an existing file" if or_path else f"unknown dataset {name!r}"
    tail = "; or give a path to a wide/long CSV/Parquet/JSONL score file" if or_path else ""
    return UnknownDatasetError(
        f"{lead}; {hint}datasets: {', '.join(names)} (see activeeval.datasets.list() or `activeeval datasets`){tail}"
    )


# ------------------------------------------------------------------ public
def info(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> DatasetInfo:
    """Catalog entry of a bundled (or shared) dataset; :class:`UnknownDatasetError` if none."""
    key = str(name).strip().lower()
    bundled = _bundled_catalog()
    if key in bundled:
        return bundled[key]
    known = _all_known(data_dir)
    if key in known:
        return known[key]
    raise _unknown(name, known)


def load(name: str, *, data_dir: str | os.PathLike[str] | None = None, cache: bool = True) -> ScoreMatrix:
    """Load a dataset by name as a :class:`ScoreMatrix` (models x items).

    Parameters
    ----------
    name : str
        A bundled dataset (``list_datasets()``), e.g. ``"ifeval"``, or a
        dataset of the project's shared data folder (e.g.
        ``"wmt21_en-zh_chrf"``) when :func:`shared_data_dir` finds it.
    data_dir : path-like, optional
        The shared data folder to look in (see :func:`shared_data_dir`).
    cache : bool
        Keep the parsed file in the user cache (see :func:`read_file`);
        False parses it anew.

    Returns
    -------
    ScoreMatrix
        Named ``name``, with the catalog's kind and score range. Missing
        entries stay NaN: the methods apply the missing-score policy. The
        result is kept for the process (it is immutable).
    """
    entry = info(name, data_dir=data_dir)
    return _load_cached(entry.name, None if entry.bundled else shared_data_dir(data_dir), cache)


def read_file(path: Path, *, cache: bool = True, **read_kwargs: Any) -> ScoreMatrix:
    """:func:`~activeeval.data.io.read_scores`, parsing each file once (``cache=False``: parse it every time).

    The parsed matrix is kept in the user cache (:mod:`activeeval.user_cache`)
    as plain arrays, keyed by the file's content hash, its name, the read
    options and the code that parsed it: the same bytes read the same way
    give the same matrix without being parsed again. A file that does not
    parse is never cached (each read raises the same error).
    """
    from activeeval import user_cache

    if not cache or user_cache.root() is None:
        return _parse(path, read_kwargs)
    try:
        key = user_cache.key("reference", user_cache.known_digest(path), path.name, read_kwargs,
                             user_cache.code_fingerprint(), _reader_versions())
    except OSError:
        return _parse(path, read_kwargs)  # read_scores names the problem
    entry = user_cache.load("reference", key)
    if entry is not None:
        m = entry.meta
        try:
            return ScoreMatrix._from_parts(entry.arrays[0], m["model_ids"], m["item_ids"], m["kind"],
                                           m["score_range"], m["name"], m["fingerprint"], m["n_missing"])
        except (KeyError, IndexError, TypeError, ValueError):
            pass  # not what this module stores: parse the file again
    matrix = _parse(path, read_kwargs)
    meta = {"model_ids": list(matrix.model_ids), "item_ids": list(matrix.item_ids), "kind": matrix.kind,
            "score_range": matrix.score_range, "name": matrix.name, "fingerprint": matrix.fingerprint(),
            "n_missing": matrix.n_missing}
    user_cache.store("reference", key, meta, [matrix.scores])
    return matrix


def _parse(path: Path, read_kwargs: dict[str, Any]) -> ScoreMatrix:
    from activeeval.data.io import read_scores  # pandas: imported on first parse

    return read_scores(path, **read_kwargs)


def _reader_versions() -> list[str]:
    """Versions of the libraries a file is parsed with (a cached parse is keyed by them)."""
    import numpy

    return [numpy.__version__, *(_installed_version(dist) for dist in ("pandas", "pyarrow"))]


def _installed_version(dist: str) -> str:
    """The installed version of package ``dist`` ("" if none), without importing it.

    Read from the name of the ``<dist>-<version>.dist-info`` folder beside the package, as pip installs it;
    :mod:`importlib.metadata` otherwise (importing it costs a later session command 20-30 ms of CPU).
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec(dist)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return ""
    for location in spec.submodule_search_locations or ():
        site = os.path.dirname(location)
        prefix = f"{dist}-"
        try:
            found = [n for n in os.listdir(site) if n.startswith(prefix) and n.endswith(".dist-info")]
        except OSError:
            continue
        if len(found) == 1:
            return found[0][len(prefix):-len(".dist-info")]
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return ""


def _read_dataset(path: Path, entry: DatasetInfo, cache: bool) -> ScoreMatrix:
    # Leaderboard exports repeat some models with identical rows; keep one (see the catalog notes).
    return read_file(path, cache=cache, layout="wide", kind=entry.kind, score_range=entry.score_range,
                     name=entry.name, duplicate_models="drop_identical")


@functools.cache
def _load_cached(name: str, shared_folder: Path | None, cache: bool = True) -> ScoreMatrix:
    """Read a bundled dataset (``shared_folder`` None) or one of ``shared_folder``."""
    if shared_folder is not None:
        # The shared files are their own reference (their catalog counts rows, not distinct models).
        entry = _shared_catalog(shared_folder)[name]
        return _read_dataset(shared_folder / entry.file, entry, cache)
    entry = _bundled_catalog()[name]
    with resources.as_file(resources.files("activeeval.data").joinpath("bundled").joinpath(entry.file)) as path:
        matrix = _read_dataset(path, entry, cache)
    if (matrix.n_models, matrix.n_items, matrix.n_missing) != (entry.n_models, entry.n_items, entry.n_missing):
        raise DataFormatError(
            f"dataset {name!r}: the file holds {matrix.n_models} x {matrix.n_items} scores with "
            f"{matrix.n_missing} missing, but the catalog says {entry.n_models} x {entry.n_items} with "
            f"{entry.n_missing}; the bundled file is damaged: reinstall activeeval"
        )
    return matrix


def list_datasets(include_shared: bool = False, *, data_dir: str | os.PathLike[str] | None = None
                  ) -> list[DatasetInfo]:
    """Catalog entries of the bundled datasets, in catalog order.

    Parameters
    ----------
    include_shared : bool
        Also list the datasets of the project's shared data folder that are
        not bundled (when :func:`shared_data_dir` finds it).
    data_dir : path-like, optional
        The shared data folder (see :func:`shared_data_dir`).
    """
    entries = [*_bundled_catalog().values()]
    if include_shared:
        folder = shared_data_dir(data_dir)
        if folder is not None:
            bundled = _bundled_catalog()
            entries += [e for name, e in _shared_catalog(folder).items() if name not in bundled]
    return entries


_FILE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".parquet", ".pq", ".jsonl", ".jsonl.gz", ".json")


def resolve(name_or_path: str | os.PathLike[str], *, data_dir: str | os.PathLike[str] | None = None,
            cache: bool = True, **read_kwargs: object) -> ScoreMatrix:
    """A dataset name or a score file, as a :class:`ScoreMatrix`.

    Parameters
    ----------
    name_or_path : str or path-like
        A dataset name (see :func:`load`) or the path of a wide/long
        CSV/Parquet/JSONL file (see :func:`~activeeval.data.io.read_scores`).
        An existing file wins over a dataset of the same name.
    data_dir : path-like, optional
        The shared data folder for a dataset name (see :func:`shared_data_dir`).
    cache : bool
        Parse a file once and keep the matrix in the user cache (see
        :func:`read_file`); False parses it anew.
    **read_kwargs
        Passed to :func:`~activeeval.data.io.read_scores` for a file
        (``layout``, ``kind``, ``score_range``, ...). Not allowed with a
        dataset name, whose kind and range come from the catalog.
    """
    text = os.fspath(name_or_path)
    path = Path(text).expanduser()
    looks_like_path = (
        isinstance(name_or_path, os.PathLike) or os.sep in text or "/" in text or text.lower().endswith(_FILE_SUFFIXES)
    )
    if path.is_file() or looks_like_path:
        return read_file(path, cache=cache, **read_kwargs)
    known = _all_known(data_dir)
    if text.strip().lower() not in known:
        raise _unknown(text, known, or_path=True)
    if read_kwargs:
        raise ConfigurationError(
            f"{sorted(read_kwargs)} only apply when reading a file, but {text!r} is a dataset name; "
            "drop them, or save the dataset with write_scores() and read the file"
        )
    return load(text, data_dir=data_dir, cache=cache)
