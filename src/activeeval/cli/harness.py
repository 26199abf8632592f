"""Options of the scorers `run` and `rank` drive: a command, lm-evaluation-harness, or Inspect AI."""

from __future__ import annotations

from typing import Any

import typer

from activeeval.cli.session_core import SCORE_NAME, VALUE_MAP
from activeeval.exceptions import ConfigurationError

SCORER = typer.Option(
    None, "--scorer",
    help="Command scoring one item, with {item_id} (and {model} when ranking); its last output line is the score.",
)
# The number is the runner's DEFAULT_TIMEOUT (not imported here: the CLI starts without the session modules;
# a test checks they agree).
TIMEOUT = typer.Option(
    None, "--timeout", metavar="SECONDS",
    help="Seconds one scorer call may take; then its processes are killed and the item stays pending (--scorer). "
    "0: no limit. [default: 600, ten minutes: longer than an item takes, short enough to notice a hung call]",
)
HARNESS = typer.Option(None, "--harness", help="Score with a harness instead of --scorer: lm-eval or inspect.")
LM_MODEL = typer.Option(
    None, "--model", help="lm-eval model type, e.g. hf, vllm, dummy; or the Inspect model, e.g. openai/gpt-4o, "
    "mockllm/model ({model} when ranking; omitted, each ranked id is the Inspect model).")
# lm-eval's own spellings are accepted too (--model_args, --tasks, --include_path, ...), so its commands carry over.
LM_MODEL_ARGS = typer.Option(
    "", "--model-args", "--model_args",
    help="lm-eval model arguments, e.g. pretrained=org/name,dtype=float16 ({model} when ranking).")
LM_TASK = typer.Option(
    None, "--task", "--tasks", help="lm-eval task whose documents are the reference's items (one task); or the "
    "Inspect task whose samples are: FILE.py@TASK or a registered name.")
LM_METRIC = typer.Option(None, "--metric", help="Per-sample metric to record, e.g. acc. [default: the task's only one]")
LM_FILTER = typer.Option(None, "--filter", help="lm-eval filter to record, for tasks with several (e.g. strict-match).")
LM_INCLUDE = typer.Option(None, "--include-path", "--include_path",
                          help="Folder of custom lm-eval task YAML files (repeatable).")
LM_FEWSHOT = typer.Option(None, "--num-fewshot", "--num_fewshot",
                          help="lm-eval few-shot examples. [default: the task's]")
LM_BATCH = typer.Option(None, "--batch-size", "--batch_size", help="lm-eval batch size (e.g. 8 or auto).")
LM_DEVICE = typer.Option(None, "--device", help="lm-eval device, e.g. cuda:0 or cpu.")
LM_GEN = typer.Option(None, "--gen-kwargs", "--gen_kwargs",
                      help="lm-eval generation arguments, e.g. temperature=0,max_gen_toks=256.")
LM_CHAT = typer.Option(False, "--apply-chat-template", "--apply_chat_template",
                       help="Apply the model's chat template (lm-eval).")
LM_VERBOSE = typer.Option(
    False, "--verbose", help="Show the harness's own output (lm-eval's tables, progress bars and warnings) on stderr.")
OUTPUT_PATH = typer.Option(
    None, "--output-path", "--output_path", metavar="PATH",
    help="Where the results go when the run stops: a folder (PATH/results.json) or a .json file; with "
    "--log-samples also lm-eval's samples files, PATH/<model>/samples_<task>_<time>.jsonl. [default: the session "
    "file's name with .results.json]")
LOG_SAMPLES = typer.Option(
    False, "--log-samples", "--log_samples",
    help="Keep every document lm-eval evaluated in its own samples-file format under --output-path (--harness "
    "lm-eval).")
IN_MODEL_ARG = typer.Option(None, "--model-arg", help="Inspect model argument KEY=VALUE (repeatable; Inspect's -M).")
IN_TASK_ARG = typer.Option(None, "--task-arg", help="Inspect task argument KEY=VALUE (repeatable; Inspect's -T).")
# (declared with `session record`'s options: activeeval.cli.session_core)
IN_SCORE_NAME = SCORE_NAME.typer()
IN_VALUE_MAP = VALUE_MAP.typer()
IN_EPOCHS = typer.Option(None, "--epochs", help="Inspect runs per sample, averaged. [default: the task's]")
IN_LOG_DIR = typer.Option(
    None, "--log-dir", help="Folder for Inspect's logs. [default: Inspect's: $INSPECT_LOG_DIR, else ./logs]")


def make_scorer(
    scorer: str | None,
    harness: str | None,
    *,
    timeout: float | None = None,
    jobs: int = 1,
    ranking: bool = False,
    model: str | None = None,
    model_args: str = "",
    task: str | None = None,
    metric: str | None = None,
    filter_name: str | None = None,
    include_path: list[str] | None = None,
    num_fewshot: int | None = None,
    batch_size: str | None = None,
    device: str | None = None,
    gen_kwargs: str | None = None,
    apply_chat_template: bool = False,
    model_arg: list[str] | None = None,
    task_arg: list[str] | None = None,
    score_name: str | None = None,
    value_map: str | None = None,
    epochs: int | None = None,
    log_dir: str | None = None,
    verbose: bool = False,
    samples_path: str | None = None,
) -> Any:
    """The scorer the flags describe; ConfigurationError naming the flag for a wrong combination.

    ``samples_path`` is the folder of lm-eval's samples files (``--output-path`` with ``--log-samples``).
    """
    shared, lm_flags, inspect_flags = _flag_groups(
        model=model, task=task, metric=metric, filter_name=filter_name, include_path=include_path,
        num_fewshot=num_fewshot, batch_size=batch_size, device=device, gen_kwargs=gen_kwargs, model_args=model_args,
        apply_chat_template=apply_chat_template, samples_path=samples_path, verbose=verbose, model_arg=model_arg,
        task_arg=task_arg, score_name=score_name, value_map=value_map, epochs=epochs, log_dir=log_dir)
    if (scorer is None) == (harness is None):
        raise ConfigurationError(
            "give exactly one of --scorer 'COMMAND {item_id}' or --harness lm-eval / --harness inspect (with --model, "
            "--task)"
        )
    if scorer is not None:
        given = [k for k, v in {**shared, **lm_flags, **inspect_flags}.items() if v is not None]
        if given:
            raise ConfigurationError(f"{', '.join(given)} go with --harness, not with --scorer; drop them")
        from activeeval.session.drivers.runner import Scorer

        limit: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        return Scorer(scorer, jobs=jobs, needs_model=ranking, **limit)
    if harness not in ("lm-eval", "inspect"):
        raise ConfigurationError(f"--harness must be lm-eval or inspect, got {harness!r}")
    if timeout is not None:
        raise ConfigurationError(f"--timeout goes with --scorer; {harness} runs in this process (stop it with Ctrl-C)")
    other = inspect_flags if harness == "lm-eval" else lm_flags
    given = [k for k, v in other.items() if v is not None]
    if given:
        hint = " (Inspect takes model arguments one by one: --model-arg KEY=VALUE)" if "--model-args" in given else ""
        raise ConfigurationError(f"{', '.join(given)} do not apply to --harness {harness}; drop them{hint}")
    if harness == "inspect":
        from activeeval.session.drivers.inspect_harness import InspectHarness

        return InspectHarness(task or "", model, model_args=model_arg, task_args=task_arg, score_name=score_name,
                              value_map=value_map, epochs=epochs, log_dir=log_dir, needs_model=ranking)
    from activeeval.session.drivers.lm_eval_harness import LmEvalHarness

    size: int | str | None = batch_size
    if batch_size is not None and batch_size != "auto" and not batch_size.startswith("auto:"):
        try:
            size = int(batch_size)
        except ValueError as exc:
            raise ConfigurationError(f"--batch-size must be a number or auto, got {batch_size!r}") from exc
    return LmEvalHarness(
        model or "", model_args, task or "", metric=metric, filter=filter_name, include_path=include_path,
        num_fewshot=num_fewshot, batch_size=size, device=device, gen_kwargs=gen_kwargs,
        apply_chat_template=apply_chat_template, needs_model=ranking, verbose=verbose, output_path=samples_path,
    )


def harness_flags_given(**flags: Any) -> list[str]:
    """The harness options among ``flags`` (``make_scorer``'s keyword names) that were given, as flags."""
    return [k for group in _flag_groups(**flags) for k, v in group.items() if v is not None]


def _flag_groups(**f: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The harness options by flag: both harnesses', lm-eval's, Inspect's (None, or an empty value: not given)."""
    shared = {"--model": f.get("model"), "--task": f.get("task")}
    lm = {"--metric": f.get("metric"), "--filter": f.get("filter_name"),
          "--include-path": f.get("include_path") or None, "--num-fewshot": f.get("num_fewshot"),
          "--batch-size": f.get("batch_size"), "--device": f.get("device"),
          "--gen-kwargs": f.get("gen_kwargs"), "--model-args": f.get("model_args") or None,
          "--apply-chat-template": f.get("apply_chat_template") or None, "--log-samples": f.get("samples_path"),
          "--verbose": f.get("verbose") or None}
    inspect = {"--model-arg": f.get("model_arg") or None, "--task-arg": f.get("task_arg") or None,
               "--score-name": f.get("score_name"), "--value-map": f.get("value_map"), "--epochs": f.get("epochs"),
               "--log-dir": f.get("log_dir")}
    return shared, lm, inspect
