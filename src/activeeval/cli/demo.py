"""``activeeval demo``: BayesAME live on a bundled real dataset."""

from __future__ import annotations

import typer

from activeeval.cli.common import app, cli_errors, print_json


@app.command()
@cli_errors
def demo(
    dataset: str = typer.Option("ifeval", help="Bundled dataset name (see `activeeval datasets`) or a score file."),
    target: str = typer.Option(None, help="Model to hold out as the target (default: chosen with --seed)."),
    epsilon1: float = typer.Option(0.005, help="Stop only once R-hat varied by at most this over the last 30 steps."),
    epsilon2: float = typer.Option(0.03, help="Stop once the 95% interval is at most this wide."),
    seed: int = typer.Option(0, min=0, help="Seed for the target choice and the method."),
    max_items: int = typer.Option(None, min=1, help="Also stop after this many items (a fixed budget)."),
    method_spec: str = typer.Option(
        "bayesame", "--method",
        help="Method, with options in brackets: bayesame (the default), bayesame-paper (the paper's exact "
        "algorithm), 'bayesame-paper[noise=learned]', rs-mean, ...",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object instead of tables."),
) -> None:
    """Hold out one real model, estimate its score with BayesAME, stop automatically, compare with the truth.

    On mmlu_pro (12 032 items, large buckets of items the references all agree
    on) the paper's algorithm (--method bayesame-paper) keeps the interval
    wider than 0.1 until most items are evaluated; the default does not.
    """
    # Imported here so that other commands do not pay for them at start-up.
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from activeeval import datasets
    from activeeval.experiments.simulate import hold_out, run_fixed, run_until_stop
    from activeeval.experiments.runner import check_methods
    from activeeval.methods.base import BaseMethod
    from activeeval.methods.baselines.rs_mean import RSMean
    from activeeval.methods.registry import make_method, parse_method_spec

    (label,) = check_methods([method_spec])
    name, options = parse_method_spec(label)
    matrix = datasets.resolve(dataset)
    split = hold_out(matrix, target, seed)
    method = make_method(
        name, split.reference, epsilon1=epsilon1, epsilon2=epsilon2, n_max=max_items, seed=seed, **options
    )
    n_items = method.n_items
    console = Console(stderr=True) if json_out else Console()

    with Progress(
        TextColumn("[bold]{task.fields[method]}[/] on {task.fields[dataset]}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=json_out,
        disable=json_out and not console.is_terminal,
    ) as progress:
        task = progress.add_task(
            "run", total=n_items, dataset=matrix.name or dataset, status="", method=label.replace("[", "\\[")
        )

        def show(m: BaseMethod, item: int, score: float) -> None:
            est = m.estimate()
            lo, hi = est.ci()
            progress.update(
                task,
                completed=est.n_observed,
                status=f"estimate {est.mean:.4f}  95% [{lo:.4f}, {hi:.4f}]  width {hi - lo:.4f}",
            )

        stopped_by = run_until_stop(method, split.truth, on_step=show)

    est = method.estimate()
    lo, hi = est.ci()
    rs = run_fixed(RSMean(split.reference, seed=seed), split.truth, est.n_observed).mean
    truth = split.true_score
    result = {
        "dataset": matrix.name or dataset,
        "target": split.target,
        "n_items": n_items,
        "method": label,
        "n_references": method.reference.n_models,
        "regime": getattr(method, "regime", None),
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
    }
    if json_out:
        print_json(result)
        return
    table = Table(title=f"{result['dataset']}: {split.target}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    regime = getattr(method, "regime", None)
    detail = f" ({regime}, B = {method.n_buckets})" if regime and hasattr(method, "n_buckets") else ""
    table.add_row("method", label.replace("[", "\\["))
    table.add_row("references", f"{method.reference.n_models} models{detail}")
    table.add_row("items used", f"{est.n_observed} of {n_items} ({100 * est.n_observed / n_items:.1f} %)")
    table.add_row("stopped by", stopped_by)
    table.add_row("estimate", f"{est.mean:.4f}")
    table.add_row("95 % interval", f"[{lo:.4f}, {hi:.4f}]  (width {hi - lo:.4f})")
    table.add_row("true full-benchmark score", f"{truth:.4f}")
    table.add_row("error", f"{est.mean - truth:+.4f}  ({'inside' if result['covered'] else 'outside'} the interval)")
    table.add_row(f"RS-Mean after {est.n_observed} random items", f"{rs:.4f}  (error {rs - truth:+.4f})")
    for note in est.notes:
        table.add_row("note", note.replace("[", "\\["))
    console.print(table)
