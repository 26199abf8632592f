"""``activeeval reference build``: a reference score file from harness outputs of other models.

Thin layer over :mod:`activeeval.data.adapters` and :func:`activeeval.write_scores`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from activeeval.cli.common import app, cli_errors, make_app
from activeeval.exceptions import ConfigurationError

reference_app = make_app("reference", "Build reference score files from harness outputs.")
app.add_typer(reference_app, name="reference")

SOURCES = ("lm-eval", "helm", "alpaca-eval", "inspect")


@reference_app.command("build")
@cli_errors
def build(
    paths: list[Path] = typer.Argument(
        ..., help="One per reference model: lm-eval --output_path folders, HELM run folders, or AlpacaEval "
        "annotations.json files; Inspect: logs (.eval, .json) or folders of logs, of any models.",
    ),
    source: str = typer.Option(
        ..., "--from", help="The harness that wrote PATHS: lm-eval, helm, alpaca-eval or inspect."),
    out: Path = typer.Option(..., "--out", help="Score file to write (.csv, .csv.gz, .parquet, .jsonl)."),
    task: str | None = typer.Option(
        None, "--task", help="lm-eval: the task (its doc ids become the item ids); Inspect: the task, when the logs "
        "hold several."),
    metric: str | None = typer.Option(
        None, "--metric", help="lm-eval / HELM per-sample metric. [default: acc (lm-eval), exact_match (HELM)]"
    ),
    filter_name: str | None = typer.Option(None, "--filter", help="lm-eval filter, for tasks with several."),
    split: str | None = typer.Option(None, "--split", help="HELM split, when the metric has several."),
    id_by: str = typer.Option("index", "--id-by", help="AlpacaEval item ids: index (item000, ...) or instruction."),
    score_name: str | None = typer.Option(
        None, "--score-name", help="Inspect: the scorer to read, or SCORER/KEY. [default: the only scorer]"),
    value_map: str | None = typer.Option(
        None, "--value-map", help="Inspect: numbers for string score values, over C=1,P=0.5,I=0,N=0; e.g. 'P=0'."),
    name: str | None = typer.Option(None, "--name", help="Name of the reference. [default: the task]"),
    force: bool = typer.Option(False, "--force", help="Overwrite --out if it exists (never one of PATHS)."),
) -> None:
    """Build a reference matrix (models x items) from other models' harness outputs and write it to --out.

    Example: activeeval reference build --from lm-eval out/org__model-a out/org__model-b --task arc_easy
    --metric acc --out arc_easy_ref.csv (item ids are lm-eval doc ids, which `run --harness lm-eval` asks for);
    activeeval reference build --from inspect logs/ --out quiz_ref.csv (item ids are Inspect sample ids).
    """
    from activeeval._files import check_output
    from activeeval.data.io import write_scores

    if source not in SOURCES:
        raise ConfigurationError(f"--from must be one of {', '.join(SOURCES)}, got {source!r}")
    check_output(out, overwrite=force, protected=paths, what="--out")  # before reading every input
    given = {"--task": task, "--filter": filter_name, "--split": split,
             "--id-by": None if id_by == "index" else id_by, "--metric": metric, "--score-name": score_name,
             "--value-map": value_map}
    allowed = {"lm-eval": {"--task", "--filter", "--metric"}, "helm": {"--split", "--metric"},
               "alpaca-eval": {"--id-by"}, "inspect": {"--task", "--score-name", "--value-map"}}[source]
    extra = [k for k, v in given.items() if v is not None and k not in allowed]
    if extra:
        raise ConfigurationError(f"{', '.join(extra)} do not apply to --from {source} (it takes "
                                 f"{', '.join(sorted(allowed))})")
    if source == "lm-eval":
        from activeeval.data.adapters import reference_from_lm_eval

        if task is None:
            raise ConfigurationError(
                "--from lm-eval needs --task (the task whose samples to read), e.g. --task arc_easy")
        matrix = reference_from_lm_eval(paths, task, metric or "acc", filter=filter_name, name=name)
        what = f"lm-eval task {task!r}, metric {metric or 'acc'}; item ids are its doc ids"
    elif source == "helm":
        from activeeval.data.adapters import reference_from_helm

        matrix = reference_from_helm(paths, metric or "exact_match", split=split, name=name)
        what = f"HELM metric {metric or 'exact_match'}; item ids are its instance ids"
    elif source == "inspect":
        from activeeval.data.adapters import reference_from_inspect

        matrix = reference_from_inspect(paths, score_name, task=task, value_map=value_map, name=name)
        shown = task or (matrix.name if name is None else None)  # the task's name, unless --name renamed it
        what = (f"Inspect task {shown!r}" if shown else "Inspect logs") + \
            f", scorer {score_name or '(the only one)'}; item ids are its sample ids"
    else:
        from activeeval.data.adapters import reference_from_alpaca_eval

        matrix = reference_from_alpaca_eval(paths, id_by=id_by, name=name)  # type: ignore[arg-type]
        what = f"AlpacaEval win probabilities; item ids by {id_by}"
    write_scores(matrix, out, overwrite=force, protected=paths)
    missing = f", {matrix.n_missing} missing scores" if matrix.n_missing else ""
    typer.echo(f"wrote {out}: {matrix.n_models} models x {matrix.n_items} items, {matrix.kind}{missing} ({what})")
