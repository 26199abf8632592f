"""Inspect AI evaluation logs (``inspect eval`` / ``inspect_ai.eval``).

Inspect writes one log per (task, model) run, a ``.eval`` file (its own
zipped format, the default) or a ``.json`` file (``--log-format json``), read
here with Inspect's public reader (``inspect_ai.log``). A log's header names
the task (``eval.task``) and the model (``eval.model``, e.g.
``openai/gpt-4o``); each sample of it carries its ``id`` (a dataset sample
id, int or str), its ``epoch`` and ``scores``: one ``Score`` per scorer,
keyed by the scorer's name, whose ``value`` is a number, a boolean, a string
such as ``"C"`` (correct), ``"I"`` (incorrect), ``"P"`` (partial) or ``"N"``
(no answer), or a mapping of such values for a scorer with several.

Item ids are the sample ids as text (``str(id)``); a sample run for several
epochs scores the mean of its epochs' values. A sample that errored (no
score) is missing. Strings map to numbers as Inspect's own
``value_to_float`` maps them (C = 1, P = 0.5, I = N = 0, yes/true = 1,
no/false = 0, numeric text as its number), unless ``value_map`` says
otherwise (e.g. ``{"P": 0}`` to give partial answers no credit); any other
string is an error naming the value and the option, never a silent 0.

Reading a log needs ``inspect-ai`` (``pip install "activeeval[inspect]"``);
:func:`scores_from_samples` is the shared pure part, which
:class:`activeeval.session.drivers.inspect_harness.InspectHarness` also uses on the
samples ``inspect_ai.eval`` returns.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from activeeval.data.adapters._common import ScoreFormat, matrix_from_rows, require_file
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ActiveEvalError, ConfigurationError, DataFormatError, InvalidScoresError, option

__all__ = [
    "DEFAULT_VALUES",
    "INSTALL_HINT",
    "find_logs",
    "import_inspect_log",
    "parse_value_map",
    "read_inspect_log",
    "reference_from_inspect",
    "scores_from_samples",
    "to_number",
]

INSTALL_HINT = 'pip install "activeeval[inspect]"'
# Inspect's own value_to_float(): C(orrect) 1, P(artial) 0.5, I(ncorrect) and N(o answer) 0.
DEFAULT_VALUES: dict[str, float] = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
LOG_SUFFIXES = (".eval", ".json")
_NOT_LOGS = frozenset({"logs.json", "eval-set.json"})  # what Inspect also writes into a log folder


def import_inspect_log() -> Any:
    """``inspect_ai.log``, or a ConfigurationError saying how to install Inspect."""
    try:
        import inspect_ai.log as log
    except ImportError as exc:
        raise ConfigurationError(f"reading Inspect logs needs inspect-ai ({exc}); install it with: {INSTALL_HINT}") \
            from exc
    return log


def parse_value_map(text: str | Mapping[str, float] | None) -> dict[str, float]:
    """``"P=0,N=0"`` (or a mapping) as ``{value: number}``; ConfigurationError naming --value-map otherwise."""
    if text is None:
        return {}
    pairs: list[tuple[str, float | str]]
    if isinstance(text, Mapping):
        pairs = list(text.items())
    else:
        pairs = []
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            key, eq, number = part.partition("=")
            if not eq or not key.strip():
                raise ConfigurationError(
                    f"{option('value_map')} takes VALUE=NUMBER pairs separated by commas, e.g. 'P=0,N=0'; got "
                    f"{part!r}")
            pairs.append((key.strip(), number.strip()))
    out: dict[str, float] = {}
    for name, given in pairs:
        try:
            value = float(given)
        except (TypeError, ValueError):
            value = math.nan
        if isinstance(given, bool) or not math.isfinite(value):
            raise ConfigurationError(
                f"{option('value_map')}: {name!r} must map to a finite number, got {given!r} (e.g. 'P=0.5')")
        out[str(name)] = value
    return out


def to_number(value: Any, where: str, value_map: Mapping[str, float] | None = None, key: str | None = None) -> float:
    """An Inspect ``Score.value`` as a number (see the module docstring); InvalidScoresError naming the fix."""
    if isinstance(value, Mapping):
        if key is None:
            raise InvalidScoresError(
                f"{where}: the score has several values {sorted(map(str, value))}; choose one with "
                f"{option('score_name', repr('SCORER/KEY'), 'SCORER/KEY')}")
        if key not in value:
            raise InvalidScoresError(f"{where}: the score has no value {key!r}; values: {sorted(map(str, value))}")
        return to_number(value[key], f"{where} [{key}]", value_map)
    if key is not None:
        raise InvalidScoresError(
            f"{where}: the score has one value, not several; drop '/{key}' from {option('score_name')}")
    mapping = {**DEFAULT_VALUES, **(value_map or {})}
    if isinstance(value, str):
        if value in mapping:
            return float(mapping[value])
        if value.strip().lower() in _WORDS:
            return _WORDS[value.strip().lower()]
        try:
            number = float(value)
        except ValueError:
            raise InvalidScoresError(
                f"{where}: score value {value!r} is not a number nor one of {', '.join(mapping)}; give it a number "
                f"with {option('value_map', repr(f'{value}=1'), repr(f'{value}=1'))}") from None
        value = number
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)) and math.isfinite(float(value)):
        return float(value)
    raise InvalidScoresError(
        f"{where}: score value {value!r} is not a number (expected a number, C/I/P/N or true/false)")


@dataclass(frozen=True)
class SampleScores:
    """One sample (one epoch) of a log: its id, epoch, scores ``{scorer: value}`` and error (None if it ran)."""

    id: Any
    epoch: int
    scores: Mapping[str, Any]
    error: str | None = None

    @classmethod
    def of(cls, sample: Any) -> SampleScores:
        """From an Inspect ``EvalSample`` or ``EvalSampleSummary``."""
        error = getattr(sample, "error", None)
        if error is not None and not isinstance(error, str):
            error = getattr(error, "message", None) or str(error)
        scores = {name: getattr(score, "value", score) for name, score in (sample.scores or {}).items()}
        return cls(sample.id, int(getattr(sample, "epoch", 1) or 1), scores, error)


def split_score_name(score_name: str | None) -> tuple[str | None, str | None]:
    """``"scorer/key"`` → (scorer, key); ``"scorer"`` → (scorer, None)."""
    if score_name is None:
        return None, None
    scorer, slash, key = score_name.partition("/")
    return scorer, (key if slash else None)


def scores_from_samples(
    samples: Iterable[SampleScores],
    source: str,
    score_name: str | None = None,
    value_map: Mapping[str, float] | None = None,
) -> tuple[dict[str, float], dict[str, str]]:
    """(item id → mean over its epochs, item id → error) from a log's samples.

    ``score_name`` None picks the only scorer there is (an error lists them
    when there are several); ``"scorer/key"`` picks one value of a scorer
    with several. A sample with an error or without this score in any epoch
    goes to the errors, not the scores.
    """
    scorer, key = split_score_name(score_name)
    rows = list(samples)
    names = sorted({name for s in rows for name in s.scores})
    if scorer is None:
        if len(names) > 1:
            raise DataFormatError(
                f"{source} has the scorers {names}; choose one with {option('score_name', '...', 'NAME')}")
        scorer = names[0] if names else None
    elif rows and names and scorer not in names:
        raise DataFormatError(
            f"{source} has no scorer {scorer!r}; scorers present: {names} (choose one with "
            f"{option('score_name', '...', 'NAME')})")
    values: dict[str, list[float]] = {}
    errors: dict[str, str] = {}
    for s in rows:
        iid = str(s.id)
        if s.error is not None or scorer is None or scorer not in s.scores:
            errors[iid] = s.error or f"no {scorer or 'score'!r} score"
            continue
        where = f"{source} sample {iid!r} (epoch {s.epoch}, scorer {scorer!r})"
        values.setdefault(iid, []).append(to_number(s.scores[scorer], where, value_map, key))
    scores = {iid: math.fsum(v) / len(v) for iid, v in values.items() if iid not in errors}
    return scores, errors


# ------------------------------------------------------------------ log files
def find_logs(path: str | os.PathLike[str]) -> list[Path]:
    """A log file, or the ``.eval``/``.json`` logs under a folder (recursively), sorted by name."""
    p = require_file(path, "Inspect log path")
    if p.is_file():
        return [p]
    found = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in LOG_SUFFIXES
                   and not any(part.startswith(".") for part in f.relative_to(p).parts)
                   and f.name not in _NOT_LOGS)
    if not found:
        raise DataFormatError(f"no Inspect logs (*.eval, *.json) under {str(p)!r}; run `inspect eval` with "
                              "--log-dir pointing there")
    return found


@dataclass(frozen=True)
class _Log:
    path: Path
    task: str
    model: str
    created: str
    samples: tuple[SampleScores, ...]


def _read_log(path: Path) -> _Log:
    log = import_inspect_log()
    try:
        header = log.read_eval_log(str(path), header_only=True)
        summaries = log.read_eval_log_sample_summaries(str(path))
    except ActiveEvalError:
        raise
    except Exception as exc:
        raise DataFormatError(f"{str(path)!r} is not a readable Inspect log ({type(exc).__name__}: {exc})") from exc
    # Inspect writes samples as they finish (concurrently, so in no fixed order): put them in the task's dataset
    # order, so a reference built from the same logs has the same item order (and fingerprint) every time.
    dataset = getattr(header.eval, "dataset", None)
    position = {str(i): k for k, i in enumerate(getattr(dataset, "sample_ids", None) or ())}
    samples = sorted((SampleScores.of(s) for s in summaries),
                     key=lambda smp: (position.get(str(smp.id), len(position)), smp.epoch or 0))
    return _Log(path, str(header.eval.task), str(header.eval.model), str(header.eval.created or ""), tuple(samples))


def _only(task: str | None, logs: list[_Log], what: str) -> list[_Log]:
    tasks = sorted({lg.task for lg in logs})
    if task is not None:
        chosen = [lg for lg in logs if lg.task == task]
        if not chosen:
            raise DataFormatError(f"no log of task {task!r} in {what}; tasks found: {tasks}")
        return chosen
    if len(tasks) > 1:
        raise DataFormatError(
            f"{what} holds logs of several tasks {tasks}; choose one with {option('task', '...', 'NAME')}")
    return logs


def _model_scores(logs: list[_Log], score_name: str | None, value_map: Mapping[str, float] | None
                  ) -> dict[str, float]:
    """One model's scores from its logs of one task: a sample in several logs takes the newest log's score."""
    out: dict[str, float] = {}
    for lg in sorted(logs, key=lambda lg: (lg.created, lg.path.name)):
        scores, _ = scores_from_samples(lg.samples, repr(str(lg.path)), score_name, value_map)
        out.update(scores)
    return out


def read_inspect_log(
    path: str | os.PathLike[str],
    score_name: str | None = None,
    *,
    task: str | None = None,
    value_map: Mapping[str, float] | str | None = None,
) -> dict[str, float]:
    """One model's per-sample scores from Inspect logs.

    Parameters
    ----------
    path : path-like
        A ``.eval`` or ``.json`` log, or a folder of logs of one model (its
        logs of several runs are merged; a sample in several takes the
        newest log's score).
    score_name : str, optional
        The scorer to read (``"match"``), or ``"scorer/key"`` for one value of
        a scorer with several; default: the only scorer.
    task : str, optional
        The task, when the logs hold several.
    value_map : mapping or str, optional
        Numbers for string values, over Inspect's defaults (C=1, P=0.5,
        I=0, N=0), e.g. ``{"P": 0}`` or ``"P=0"``.

    Returns
    -------
    dict of str to float
        Sample id (as text) → score, the mean over the sample's epochs.
    """
    logs = _only(task, [_read_log(f) for f in find_logs(path)], repr(str(path)))
    models = sorted({lg.model for lg in logs})
    if len(models) > 1:
        raise DataFormatError(
            f"{str(path)!r} holds logs of several models {models}; give one model's logs "
            "(activeeval.data.adapters.inspect_eval.reference_from_inspect(LOGS) takes several models)")
    return _model_scores(logs, score_name, parse_value_map(value_map))


def reference_from_inspect(
    paths: Iterable[str | os.PathLike[str]],
    score_name: str | None = None,
    *,
    task: str | None = None,
    value_map: Mapping[str, float] | str | None = None,
    score_range: tuple[float, float] | None = (0.0, 1.0),
    name: str | None = None,
) -> ScoreMatrix:
    """A reference ScoreMatrix from Inspect logs of several models (files or folders, in any mix).

    One row per model (``eval.model`` of its logs, in first-seen order), one
    column per sample id; a sample a model lacks (not run, or errored) is
    missing (NaN), as with the other adapters. Logs of one task only (choose
    it with ``task=`` when there are several).
    """
    files = [f for p in paths for f in find_logs(p)]
    if not files:
        raise ConfigurationError("reference_from_inspect needs at least one Inspect log or folder of logs")
    logs = _only(task, [_read_log(f) for f in files], "the logs given")
    by_model: dict[str, list[_Log]] = {}
    for lg in logs:
        by_model.setdefault(lg.model, []).append(lg)
    value_numbers = parse_value_map(value_map)
    rows = [(model, _model_scores(group, score_name, value_numbers)) for model, group in by_model.items()]
    return matrix_from_rows(rows, name=name or logs[0].task, score_range=score_range)


FORMAT = ScoreFormat("inspect", read_inspect_log, frozenset({"score_name", "task", "value_map"}),
                     lambda p: p.suffix == ".eval")
