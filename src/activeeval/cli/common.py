"""Shared pieces of the CLI: the Typer app, error handling, output helpers."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import typer

from activeeval.exceptions import ActiveEvalError, ConfigurationError, MissingScoresWarning

# Plain help (no Rich markup): a method spec such as 'bayesame-paper[noise=learned]' is shown as written.
CONTEXT = {"help_option_names": ["-h", "--help"]}


def make_app(name: str, help: str) -> typer.Typer:
    """A Typer (sub)command group with the CLI's conventions: -h, plain help text, no completion options."""
    return typer.Typer(
        name=name, help=help, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
        rich_markup_mode=None, context_settings=CONTEXT,
    )


app = make_app("activeeval", "Efficient, trustworthy LLM evaluation on a few actively chosen items.")


def _version(value: bool) -> None:
    if value:
        from activeeval import __version__

        typer.echo(f"activeeval {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
    data_dir: str | None = typer.Option(
        None, "--data-dir", metavar="DIR",
        help="Shared data folder (with catalog.json) for datasets not bundled, e.g. WMT21; as "
             "ACTIVEEVAL_SHARED_DATA. [default: beside the installed package, if any]"),
    no_cache: bool = typer.Option(
        False, "--no-cache",
        help="Use no user cache for this command: parse reference files and rebuild session states anew "
             "(as ACTIVEEVAL_CACHE=off). [default: the cache in ACTIVEEVAL_CACHE, else ~/.cache/activeeval]"),
    threads: int | None = typer.Option(
        None, "--threads", metavar="N",
        help="BLAS threads of activeeval's own numeric work (per backtest worker); your scorer, lm-eval and "
             "Inspect keep their own; as ACTIVEEVAL_THREADS. [default: 1]"),
) -> None:
    """Efficient, trustworthy LLM evaluation on a few actively chosen items."""
    from activeeval._threads import limit_threads

    if threads is not None and threads < 1:
        typer.echo(f"error: --threads must be a positive integer (BLAS threads), got {threads}; e.g. --threads 1",
                   err=True)
        raise typer.Exit(2)
    try:  # the command's numeric work runs under the limit, applied once it starts (none: SciPy is not loaded for it)
        ctx.with_resource(limit_threads(threads, defer=True))  # left when the command ends, even in-process
    except ActiveEvalError as exc:  # a bad ACTIVEEVAL_THREADS
        raise fail(exc) from None
    if no_cache:
        import os

        from activeeval.user_cache import CACHE_ENV, OFF

        os.environ[CACHE_ENV] = OFF  # what every reader and session of this command consults
    if data_dir is not None:
        import os

        from activeeval.data.datasets import SHARED_DATA_ENV, shared_data_dir

        try:
            shared_data_dir(data_dir)
        except ActiveEvalError as exc:
            raise fail(cli_message(exc)) from exc
        os.environ[SHARED_DATA_ENV] = data_dir  # what every command's dataset lookup reads


def show_progress(flag: bool | None) -> bool:
    """``--progress/--no-progress``: on or off as given; not given (None), only when stderr is a terminal.

    Progress goes to stderr alone, so stdout carries only results (pipes and ``--json`` stay clean); Rich
    leaves colours out when ``NO_COLOR`` is set.
    """
    return sys.stderr.isatty() if flag is None else bool(flag)


PROGRESS = typer.Option(
    None, "--progress/--no-progress",
    help="Progress and the current step on stderr. [default: when stderr is a terminal]")


@contextlib.contextmanager
def phases(enabled: bool | None) -> Iterator[Callable[[str], None]]:
    """The steps of a command as they start: ``say("fitting ...")`` for ``with``.

    On a terminal a spinner with the step and its elapsed time (gone when the command ends); with
    ``--progress`` elsewhere (a log file) one line per step; otherwise nothing. ``enabled`` is the
    ``--progress`` flag (None: when stderr is a terminal).
    """
    if not show_progress(enabled):
        yield lambda text: None
        return
    if not sys.stderr.isatty():
        yield lambda text: typer.echo(f"{text} ...", err=True)
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                   console=Console(stderr=True), transient=True)
    current: list[Any] = []

    def say(text: str) -> None:
        if current:
            bar.remove_task(current.pop())
        current.append(bar.add_task(text, total=None))

    with bar:
        yield say


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool | None = True) -> Iterator[Callable[[int, int], None] | None]:
    """A Rich progress bar on stderr for ``with``: yields the ``(done, total)`` callback the library's long runs
    take (``run_backtest(progress=...)``), or None when ``enabled`` is false (None: when stderr is a terminal)."""
    if not show_progress(enabled):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                   console=Console(stderr=True), transient=True)
    task = None

    def update(done: int, total: int) -> None:
        nonlocal task
        if task is None:
            task = bar.add_task("runs", total=total)
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


# Options several commands share (one definition, so the flags and their help read the same everywhere).
METHOD_HELP = (
    "Estimation method, optionally with options in brackets, e.g. bayesame or 'bayesame[selection=random]' "
    "(quote it in the shell)."
)
SCORE_RANGE = typer.Option(
    None, "--score-range", metavar="LOW HIGH",
    help="Score range of a reference file, e.g. 0 100 for chrF. [default: 0 1]",
)
KIND = typer.Option(None, "--kind", help="Score kind of a reference file: binary or continuous. [default: inferred]")
MISSING = typer.Option(
    "models", "--missing",
    help="Missing reference scores: drop the models that miss any (the item set stays whole) or the items.",
)
DUPLICATE_MODELS = typer.Option(
    None, "--duplicate-models",
    help="A model id repeated in a reference file: error, or drop-identical (keep one of identical rows). "
    "[default: error]",
)


PRIOR_WEIGHTS = typer.Option(
    None, "--prior-weights", metavar="FILE",
    help="Metadata prior weights of bayesame-paper (paper App. B.2), one per reference model: CSV/TSV with columns "
    "model,weight, or JSON {model: weight}. [default: uniform]",
)


EXCLUDE_MODELS = typer.Option(
    None, "--exclude-models", metavar="A,B",
    help="Leave these models (comma-separated ids) out of the reference, e.g. the model you evaluate when the "
    "reference holds it; `activeeval datasets --models NAME` lists a dataset's models.")


def read_options(kind: str | None, score_range: tuple[float, float] | None, duplicate_models: str | None,
                 exclude_models: str | None = None) -> dict[str, Any]:
    """The reference read options given on the command line (None = not given; ``exclude_models`` only when given,
    for the commands whose sessions take it)."""
    read = {"kind": kind, "score_range": score_range, "duplicate_models": duplicate_models}
    return read if exclude_models is None else {**read, "exclude_models": exclude_models}


def load_dataset(dataset: str, missing: str, read: dict):
    """The dataset (read options for a file) with the --missing policy applied to the whole matrix for 'items'."""
    from activeeval.session.reference import apply_missing, resolve_reference

    matrix, _ = resolve_reference(dataset, read)
    if missing == "items":
        return apply_missing(matrix, "items")
    if missing != "models":
        raise ConfigurationError(f"--missing must be 'models' or 'items', got {missing!r}")
    return matrix  # the methods drop incomplete reference models (targets need complete scores anyway)


#: The folder of a backtest's ``--out`` that keeps its finished tasks until the run completes.
OUT_TASKS = "tasks"
OUT_RULE = "new or empty, or with --force the results folder of an earlier run (never a folder of other files)."
FORCE = typer.Option(False, "--force", help="Replace --out if it holds the results of an earlier run.")


def check_out(out: Path | None, force: bool) -> None:
    """Refuse --out before the run (the same check runs again before the results are moved into place).

    The finished tasks an interrupted run of the command kept in ``--out/tasks`` are no reason to refuse it:
    the command resumes from them (if they are the same run's: :mod:`activeeval.experiments.checkpoint`).
    """
    if out is not None:
        from activeeval._files import check_output_folder

        check_output_folder(out, overwrite=force, what="--out", resumable=OUT_TASKS)


@contextlib.contextmanager
def results_folder(out: Path, force: bool) -> Iterator[Path]:
    """A temporary folder to write the results into; it becomes --out (with the kept tasks gone) when the block
    succeeds, and an error leaves --out as it was (:func:`activeeval._files.output_folder`)."""
    from activeeval._files import output_folder

    with output_folder(out, overwrite=force, what="--out", resumable=OUT_TASKS) as tmp:
        yield tmp


@contextlib.contextmanager
def interruptible(out: Path | None) -> Iterator[None]:
    """Ctrl-C during a backtest: say what was kept and how to resume, and exit 130 (128 + SIGINT)."""
    from activeeval.experiments.checkpoint import MANIFEST, BacktestInterrupted

    try:
        yield
    except KeyboardInterrupt as exc:
        if out is None:
            done = f" after {exc.done} of {exc.total} tasks" if isinstance(exc, BacktestInterrupted) else ""
            typer.echo(f"interrupted{done}: nothing kept (give --out DIR to keep finished tasks and resume)", err=True)
        else:
            tasks = out.expanduser() / OUT_TASKS
            kept = sum(1 for p in tasks.rglob("*") if p.suffix in (".npz", ".json") and p.name != MANIFEST
                       and not p.name.startswith(".")) if tasks.is_dir() else 0
            typer.echo(f"interrupted: {kept} finished task(s) kept in {str(out)!r}; re-run the same command to resume",
                       err=True)
        raise typer.Exit(130) from None


def interrupted(n_recorded: int) -> typer.Exit:
    """The Ctrl-C message and exit code 130 (128 + SIGINT), for the caller to raise."""
    typer.echo(f"interrupted: {n_recorded} scores recorded, re-run to resume", err=True)
    return typer.Exit(code=130)


F = TypeVar("F", bound=Callable[..., Any])


def one_line(message: object) -> str:
    return " ".join(str(message).split())


# The fixes library messages spell as Python keywords, and what a command-line user types instead. One pass,
# longest phrase first, so a replacement is never replaced again (tests check that each phrase is still in the
# library's messages, and that commands print the flags).
CLI_FIXES = {
    "score_range=(low, high) (None for unbounded scores)": "--score-range LOW HIGH",
    "score_range=(low, high)": "--score-range LOW HIGH",
    "a wider score_range": "a wider --score-range LOW HIGH",
    "kind='continuous'": "--kind continuous",
    "kind='binary'": "--kind binary",
    "duplicate_models='drop_identical'": "--duplicate-models drop-identical",
    "use dropna(axis='items')": "pass --missing items",
    "use dropna(axis='models')": "pass --missing models",
    "call .dropna() to drop incomplete models or items": "pass --missing models or --missing items to drop them",
    "item_column=NAME": "--item-column NAME",
    "score_column=NAME": "--score-column NAME",
    "overwrite=True": "--force",
    "data_dir=": "--data-dir ",
    " (see .model_ids)": " (`activeeval datasets --models NAME` lists a dataset's models)",
    " (see .item_ids)": "",
}
# Fixes whose wording varies (a class name, a value): pattern -> what the command line prints instead.
CLI_PATTERNS = [
    # "choose one with metric=... (--metric on the command line)", "(choose one with metric=... / --metric)"
    (re.compile(r"\w+='([^']*)' \((--[\w-]+) \1 on the command line\)"), r"\2 \1"),
    (re.compile(r"\w+=\.\.\. \((--[\w-]+) on the command line\)"), r"\1"),
    (re.compile(r"\w+=\.\.\. / (--[\w-]+)"), r"\1"),
    # how to give a session its reference again, and how to create one
    (re.compile(r"\w+\.open\(path, reference=\.\.\.\) or `--reference` on the command line"), "--reference FILE"),
    (re.compile(r"open it with \w+\.open\(path, reference=<that matrix>\)"),
     "give its data as a score file with --reference FILE"),
    (re.compile(r"\w+\.create\(\.\.\.\) or (`activeeval session new`)"), r"\1"),
    # CAT's calibration: a CLI user chooses one of the two by name
    (re.compile(r"'paper' or an irt\.Calibration for the reference's \d+ items"), "'paper'"),
    (re.compile(r"; fit it with methods\.cat\.fit_calibration\(reference\.scores\) on the same \(complete\) matrix"),
     ""),
]
_FIX_RE = re.compile("|".join(re.escape(k) for k in sorted(CLI_FIXES, key=len, reverse=True)))
# "--missing (missing=)", "--correlation low or high (correlation='low' or 'high')": a message naming both
# spellings; the flag is enough here.
_BOTH_RE = re.compile(r"(--[a-z][\w-]*(?: [\w/]+| or)*) \(\w+=[^()]*\)")
# "--score-range LOW HIGH (--score-range LOW HIGH)": a message that gave both, once translated.
_TWICE_RE = re.compile(r"(--[a-z][\w-]*(?: [A-Z]+)*) \(\1\)")


def cli_message(exc: BaseException) -> str:
    """A library error's message with its fixes as command-line flags (see :data:`CLI_FIXES`)."""
    text = _FIX_RE.sub(lambda m: CLI_FIXES[m.group()], str(exc))
    for pattern, replacement in CLI_PATTERNS:
        text = pattern.sub(replacement, text)
    return _TWICE_RE.sub(r"\1", _BOTH_RE.sub(r"\1", text))


def fail(message: object) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; return Exit(2) for the caller to raise."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(code=2)


def cli_errors(func: F) -> F:
    """Turn library errors into a one-line message and exit code 2.

    Warnings are printed on stderr once each, after the command: missing-score
    drops as ``note:`` lines, anything else as ``warning:`` lines.
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", MissingScoresWarning)
                try:
                    return func(*args, **kwargs)
                except ActiveEvalError as exc:
                    raise fail(cli_message(exc)) from None
        finally:
            # Re-emit outside the recording context: showing a warning inside
            # it would append to `caught` while we iterate over it.
            # Each distinct warning once (a backtest repeats the same ones per run).
            shown: set[str] = set()
            for w in caught:
                if issubclass(w.category, MissingScoresWarning):
                    text = f"note: {one_line(w.message)}"
                else:
                    text = f"warning: {w.category.__name__}: {one_line(w.message)}"
                if text not in shown:
                    shown.add(text)
                    typer.echo(text, err=True)

    return wrapper  # type: ignore[return-value]


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _jsonable(value.item())
    return value


def json_text(obj: Any) -> str:
    """``obj`` as indented JSON text (NaN/inf become null, numpy scalars become numbers), with a final newline."""
    return json.dumps(_jsonable(obj), indent=2) + "\n"


def print_json(obj: Any) -> None:
    """One JSON object on stdout (as :func:`json_text`)."""
    sys.stdout.write(json_text(obj))
