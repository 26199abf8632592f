"""``activeeval session ...`` and ``activeeval run``: the real evaluation loop.

Thin layer over :mod:`activeeval.session` (one target) and
:mod:`activeeval.session.multi` (several targets, ``--targets a,b,c``); every
library error becomes one ``error:`` line on stderr and exit code 2; Ctrl-C
in ``run`` exits 130 after recording every score obtained. Read-only commands
(status, history, report) open the file read-only: they never create or
change a file.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer

from activeeval.cli import harness as h
from activeeval.cli import session_core as core
from activeeval.cli.common import (
    DUPLICATE_MODELS,
    EXCLUDE_MODELS,
    KIND,
    METHOD_HELP,
    MISSING,
    PRIOR_WEIGHTS,
    PROGRESS,
    SCORE_RANGE,
    app,
    cli_errors,
    cli_message,
    command_from,
    interrupted,
    make_app,
    phases,
    print_json,
    read_options,
    show_progress,
)
from activeeval.cli.forecast import FORECAST, no_forecast_note, session_forecast
from activeeval.cli.session_core import (  # noqa: F401 - the helpers other commands print with
    _echo_written,
    _open,
    _open_evaluation,
    _results_once_stopped,
    _status_line,
    _target_of,
    condition_lines,
    multi_lines,
    rank_lines,
)
from activeeval.exceptions import ConfigurationError
from activeeval.stopping import DEFAULT_STOP

session_app = make_app("session", "Ask/tell sessions: which items to score next, record scores, status, report.")
app.add_typer(session_app, name="session")

FILE = core.FILE.typer()
REFERENCE_OVERRIDE = core.REFERENCE_OVERRIDE.typer()
LABEL = typer.Option(None, "--label", help="Name of the model being evaluated (shown in status and the report).")
TARGETS_HELP = ("Evaluate several target models together: their names, comma-separated (a,b,c); ask hands out "
                "(target, item) pairs and each target stops on its own.")
TARGET = core.TARGET.typer()
SET_EPSILON1 = "Tolerated range of the estimate over the window."
SET_EPSILON2 = "Tolerated width of the 95% interval."
SET_WINDOW = "Window of the stopping rule (items)."
SET_MAX_ITEMS = "Budget: stop after this many items at most."


def _default(help_text: str, value: object) -> str:
    return f"{help_text} [default: {value}]"


def parse_targets(targets: str | None) -> list[str] | None:
    """``--targets a,b,c`` as a list of names (None when not given)."""
    if targets is None:
        return None
    return [t.strip() for t in targets.split(",") if t.strip()]


@session_app.command("new")
@cli_errors
def new(
    file: Path = FILE,
    reference: str = typer.Option(..., "--reference", help="Bundled dataset name or path to a score file."),
    method: str = typer.Option("bayesame", "--method", help=METHOD_HELP),
    epsilon1: float = typer.Option(DEFAULT_STOP.epsilon1, "--epsilon1", help=SET_EPSILON1),
    epsilon2: float = typer.Option(DEFAULT_STOP.epsilon2, "--epsilon2", help=SET_EPSILON2),
    window: int = typer.Option(DEFAULT_STOP.window, "--window", help=SET_WINDOW),
    max_items: int | None = typer.Option(None, "--max-items", help=SET_MAX_ITEMS + " [default: none]"),
    seed: int | None = typer.Option(None, "--seed", help="Seed of the item selection. [default: random, stored]"),
    missing: str = MISSING,
    kind: str | None = KIND,
    score_range: tuple[float, float] | None = SCORE_RANGE,
    duplicate_models: str | None = DUPLICATE_MODELS,
    exclude_models: str | None = EXCLUDE_MODELS,
    label: str | None = LABEL,
    targets: str | None = typer.Option(None, "--targets", help=TARGETS_HELP),
    prior_weights: Path | None = PRIOR_WEIGHTS,
    progress: bool | None = PROGRESS,
    forecast: bool | None = FORECAST,
) -> None:
    """Create a session FILE against reference data (with --targets a,b,c: several target models).

    Then, unless --no-forecast, the expected number of items to the stopping rule (median and the range of 80 % of
    runs), from reference models playing the target; for a reference file, after how many evaluated models it pays
    for itself.
    """
    with phases(progress) as say:
        s = _create(file, reference, parse_targets(targets), method=method, epsilon1=epsilon1, epsilon2=epsilon2,
                    window=window, max_items=max_items, seed=seed, missing=missing, label=label,
                    prior_weights=prior_weights, progress=say,
                    **read_options(kind, score_range, duplicate_models, exclude_models))
        fc = _forecast(s, say, forecast)
    with s:
        typer.echo(_created_line(file, s, reference))
    for line in fc["lines"] if fc else ():
        typer.echo(line)


def _forecast(s: Any, say: Any, wanted: bool | None) -> dict[str, Any] | None:
    """The new session's cost forecast (``--forecast``: True, False, or None: when cheap); a note on stderr instead
    when it was asked for and its method has none, or when it was not and it would take long."""
    if wanted is False:
        return None
    from activeeval.exceptions import ActiveEvalError

    try:
        fc = session_forecast(s, say, asked=bool(wanted))
    except ActiveEvalError as exc:  # e.g. too few reference models to play the target: the session stands
        typer.echo(f"note: no cost forecast: {cli_message(exc)}", err=True)
        return None
    except BaseException:
        s.close()
        raise
    if fc is None:
        if wanted:
            typer.echo(no_forecast_note(s.settings.get("method_spec", s.settings["method"])), err=True)
    elif "note" in fc:
        typer.echo(fc["note"], err=True)
        return None
    return fc


def _create(file: Path, reference: str, targets: list[str] | None, **options: Any):
    """A new single-target session, or a multi-target one when ``targets`` are given."""
    prior_weights = options.pop("prior_weights", None)
    if targets is None:
        from activeeval.session import Session

        return Session.create(file, reference, prior_weights=prior_weights, **options)
    if prior_weights is not None:
        raise ConfigurationError("--prior-weights applies to a single-target session (--method bayesame-paper); "
                                 "drop --targets or --prior-weights")
    from activeeval.session.multi import MultiSession

    return MultiSession.create(file, reference, targets, **options)


def _created_line(file: Path, s: Any, reference: str) -> str:
    ref = s.settings["reference"]
    seed, epsilon2 = s.settings["method_kwargs"]["seed"], s.stopping_settings["epsilon2"]
    targets = f", targets {', '.join(s.targets)}" if s.KIND == "multi" else ""
    weights = s.settings["method_kwargs"].get("weights")
    if isinstance(weights, dict):
        targets += f", prior weights for {len(weights)} models"
    spec = s.settings.get("method_spec", s.settings["method"])
    return (
        f"created {file}: method {spec}, reference {ref['name'] or reference!r} "
        f"({ref['n_models']} models x {ref['n_items']} items){targets}, epsilon2 {epsilon2:g}, seed {seed}"
    )


# next, record and status: declared in session_core, whose bodies the light path runs too (activeeval.cli.light)
command_from(session_app, "next", core.NEXT, core.next_items)
command_from(session_app, "record", core.RECORD, core.record)
command_from(session_app, "status", core.STATUS, core.status)


@session_app.command("set")
@cli_errors
def set_settings(
    file: Path = FILE,
    epsilon1: float | None = typer.Option(None, "--epsilon1", help=SET_EPSILON1),
    epsilon2: float | None = typer.Option(None, "--epsilon2", help=SET_EPSILON2),
    window: int | None = typer.Option(None, "--window", help=SET_WINDOW),
    max_items: int | None = typer.Option(None, "--max-items", help=SET_MAX_ITEMS),
    reference: str | None = REFERENCE_OVERRIDE,
) -> None:
    """Change the stopping rule or the budget of a session (recorded in the journal)."""
    if all(v is None for v in (epsilon1, epsilon2, window, max_items)):
        raise ConfigurationError("give at least one of --epsilon1, --epsilon2, --window, --max-items")
    with _open_evaluation(file, reference, "session set") as s:
        before = s.stopping_settings
        changed = s.change_settings(epsilon1=epsilon1, epsilon2=epsilon2, window=window, max_items=max_items)
        st = s.status()
    _echo_changes(before, changed)
    typer.echo(_status_line(st))


def _echo_changes(before: dict[str, Any], changed: dict[str, Any], err: bool = False) -> None:
    """What a settings change did (on stderr with ``err``: stdout is then the JSON result)."""
    if not changed:
        typer.echo("nothing changed (the session already has these settings)", err=err)
    for k, v in changed.items():
        typer.echo(f"changed {k.replace('_', '-')}: {before[k]} -> {v} (recorded in the journal)", err=err)


@session_app.command("history")
@cli_errors
def history(
    file: Path = FILE,
    as_json: bool = typer.Option(False, "--json", help="Print the events as JSON."),
    reference: str | None = REFERENCE_OVERRIDE,
) -> None:
    """Every ask/tell event and settings change of the journal, oldest first."""
    with _open(file, reference, readonly=True) as s:
        events = s.history()
    if as_json:
        print_json(events)
        return
    for e in events:
        if e["kind"] == "set":
            changes = ", ".join(f"{k}={v}" for k, v in e["settings"].items())
            typer.echo(f"{'':>6} {e['time']} set  {changes}")
            continue
        score = "" if e["score"] is None else f" {e['score']:g}"
        model = f"{e['model']} " if e.get("model") else ""
        typer.echo(f"{e['seq']:>6} {e['time']} {e['kind']:<4} {model}{e['item_id']}{score}")


@session_app.command("report")
@cli_errors
def report(
    file: Path = FILE,
    out: Path = typer.Option(..., "--out", help="HTML file to write (a new file, or an old one with --force)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists (never the session or its "
                               "reference)."),
    reference: str | None = REFERENCE_OVERRIDE,
) -> None:
    """Write a self-contained HTML report (result, settings, trajectory chart, items used)."""
    from activeeval.session.report import write_report

    with _open(file, reference, readonly=True) as s:
        if s.KIND != "single":
            what = "a ranking session" if s.KIND == "rank" else "a multi-target session"
            raise ConfigurationError(f"{str(file)!r} is {what}; reports are for single-model sessions "
                                     "(`activeeval session status FILE --json` shows every model)")
        write_report(s, out, overwrite=force)
    typer.echo(f"wrote {out}")


@session_app.command("export")
@cli_errors
def export(
    file: Path = FILE,
    out: Path | None = typer.Option(
        None, "--out", help="Results file to write. [default: the session file's name with .results.json]"),
    force: bool = typer.Option(False, "--force", help="Overwrite --out even if it holds no results of this session "
                               "(never the session or its reference)."),
    reference: str | None = REFERENCE_OVERRIDE,
) -> None:
    """Write the results file (results.json): versions, method, seed, reference, stopping rule, result, every score.

    Its JSON Schema ships with activeeval (activeeval/schemas/results.schema.json). An existing file is replaced
    when it holds this session's earlier results, or with --force.
    """
    from activeeval.session.report.results import results_path, write_results

    with _open(file, reference, readonly=True) as s:
        path = write_results(s, out if out is not None else results_path(file), overwrite=force)
    typer.echo(f"wrote {path}")


@app.command("run")
@cli_errors
def run(
    session: Path = typer.Option(..., "--session", help="Session file (created if absent, resumed otherwise)."),
    scorer: str | None = h.SCORER,
    harness: str | None = h.HARNESS,
    target: str | None = typer.Option(
        None, "--target", metavar="MODEL",
        help="Try the loop on a model of the reference: hold MODEL out of it and score the items with its own "
             "reference scores (instead of --scorer/--harness); the true score is printed at the end."),
    reference: str | None = typer.Option(
        None, "--reference", help="Bundled dataset name or score file (needed to create the session)."
    ),
    method: str | None = typer.Option(None, "--method", help=METHOD_HELP + " [default: bayesame]"),
    epsilon1: float | None = typer.Option(None, "--epsilon1", help=_default(SET_EPSILON1, DEFAULT_STOP.epsilon1)),
    epsilon2: float | None = typer.Option(None, "--epsilon2", help=_default(SET_EPSILON2, DEFAULT_STOP.epsilon2)),
    window: int | None = typer.Option(None, "--window", help=_default(SET_WINDOW, DEFAULT_STOP.window)),
    max_items: int | None = typer.Option(None, "--max-items", help=SET_MAX_ITEMS + " [default: none]"),
    seed: int | None = typer.Option(None, "--seed", help="Selection seed. [default: random, stored]"),
    missing: str | None = typer.Option(None, "--missing", help=MISSING.help + " [default: models]"),
    kind: str | None = KIND,
    score_range: tuple[float, float] | None = SCORE_RANGE,
    duplicate_models: str | None = DUPLICATE_MODELS,
    exclude_models: str | None = EXCLUDE_MODELS,
    label: str | None = LABEL,
    targets: str | None = typer.Option(
        None, "--targets", help=TARGETS_HELP + " The scorer gets each target's name as {model}."),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Scorer commands to run concurrently (--scorer)."),
    k: int = typer.Option(8, "--k", "-k", help="Items per harness call (--harness lm-eval or inspect)."),
    timeout: float | None = h.TIMEOUT,
    model: str | None = h.LM_MODEL,
    model_args: str = h.LM_MODEL_ARGS,
    task: str | None = h.LM_TASK,
    metric: str | None = h.LM_METRIC,
    filter_name: str | None = h.LM_FILTER,
    include_path: list[str] | None = h.LM_INCLUDE,
    num_fewshot: int | None = h.LM_FEWSHOT,
    batch_size: str | None = h.LM_BATCH,
    device: str | None = h.LM_DEVICE,
    gen_kwargs: str | None = h.LM_GEN,
    apply_chat_template: bool = h.LM_CHAT,
    verbose: bool = h.LM_VERBOSE,
    output_path: Path | None = h.OUTPUT_PATH,
    log_samples: bool = h.LOG_SAMPLES,
    force: bool = typer.Option(
        False, "--force", help="Replace the results file even if it holds no results of this session (never the "
                               "session or its reference)."),
    model_arg: list[str] | None = h.IN_MODEL_ARG,
    task_arg: list[str] | None = h.IN_TASK_ARG,
    score_name: str | None = h.IN_SCORE_NAME,
    value_map: str | None = h.IN_VALUE_MAP,
    epochs: int | None = h.IN_EPOCHS,
    log_dir: str | None = h.IN_LOG_DIR,
    prior_weights: Path | None = PRIOR_WEIGHTS,
    as_json: bool = typer.Option(False, "--json", help="Print the final status as JSON."),
    progress: bool | None = PROGRESS,
    forecast: bool | None = FORECAST,
) -> None:
    """Score items with a command, lm-eval or Inspect until the stopping rule is met (re-run to resume).

    On a resumed session, --epsilon1/--epsilon2/--window/--max-items change the stopping rule (recorded in
    the journal); the other settings must match the session's. With --targets a,b,c (or a session created
    with them) every target is evaluated, each until it stops: --scorer 'python score.py {model} {item_id}'.
    When the rule is met the results file is written (--output-path; lm-eval's option names are accepted too:
    --tasks, --model_args, --include_path, --output_path, --log_samples, ...).
    """
    from activeeval.session.drivers.runner import check_jobs
    from activeeval.session.report.results import results_path, write_results

    check_jobs(jobs)
    if k < 1:
        raise ConfigurationError(f"--k must be a positive integer, got {k}")
    if harness is None and k != 8:
        raise ConfigurationError("--k goes with --harness; with --scorer, --jobs sets the batch")
    lm = {"timeout": timeout, "jobs": jobs, "model": model, "model_args": model_args, "task": task, "metric": metric,
          "filter_name": filter_name, "include_path": include_path, "num_fewshot": num_fewshot,
          "batch_size": batch_size, "device": device, "gen_kwargs": gen_kwargs,
          "apply_chat_template": apply_chat_template, "model_arg": model_arg, "task_arg": task_arg,
          "score_name": score_name, "value_map": value_map, "epochs": epochs, "log_dir": log_dir,
          "verbose": verbose, "samples_path": _samples_folder(log_samples, harness, output_path)}
    batch = jobs if harness is None else k
    names = parse_targets(targets)
    excluded = [*(parse_targets(exclude_models) or []), *([target] if target is not None else [])]
    read = read_options(kind, score_range, duplicate_models, ",".join(excluded) or None)
    stopping = {"epsilon1": epsilon1, "epsilon2": epsilon2, "window": window, "max_items": max_items}
    if target is not None:
        _check_tryout_flags(scorer, harness, names, lm)
    out = results_path(session, output_path)
    with phases(progress) as say:
        resumed = session.exists()
        s, sc, changed = _start_run(session, reference, target, scorer, harness, names, lm, read, out, force, say,
                                    stopping=stopping, method=method, seed=seed, missing=missing, label=label,
                                    prior_weights=prior_weights)
        fc = _forecast(s, say, False if resumed else forecast)
    if changed:
        before, after = changed
        _echo_changes(before, after, err=as_json)
    for line in fc["lines"] if fc else ():
        typer.echo(line, err=True)  # before the run, beside its progress; stdout is the result
    with s:
        if hasattr(sc, "start_samples"):
            sc.start_samples(s.settings["created"])
        _drive_with_progress(s, sc, batch, progress)
        st = s.status()
        written = write_results(s, out, overwrite=force, scorer=_scorer_settings(sc, target))
    result = st.to_dict()
    truth = getattr(sc, "truth", None)
    if as_json:
        print_json({**result, "results_file": str(written),
                    **({"tryout": _tryout_dict(target, truth, result)} if truth is not None else {}),
                    **({"forecast": fc["forecast"]} if fc else {})})
        return
    typer.echo(_status_line(st))
    if truth is not None:
        typer.echo(_tryout_line(target, truth, result))
    typer.echo(f"wrote {written}")


def _start_run(session: Path, reference: str | None, target: str | None, scorer: str | None,
               harness: str | None, names: list[str] | None, lm: dict[str, Any], read: dict[str, Any], out: Path,
               force: bool, say: Any, *, stopping: dict[str, Any], method: str | None, seed: int | None,
               missing: str | None, label: str | None, prior_weights: Path | None
               ) -> tuple[Any, Any, tuple[dict[str, Any], dict[str, Any]] | None]:
    """The session of ``run`` (resumed, or created), its scorer, and the stopping settings it changed."""
    from activeeval._files import check_output
    from activeeval.session.report.results import check_results_path

    def scorer_of(targets: Sequence[str] | None, source: dict[str, Any], resumed: Path | None) -> Any:
        if target is not None:
            sc = _tryout_scorer(source, reference, target, resumed)
        else:
            if harness is not None:
                say(f"loading {harness}")
            sc = _make_scorer(scorer, harness, targets, lm)
        out.parent.mkdir(parents=True, exist_ok=True)  # the folder of --output-path, made as lm-eval makes it
        return sc

    if session.exists():
        say(f"opening {session}")
        s = _open_evaluation(session, reference, "run")
        try:
            _check_targets(s, session, names)
            sc = scorer_of(s.targets if s.KIND == "multi" else None, s.settings["reference_source"], session)
            _check_resume(s, session, reference, method, seed, missing, label, read)
            _check_prior_weights(s, session, prior_weights)
            check_results_path(s, out, overwrite=force)
            before = s.stopping_settings
            changed = s.change_settings(**stopping)
        except BaseException:
            s.close()
            raise
        return s, sc, ((before, changed) if changed else None)
    if reference is None:
        several = "" if names is not None else " (and --targets a,b,c to evaluate several models)"
        raise ConfigurationError(
            f"session {str(session)!r} does not exist yet: give --reference to create it{several}")
    sc = scorer_of(names, {"read": {k: v for k, v in read.items() if v is not None}}, None)
    check_output(out, overwrite=force, what="results file")
    defaults = DEFAULT_STOP.to_dict()
    s = _create(session, reference, names, method=method or "bayesame",
                **{k: defaults[k] if v is None else v for k, v in stopping.items()}, seed=seed,
                missing=missing or "models", label=label if label is not None else target,
                prior_weights=prior_weights, progress=say, **read)
    return s, sc, None


def _samples_folder(log_samples: bool, harness: str | None, output_path: Path | None) -> str | None:
    """The folder of lm-eval's samples files (--log-samples), checked as lm-eval checks it."""
    if not log_samples:
        return None
    if harness != "lm-eval":
        raise ConfigurationError("--log-samples keeps lm-eval's samples files and goes with --harness lm-eval "
                                 "(Inspect keeps its own logs: --log-dir)")
    if output_path is None:
        raise ConfigurationError("--log-samples needs --output-path DIR (where the samples files go), as lm-eval's "
                                 "--log_samples needs --output_path")
    folder = output_path.expanduser()
    return str(folder.parent if folder.suffix == ".json" else folder)


def _check_tryout_flags(scorer: str | None, harness: str | None, names: list[str] | None,
                        lm: dict[str, Any]) -> None:
    """--target scores with the model's own reference scores: no scorer, harness or their options."""
    given = [flag for flag, v in (("--scorer", scorer), ("--harness", harness), ("--targets", names)) if v]
    given += h.harness_flags_given(**lm)
    if given:
        raise ConfigurationError(
            f"--target MODEL scores the items with MODEL's own scores in the reference; drop {', '.join(given)} "
            "(or drop --target to score a model of your own)")


class _Tryout:
    """The scorer of ``run --target MODEL``: MODEL's own scores in the reference (a plain item_id -> score)."""

    def __init__(self, model: str, scores: dict[str, float], truth: float) -> None:
        self.model, self.scores, self.truth = model, scores, truth

    def __call__(self, item_id: str) -> float:
        return self.scores[item_id]


def _tryout_scorer(source: dict[str, Any], reference: str | None, target: str, session: Path | None) -> _Tryout:
    """MODEL's scores from the reference the session holds it out of (``reference``, or where the session's is)."""
    from activeeval.experiments.simulate import hold_out
    from activeeval.session.reference import check_read_options, resolve_reference

    read = check_read_options(source.get("read") or {})
    excluded = read.pop("exclude_models", [])
    if session is not None and target not in excluded:
        raise ConfigurationError(
            f"session {str(session)!r} was not created with --target {target} (its reference holds that model); "
            "drop --target to resume it with --scorer or --harness, or choose a new --session file")
    where = reference if reference is not None else source.get("path", source.get("name"))
    if where is None:
        raise ConfigurationError("--target needs the reference the model is held out of: give --reference")
    full, _ = resolve_reference(where, {**read, "exclude_models": [m for m in excluded if m != target]})
    split = hold_out(full, target)
    return _Tryout(target, dict(zip(full.item_ids, map(float, split.truth), strict=True)), split.true_score)


def _tryout_dict(target: str | None, truth: float, result: dict[str, Any]) -> dict[str, Any]:
    return {"model": target, "truth": truth, "error": result["estimate"] - truth,
            "covered": bool(result["ci_low"] <= truth <= result["ci_high"])}


def _tryout_line(target: str | None, truth: float, result: dict[str, Any]) -> str:
    d = _tryout_dict(target, truth, result)
    where = "inside" if d["covered"] else "outside"
    return f"true score of {target} (all {result['n_items']} items): {truth:.4f}; error {d['error']:+.4f}, {where} " \
           "the interval"


def _scorer_settings(sc: Any, target: str | None) -> dict[str, Any] | None:
    """What scored the items, for the results file."""
    if target is not None:
        return {"tryout": target, "note": "the model's own scores in the reference it was held out of"}
    describe = getattr(sc, "describe", None)
    if callable(describe):
        return describe()
    command = getattr(sc, "command", None)
    return {"command": command} if isinstance(command, str) else None


def _check_prior_weights(s: Any, session: Path, prior_weights: Path | None) -> None:
    """--prior-weights on a resumed session must be the weights it was created with."""
    if prior_weights is None:
        return
    from activeeval.session.base import prior_weights_option

    stored = s.settings["method_kwargs"].get("weights")
    if prior_weights_option(s.settings["method"], prior_weights) != stored:
        raise ConfigurationError(
            f"--prior-weights {str(prior_weights)!r} differs from the weights session {str(session)!r} was created "
            "with; drop --prior-weights to resume it, or choose a new --session file")


def _check_targets(s: Any, session: Path, names: list[str] | None) -> None:
    """--targets on a resumed session: refused by a single-target one, and must be the multi-target one's."""
    if names is None:
        return
    if s.KIND != "multi":
        raise ConfigurationError(
            f"session {str(session)!r} evaluates one model; drop --targets to resume it, or choose a new --session "
            "file to evaluate several")
    if list(names) != list(s.targets):
        raise ConfigurationError(
            f"session {str(session)!r} evaluates {', '.join(s.targets)}, not {', '.join(names)}; drop --targets to "
            "resume it, or choose a new --session file")


def _make_scorer(scorer: str | None, harness: str | None, targets: Sequence[str] | None,
                 lm: dict[str, Any]) -> Any:
    """The scorer of ``run``; with several targets it must take each target's name as {model}."""
    several = targets is not None and len(targets) > 1
    if several and scorer is not None and "{model}" not in scorer:
        raise ConfigurationError(
            f"--scorer {scorer!r} has no {{model}} placeholder; the session evaluates several targets "
            f"({', '.join(targets or ())}) and passes each one's name there, e.g. "
            "--scorer 'python score.py {model} {item_id}'")
    if several and harness == "lm-eval" and "{model}" not in lm["model_args"]:
        raise ConfigurationError(
            f"--model-args {lm['model_args']!r} has no {{model}} placeholder; the session evaluates several targets "
            f"({', '.join(targets or ())}) and passes each one's name there, e.g. --model-args 'pretrained={{model}}'")
    return h.make_scorer(scorer, harness, ranking=several, **lm)


def _check_resume(s: Any, session: Path, reference: str | None, method: str | None, seed: int | None,
                  missing: str | None, label: str | None, read: dict[str, Any]) -> None:
    """Refuse options that contradict the stored settings (they would need a new session)."""
    from activeeval.session.base import resolve_method

    st = s.settings
    clash = []
    stored_spec = st.get("method_spec", st["method"])  # format-1 files store the name only
    if method is not None and resolve_method(method)[2] != stored_spec:
        clash.append(f"--method {method} (session has {stored_spec})")
    if seed is not None and seed != st["method_kwargs"].get("seed"):
        clash.append(f"--seed {seed} (session has {st['method_kwargs'].get('seed')})")
    if missing is not None and missing != st.get("missing", "models"):
        clash.append(f"--missing {missing} (session has {st.get('missing', 'models')})")
    if label is not None and label != st.get("label"):
        clash.append(f"--label {label} (session has {st.get('label')})")
    stored_read = (st["reference_source"].get("read") or {})
    from activeeval.session.reference import check_read_options

    for key, value in check_read_options(read).items():
        if stored_read.get(key) != value:
            flag = key.replace("_", "-")
            clash.append(f"--{flag} {value} (session has {stored_read.get(key)})")
    if clash:
        raise ConfigurationError(
            f"session {str(session)!r} exists with other settings: {'; '.join(clash)}; drop these options "
            "to resume it, or choose a new --session file (--epsilon1/--epsilon2/--window/--max-items may change)"
        )


def _drive_with_progress(s: Any, sc: Any, batch: int, progress: bool | None = None) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from activeeval.session.drivers.runner import drive, drive_multi

    multi = s.KIND == "multi"
    n_total = (s.stopping_settings["max_items"] or s.settings["reference"]["n_items"]) * (
        len(s.targets) if multi else 1)
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), disable=not show_progress(progress), transient=False,
    )

    def describe(sess: Any) -> str:
        if multi:
            return f"{len(sess.status().running)} of {len(sess.targets)} targets running"
        e = sess.estimate()
        lo, hi = e.ci()
        return f"estimate {e.mean:.3f} [{lo:.3f}, {hi:.3f}]"

    try:
        with bar:
            task = bar.add_task(describe(s), total=n_total, completed=len(s.observations))

            def on_record(sess: Any) -> None:
                bar.update(task, completed=len(sess.observations), description=describe(sess))

            (drive_multi if multi else drive)(s, sc, jobs=batch, on_record=on_record)
    except KeyboardInterrupt:
        raise interrupted(len(s.observations)) from None
