"""``activeeval session ...`` and ``activeeval run``: the real evaluation loop.

Thin layer over :mod:`activeeval.session`; every library error becomes one
``error:`` line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from activeeval.cli.common import app, cli_errors, fail, print_json
from activeeval.exceptions import ConfigurationError

session_app = typer.Typer(
    name="session",
    help="Ask/tell sessions: which items to score next, record scores, status, report.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(session_app, name="session")

FILE = typer.Argument(..., help="The session file (SQLite).", dir_okay=False)
REFERENCE_OVERRIDE = typer.Option(
    None, "--reference", help="Load the reference data from here instead of where the session recorded it."
)


def _open(file: Path, reference: Optional[str]):  # noqa: ANN202
    from activeeval.session import Session

    return Session.open(file, reference=reference)


def _status_line(status) -> str:  # noqa: ANN001
    d = status.to_dict()
    stop = f"stop: yes ({d['stop_reason']})" if d["stop"] else "stop: no"
    pending = f", {len(d['pending'])} pending" if d["pending"] else ""
    return (
        f"estimate {d['estimate']:.4f}  95% interval [{d['ci_low']:.4f}, {d['ci_high']:.4f}]  "
        f"items used {d['n_used']}/{d['n_items']}{pending}  {stop}"
    )


@session_app.command("new")
@cli_errors
def new(
    file: Path = FILE,
    reference: str = typer.Option(..., "--reference", help="Bundled dataset name or path to a score file."),
    method: str = typer.Option("bayesame", "--method", help="Estimation method."),
    epsilon1: float = typer.Option(0.005, "--epsilon1", help="Tolerated range of the estimate over the window."),
    epsilon2: float = typer.Option(0.03, "--epsilon2", help="Tolerated width of the 95% interval."),
    window: int = typer.Option(30, "--window", help="Window of the stopping rule (observations)."),
    max_items: Optional[int] = typer.Option(None, "--max-items", help="Stop after this many items at most."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the item selection (random if omitted)."),
) -> None:
    """Create a session FILE against reference data."""
    from activeeval.session import Session

    with Session.create(
        file, reference, method=method, epsilon1=epsilon1, epsilon2=epsilon2, window=window,
        max_items=max_items, seed=seed,
    ) as s:
        ref = s.settings["reference"]
        kw = s.settings["method_kwargs"]
        typer.echo(
            f"created {file}: method {method}, reference {ref['name'] or reference!r} "
            f"({ref['n_models']} models x {ref['n_items']} items), epsilon2 {kw['epsilon2']:g}, seed {kw['seed']}"
        )


@session_app.command("next")
@cli_errors
def next_items(
    file: Path = FILE,
    k: int = typer.Option(1, "--k", "-k", help="How many items to hand out."),
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of {item_id, index, ...}."),
    reference: Optional[str] = REFERENCE_OVERRIDE,
) -> None:
    """Print the next K item ids to score (one per line) and mark them pending."""
    with _open(file, reference) as s:
        reason = s.stop_reason()
        if reason is not None:
            typer.echo(f"note: the stopping rule is already met ({reason}); more items are optional", err=True)
        items = s.ask(k)
    if as_json:
        print_json([a.to_dict() for a in items])
    else:
        for a in items:
            typer.echo(a.item_id)


@session_app.command("record")
@cli_errors
def record(
    file: Path = FILE,
    item_id: Optional[str] = typer.Argument(None, help="Item id (omit with --from)."),
    score: Optional[str] = typer.Argument(None, help="The target model's score on the item."),
    from_file: Optional[Path] = typer.Option(None, "--from", help="Record every score of a file (all or nothing)."),
    fmt: Optional[str] = typer.Option(
        None, "--format", help="lm-eval, helm, alpaca-eval or plain (default: from the file name)."
    ),
    metric: Optional[str] = typer.Option(None, "--metric", help="lm-eval/HELM metric (default acc / exact_match)."),
    task: Optional[str] = typer.Option(None, "--task", help="lm-eval task (when --from is a folder)."),
    filter_name: Optional[str] = typer.Option(None, "--filter", help="lm-eval filter (e.g. strict-match)."),
    split: Optional[str] = typer.Option(None, "--split", help="HELM split."),
    generator: Optional[str] = typer.Option(None, "--generator", help="AlpacaEval generator_2 to read."),
    item_column: Optional[str] = typer.Option(None, "--item-column", help="Plain files: item id column."),
    score_column: Optional[str] = typer.Option(None, "--score-column", help="Plain files: score column."),
    reference: Optional[str] = REFERENCE_OVERRIDE,
) -> None:
    """Record ITEM_ID SCORE, or every score of a file with --from."""
    if from_file is not None:
        if item_id is not None or score is not None:
            raise fail("give either ITEM_ID SCORE or --from FILE, not both")
        from activeeval.data.adapters import detect_format, read_scores_any

        kind = fmt or detect_format(from_file)
        default_metric = {"lm-eval": "acc", "helm": "exact_match"}.get(kind)
        scores = read_scores_any(
            from_file, kind, metric=metric or default_metric, task=task, filter=filter_name, split=split,
            generator=generator, item_column=item_column, score_column=score_column,
        )
        with _open(file, reference) as s:
            n_new, n_same = s.tell_many(scores.items())
            status = s.status()
        typer.echo(f"recorded {n_new} score(s) from {from_file} ({n_same} already recorded with the same score)")
        typer.echo(_status_line(status))
        return
    if item_id is None or score is None:
        raise fail("give ITEM_ID and SCORE (e.g. `activeeval session record run.aeval mmlu-00012 1`) or --from FILE")
    if any(o is not None for o in (fmt, metric, task, filter_name, split, generator, item_column, score_column)):
        raise ConfigurationError("--format/--metric/--task/--filter/--split/--generator/--*-column need --from FILE")
    with _open(file, reference) as s:
        new_score = s.tell(item_id, score)  # type: ignore[arg-type]  # validated (and parsed) by the session
        status = s.status()
    typer.echo(f"recorded {item_id} = {score}" if new_score else f"{item_id} already has score {score}: nothing changed")
    typer.echo(_status_line(status))


@session_app.command("status")
@cli_errors
def status(
    file: Path = FILE,
    as_json: bool = typer.Option(False, "--json", help="Print the status as JSON."),
    reference: Optional[str] = REFERENCE_OVERRIDE,
) -> None:
    """Estimate, interval, items used, pending items, and whether to stop."""
    with _open(file, reference) as s:
        st = s.status()
    if as_json:
        print_json(st.to_dict())
    else:
        typer.echo(_status_line(st))


@session_app.command("history")
@cli_errors
def history(
    file: Path = FILE,
    as_json: bool = typer.Option(False, "--json", help="Print the events as JSON."),
    reference: Optional[str] = REFERENCE_OVERRIDE,
) -> None:
    """Every ask/tell event of the journal, oldest first."""
    with _open(file, reference) as s:
        events = s.history()
    if as_json:
        print_json(events)
        return
    for e in events:
        score = "" if e["score"] is None else f" {e['score']:g}"
        typer.echo(f"{e['seq']:>6} {e['time']} {e['kind']:<4} {e['item_id']}{score}")


@session_app.command("report")
@cli_errors
def report(
    file: Path = FILE,
    out: Path = typer.Option(..., "--out", help="HTML file to write."),
    reference: Optional[str] = REFERENCE_OVERRIDE,
) -> None:
    """Write a self-contained HTML report (trajectory plot, items used, settings)."""
    from activeeval.session.report import write_report

    with _open(file, reference) as s:
        write_report(s, out)
    typer.echo(f"wrote {out}")


@app.command("run")
@cli_errors
def run(
    scorer: str = typer.Option(..., "--scorer", help="Command scoring one item, with {item_id}; prints the score."),
    session: Path = typer.Option(..., "--session", help="Session file (created if absent, resumed otherwise)."),
    reference: Optional[str] = typer.Option(
        None, "--reference", help="Bundled dataset name or score file (needed to create the session)."
    ),
    method: Optional[str] = typer.Option(None, "--method", help="Estimation method (default bayesame)."),
    epsilon1: Optional[float] = typer.Option(None, "--epsilon1", help="Tolerated estimate range (default 0.005)."),
    epsilon2: Optional[float] = typer.Option(None, "--epsilon2", help="Tolerated 95% interval width (default 0.03)."),
    max_items: Optional[int] = typer.Option(None, "--max-items", help="Budget: stop after this many items."),
    seed: Optional[int] = typer.Option(None, "--seed", help="Selection seed (random if omitted)."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Scorers to run concurrently."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds allowed per scorer call."),
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
) -> None:
    """Score items with an external command until the stopping rule is met (re-run to resume)."""
    from activeeval.session import Session
    from activeeval.session.runner import Scorer, drive

    sc = Scorer(scorer, timeout=timeout)
    if jobs < 1:
        raise ConfigurationError(f"--jobs must be at least 1, got {jobs}")
    given = {"method": method, "epsilon1": epsilon1, "epsilon2": epsilon2, "n_max": max_items, "seed": seed}
    if session.exists():
        s = Session.open(session, reference=reference)
        stored = {"method": s.settings["method"], **s.settings["method_kwargs"]}
        clash = [f"--{k.replace('n_max', 'max-items').replace('_', '-')} {v} (session has {stored.get(k)})"
                 for k, v in given.items() if v is not None and v != stored.get(k)]
        if clash:
            s.close()
            raise ConfigurationError(
                f"session {str(session)!r} exists with other settings: {'; '.join(clash)}; drop these options "
                "to resume it, or choose a new --session file"
            )
    else:
        if reference is None:
            raise ConfigurationError(f"session {str(session)!r} does not exist yet: give --reference to create it")
        s = Session.create(
            session, reference, method=method or "bayesame",
            epsilon1=0.005 if epsilon1 is None else epsilon1, epsilon2=0.03 if epsilon2 is None else epsilon2,
            max_items=max_items, seed=seed,
        )
    with s:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        n_total = s.settings["method_kwargs"].get("n_max") or s.settings["reference"]["n_items"]
        progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), disable=not sys.stderr.isatty(), transient=False,
        )

        def describe(sess: Session) -> str:
            e = sess.estimate()
            lo, hi = e.ci()
            return f"estimate {e.mean:.3f} [{lo:.3f}, {hi:.3f}]"

        with progress:
            task = progress.add_task(describe(s), total=n_total, completed=len(s.observations))

            def on_record(sess: Session) -> None:
                progress.update(task, completed=len(sess.observations), description=describe(sess))

            drive(s, sc, jobs=jobs, on_record=on_record)
        st = s.status()
    if as_json:
        print_json(st.to_dict())
    else:
        typer.echo(_status_line(st))
