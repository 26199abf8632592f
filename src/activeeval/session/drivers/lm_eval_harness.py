"""lm-evaluation-harness in the loop: score exactly the items a session asks for.

:class:`LmEvalHarness` loads the model once (``lm_eval.api.registry``) and,
for each batch, calls ``lm_eval.simple_evaluate(model=<the loaded LM>,
tasks=[task], samples={task: [doc ids]}, log_samples=True)`` (the
``samples=`` argument exists from lm-eval 0.4.8 on), then reads each
document's per-sample metric from the returned samples, exactly as
``record --from`` reads a ``--log_samples`` file
(:func:`activeeval.data.adapters.lm_eval.scores_from_samples`).

Item ids are lm-eval document ids (``"12"``, or ``"<task>/12"``), which is
what :func:`activeeval.data.adapters.reference_from_lm_eval` (``activeeval
reference build --from lm-eval``) gives a reference built from other models'
``--log_samples`` output of the same task.

In a ranking session the model arguments may contain ``{model}``, replaced
by each ranked model's id; each model is loaded on first use and kept.

lm-eval's own output (tables, progress bars, warnings, the ``git`` it runs)
goes nowhere unless ``verbose`` (then to stderr; stdout is never written).
With ``output_path`` (``--output_path DIR --log_samples``) every evaluated
document is also appended to lm-eval's own samples file,
``DIR/<model>/samples_<task>_<timestamp>.jsonl``, line for line as
``lm_eval --log_samples`` writes it, so what reads lm-eval's samples (``activeeval
reference build --from lm-eval``, ``session record --from``, lm-eval's own
tools) reads them.

Needs ``pip install "activeeval[lm-eval]"``.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from activeeval._threads import user_threads
from activeeval.data.adapters.lm_eval import parse_doc_id, scores_from_samples
from activeeval.exceptions import ActiveEvalError, ConfigurationError, ScorerError, StorageError, option, template_of
from activeeval.session.drivers.harness_output import harness_output
from activeeval.session.drivers.runner import MODEL_PLACEHOLDER

__all__ = ["LmEvalHarness", "import_lm_eval"]

INSTALL_HINT = 'pip install "activeeval[lm-eval]"'


def import_lm_eval() -> Any:
    """The ``lm_eval`` module, or a ConfigurationError saying how to install it."""
    try:
        import lm_eval
        import lm_eval.api.registry
        from lm_eval.tasks import TaskManager  # noqa: F401
    except ImportError as exc:
        raise ConfigurationError(
            f"the lm-eval harness needs lm-evaluation-harness ({exc}); install it with: {INSTALL_HINT}"
        ) from exc
    if "samples" not in inspect.signature(lm_eval.simple_evaluate).parameters:
        raise ConfigurationError(
            f"the lm-eval harness needs lm-eval >= 0.4.8 (simple_evaluate(samples=...)); upgrade it: {INSTALL_HINT}"
        )
    return lm_eval


class LmEvalHarness:
    """Scores batches of documents of one lm-eval task with one (or, ranking, several) loaded models.

    Parameters
    ----------
    model : str
        lm-eval model type (``hf``, ``vllm``, ``dummy``, ...): ``--model``.
    model_args : str
        ``--model_args`` of lm-eval, e.g. ``"pretrained=org/name,dtype=float16"``;
        in a ranking session ``{model}`` is replaced by the ranked model's id.
    task : str
        The lm-eval task (one task; its documents are the reference's items).
    metric : str, optional
        Per-sample metric to record (``acc``, ``exact_match``, ...); default:
        the task's only metric.
    filter : str, optional
        The filter whose results to record, for tasks with several.
    include_path : sequence of str, optional
        Folders of custom task YAML files (lm-eval's ``--include_path``).
    num_fewshot, batch_size, device, gen_kwargs, apply_chat_template
        As lm-eval's options of the same names.
    verbose : bool
        Show lm-eval's output (on stderr); otherwise it is silenced.
    output_path : path-like, optional
        Keep every evaluated document in lm-eval's samples file under this
        folder (``--output_path DIR --log_samples``); see :meth:`start_samples`.
    """

    def __init__(
        self,
        model: str,
        model_args: str = "",
        task: str = "",
        *,
        metric: str | None = None,
        filter: str | None = None,
        include_path: Sequence[str] | None = None,
        num_fewshot: int | None = None,
        batch_size: int | str | None = None,
        device: str | None = None,
        gen_kwargs: str | None = None,
        apply_chat_template: bool = False,
        needs_model: bool = False,
        verbose: bool = False,
        output_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if not task:
            raise ConfigurationError(f"the lm-eval harness needs {option('task')} (the lm-eval task to score), e.g. "
                                     f"{option('task', repr('arc_easy'), 'arc_easy')}")
        if "," in task:
            raise ConfigurationError(
                f"{option('task', repr(task), repr(task))} names several tasks; a session evaluates one task (its "
                "documents are the reference's items): run one session per task")
        if not model:
            raise ConfigurationError(f"the lm-eval harness needs {option('model')} (the lm-eval model type), e.g. "
                                     f"{option('model', repr('hf'), 'hf')}")
        if needs_model and MODEL_PLACEHOLDER not in model_args:
            raise ConfigurationError(
                f"ranking with lm-eval: {option('model_args', repr(model_args), repr(model_args))} has no "
                f"{MODEL_PLACEHOLDER} placeholder; each ranked model's id is passed there, e.g. "
                f"{option('model_args', repr('pretrained={model}'), repr('pretrained={model}'))}"
            )
        self.model, self.model_args, self.task = model, model_args, task
        self.metric, self.filter = metric, filter
        self.include_path = list(include_path or [])
        self.options = {"num_fewshot": num_fewshot, "gen_kwargs": gen_kwargs,
                        "apply_chat_template": apply_chat_template}
        self.batch_size, self.device = batch_size, device
        self._lms: dict[str, Any] = {}
        self._tasks: Any = None
        self.verbose = bool(verbose)
        self.output_path = None if output_path is None else Path(output_path).expanduser()
        self._samples: dict[str, _SamplesFile] = {}
        self._stamp: str | None = None
        self._lm_eval = import_lm_eval()
        with self._output():
            self._model_class()  # a wrong --model or --task fails here, before a session is created or asked
            self._task_manager()

    def _output(self) -> Any:
        """lm-eval's output for the duration of a call: on stderr with ``verbose``, else nowhere."""
        return harness_output(self.verbose, loggers=("lm_eval",))

    def start_samples(self, created: str) -> None:
        """Log samples into the files of the session created at ``created`` (its ISO time, as stored).

        The timestamp of the file name is the session's creation time (in
        lm-eval's spelling), so a resumed run appends to the same file, and a
        document already there (scored again after a crash) is not written twice.
        """
        if self.output_path is not None:
            when = datetime.fromisoformat(created).astimezone(timezone.utc).replace(tzinfo=None)
            self._stamp = when.isoformat().replace(":", "-")

    def describe(self) -> dict[str, Any]:
        """The settings, for the journal's record of what scored the items."""
        return {"harness": "lm-eval", "model": self.model, "model_args": self.model_args, "task": self.task,
                "metric": self.metric, "filter": self.filter, "include_path": self.include_path,
                **{k: v for k, v in self.options.items() if v not in (None, False)}}

    # --------------------------------------------------------------- loading
    def _task_manager(self) -> Any:
        if self._tasks is None:
            from lm_eval.tasks import TaskManager

            paths = self.include_path if len(self.include_path) != 1 else self.include_path[0]
            if self.include_path:
                # Indexing lm-eval's own thousands of task files takes seconds: a custom task is looked
                # up in include_path alone first.
                tasks = TaskManager(include_path=paths, include_defaults=False)
                if self.task in tasks.all_tasks:
                    self._tasks = tasks
                    return tasks
            tasks = TaskManager(include_path=paths or None)
            if self.task not in tasks.all_tasks:
                import difflib

                close = difflib.get_close_matches(self.task, tasks.all_tasks, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise ConfigurationError(
                    f"lm-eval has no task {self.task!r}{hint}; for a custom task give the folder of its YAML file "
                    f"with {option('include_path', repr('DIR'), 'DIR')}"
                )
            self._tasks = tasks
        return self._tasks

    def _model_class(self) -> Any:
        from lm_eval.api.registry import get_model

        try:
            return get_model(self.model)
        except (KeyError, ValueError) as exc:
            raise ConfigurationError(
                f"lm-eval has no model type {self.model!r} ({exc}); e.g. {option('model', repr('hf'), 'hf')} "
                "(pip install 'lm-eval[hf]')"
            ) from exc

    def _lm(self, model_id: str | None) -> Any:
        args = self.model_args.replace(MODEL_PLACEHOLDER, model_id) if model_id is not None else self.model_args
        if args not in self._lms:
            cls = self._model_class()
            extra = {k: v for k, v in (("batch_size", self.batch_size), ("device", self.device)) if v is not None}
            try:
                self._lms[args] = cls.create_from_arg_string(args, extra)
            except ActiveEvalError:
                raise
            except Exception as exc:
                raise ConfigurationError(
                    f"lm-eval could not load model {self.model!r} with {option('model_args', repr(args), repr(args))}: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
        return self._lms[args]

    # --------------------------------------------------------------- scoring
    def score_many(self, item_ids: Sequence[str], model: str | None = None) -> list[float | ScorerError]:
        """Run lm-eval on exactly these documents; one score (or ScorerError) per item, in order.

        lm-eval runs with the BLAS threads it would have on its own: activeeval's limit
        (:mod:`activeeval._threads`) is lifted for the call.
        """
        with user_threads():
            return self._score_many(item_ids, model)

    def _score_many(self, item_ids: Sequence[str], model: str | None) -> list[float | ScorerError]:
        docs = [parse_doc_id(iid, self.task) for iid in item_ids]
        # Sorted: lm-eval 0.4.13 runs the selected documents in dataset order but labels them with the doc ids
        # in the order given, so an unsorted list would file each score under another document's id.
        wanted = sorted(set(docs))
        with self._output():
            lm = self._lm(model)
            tasks = self._task_manager()
            try:
                results = self._lm_eval.simple_evaluate(
                    model=lm, tasks=[self.task], samples={self.task: wanted}, task_manager=tasks, log_samples=True,
                    bootstrap_iters=0, **{k: v for k, v in self.options.items() if v is not None},
                )
            except (KeyboardInterrupt, ActiveEvalError):
                raise
            except Exception as exc:
                quiet = ("" if self.verbose
                         else f" (re-run with {option('verbose', 'True', '')} to see lm-eval's output)")
                err = ScorerError(
                    f"lm-eval failed on documents {docs[:10]}{' ...' if len(docs) > 10 else ''} of task "
                    f"{self.task!r}{'' if model is None else f' for model {model!r}'}: {type(exc).__name__}: "
                    f"{template_of(exc)}{quiet}"
                )
                return [err] * len(item_ids)
        try:
            samples = (results or {}).get("samples", {}).get(self.task, [])
            if self._stamp is not None:
                self._samples_file(model).append(samples)
            scores, bad = self._scores(samples)
        except ActiveEvalError as exc:  # e.g. a metric no document has
            return [ScorerError(template_of(exc))] * len(item_ids)
        except (AttributeError, TypeError, ValueError) as exc:  # samples not as lm-eval writes them
            err = ScorerError(f"lm-eval's samples of task {self.task!r} could not be read: {type(exc).__name__}: {exc}")
            return [err] * len(item_ids)
        out: list[float | ScorerError] = []
        for iid, doc in zip(item_ids, docs, strict=True):
            if doc in scores:
                out.append(scores[doc])
            elif doc in bad:
                out.append(ScorerError(f"lm-eval's score of item {iid!r} (task {self.task!r}): {bad[doc]}"))
            else:
                out.append(ScorerError(
                    f"lm-eval returned no sample for document {doc} of task {self.task!r} (item {iid!r}); "
                    "check that the reference's item ids are this task's doc ids"
                ))
        return out

    def _scores(self, samples: Sequence[Mapping[str, Any]]) -> tuple[dict[int, float], dict[int, Exception]]:
        """Each document's score, and the error of each document whose metric is absent or not a number."""
        plain = (  # metric values come back as numpy scalars (np.float64, np.bool_): plain numbers, as in a file
            {k: (v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v) for k, v in s.items()}
            for s in samples
        )
        bad: dict[str, Exception] = {}
        by_id = scores_from_samples(
            enumerate(plain), f"lm-eval task {self.task!r}", "sample", self.task, self.metric, self.filter,
            errors=bad,
        )
        return {int(k): v for k, v in by_id.items()}, {int(k): v for k, v in bad.items()}

    def _samples_file(self, model: str | None) -> _SamplesFile:
        """The samples file of ``model`` (the model arguments' model, as lm-eval names its folder)."""
        args = self.model_args.replace(MODEL_PLACEHOLDER, model) if model is not None else self.model_args
        if args not in self._samples:
            from lm_eval.loggers.evaluation_tracker import GeneralConfigTracker
            from lm_eval.utils import sanitize_model_name

            name = GeneralConfigTracker._get_model_name(args) or self.model  # lm-eval draws a random name here
            folder = self.output_path / sanitize_model_name(name)
            self._samples[args] = _SamplesFile(folder / f"samples_{self.task}_{self._stamp}.jsonl")
        return self._samples[args]

    def stop(self) -> None:
        """Nothing to stop: lm-eval runs in this process, and Ctrl-C interrupts it there."""


class _SamplesFile:
    """One lm-eval samples file, appended batch by batch; each (document, filter) once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: set[tuple[Any, Any]] = set()
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip():
                        obj = json.loads(line)
                        self._seen.add((obj.get("doc_id"), obj.get("filter")))

    def append(self, samples: Sequence[Mapping[str, Any]]) -> None:
        """Append the samples not in the file yet, each line as ``lm_eval --log_samples`` writes it."""
        from lm_eval.utils import handle_non_serializable, sanitize_list

        lines = []
        for original in samples:
            key = (original.get("doc_id"), original.get("filter"))
            if key in self._seen:
                continue
            sample = copy.copy(dict(original))
            # lm-eval's EvaluationTracker.save_results_samples, so its readers load the file as its own
            sample["arguments"] = {
                f"gen_args_{i}": {f"arg_{j}": tmp for j, tmp in enumerate(arg)}
                for i, arg in enumerate(sample.get("arguments", []))
            }
            sample["resps"] = sanitize_list(sample.get("resps", []))
            sample["filtered_resps"] = sanitize_list(sample.get("filtered_resps", []))
            sample["target"] = str(sample.get("target"))
            lines.append(json.dumps(sample, default=handle_non_serializable, ensure_ascii=False) + "\n")
            self._seen.add(key)
        if not lines:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.writelines(lines)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            raise StorageError(
                f"cannot append lm-eval's samples to {str(self.path)!r} ({exc.strerror or exc}); the scores of this "
                "batch are not recorded: free space or fix the folder, then re-run the same command") from exc
