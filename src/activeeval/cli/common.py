"""Shared pieces of the CLI: the Typer app, error handling, output helpers."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer

from activeeval.cli.light import GLOBAL_OPTIONS, Opt, global_options
from activeeval.cli.plain import (  # noqa: F401 - re-exported: every command prints through these
    CLI_FIXES,
    CLI_PATTERNS,
    CommandExit,
    cli_message,
    json_text,
    one_line,
    print_json,
    reported,
)
from activeeval.exceptions import ConfigurationError

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


def _main(ctx: typer.Context, version: bool, **options: Any) -> None:
    """Efficient, trustworthy LLM evaluation on a few actively chosen items."""
    try:  # the command runs with them in force (left when it ends, even in-process)
        ctx.with_resource(global_options(**options))
    except CommandExit as exc:
        raise typer.Exit(exc.code) from None


def _callback_signature() -> Any:
    """``_main``'s parameters: --version, then the top-level options as declared once (activeeval.cli.light)."""
    import inspect

    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    version = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version.")
    return inspect.Signature([inspect.Parameter("ctx", kind, annotation=typer.Context),
                              inspect.Parameter("version", kind, default=version, annotation=bool),
                              *(inspect.Parameter(p.dest, kind, default=p.typer(), annotation=p.annotation)
                                for p in GLOBAL_OPTIONS)])


_main.__signature__ = _callback_signature()  # type: ignore[attr-defined]
_main.__annotations__ = {p.name: p.annotation for p in _main.__signature__.parameters.values()}  # type: ignore
app.callback()(_main)


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


def fail(message: object) -> typer.Exit:
    """Print ``error: message`` as one line on stderr; return Exit(2) for the caller to raise."""
    typer.echo(f"error: {one_line(message)}", err=True)
    return typer.Exit(code=2)


def cli_errors(func: F) -> F:
    """Turn library errors into a one-line message and exit code 2 (:func:`activeeval.cli.plain.reported`);
    a body's :class:`~activeeval.cli.plain.CommandExit` becomes Typer's Exit."""
    inner = reported(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return inner(*args, **kwargs)
        except CommandExit as exc:
            raise typer.Exit(exc.code) from None

    return wrapper  # type: ignore[return-value]


def command_from(group: typer.Typer, name: str, params: Sequence[Opt], body: Callable[..., Any]) -> Callable[..., Any]:
    """Register ``body`` as command ``name`` of ``group``, its parameters declared by ``params`` alone (the light
    path parses the same declarations: :mod:`activeeval.cli.light`)."""
    import inspect

    def command(**kwargs: Any) -> Any:
        return body(**kwargs)

    command.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter(p.dest, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.typer(), annotation=p.annotation)
        for p in params])
    command.__annotations__ = {p.dest: p.annotation for p in params}
    command.__name__ = command.__qualname__ = body.__name__
    command.__doc__ = body.__doc__
    command.__module__ = body.__module__
    group.command(name)(cli_errors(command))
    return command
