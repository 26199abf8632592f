"""The results file of an evaluation session: ``results.json``, self-describing like lm-eval's ``results_*.json``.

Written when ``activeeval run`` (or a ``session record`` that meets the
stopping rule) stops, and by ``activeeval session export``. It says what was
run and how (activeeval and dependency versions, method and options, seed,
the reference's fingerprint, models and items, the stopping rule and why it
stopped) and what came out (estimate, interval, items used, every per-item
score). The schema is versioned (:data:`SCHEMA_VERSION`) and given as a JSON
Schema file, ``activeeval/schemas/results.schema.json`` (:func:`schema`).
``session status --json`` carries the same header (:func:`header`).

A results file is replaced only by the same session's newer results, or when
asked (``overwrite=True``, ``--force``); it is written to a temporary file
and renamed into place (:mod:`activeeval._files`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import sys
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from activeeval._files import atomic_output, check_output
from activeeval.exceptions import ConfigurationError
from activeeval.session.base import method_options_of

__all__ = [
    "SCHEMA",
    "SCHEMA_VERSION",
    "check_results_path",
    "header",
    "own_files",
    "results",
    "results_path",
    "schema",
    "session_id",
    "write_results",
]

SCHEMA = "activeeval-results"
SCHEMA_VERSION = 1
#: The libraries whose versions a results file records (those installed).
DEPENDENCIES = ("numpy", "scipy", "pandas", "typer", "rich", "threadpoolctl", "pyarrow", "matplotlib", "lm-eval",
                "inspect-ai")
LEVEL = 0.95


def schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a results file."""
    text = resources.files("activeeval").joinpath("schemas").joinpath("results.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def session_id(settings: dict[str, Any]) -> str:
    """A stable id of a session: a hash of the settings written at its creation (they never change)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


def _versions() -> dict[str, Any]:
    from importlib import metadata  # (20-30 ms: imported by the commands that write a header)

    from activeeval import __version__

    deps: dict[str, str] = {}
    for name in DEPENDENCIES:
        try:
            deps[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {"version": __version__, "python": platform.python_version(), "platform": sys.platform,
            "dependencies": deps}


def _number(x: Any) -> float | None:
    """A finite float, or None (JSON has no NaN)."""
    try:
        value = float(x)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _plain(value: Any) -> Any:
    """JSON-ready: numpy scalars as numbers, NaN/inf as None, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def header(session: Any) -> dict[str, Any]:
    """What a session is: schema, versions, the session, method and options, seed, reference, stopping rule.

    The same for the results file and ``session status --json``; it reads the stored settings (and, for the
    reference's models, the rebuilt method), never the scores.
    """
    st = session.settings
    kw = st["method_kwargs"]
    ref, source = st["reference"], st["reference_source"]
    state = session.method if session.KIND != "rank" else next(iter(session.methods.values()), None)
    models = getattr(getattr(state, "reference", None), "model_ids", None)
    out: dict[str, Any] = {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "activeeval": _versions(),
        "session": {"file": str(session.path), "id": session_id(st), "kind": st.get("kind", "single"),
                    "created": st.get("created"), "created_with": st.get("library_version")},
        "label": st.get("label"),
        "method": {"name": st["method"], "spec": st.get("method_spec", st["method"]),
                   "options": _plain({k: v for k, v in method_options_of(st).items() if k != "seed"})},
        "seed": kw.get("seed"),
        "reference": {
            "name": ref.get("name"),
            "source": _plain(source),
            "fingerprint": ref.get("fingerprint"),
            "n_models": ref.get("n_models"),
            "n_items": ref.get("n_items"),
            "kind": ref.get("kind"),
            "score_range": _plain(ref.get("score_range")),
            "model_ids_sha": ref.get("model_ids_sha"),
            "item_ids_sha": ref.get("item_ids_sha"),
            "missing": st.get("missing", "models"),
            # the models the method used (after --exclude-models and the missing-score policy)
            "models": list(models) if models is not None else None,
        },
    }
    if session.KIND != "rank":
        out["stopping_rule"] = {**session.stopping_settings, "level": LEVEL}
    return out


def _result(model: str | None, status: Any, observations: list[tuple[str, float]]) -> dict[str, Any]:
    d = status.to_dict()
    return {
        "model": model,
        "estimate": _number(d["estimate"]),
        "std": _number(d["std"]),
        "ci_low": _number(d["ci_low"]),
        "ci_high": _number(d["ci_high"]),
        "shift": _number(d["shift"]),
        "level": LEVEL,
        "n_used": d["n_used"],
        "n_items": d["n_items"],
        "fraction_used": d["n_used"] / d["n_items"] if d["n_items"] else None,
        "stopped": d["stop"],
        "stop_reason": d["stop_reason"],
        "conditions": _plain(d["conditions"]),
        "notes": d["notes"],
        "pending": d["pending"],
        "samples": [{"item_id": iid, "score": score} for iid, score in observations],
    }


def results(session: Any, scorer: dict[str, Any] | None = None) -> dict[str, Any]:
    """The results document of an evaluation session (one model, or each target of a multi-target one).

    ``scorer`` describes what scored the items (e.g. the harness and its options), when known.
    """
    if session.KIND == "rank":
        raise ConfigurationError(
            f"{str(session.path)!r} is a ranking session; results files are for evaluation sessions (its status "
            "shows the ranking)")
    status = session.status()
    if session.KIND == "multi":
        per = [_result(t, status.targets[t], [(iid, s) for tt, iid, s in session.observations if tt == t])
               for t in session.targets]
    else:
        per = [_result(session.label, status, list(session.observations))]
    return {
        **header(session),
        "written": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "scorer": _plain(scorer) if scorer else None,
        "stopped": status.stop,
        "stop_reason": status.stop_reason,
        "results": per,
    }


def results_path(session_path: str | os.PathLike[str], output_path: str | os.PathLike[str] | None = None) -> Path:
    """Where the results of the session at ``session_path`` go.

    ``output_path`` a ``.json`` file: there; a folder: ``results.json`` in it; None: beside the session file,
    its name with ``.results.json`` (``run.aeval`` → ``run.results.json``).
    """
    if output_path is not None:
        out = Path(output_path).expanduser()
        return out if out.suffix == ".json" else out / "results.json"
    p = Path(session_path)
    return p.with_name(f"{p.stem}.results.json")


def _same_session(path: Path, sid: str) -> bool:
    """Whether ``path`` is a results file of the session ``sid`` (which its newer results may replace)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("schema") == SCHEMA and (data.get("session") or {}).get("id") == sid


def check_results_path(session: Any, out: str | os.PathLike[str], *, overwrite: bool = False) -> bool:
    """Check, before long work, that the results may be written to ``out``; whether that replaces a file.

    An existing file may be replaced when it holds this session's earlier results, or with ``overwrite``;
    the session file and its reference never (:mod:`activeeval._files`).
    """
    path = Path(out).expanduser()
    allowed = overwrite or (path.is_file() and _same_session(path, session_id(session.settings)))
    check_output(path, overwrite=allowed, protected=own_files(session), what="results file")
    return allowed


def write_results(session: Any, out: str | os.PathLike[str], *, overwrite: bool = False,
                  scorer: dict[str, Any] | None = None) -> Path:
    """Write :func:`results` to ``out`` (a ``.json`` file) and return its path (see :func:`check_results_path`)."""
    allowed = check_results_path(session, out, overwrite=overwrite)
    text = json.dumps(results(session, scorer), indent=2, ensure_ascii=False) + "\n"
    with atomic_output(out, overwrite=allowed, protected=own_files(session), what="results file") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out).expanduser()


def own_files(session: Any) -> list[Any]:
    """The session file and the reference file(s) it reads: never overwritten by what it writes."""
    source = session.settings.get("reference_source", {})
    override = getattr(session, "_override", None)  # `--reference` given when opening
    return [session.path, source.get("path") if source.get("type") == "file" else None,
            override if isinstance(override, (str, os.PathLike)) else None]
