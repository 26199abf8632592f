"""``activeeval datasets``: list the real score matrices that can be loaded by name."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import typer

from activeeval.cli.common import app, cli_errors, print_json


def _table(entries):
    from rich.table import Table

    table = Table(title="activeeval datasets", title_justify="left")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("models", justify="right")
    table.add_column("items", justify="right")
    table.add_column("kind", no_wrap=True)
    table.add_column("missing", justify="right")
    table.add_column("origin")
    for e in entries:
        table.add_row(e.name, str(e.n_models), str(e.n_items), e.kind, str(e.n_missing), e.origin)
    return table


@app.command("datasets")
@cli_errors
def datasets_command(
    as_json: bool = typer.Option(False, "--json", help="Print a JSON list of objects instead of a table."),
    include_shared: bool = typer.Option(
        False, "--all", help="Also list the project's shared (not bundled) datasets when the folder is found."
    ),
    models: str | None = typer.Option(
        None, "--models", metavar="NAME",
        help="List the models of dataset (or score file) NAME instead, with their full-benchmark scores: the names "
             "--target and --exclude-models take."),
) -> None:
    """List the datasets that --dataset and --reference accept by name."""
    from rich.console import Console

    from activeeval.data.datasets import list_datasets, shared_data_dir

    if models is not None:
        _print_models(models, as_json)
        return
    entries = list_datasets(include_shared=include_shared)
    if as_json:
        print_json([dataclasses.asdict(e) for e in entries])
        return
    console = Console(soft_wrap=False)
    console.print(_table(entries))
    if include_shared and shared_data_dir() is None:
        typer.echo(
            "note: no shared data folder found (set ACTIVEEVAL_SHARED_DATA); listing bundled datasets only", err=True
        )


def _print_models(name: str, as_json: bool) -> None:
    """Each model of ``name`` and its mean score over the items it has (tab-separated; --json: a list)."""
    import numpy as np

    from activeeval.data.datasets import resolve

    matrix = resolve(name)
    seen = ~np.isnan(matrix.scores)
    counts = seen.sum(axis=1)
    sums = np.where(seen, matrix.scores, 0.0).sum(axis=1)
    rows: list[dict[str, Any]] = [
        {"model": m, "score": float(s / c) if c else math.nan, "missing": matrix.n_items - int(c)}
        for m, s, c in zip(matrix.model_ids, sums, counts, strict=True)]
    if as_json:
        print_json(rows)
        return
    for row in rows:
        score = "-" if math.isnan(row["score"]) else f"{row['score']:.4f}"
        missing = f"\t{row['missing']} missing" if row["missing"] else ""
        typer.echo(f"{row['model']}\t{score}{missing}")
