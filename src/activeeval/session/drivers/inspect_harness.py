"""Inspect AI in the loop: score exactly the samples a session asks for.

:class:`InspectHarness` checks the task once (``inspect_ai.eval(...,
run_samples=False)`` into a temporary folder: the task loads, its sample ids
are known) and, for each batch, calls ``inspect_ai.eval(task, model=<the
model>, sample_id=[the batch's ids], ...)`` with ``fail_on_error=False`` (a
sample that fails is reported on that sample, the others are scored), then
reads each sample's score from the returned log exactly as ``reference
build --from inspect`` reads a log file
(:func:`activeeval.data.adapters.inspect_eval.scores_from_samples`: the
chosen scorer, C/I/P/N mapped to numbers, epochs averaged).

Item ids are Inspect sample ids (as text), which is what
:func:`activeeval.data.adapters.reference_from_inspect` gives a reference
built from other models' logs of the same task.

When ranking several models (or evaluating several targets), ``{model}`` in
the model name or a model argument is replaced by each model's id; without
``model`` the id is the Inspect model itself (``openai/gpt-4o``). Each model
is created once (``inspect_ai.model.get_model``) and kept.

Needs ``pip install "activeeval[inspect]"``.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

from activeeval._threads import user_threads
from activeeval.data.adapters.inspect_eval import (
    INSTALL_HINT,
    SampleScores,
    parse_value_map,
    scores_from_samples,
)
from activeeval.exceptions import ActiveEvalError, ConfigurationError, ScorerError, option, template_of
from activeeval.session.drivers.runner import MODEL_PLACEHOLDER, Interrupted

__all__ = ["InspectHarness", "import_inspect", "parse_args"]

_GLOB = re.compile(r"([*?\[])")  # Inspect matches sample ids with fnmatch: these characters are escaped


def import_inspect() -> Any:
    """The ``inspect_ai`` module, or a ConfigurationError saying how to install it."""
    try:
        import inspect_ai
        import inspect_ai.model
    except ImportError as exc:
        raise ConfigurationError(
            f"the Inspect harness needs inspect-ai ({exc}); install it with: {INSTALL_HINT}") from exc
    return inspect_ai


def parse_args(pairs: Sequence[str] | Mapping[str, Any] | None, name: str) -> dict[str, str]:
    """``["k=v", ...]`` (the option ``name``: ``model_args`` or ``task_args``) as ``{k: raw v}``; values are
    parsed later."""
    if pairs is None:
        return {}
    if isinstance(pairs, Mapping):
        return {str(k): v for k, v in pairs.items()}
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            example = option(name, "['temperature=0']", "temperature=0", key=f"inspect.{name}")
            raise ConfigurationError(f"{option(name, key=f'inspect.{name}')} takes KEY=VALUE, got {pair!r} "
                                     f"(e.g. {example})")
        out[key.strip().replace("-", "_")] = value
    return out


def _value(raw: Any) -> Any:
    """A KEY=VALUE argument's value as Inspect's own command line reads it: YAML, a comma list a list."""
    if not isinstance(raw, str):
        return raw
    import yaml  # a dependency of inspect-ai

    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw
    if isinstance(value, str) and "," in value:
        return value.split(",")
    return value


def _plain(message: object) -> str:
    """Inspect's messages carry Rich markup ([bold]...[/bold]): the plain text, on one line."""
    from rich.text import Text

    try:
        text = Text.from_markup(str(message)).plain
    except Exception:
        text = str(message)
    return " ".join(text.split())


def _selector(item_id: str) -> str:
    return _GLOB.sub(r"[\1]", item_id)


def _key(sample_id: Any) -> str:
    """How Inspect compares sample ids: digit strings as integers (so '7' and 7 are one id)."""
    text = str(sample_id)
    return str(int(text)) if text.isdigit() else text


class InspectHarness:
    """Scores batches of samples of one Inspect task with one (or, ranking, several) models.

    Parameters
    ----------
    task : str
        The Inspect task: ``file.py@name``, ``file.py`` (its only task), or a
        registered task (``inspect_evals/gpqa_diamond``): ``--task``.
    model : str, optional
        The Inspect model, e.g. ``openai/gpt-4o`` or ``mockllm/model``:
        ``--model``. When ranking, ``{model}`` is replaced by each model's
        id; omitted, the id is the model.
    model_args, task_args : mapping or ``["k=v", ...]``
        Model and task arguments (``--model-arg``, ``--task-arg``; Inspect's
        ``-M`` and ``-T``), values read as YAML as Inspect does.
    score_name : str, optional
        The scorer whose score to record, or ``scorer/key`` for one value of
        a scorer with several; default: the task's only scorer.
    value_map : mapping or str, optional
        Numbers for string score values over Inspect's (C=1, P=0.5, I=N=0).
    epochs : int, optional
        Runs per sample (their scores are averaged); default: the task's.
    log_dir : str, optional
        Where Inspect writes its logs; default: Inspect's own
        (``$INSPECT_LOG_DIR``, else ``./logs``).
    """

    def __init__(
        self,
        task: str,
        model: str | None = None,
        *,
        model_args: Sequence[str] | Mapping[str, Any] | None = None,
        task_args: Sequence[str] | Mapping[str, Any] | None = None,
        score_name: str | None = None,
        value_map: Mapping[str, float] | str | None = None,
        epochs: int | None = None,
        log_dir: str | None = None,
        needs_model: bool = False,
    ) -> None:
        if not task:
            raise ConfigurationError(
                f"the Inspect harness needs {option('task')} (the Inspect task to score), e.g. "
                f"{option('task', repr('quiz.py@quiz'), 'quiz.py@quiz')}")
        if needs_model and model is None:
            model = MODEL_PLACEHOLDER
        if not model:
            raise ConfigurationError(f"the Inspect harness needs {option('model')} (the Inspect model), e.g. "
                                     f"{option('model', repr('openai/gpt-4o'), 'openai/gpt-4o')}")
        self.model_args = parse_args(model_args, "model_args")
        self.task_args = {k: _value(v) for k, v in parse_args(task_args, "task_args").items()}
        templated = MODEL_PLACEHOLDER in model or any(MODEL_PLACEHOLDER in str(v) for v in self.model_args.values())
        if needs_model and not templated:
            raise ConfigurationError(
                f"{option('model', repr(model), repr(model))} has no {MODEL_PLACEHOLDER} placeholder; each model's id "
                f"is passed there (drop {option('model')} to use the ids as Inspect models, e.g. "
                f"{option('models', repr('openai/gpt-4o,openai/gpt-4o-mini'), 'openai/gpt-4o,openai/gpt-4o-mini')})")
        if epochs is not None and (isinstance(epochs, bool) or int(epochs) != epochs or epochs < 1):
            raise ConfigurationError(f"{option('epochs')} must be a positive integer, got {epochs!r}")
        self.task, self.model, self.score_name = task, model, score_name
        self.value_map = parse_value_map(value_map)
        self.epochs, self.log_dir = epochs, log_dir
        self._models: dict[str, Any] = {}
        self._inspect = import_inspect()
        logging.getLogger("inspect_ai").setLevel(logging.ERROR)  # its warnings would bury the progress
        self.task_name, self.sample_ids = self._load_task()  # a wrong --task fails here, before a session exists
        if not templated:
            self._model(None)  # so does a wrong --model

    # --------------------------------------------------------------- loading
    def _eval(self, **options: Any) -> Any:
        """``inspect_ai.eval`` of the task with the options every call shares: no display, no control server.

        Inspect (and a local model it runs) gets the BLAS threads it would have on its own: activeeval's limit
        (:mod:`activeeval._threads`) is lifted for the call, as for Inspect's model loading (:meth:`_model`).
        """
        with user_threads():
            return self._inspect.eval(self.task, task_args=self.task_args, display="none", ctl_server=False,
                                      score_display=False, **options)

    def _load_task(self) -> tuple[str, dict[str, Any]]:
        """The task's name and its sample ids (by :func:`_key`), from a run of no samples into a scratch folder."""
        scratch = tempfile.mkdtemp(prefix="activeeval-inspect-")
        try:
            with _quiet():
                logs = self._eval(model=None, run_samples=False, log_dir=scratch)
        except (KeyboardInterrupt, ActiveEvalError):
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"Inspect could not load task {self.task!r}: {_plain(exc)}; give {option('task')} as FILE.py@TASK "
                "(a task file) or a registered task name, and its arguments with "
                f"{option('task_args', repr('KEY=VALUE'), 'KEY=VALUE', key='inspect.task_args')}") from exc
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        if not logs:  # Ctrl-C while the task loaded
            raise KeyboardInterrupt
        ids = logs[0].eval.dataset.sample_ids or []
        return str(logs[0].eval.task), {_key(i): i for i in ids}

    def _model(self, model_id: str | None) -> Any:
        name = self.model if model_id is None else self.model.replace(MODEL_PLACEHOLDER, model_id)
        args = {k: _value(v.replace(MODEL_PLACEHOLDER, model_id) if model_id is not None and isinstance(v, str) else v)
                for k, v in self.model_args.items()}
        key = repr((name, sorted(args.items(), key=lambda kv: kv[0])))
        if key not in self._models:
            from inspect_ai.model import get_model

            try:
                with _quiet(), user_threads():
                    self._models[key] = get_model(name, **args)
            except (KeyboardInterrupt, ActiveEvalError):
                raise
            except Exception as exc:
                raise ConfigurationError(
                    f"Inspect could not create model {name!r}"
                    + (f" with {option('model_args', key='inspect.model_args')} {args}" if args else "")
                    + f": {_plain(exc)}; give {option('model')} as PROVIDER/MODEL (e.g. openai/gpt-4o, mockllm/model) "
                    "and its arguments with "
                    + option("model_args", repr("KEY=VALUE"), "KEY=VALUE", key="inspect.model_args")) from exc
        return self._models[key]

    # --------------------------------------------------------------- scoring
    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        """Run Inspect on exactly these samples; one score (or ScorerError) per item, in order."""
        of = "" if model is None else f" for model {model!r}"
        out: dict[str, float | ScorerError] = {}
        wanted: list[str] = []
        for iid in item_ids:
            if _key(iid) in self.sample_ids:
                wanted.append(iid)
                continue
            examples = ", ".join(repr(str(i)) for i in list(self.sample_ids.values())[:3])
            out[iid] = ScorerError(
                f"Inspect task {self.task_name!r} has no sample {iid!r} (its ids: {examples}, ...); the reference's "
                "item ids must be the task's sample ids: build it with "
                "activeeval.data.adapters.inspect_eval.reference_from_inspect(LOGS) from logs of this task (with the "
                f"same {option('task_args', key='inspect.task_args')})")
        cancelled = False
        if wanted:
            try:
                lm = self._model(model)
            except ConfigurationError as exc:
                return [ScorerError(template_of(exc))] * len(item_ids)
            cancelled = self._run(wanted, lm, of, out)
        if cancelled:
            # Ctrl-C: Inspect cancelled the run. Whatever it returned scored is recorded by the runner, which then
            # stops as on any interrupt; the rest of the batch stays pending for the next run.
            raise Interrupted([v if isinstance(v := out.get(iid), float) else None for iid in item_ids])
        return [out[iid] for iid in item_ids]

    def _run(self, wanted: list[str], lm: Any, of: str, out: dict[str, float | ScorerError]) -> bool:
        """Score ``wanted`` into ``out``; True if Inspect was cancelled (Ctrl-C) on the way."""
        shown = f"samples {wanted[:10]}{' ...' if len(wanted) > 10 else ''} of task {self.task_name!r}{of}"
        options = {k: v for k, v in (("epochs", self.epochs), ("log_dir", self.log_dir)) if v is not None}
        try:
            with _quiet():
                logs = self._eval(model=lm, sample_id=[_selector(i) for i in wanted], fail_on_error=False, **options)
        except (KeyboardInterrupt, ActiveEvalError):
            raise
        except Exception as exc:
            err = ScorerError(f"Inspect failed on {shown}: {type(exc).__name__}: {_plain(exc)}; fix the task or the "
                              "model, then re-run the same command (the samples stay pending)")
            out.update(dict.fromkeys(wanted, err))
            return False
        if not logs:  # on Ctrl-C Inspect cancels, writes the cancelled run's log into --log-dir, and returns none
            return True
        (log,) = logs
        where = f"Inspect log {log.location}" if getattr(log, "location", None) else f"Inspect task {self.task_name!r}"
        samples = [SampleScores.of(s) for s in (log.samples or [])]
        try:
            scores, errors = scores_from_samples(samples, where, self.score_name, self.value_map)
        except ActiveEvalError as exc:
            out.update(dict.fromkeys(wanted, ScorerError(template_of(exc))))
            return False
        by_key = {_key(i): i for i in scores}
        failed = {_key(i): msg for i, msg in errors.items()}
        for iid in wanted:
            k = _key(iid)
            if k in by_key:
                out[iid] = scores[by_key[k]]
            elif k in failed:
                out[iid] = ScorerError(
                    f"Inspect sample {iid!r} of task {self.task_name!r}{of} failed: {_plain(failed[k])} (see {where}); "
                    "the other samples' scores are recorded: fix the cause and re-run the same command to retry it")
            else:
                status = getattr(log, "status", "?")
                why = _plain(log.error.message) if getattr(log, "error", None) is not None else f"status {status}"
                out[iid] = ScorerError(f"Inspect returned no sample {iid!r} of task {self.task_name!r}{of} ({why}); "
                                       "re-run the same command to retry it")
        return getattr(log, "status", None) == "cancelled"

    def stop(self) -> None:
        """Nothing to stop: Inspect runs in this process, and Ctrl-C interrupts it there."""


@contextlib.contextmanager
def _quiet():
    """Inspect prints to stdout at times (e.g. a task's print()); stdout is the user's (e.g. --json)."""
    import io
    from contextlib import redirect_stdout

    with redirect_stdout(io.StringIO()):
        yield
