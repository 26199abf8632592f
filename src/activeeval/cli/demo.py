"""``activeeval demo``: a method live on a bundled real dataset (BayesAME by default)."""

from __future__ import annotations

import typer

from activeeval.cli.common import (
    DUPLICATE_MODELS,
    EXCLUDE_MODELS,
    KIND,
    METHOD_HELP,
    MISSING,
    PROGRESS,
    SCORE_RANGE,
    app,
    cli_errors,
    load_dataset,
    phases,
    print_json,
    read_options,
    show_progress,
)
from activeeval.cli.forecast import FORECAST, forecast_or_note
from activeeval.stopping import DEFAULT_EPSILON1, DEFAULT_EPSILON2, DEFAULT_WINDOW


@app.command()
@cli_errors
def demo(
    dataset: str = typer.Option("ifeval", help="Bundled dataset name (see `activeeval datasets`) or a score file."),
    target: str = typer.Option(None, help="Model to hold out as the target. [default: chosen with --seed]"),
    method: str = typer.Option("bayesame", "--method", help=METHOD_HELP),
    epsilon1: float = typer.Option(
        DEFAULT_EPSILON1, help=f"Stop only once R-hat varied by at most this over the last {DEFAULT_WINDOW} steps."),
    epsilon2: float = typer.Option(DEFAULT_EPSILON2, help="Stop once the 95% interval is at most this wide."),
    seed: int = typer.Option(0, min=0, help="Seed for the target choice and the method."),
    max_items: int = typer.Option(None, min=1, help="Also stop after this many items (a fixed budget)."),
    missing: str = MISSING,
    kind: str | None = KIND,
    score_range: tuple[float, float] | None = SCORE_RANGE,
    duplicate_models: str | None = DUPLICATE_MODELS,
    exclude_models: str | None = EXCLUDE_MODELS,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
    progress: bool | None = PROGRESS,
    forecast: bool | None = FORECAST,
) -> None:
    """Hold out one real model, estimate its score (BayesAME by default), stop automatically, compare with the truth.

    On mmlu_pro (12 032 items, large buckets of items the references all agree
    on) the paper's algorithm (--method bayesame-paper) keeps the interval
    wider than 0.1 until most items are evaluated; the default does not.
    """
    # Imported here so that other commands do not pay for them at start-up.
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from activeeval.experiments.simulate import hold_out, run_fixed, run_until_stop
    from activeeval.methods.registry import make_method
    from activeeval.session.base import check_stopping, resolve_method

    name, options, spec = resolve_method(method, {})
    with phases(progress) as say:
        say(f"reading {dataset}")
        matrix = load_dataset(dataset, missing, read_options(kind, score_range, duplicate_models, exclude_models))
        split = hold_out(matrix, target, seed)
        rule = check_stopping(epsilon1, epsilon2, 30, max_items)  # before the method's fit: a bad flag fails at once
        say(f"fitting {spec} on {split.reference.n_models} reference models x {split.reference.n_items} items")
        est_method = make_method(name, split.reference, seed=seed, **options)
        fc = forecast_or_note(est_method, epsilon1, epsilon2, 30, max_items, forecast, say)
    n_items = est_method.n_items

    # Progress on stderr only (stdout is the result), and only on a terminal unless --progress.
    with Progress(
        TextColumn("{task.fields[method]} on {task.fields[dataset]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=not show_progress(progress),
    ) as bar:
        task = bar.add_task("run", total=n_items, dataset=matrix.name or dataset, status="", method=spec)

        def show(m, item: int, score: float) -> None:
            est = m.estimate()
            lo, hi = est.ci()
            bar.update(
                task,
                completed=est.n_observed,
                status=f"estimate {est.mean:.4f}  95% [{lo:.4f}, {hi:.4f}]  width {hi - lo:.4f}",
            )

        stopped_by = run_until_stop(est_method, split.truth, rule, on_step=show)

    est = est_method.estimate()
    lo, hi = est.ci()
    rs = run_fixed(make_method("rs-mean", split.reference, seed=seed), split.truth, est.n_observed).mean
    truth = split.true_score
    result = {
        "dataset": matrix.name or dataset,
        "target": split.target,
        "n_items": n_items,
        "method": spec,
        "n_references": est_method.reference.n_models,
        "regime": getattr(est_method, "regime", None),
        "n_used": est.n_observed,
        "fraction_used": est.n_observed / n_items,
        "estimate": est.mean,
        "ci_low": lo,
        "ci_high": hi,
        "truth": truth,
        "error": est.mean - truth,
        "covered": bool(lo <= truth <= hi),
        "rs_mean_estimate": rs,
        "rs_mean_error": rs - truth,
        "stopped_by": stopped_by,
        "epsilon1": epsilon1,
        "epsilon2": epsilon2,
        "seed": seed,
        "notes": list(est.notes),
        "forecast": None if fc is None else fc.to_dict(),
    }
    if json_out:
        print_json(result)
        return
    table = Table(title=f"{result['dataset']}: {split.target}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    regime = getattr(est_method, "regime", None)
    buckets = getattr(est_method, "n_buckets", None)
    detail = f" ({regime}, B = {buckets})" if regime is not None and buckets is not None else ""
    table.add_row("references", f"{est_method.reference.n_models} models{detail}")
    table.add_row("items used", f"{est.n_observed} of {n_items} ({100 * est.n_observed / n_items:.1f} %)")
    table.add_row("stopped by", stopped_by)
    if fc is not None:
        inside = "inside" if fc.low <= est.n_observed <= fc.high else "outside"
        table.add_row("forecast before the run", f"{fc.median} items (80 % of runs: {fc.low}-{fc.high}; this run: "
                      f"{inside})")
    table.add_row(f"{type(est_method).__name__ if spec == name else spec} estimate", f"{est.mean:.4f}")
    table.add_row("95 % interval", f"[{lo:.4f}, {hi:.4f}]  (width {hi - lo:.4f})")
    table.add_row("true full-benchmark score", f"{truth:.4f}")
    table.add_row("error", f"{est.mean - truth:+.4f}  ({'inside' if result['covered'] else 'outside'} the interval)")
    table.add_row(f"RS-Mean after {est.n_observed} random items", f"{rs:.4f}  (error {rs - truth:+.4f})")
    for note in est.notes:
        table.add_row("note", escape(note))
    Console().print(table)
