"""Where a session's reference data comes from, how to reload it, and how to check it did not change.

A session stores how to load its reference again (a bundled dataset name, or
a file path with the options it was read with) and the reference's
fingerprint; every reopen checks the fingerprint. A file is parsed once: the
parsed matrix is kept in the user cache under the file's content hash
(:func:`activeeval.data.datasets.read_file`), so reopening a session on a
large reference costs a hash of the file and a read of its arrays.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import (
    ActiveEvalError,
    ConfigurationError,
    MissingScoresWarning,
    ReferenceMismatchError,
    StorageError,
    UnknownDatasetError,
    option,
)
from activeeval.settings import Settings, setting

__all__ = [
    "READ_OPTIONS",
    "ReadSettings",
    "apply_missing",
    "check_read_options",
    "load_reference",
    "reference_summary",
    "resolve_reference",
    "without_models",
]

# Options of reading a reference *file* (``activeeval.read_scores``); and the models to leave out of any reference
# (a file, a dataset or a matrix), applied once it is read.
READ_OPTIONS = ("kind", "score_range", "duplicate_models", "exclude_models")
MISSING_POLICIES = ("models", "items")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ReadSettings(Settings):
    """How a session reads a reference *file* (:func:`activeeval.read_scores`): a session's ``read`` group; each
    field is also a flat keyword of ``create`` (``kind="continuous"``). Values are kept as given (the session
    stores them, normalised, when it is created); :func:`check_read_options` checks them."""

    about: ClassVar[str] = "how the reference file is read"

    kind: str | None = setting(None, None, '"binary" or "continuous" (default: inferred)')
    score_range: tuple[float, float] | None = setting(None, None, "(low, high) of the scores, e.g. (0, 100) for chrF")
    duplicate_models: str | None = setting(None, None, '"error" or "drop-identical" for a model id repeated')
    exclude_models: Sequence[str] | str | None = setting(None, None, "reference models to leave out")

    def check(self) -> None:
        check_read_options(self.options())

    def options(self) -> dict[str, Any]:
        """The four options by name, as given (None: not set)."""
        return {name: getattr(self, name) for name in READ_OPTIONS}


def check_read_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and normalise read options (None values dropped); JSON-ready."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        if key not in READ_OPTIONS:
            raise ConfigurationError(f"unknown reference read option {key!r}; choose from {', '.join(READ_OPTIONS)}")
        if key == "kind":
            if value not in ("binary", "continuous"):
                raise ConfigurationError(f"{option('kind')} must be 'binary' or 'continuous', got {value!r}")
        elif key == "score_range":
            try:
                lo, hi = (float(v) for v in value)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(
                    f"{option('score_range', '(low, high)', 'LOW HIGH')} needs two numbers, got {value!r}"
                ) from exc
            if not lo < hi:
                raise ConfigurationError(
                    f"{option('score_range', '(low, high)', 'LOW HIGH')} needs low < high, got {lo:g} {hi:g}")
            value = [lo, hi]
        elif key == "exclude_models":
            value = _model_list(value)
            if not value:
                continue
        elif key == "duplicate_models":
            value = str(value).replace("-", "_")
            if value not in ("error", "drop_identical"):
                raise ConfigurationError(
                    f"{option('duplicate_models')} must be 'error' or 'drop-identical', got {options[key]!r}"
                )
        out[key] = value
    return out


def _model_list(value: Any) -> list[str]:
    """``exclude_models``: model ids as a list (a string is one comma-separated list, as on the command line)."""
    if isinstance(value, str):
        value = value.split(",")
    try:
        names = [str(v).strip() for v in value]
    except TypeError as exc:
        raise ConfigurationError(
            f"{option('exclude_models')} takes model ids (a list, or one comma-separated string), got {value!r}"
        ) from exc
    return list(dict.fromkeys(n for n in names if n))


def without_models(matrix: ScoreMatrix, models: Sequence[str]) -> ScoreMatrix:
    """``matrix`` without ``models``; an unknown one is refused with the closest model ids."""
    known = set(matrix.model_ids)
    unknown = [m for m in models if m not in known]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], matrix.model_ids, n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ConfigurationError(
            f"{option('exclude_models')} names {', '.join(map(repr, unknown))}, not a model of "
            f"{matrix.name or 'the reference'}{hint}; drop it or fix its spelling (see .model_ids)")
    return matrix.drop_models(models)


def resolve_reference(
    reference: str | os.PathLike[str] | ScoreMatrix, read_options: Mapping[str, Any] | None = None, *,
    cache: bool = True,
) -> tuple[ScoreMatrix, dict[str, Any]]:
    """The matrix (without the models of the read option ``exclude_models``) and a JSON description of how to load it
    again (``cache``: through the user cache)."""
    opts = check_read_options(read_options or {})
    exclude = opts.pop("exclude_models", None)
    matrix, source = _resolve_reference(reference, opts, cache)
    if exclude is None:
        return matrix, source
    return without_models(matrix, exclude), {**source, "read": {**source.get("read", {}), "exclude_models": exclude}}


def _resolve_reference(
    reference: str | os.PathLike[str] | ScoreMatrix, opts: dict[str, Any], cache: bool
) -> tuple[ScoreMatrix, dict[str, Any]]:
    if isinstance(reference, ScoreMatrix):
        if opts:
            raise ConfigurationError(
                f"{', '.join(sorted(opts))} only apply when reading a score file, not to a ScoreMatrix; drop them"
            )
        return reference, {"type": "matrix", "name": reference.name}
    if not isinstance(reference, (str, os.PathLike)):
        raise ConfigurationError(
            f"reference must be a dataset name, a path to a score file or a ScoreMatrix, "
            f"got {type(reference).__name__}"
        )
    from activeeval import datasets  # data layer; imported lazily to keep start-up fast

    text = os.fspath(reference)
    path = Path(text).expanduser()
    if opts and not path.is_file():
        try:
            datasets.info(text)
        except UnknownDatasetError:
            pass  # resolve() below gives the usual "neither a dataset nor a file" error
        else:
            flags = ", ".join(option(k) for k in opts)
            raise ConfigurationError(
                f"{flags} only apply to a score file; {text!r} is a bundled dataset whose kind and score range come "
                "from its catalog: drop them, or give a score file"
            )
    read = dict(opts)
    if "score_range" in read:
        read["score_range"] = tuple(read["score_range"])
    matrix = datasets.resolve(text, cache=cache, **read)
    if path.is_file():
        source: dict[str, Any] = {"type": "file", "path": str(path.resolve())}
        if opts:
            source["read"] = opts
        return matrix, source
    return matrix, {"type": "dataset", "name": matrix.name or text}


def reference_summary(matrix: ScoreMatrix) -> dict[str, Any]:
    """What the journal stores about the reference, to say what changed on a mismatch."""
    return {
        "name": matrix.name,
        "n_models": matrix.n_models,
        "n_items": matrix.n_items,
        "kind": matrix.kind,
        "score_range": list(matrix.score_range) if matrix.score_range is not None else None,
        "model_ids_sha": _sha(json.dumps(matrix.model_ids)),
        "item_ids_sha": _sha(json.dumps(matrix.item_ids)),
        "fingerprint": matrix.fingerprint(),
    }


def apply_missing(matrix: ScoreMatrix, missing: str) -> ScoreMatrix:
    """The reference with the missing-score policy applied (a note says what was dropped)."""
    if missing not in MISSING_POLICIES:
        raise ConfigurationError(f"{option('missing')} must be 'models' or 'items', got {missing!r}")
    out, report = matrix.dropna(missing)  # type: ignore[arg-type]
    if report.changed:
        warnings.warn(report.summary(), MissingScoresWarning, stacklevel=3)
    return out


def _what_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    parts = []
    if old.get("n_models") != new["n_models"] or old.get("model_ids_sha") != new["model_ids_sha"]:
        parts.append(f"models {old.get('n_models')} -> {new['n_models']} (model ids differ)")
    if old.get("n_items") != new["n_items"] or old.get("item_ids_sha") != new["item_ids_sha"]:
        parts.append(f"items {old.get('n_items')} -> {new['n_items']} (item ids differ)")
    if old.get("kind") != new["kind"]:
        parts.append(f"kind {old.get('kind')} -> {new['kind']}")
    if old.get("score_range") != new["score_range"]:
        parts.append(f"score range {old.get('score_range')} -> {new['score_range']}")
    return "; ".join(parts) if parts else "same models and items, but some scores differ"


def describe(source: Mapping[str, Any]) -> str:
    if source.get("type") == "file":
        return f"file {source['path']!r}"
    if source.get("type") == "dataset":
        return f"bundled dataset {source['name']!r}"
    return f"an in-memory ScoreMatrix ({source.get('name')!r})"


def load_reference(
    path: Path, meta: Mapping[str, Any], reference: str | os.PathLike[str] | ScoreMatrix | None, *,
    cache: bool = True,
) -> ScoreMatrix:
    """Reload the reference of session ``path`` (or take the override ``reference``) and check its fingerprint.

    A matrix from the user cache that does not match is not taken for a changed reference: the file itself is
    parsed again and compared.
    """
    matrix, origin = _reload(path, meta, reference, cache)
    stored = meta["reference"]
    if cache and matrix.fingerprint() != stored.get("fingerprint"):
        matrix, origin = _reload(path, meta, reference, False)
    new = reference_summary(matrix)
    if new["fingerprint"] != stored.get("fingerprint"):
        raise ReferenceMismatchError(
            f"the reference data of session {str(path)!r} changed since the session was created: "
            f"{origin} has fingerprint {new['fingerprint'][:12]}, the session expects "
            f"{str(stored.get('fingerprint'))[:12]} ({_what_changed(stored, new)}). Recorded scores are "
            f"only valid against the original data: restore it and {_hint(meta)}, or start a new session"
        )
    return matrix


def _opener(meta: Mapping[str, Any]) -> str:
    return {"rank": "RankSession", "multi": "MultiSession"}.get(meta.get("kind", "single"), "Session")


def _hint(meta: Mapping[str, Any]) -> str:
    return f"pass the original data explicitly: {_opener(meta)}.open(path, reference=...)"


def _reload(
    path: Path, meta: Mapping[str, Any], reference: str | os.PathLike[str] | ScoreMatrix | None, cache: bool
) -> tuple[ScoreMatrix, str]:
    """The reference of session ``path`` as loaded (not yet checked), and where it came from."""
    source = meta["reference_source"]
    hint = _hint(meta)
    read = source.get("read") or {}
    if reference is not None:
        exclude = {k: v for k, v in read.items() if k == "exclude_models"}
        matrix, given = resolve_reference(reference, read if not isinstance(reference, ScoreMatrix) else exclude,
                                          cache=cache)
        origin = f"the reference passed to open ({describe(given)})"
    elif source.get("type") == "matrix":
        raise StorageError(
            f"session {str(path)!r} was created from an in-memory ScoreMatrix ({source.get('name')!r}); "
            f"open it with {_opener(meta)}.open(path, reference=<that matrix>)"
        )
    elif source.get("type") == "file":
        ref_path = Path(source["path"])
        if not ref_path.is_file():
            raise StorageError(
                f"reference file {str(ref_path)!r} of session {str(path)!r} no longer exists; "
                f"restore it, or {hint}"
            )
        origin = f"reference file {str(ref_path)!r}"
        try:
            matrix, _ = resolve_reference(ref_path, read, cache=cache)
        except ActiveEvalError as exc:
            raise StorageError(f"cannot reload {origin} of session {str(path)!r}: {exc}") from exc
    elif source.get("type") == "dataset":
        origin = f"bundled dataset {source['name']!r}"
        try:
            matrix, _ = resolve_reference(source["name"], read, cache=cache)
        except UnknownDatasetError as exc:
            raise StorageError(f"cannot reload {origin} of session {str(path)!r}: {exc}; {hint}") from exc
    else:
        raise StorageError(f"session file {str(path)!r} is corrupted: unknown reference source {source!r}")
    return matrix, origin
