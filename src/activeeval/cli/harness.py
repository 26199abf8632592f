"""Options of the scorers `run` and `rank` drive: a command, or lm-evaluation-harness."""

from __future__ import annotations

from typing import Any, Optional

import typer

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
HARNESS = typer.Option(None, "--harness", help="Score with a harness instead of --scorer: lm-eval.")
LM_MODEL = typer.Option(None, "--model", help="lm-eval model type, e.g. hf, vllm, dummy (with --harness lm-eval).")
LM_MODEL_ARGS = typer.Option(
    "", "--model-args", help="lm-eval model arguments, e.g. pretrained=org/name,dtype=float16 ({model} when ranking).",
)
LM_TASK = typer.Option(None, "--task", help="lm-eval task whose documents are the reference's items.")
LM_METRIC = typer.Option(None, "--metric", help="Per-sample metric to record, e.g. acc. [default: the task's only one]")
LM_FILTER = typer.Option(None, "--filter", help="lm-eval filter to record, for tasks with several (e.g. strict-match).")
LM_INCLUDE = typer.Option(None, "--include-path", help="Folder of custom lm-eval task YAML files (repeatable).")
LM_FEWSHOT = typer.Option(None, "--num-fewshot", help="lm-eval few-shot examples. [default: the task's]")
LM_BATCH = typer.Option(None, "--batch-size", help="lm-eval batch size (e.g. 8 or auto).")
LM_DEVICE = typer.Option(None, "--device", help="lm-eval device, e.g. cuda:0 or cpu.")
LM_GEN = typer.Option(None, "--gen-kwargs", help="lm-eval generation arguments, e.g. temperature=0,max_gen_toks=256.")
LM_CHAT = typer.Option(False, "--apply-chat-template", help="Apply the model's chat template (lm-eval).")


def make_scorer(
    scorer: Optional[str],
    harness: Optional[str],
    *,
    timeout: Optional[float] = None,
    jobs: int = 1,
    ranking: bool = False,
    model: Optional[str] = None,
    model_args: str = "",
    task: Optional[str] = None,
    metric: Optional[str] = None,
    filter_name: Optional[str] = None,
    include_path: Optional[list[str]] = None,
    num_fewshot: Optional[int] = None,
    batch_size: Optional[str] = None,
    device: Optional[str] = None,
    gen_kwargs: Optional[str] = None,
    apply_chat_template: bool = False,
) -> Any:
    """The scorer the flags describe; ConfigurationError naming the flag for a wrong combination."""
    lm_flags = {"--model": model, "--task": task, "--metric": metric, "--filter": filter_name,
                "--include-path": include_path or None, "--num-fewshot": num_fewshot, "--batch-size": batch_size,
                "--device": device, "--gen-kwargs": gen_kwargs, "--model-args": model_args or None,
                "--apply-chat-template": apply_chat_template or None}
    if (scorer is None) == (harness is None):
        raise ConfigurationError(
            "give exactly one of --scorer 'COMMAND {item_id}' or --harness lm-eval (with --model, --task)"
        )
    if scorer is not None:
        given = [k for k, v in lm_flags.items() if v is not None]
        if given:
            raise ConfigurationError(f"{', '.join(given)} go with --harness lm-eval, not with --scorer; drop them")
        from activeeval.session.runner import Scorer

        limit = {} if timeout is None else {"timeout": timeout}
        return Scorer(scorer, jobs=jobs, needs_model=ranking, **limit)
    if harness != "lm-eval":
        raise ConfigurationError(f"--harness must be lm-eval, got {harness!r}")
    if timeout is not None:
        raise ConfigurationError("--timeout goes with --scorer; lm-eval runs in this process (stop it with Ctrl-C)")
    from activeeval.session.lm_eval_harness import LmEvalHarness

    size: int | str | None = batch_size
    if batch_size is not None and batch_size != "auto" and not batch_size.startswith("auto:"):
        try:
            size = int(batch_size)
        except ValueError as exc:
            raise ConfigurationError(f"--batch-size must be a number or auto, got {batch_size!r}") from exc
    return LmEvalHarness(
        model or "", model_args, task or "", metric=metric, filter=filter_name, include_path=include_path,
        num_fewshot=num_fewshot, batch_size=size, device=device, gen_kwargs=gen_kwargs,
        apply_chat_template=apply_chat_template, needs_model=ranking,
    )
