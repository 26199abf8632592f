"""HELM per-instance statistics.

``helm-run`` writes one folder per run,
``benchmark_output/runs/<suite>/<run name>/`` (run names look like
``mmlu:subject=anatomy,method=multiple_choice_joint,model=openai_gpt2``),
holding ``run_spec.json`` (``adapter_spec.model`` names the model) and
``per_instance_stats.json``: a list with one entry per (instance,
perturbation, train trial)::

    [{"instance_id": "id12", "train_trial_index": 0,
      "stats": [{"name": {"name": "exact_match", "split": "test"},
                 "count": 1, "sum": 1.0, "sum_squared": 1.0,
                 "min": 1.0, "max": 1.0, "mean": 1.0, "variance": 0.0, "stddev": 0.0},
                ...]},
     {"instance_id": "id12", "perturbation": {"name": "robustness", ...}, ...}]

A stat's ``name`` may also carry ``sub_split`` and ``perturbation``. This
adapter reads the unperturbed entries (no ``perturbation`` on the entry or on
the stat name) and averages the ``mean`` of the chosen metric over train
trials, as HELM itself aggregates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from activeeval.data.adapters._common import ScoreFormat, matrix_from_rows, read_json, require_file, to_score
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, option

__all__ = ["helm_model_name", "read_helm_per_instance_stats", "reference_from_helm"]


def _stats_file(path: Path) -> Path:
    if path.is_dir():
        f = path / "per_instance_stats.json"
        if not f.is_file():
            raise DataFormatError(f"no per_instance_stats.json in HELM run folder {str(path)!r}")
        return f
    return path


def read_helm_per_instance_stats(
    path: str | os.PathLike[str],
    metric: str = "exact_match",
    *,
    split: str | None = None,
) -> dict[str, float]:
    """Per-instance scores of one HELM run.

    Parameters
    ----------
    path : path-like
        ``per_instance_stats.json`` or the run folder holding it.
    metric : str
        Stat name, e.g. ``"exact_match"``, ``"quasi_exact_match"``, ``"f1_score"``.
    split : str, optional
        Required when the file holds the metric for several splits
        (e.g. ``"valid"`` and ``"test"``).

    Returns
    -------
    dict of str to float
        ``instance_id`` → mean of the metric over train trials.
    """
    f = _stats_file(require_file(path, "HELM per-instance stats path"))
    data = read_json(f)
    if not isinstance(data, list):
        raise DataFormatError(f"{str(f)!r} is not a HELM per_instance_stats.json (expected a JSON list)")
    values: dict[tuple[str, str | None], list[float]] = {}
    names: set[str] = set()
    for pos, entry in enumerate(data):
        if not isinstance(entry, dict) or "instance_id" not in entry or "stats" not in entry:
            raise DataFormatError(
                f"{str(f)!r} entry {pos} has no instance_id/stats; is this a HELM per_instance_stats.json?"
            )
        if entry.get("perturbation"):
            continue
        for stat in entry["stats"]:
            sname = stat.get("name") or {}
            names.add(str(sname.get("name")))
            if sname.get("name") != metric or sname.get("perturbation"):
                continue
            if split is not None and sname.get("split") != split:
                continue
            if stat.get("count", 1) == 0 or "mean" not in stat:
                continue
            where = f"{str(f)!r} entry {pos} (instance {entry['instance_id']!r}, {metric})"
            values.setdefault((str(entry["instance_id"]), sname.get("split")), []).append(to_score(stat["mean"], where))
    if not values:
        raise DataFormatError(
            f"{str(f)!r} has no unperturbed stat {metric!r}"
            + (f" for split {split!r}" if split else "")
            + f"; stats present: {sorted(names)[:20]}"
        )
    splits = {s for _, s in values}
    if len(splits) > 1:
        raise DataFormatError(
            f"{str(f)!r} has {metric!r} for several splits {sorted(map(str, splits))}; choose one with "
            f"{option('split', '...', 'NAME')}"
        )
    return {iid: sum(v) / len(v) for (iid, _), v in values.items()}


def helm_model_name(run_dir: str | os.PathLike[str]) -> str:
    """``adapter_spec.model`` of ``run_spec.json``, else ``model=`` in the run folder's name."""
    d = Path(run_dir)
    if d.is_file():
        d = d.parent
    spec = d / "run_spec.json"
    if spec.is_file():
        data = read_json(spec)
        model = (data.get("adapter_spec") or {}).get("model") if isinstance(data, dict) else None
        if isinstance(model, str) and model:
            return model
    m = re.search(r"model=([^,]+)", d.name)
    return m.group(1) if m else d.name


def reference_from_helm(
    run_dirs: Iterable[str | os.PathLike[str]],
    metric: str = "exact_match",
    *,
    split: str | None = None,
    score_range: tuple[float, float] | None = (0.0, 1.0),
    name: str | None = None,
) -> ScoreMatrix:
    """A reference ScoreMatrix from several models' HELM runs of one scenario (one row per run)."""
    rows = [(helm_model_name(d), read_helm_per_instance_stats(d, metric, split=split)) for d in run_dirs]
    if not rows:
        raise ConfigurationError("reference_from_helm needs at least one run folder")
    return matrix_from_rows(rows, name=name, score_range=score_range)


FORMAT = ScoreFormat("helm", read_helm_per_instance_stats, frozenset({"metric", "split"}),
                     lambda p: (p.is_dir() and (p / "per_instance_stats.json").is_file())
                     or p.name.lower() == "per_instance_stats.json")
