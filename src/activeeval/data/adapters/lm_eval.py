"""lm-evaluation-harness ``--log_samples`` output.

``lm_eval --model ... --tasks TASK --output_path OUT --log_samples`` writes, per
model, a folder ``OUT/<model name with / replaced by __>/`` holding
``results_<timestamp>.json`` (aggregate metrics; ``model_name`` and
``config.model_args`` name the model) and one ``samples_<task>_<timestamp>.jsonl``
per task. Each line of a samples file is one document::

    {"doc_id": 0, "doc": {...}, "target": "...", "arguments": [...],
     "resps": [...], "filtered_resps": [...], "filter": "none",
     "metrics": ["acc", "acc_norm"], "doc_hash": "...", "acc": 1.0, "acc_norm": 0.0}

The per-document metric values sit at the top level of the line, under the
metric's name (``acc``, ``acc_norm``, ``exact_match``, ...). Tasks with several
filters (e.g. gsm8k's ``strict-match`` / ``flexible-extract``) write one line
per (document, filter); pick one with ``filter=``. Older harness versions omit
``filter``, ``metrics`` and the hashes.

Item ids are ``str(doc_id)`` by default; ``id_format="{task}/{doc_id}"`` keeps
documents of several tasks apart.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from activeeval.data.adapters._common import (
    ScoreFormat,
    iter_jsonl,
    matrix_from_rows,
    read_json,
    require_file,
    to_score,
)
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, DuplicateIdError, InvalidScoresError, option

__all__ = [
    "find_samples_files",
    "lm_eval_model_name",
    "parse_doc_id",
    "read_lm_eval_samples",
    "reference_from_lm_eval",
    "scores_from_samples",
]

# Keys of a samples line that are not per-document metrics.
_BOOKKEEPING = frozenset(
    {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
     "doc_hash", "prompt_hash", "target_hash"}
)
_SAMPLES_RE = re.compile(r"^samples_(?P<task>.+)_(?P<stamp>\d{4}-\d{2}-\d{2}T[\d\-.:]+)\.jsonl(\.gz)?$")


def _task_of(path: Path) -> str:
    m = _SAMPLES_RE.match(path.name)
    if m:
        return m.group("task")
    name = path.name.split(".jsonl")[0]
    return name[len("samples_"):] if name.startswith("samples_") else name


def find_samples_files(folder: str | os.PathLike[str], task: str | None = None) -> dict[str, Path]:
    """The newest ``samples_<task>_<timestamp>.jsonl`` of each task under ``folder`` (searched recursively)."""
    root = require_file(folder, "lm-eval output folder")
    found: dict[str, list[Path]] = {}
    for p in sorted(root.rglob("samples_*.jsonl*")):
        if p.name.endswith((".jsonl", ".jsonl.gz")):
            found.setdefault(_task_of(p), []).append(p)
    if not found:
        raise DataFormatError(
            f"no samples_<task>_<timestamp>.jsonl files under {str(root)!r}; run lm_eval with --log_samples "
            "and --output_path pointing there"
        )
    if task is not None:
        if task not in found:
            raise DataFormatError(
                f"no samples file for task {task!r} under {str(root)!r}; tasks found: {sorted(found)}"
            )
        found = {task: found[task]}
    # Timestamps sort lexicographically; a re-run of a task supersedes the earlier one.
    return {t: sorted(ps, key=lambda p: p.name)[-1] for t, ps in found.items()}


def scores_from_samples(
    samples: Iterable[tuple[Any, Mapping[str, Any]]],
    source: str,
    unit: str,
    task: str,
    metric: str | None,
    filter: str | None,
    id_format: str = "{doc_id}",
    errors: dict[str, Exception] | None = None,
) -> dict[str, float]:
    """Item id → score from lm-eval per-sample records (``(position, record)`` pairs).

    ``source`` names where the records come from and ``unit`` what a
    position is (``"line"`` of a file, ``"sample"`` of a run), for messages.

    ``metric`` None picks the only per-sample metric there is (an error lists
    them when there are several). Shared by the samples-file reader and the
    harness driver, which gets the same records from ``simple_evaluate``.
    With ``errors`` (a dict), a document whose metric is absent or not a
    number goes there (item id → the error) instead of raising, so the other
    documents' scores are kept.
    """
    rows: dict[tuple[Any, Any], tuple[Any, Mapping[str, Any]]] = {}
    filters: set[Any] = set()
    metrics_seen: set[str] = set()
    for pos, obj in samples:
        if "doc_id" not in obj:
            raise DataFormatError(
                f"{source} {unit} {pos} has no 'doc_id'; is this an lm-eval samples file (--log_samples)?"
            )
        filt = obj.get("filter")
        filters.add(filt)
        metrics_seen.update(k for k in obj if k not in _BOOKKEEPING and not str(k).startswith("_"))
        if filter is not None and filt != filter:
            continue
        key = (obj["doc_id"], filt)
        if key in rows:
            raise DuplicateIdError(
                f"{source} {unit} {pos}: doc_id {obj['doc_id']!r} appears twice"
                + (f" for filter {filt!r}" if filt is not None else "")
            )
        rows[key] = (pos, obj)
    if filter is not None and filter not in filters:
        raise DataFormatError(
            f"{source} has no lines with filter {filter!r}; filters present: {sorted(map(str, filters))}")
    if filter is None and len(filters) > 1:
        raise DataFormatError(
            f"{source} has several filters {sorted(map(str, filters))} (one line per document and filter); "
            f"choose one with {option('filter', '...', 'NAME')}"
        )
    if metric is None:
        if len(metrics_seen) != 1:
            raise DataFormatError(
                f"{source} has the metrics {sorted(metrics_seen)}; choose one with {option('metric', '...', 'NAME')}"
            )
        metric = next(iter(metrics_seen))
    if metric not in metrics_seen:  # a wrong metric: no document has it
        raise DataFormatError(
            f"{source} has no metric {metric!r} in any {unit}; metrics present: {sorted(metrics_seen)} (choose one "
            f"with {option('metric', '...', 'NAME')})"
        )
    out: dict[str, float] = {}
    for (doc_id, _), (pos, obj) in rows.items():
        iid = id_format.format(task=task, doc_id=doc_id)
        try:
            if metric not in obj:
                raise DataFormatError(
                    f"{source} {unit} {pos} has no metric {metric!r}; metrics present: "
                    f"{sorted(metrics_seen)} (choose one with {option('metric', '...', 'NAME')})"
                )
            out[iid] = to_score(obj[metric], f"{source} {unit} {pos} (doc_id {doc_id!r}, {metric})")
        except (DataFormatError, InvalidScoresError) as exc:
            if errors is None:
                raise
            errors[iid] = exc
    return out


def _read_file(path: Path, task: str, metric: str | None, filter: str | None, id_format: str) -> dict[str, float]:
    return scores_from_samples(iter_jsonl(path), repr(str(path)), "line", task, metric, filter, id_format)


def parse_doc_id(item_id: str, task: str) -> int:
    """The lm-eval document index of an item id (``"12"`` or ``"<task>/12"``, as the readers write them)."""
    text = str(item_id)
    if text.startswith(f"{task}/"):
        text = text[len(task) + 1:]
    try:
        doc = int(text)
    except ValueError:
        doc = -1
    if doc < 0 or str(doc) != text:
        raise ConfigurationError(
            f"item id {item_id!r} is not an lm-eval document id of task {task!r} (expected '12' or '{task}/12'); "
            "build the reference with activeeval.data.adapters.lm_eval.reference_from_lm_eval(...) so its item ids "
            "are doc ids"
        )
    return doc


def read_lm_eval_samples(
    path: str | os.PathLike[str],
    metric: str = "acc",
    *,
    task: str | None = None,
    filter: str | None = None,
    id_format: str | None = None,
) -> dict[str, float]:
    """One model's per-document scores from lm-eval ``--log_samples`` output.

    Parameters
    ----------
    path : path-like
        A ``samples_<task>_<timestamp>.jsonl`` file, or a folder searched
        recursively for them (the newest file of each task is used).
    metric : str
        The per-document metric key, e.g. ``"acc"``, ``"acc_norm"``,
        ``"exact_match"``. Booleans become 0/1.
    task : str, optional
        With a folder: only this task.
    filter : str, optional
        The filter whose lines to read when a task has several.
    id_format : str, optional
        Item id template with ``{task}`` and ``{doc_id}``; default
        ``"{doc_id}"`` for one task, ``"{task}/{doc_id}"`` for several.

    Returns
    -------
    dict of str to float
        Item id → score, in file order.
    """
    p = require_file(path, "lm-eval samples path")
    files = find_samples_files(p, task) if p.is_dir() else {task or _task_of(p): p}
    fmt = id_format or ("{doc_id}" if len(files) == 1 else "{task}/{doc_id}")
    if len(files) > 1 and "{task}" not in fmt:
        raise ConfigurationError(
            f"{len(files)} tasks found ({sorted(files)}) but id_format {fmt!r} has no {{task}}: doc ids repeat "
            "across tasks; choose one task or include {task} in the id format"
        )
    out: dict[str, float] = {}
    for t, f in files.items():
        out.update(_read_file(f, t, metric, filter, fmt))
    return out


def lm_eval_model_name(folder: str | os.PathLike[str]) -> str:
    """The model of an lm-eval output folder: ``model_name`` or ``pretrained=`` of its newest results file."""
    root = Path(folder)
    results = sorted(root.rglob("results_*.json"), key=lambda p: p.name)
    if results:
        data = read_json(results[-1])
        if isinstance(data, dict):
            if isinstance(data.get("model_name"), str) and data["model_name"]:
                return data["model_name"]
            args = (data.get("config") or {}).get("model_args")
            if isinstance(args, str):
                m = re.search(r"(?:^|,)\s*(?:pretrained|model)=([^,]+)", args)
                if m:
                    return m.group(1)
    # lm-eval names the folder after the model with "/" replaced by "__".
    return root.name.replace("__", "/")


def reference_from_lm_eval(
    folders: Iterable[str | os.PathLike[str]],
    task: str,
    metric: str = "acc",
    *,
    filter: str | None = None,
    score_range: tuple[float, float] | None = (0.0, 1.0),
    name: str | None = None,
) -> ScoreMatrix:
    """A reference ScoreMatrix from several models' lm-eval output folders.

    One row per folder (model named by :func:`lm_eval_model_name`), one
    column per document of ``task`` (item id ``str(doc_id)``); a document a
    model lacks is missing (NaN).
    """
    rows = []
    for folder in folders:
        scores = read_lm_eval_samples(folder, metric, task=task, filter=filter)
        rows.append((lm_eval_model_name(folder), scores))
    if not rows:
        raise ConfigurationError("reference_from_lm_eval needs at least one output folder")
    return matrix_from_rows(rows, name=name or task, score_range=score_range)


FORMAT = ScoreFormat("lm-eval", read_lm_eval_samples, frozenset({"metric", "task", "filter", "id_format"}),
                     lambda p: p.is_dir() or (p.name.lower().startswith("samples_") and ".jsonl" in p.name.lower()))
