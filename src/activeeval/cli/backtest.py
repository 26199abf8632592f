"""``activeeval backtest`` and ``activeeval reproduce table1|table2``: the paper's protocol from the command line.

Thin layer: argument parsing, output and files only; the work is in
:mod:`activeeval.experiments` (protocol, runner, metrics, tables, plots).
With ``--out``, every finished task is kept in ``--out/tasks`` as it
completes (:mod:`activeeval.experiments.checkpoint`), so Ctrl-C (exit 130), a
crash or ``kill -9`` loses none of them and the same command resumes. The
result files go to a temporary directory next to ``--out`` and are moved into
place only when everything is written (the kept tasks then go), so an error
leaves nothing half-written (:func:`activeeval._files.output_folder`);
``--out`` must be new or empty, hold an interrupted run's tasks, or (with
``--force``) be a results folder activeeval wrote before.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from activeeval.cli.common import (
    DUPLICATE_MODELS,
    FORCE,
    KIND,
    MISSING,
    OUT_RULE,
    OUT_TASKS,
    PRIOR_WEIGHTS,
    PROGRESS,
    SCORE_RANGE,
    app,
    check_out,
    cli_errors,
    interruptible,
    load_dataset,
    make_app,
    print_json,
    progress_bar,
    read_options,
    results_folder,
)
from activeeval.exceptions import ConfigurationError
from activeeval.stopping import DEFAULT_EPSILON2

if TYPE_CHECKING:
    from activeeval.data.matrix import ScoreMatrix
    from activeeval.experiments.protocol import BacktestConfig

# The paper's Table 1 methods (its BayesAME under its own name), and our default beside them.
TABLE1_METHODS = (
    "bayesame-paper", "bayesame-paper-rs", "rs-mean", "seq-apw", "bayes-aipw", "bayes-rs-learn", "proeval", "irt",
)
ALL_METHODS = ("bayesame", *TABLE1_METHODS)
DEFAULT_SEEDS = 20  # minutes on the bundled data; the paper's 200 take hours (docs/BENCHMARKS.md)
BASELINE = "rs-mean"  # experiments.tables.BASELINE (checked in a test); kept here so --help imports no pandas

reproduce_app = make_app("reproduce", "Reproduce tables of the BayesAME paper on the bundled data.")
app.add_typer(reproduce_app, name="reproduce")


def _fmt(x: object, digits: int = 2) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "—"
    return f"{x:.{digits}f}"


def _parse_methods(text: str) -> tuple[str, ...]:
    from activeeval.experiments.runner import check_methods
    from activeeval.methods.registry import split_method_list

    names = tuple(split_method_list(text))
    if not names:
        raise ConfigurationError(f"--methods must list at least one method, got {text!r}; e.g. rs-mean,bayesame")
    return check_methods(names)


def _method_flags(names: tuple[str, ...], likelihood: str | None, prior_weights: Path | None
                  ) -> tuple[tuple[str, ...], dict]:
    """--likelihood and --prior-weights applied to every method of --methods: (labels, method_options).

    --likelihood goes into each label (``bayesame-paper[likelihood=logit]``); the weights, a mapping, into
    ``BacktestConfig.method_options``. A method without the option is an error naming it.
    """
    from activeeval.experiments.runner import check_methods
    from activeeval.methods.registry import method_parameters, method_spec, parse_method_spec

    if likelihood is not None and likelihood not in ("gaussian", "logit"):
        raise ConfigurationError(f"--likelihood must be 'gaussian' or 'logit', got {likelihood!r}")
    weights = None
    if prior_weights is not None:
        from activeeval.data.io import read_prior_weights

        weights = read_prior_weights(prior_weights)
    labels, options_of = [], {}
    for label in names:
        name, options = parse_method_spec(label)
        for flag, key, value in (("--likelihood", "likelihood", likelihood), ("--prior-weights", "weights", weights)):
            if value is not None and key not in method_parameters(name):
                raise ConfigurationError(
                    f"{flag} applies to methods with a {key} option (bayesame-paper, bayesame-paper-rs); method "
                    f"{name!r} has none: remove it from --methods (or run it in a backtest without {flag})")
        if likelihood is not None:
            if options.get("likelihood", likelihood) != likelihood:
                raise ConfigurationError(f"method {label!r} sets likelihood={options['likelihood']}, --likelihood "
                                         f"{likelihood}: give it once")
            options["likelihood"] = likelihood
        labels.append(method_spec(name, options))
        if weights is not None:
            options_of[labels[-1]] = {"weights": weights}
    return check_methods(tuple(labels)), options_of


def _check_weights_cover(weights: dict, matrix, config) -> None:
    """Every model of the reference pool has a weight, and every weight names a model of the dataset."""
    from activeeval.experiments.runner import backtest_split

    models = set(matrix.model_ids)
    unknown = [m for m in weights if m not in models]
    missing = [m for m in backtest_split(matrix, config).pool if m not in weights]
    if unknown or missing:
        what = []
        if missing:
            what.append(f"no weight for {len(missing)} model(s) of the reference pool: {', '.join(missing[:5])}"
                        + (", ..." if len(missing) > 5 else ""))
        if unknown:
            what.append(f"{len(unknown)} model(s) not in the dataset: {', '.join(unknown[:5])}"
                        + (", ..." if len(unknown) > 5 else ""))
        raise ConfigurationError(f"--prior-weights: {'; '.join(what)}; give one weight per model of the dataset "
                                 "(the targets' weights are not used)")


def _shared_order(orders: str) -> bool:
    if orders not in ("shared", "independent"):
        raise ConfigurationError(f"--orders must be 'shared' or 'independent', got {orders!r}")
    return orders == "shared"


def _task_store(out: Path | None, key: str = ""):
    """Where run_backtest keeps the finished tasks of a run: --out's tasks folder (None without --out)."""
    if out is None:
        return None
    from activeeval.experiments.checkpoint import TaskStore

    folder = out.expanduser() / OUT_TASKS
    return TaskStore(folder / key if key else folder, flag="--out")


def default_format() -> str:
    """parquet when pyarrow is installed, else csv (which the base install always writes)."""
    import importlib.util

    return "parquet" if importlib.util.find_spec("pyarrow") is not None else "csv"


def _check_common(workers: int | None, backend: str, output_format: str | None) -> str:
    from activeeval.experiments.runner import BACKENDS

    if workers is not None and workers < 1:
        raise ConfigurationError(f"--workers must be a positive integer, got {workers}")
    if backend not in BACKENDS:
        raise ConfigurationError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    output_format = output_format or default_format()
    if output_format not in ("parquet", "csv"):
        raise ConfigurationError(f"--format must be 'parquet' or 'csv', got {output_format!r}")
    return output_format


FORMAT_HELP = "Raw results as parquet or csv. [default: parquet if pyarrow is installed, else csv]"


def _write_frame(frame, path: Path, output_format: str) -> Path:
    if output_format == "parquet":
        try:
            frame.to_parquet(path.with_suffix(".parquet"), index=False)
        except ImportError as exc:
            raise ConfigurationError(
                'Parquet output needs pyarrow: pip install "activeeval[parquet]", or pass --format csv'
            ) from exc
        return path.with_suffix(".parquet")
    frame.to_csv(path.with_suffix(".csv"), index=False)
    return path.with_suffix(".csv")


def _write_result(result, summary: dict, tmp: Path, prefix: str, output_format: str, plots: bool) -> None:
    from activeeval.experiments.tables import cost_accuracy_frame, curves_frame, runs_frame, stops_frame

    curves = curves_frame(result)
    cost = cost_accuracy_frame(result)
    _write_frame(runs_frame(result), tmp / f"{prefix}runs", output_format)
    _write_frame(stops_frame(result), tmp / f"{prefix}stops", output_format)
    curves.to_csv(tmp / f"{prefix}curves.csv", index=False)
    cost.to_csv(tmp / f"{prefix}cost_accuracy.csv", index=False)
    (tmp / f"{prefix}summary.json").write_text(json.dumps(_payload(result, summary), indent=2) + "\n")
    if plots:
        from activeeval.experiments.plots import plots_available, write_plots

        if not plots_available():  # the results matter more than their pictures: write them, and say why no plots
            typer.echo('note: no plots: matplotlib is not installed (pip install "activeeval[plot]"); the results '
                       "are written", err=True)
            return
        sub = tmp / prefix.rstrip("_") if prefix else tmp
        sub.mkdir(exist_ok=True)
        cfg = result.config
        write_plots(curves, cost, sub, f"{result.dataset}, {_regime_title(result)}, {cfg.ref_fraction:.0%} refs")


def _check_multi_target_flags(multi_target: bool, correlation: str | None, regime: str | None) -> None:
    if not multi_target:
        if correlation is not None:
            raise ConfigurationError(
                "--correlation chooses the targets of a multi-target backtest; add --multi-target (or drop "
                "--correlation)")
        return
    if correlation is None:
        raise ConfigurationError(
            "--multi-target needs --correlation low (a random target set) or high (the most correlated models)")
    if regime is not None:
        raise ConfigurationError(
            "--regime does not apply to --multi-target: its targets are the --correlation set; drop --regime")


def _regime_title(result) -> str:
    """``interpolation``, or ``multi-target, high correlation (mean r = 0.83)``."""
    split = result.split
    if not result.config.multi_target:
        return result.config.regime
    return f"{split.regime}, {split.correlation} correlation (mean r = {split.mean_correlation:.2f})"


def _payload(result, summary: dict) -> dict:
    extra = {"correlation": result.split.correlation_summary()} if result.config.multi_target else {}
    return {
        "dataset": result.dataset,
        "regime": result.config.regime,
        "refs": result.config.ref_fraction,
        "targets": list(result.split.targets),
        "seeds": result.config.n_seeds,
        "n_items": result.n_items,
        "dropped_twins": list(result.split.dropped_twins),
        **extra,
        "wall_time_s": round(result.wall_time, 1),
        "methods": {
            name: {
                "ew_irmse": s["ew_irmse"],
                "gain_db": s["gain_db"],
                "coverage_at_stop": s["coverage_at_stop"],
                "mean_fraction_at_stop": s["mean_fraction_at_stop"],
            }
            for name, s in summary.items()
        },
    }


@app.command("backtest")
@cli_errors
def backtest_command(
    dataset: str = typer.Option(..., "--dataset", help="Dataset name or score file (models x items)."),
    methods: str = typer.Option(
        ",".join(ALL_METHODS), "--methods", "--method",
        help="Comma-separated method names, each with optional constructor options in brackets, e.g. "
        "'bayesame,bayesame[selection=random]' to compare two settings.",
    ),
    regime: str | None = typer.Option(
        None, "--regime", help="interpolation or extrapolation (not with --multi-target). [default: interpolation]"),
    multi_target: bool = typer.Option(
        False, "--multi-target",
        help="Targets of low or high correlation (--correlation; the paper's §5.2): multi-target methods such as "
        "bayesame-multi evaluate them jointly, single-target methods one by one.",
    ),
    correlation: str | None = typer.Option(
        None, "--correlation",
        help="With --multi-target: low (a random target set) or high (the most correlated models, greedily).",
    ),
    refs: float = typer.Option(0.5, "--refs", help="Fraction of the reference pool sampled per seed, in (0, 1]."),
    targets: int = typer.Option(10, "--targets", "--targets-count", help="Number of target models."),
    seeds: int | None = typer.Option(
        None, "--seeds",
        help=f"Number of seeds (reference samples and item orders); the paper used 200. [default: {DEFAULT_SEEDS}, "
        "with the estimated cost printed first]",
    ),
    workers: int | None = typer.Option(None, "--workers", help="Worker processes. [default: all cores]"),
    backend: str = typer.Option("local", "--backend", help="local, ray or dask."),
    address: str | None = typer.Option(None, "--address", help="ray/dask cluster address. [default: local]"),
    out: Path | None = typer.Option(None, "--out", help="Directory for raw results and PNG plots: " + OUT_RULE),
    force: bool = FORCE,
    epsilon2: float = typer.Option(DEFAULT_EPSILON2, "--epsilon2",
                                   help="ε2 of the 'at stop' columns (the sweep is always run)."),
    split_seed: int = typer.Option(
        0, "--split-seed", help="Seed of the random targets (interpolation; --multi-target --correlation low)."),
    output_format: str | None = typer.Option(None, "--format", help=FORMAT_HELP),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots to --out (when matplotlib is "
                               "installed: activeeval[plot]; otherwise a note says so)."),
    progress: bool | None = PROGRESS,
    orders: str = typer.Option(
        "shared", "--orders",
        help="shared: one random item order per seed for all targets (fast); independent: one per target.",
    ),
    batch_size: int = typer.Option(
        1, "--batch-size",
        help="|A|: the BayesAME methods select batches of this many items (App. B.1); --myopic observes the whole "
        "batch per step, --non-myopic one random member. 1: one item at a time.",
    ),
    batch_strategy: str = typer.Option(
        "greedy", "--batch-strategy",
        help="How the BayesAME methods pick a batch: greedy (condition on each pick), pair (the |A| = 2 closed "
        "form, in steps of two), lars, dpp or kmeans (warm starts, then local search and SMC).",
    ),
    myopic: bool = typer.Option(
        True, "--myopic/--non-myopic",
        help="With --batch-size K > 1: observe all K items of each batch (myopic; the stopping window becomes "
        "ceil(30/K) batches) or one random member of it (non-myopic).",
    ),
    missing: str = MISSING,
    kind: str | None = KIND,
    score_range: tuple[float, float] | None = SCORE_RANGE,
    duplicate_models: str | None = DUPLICATE_MODELS,
    likelihood: str | None = typer.Option(
        None, "--likelihood",
        help="gaussian or logit (the paper's logit-normal variants, App. B.3) for every method of --methods "
        "(each must have the option: bayesame-paper, bayesame-paper-rs). [default: each method's own]"),
    prior_weights: Path | None = PRIOR_WEIGHTS,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Backtest methods on held-out models with the protocol of the BayesAME paper (§5; §5.2 with --multi-target)."""
    from activeeval.experiments.protocol import EPSILON2_SWEEP, BacktestConfig
    from activeeval.experiments.runner import check_batch, check_multi_target, run_backtest
    from activeeval.experiments.tables import summarize

    output_format = _check_common(workers, backend, output_format)
    shared = _shared_order(orders)
    names, method_options = _method_flags(_parse_methods(methods), likelihood, prior_weights)
    check_out(out, force)
    _check_multi_target_flags(multi_target, correlation, regime)
    if not (epsilon2 > 0):
        raise ConfigurationError(f"--epsilon2 must be > 0, got {epsilon2}")
    if seeds is not None and seeds < 1:
        raise ConfigurationError(f"--seeds must be a positive integer, got {seeds}")
    if BASELINE not in names:
        names = names + (BASELINE,)
        typer.echo(f"note: added {BASELINE} (the baseline of RMSE Gain)", err=True)
    sweep = tuple(sorted(set(EPSILON2_SWEEP) | {float(epsilon2)}))
    if batch_size < 1:
        raise ConfigurationError(f"--batch-size must be a positive integer, got {batch_size}; 1 selects one item "
                                 "at a time")
    batch: dict[str, Any] = dict(batch_size=batch_size, batch_strategy=batch_strategy, myopic=myopic)
    settings: dict[str, Any] = dict(
        methods=names, ref_fraction=refs, n_targets=targets, n_seeds=DEFAULT_SEEDS if seeds is None else seeds,
        split_seed=split_seed, epsilon2=sweep, shared_order=shared, method_options=method_options, **batch,
    )
    config: BacktestConfig
    if multi_target:
        from activeeval.experiments.multi_target import MultiTargetConfig

        config = MultiTargetConfig(correlation=correlation, **settings)
    else:
        config = BacktestConfig(regime=regime or "interpolation", **settings)
    check_multi_target(config)  # a multi-target method without --multi-target: before loading anything
    matrix = load_dataset(dataset, missing, read_options(kind, score_range, duplicate_models))
    if method_options:
        _check_weights_cover(next(iter(method_options.values()))["weights"], matrix, config)
    check_batch(config, matrix.n_items)
    store = _task_store(out)
    with interruptible(out):
        if seeds is None:
            _print_estimate(matrix, config, workers)
        with progress_bar("backtest", progress and not as_json) as update:
            result = run_backtest(matrix, config, workers=workers, backend=backend, address=address,
                                  progress=update, checkpoint=store)
    summary = summarize(result, epsilon2)
    if out is not None:
        with results_folder(out, force) as tmp:
            _write_result(result, summary, tmp, "", output_format, plots)
            (tmp / "config.json").write_text(json.dumps(_config_dict(config, dataset), indent=2) + "\n")
    if as_json:
        payload = _payload(result, summary)
        keys = ("dataset", "regime", "methods") + (("correlation", "targets") if config.multi_target else ())
        print_json({k: payload[k] for k in keys})
        return
    _print_table(result, summary, epsilon2)
    if out is not None:
        typer.echo(f"wrote raw results and plots to {out}")


def estimate_seconds(matrix, config, workers: int | None) -> tuple[float, dict[str, float]]:
    """Estimated wall time of the whole backtest: one seed of every method, timed, times seeds / workers."""
    import os

    from activeeval.experiments.runner import backtest_split, run_task

    split = backtest_split(matrix, config)
    per_method = {}
    for method in config.methods:
        start = time.process_time()
        run_task(matrix, config, split, method, 0)
        per_method[method] = time.process_time() - start
    n_workers = max(1, min(workers or os.cpu_count() or 1, config.n_seeds * len(config.methods)))
    return sum(per_method.values()) * config.n_seeds / n_workers, per_method


def _print_estimate(matrix, config, workers: int | None) -> None:
    total, per_method = estimate_seconds(matrix, config, workers)
    slowest = max(per_method, key=lambda name: per_method[name])
    typer.echo(
        f"backtest: {len(config.methods)} methods x {config.n_seeds} seeds (--seeds default {DEFAULT_SEEDS}), "
        f"{config.n_targets} targets each; estimated {_duration(total)} (one seed of each method timed: "
        f"{sum(per_method.values()):.1f} s CPU, slowest {slowest} {per_method[slowest]:.1f} s); "
        f"--seeds 200 (the paper's) would take about {_duration(total * 200 / config.n_seeds)}",
        err=True,
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _config_dict(config, dataset: str) -> dict:
    extra = {"correlation": config.correlation} if config.multi_target else {}
    return {
        "dataset": dataset, "methods": list(config.methods), "regime": config.regime, **extra,
        "refs": config.ref_fraction,
        "targets": config.n_targets, "seeds": config.n_seeds, "split_seed": config.split_seed,
        "root_seed": config.root_seed, "epsilon1": config.epsilon1, "epsilon2_sweep": list(config.epsilon2),
        "window": config.window, "level": config.level, "orders": "shared" if config.shared_order else "independent",
        **({"prior_weights": next(iter(config.method_options.values())).get("weights")} if config.method_options
           else {}),
        "batch_size": config.batch_size, "batch_strategy": config.batch_strategy, "myopic": config.myopic,
    }


def _print_table(result, summary: dict, epsilon2: float) -> None:
    cfg = result.config
    table = Table(
        title=f"{result.dataset}: {_regime_title(result)}, {cfg.ref_fraction:.0%} refs, "
        f"{len(result.split.targets)} targets, "
        f"{cfg.n_seeds} seeds, N = {result.n_items}; at stop: ε2 = {epsilon2:g}"
        + (f"; batches |A| = {cfg.batch_size} {'myopic' if cfg.myopic else 'non-myopic'}, {cfg.batch_strategy}"
           if cfg.batched else "")
    )
    table.add_column("method", justify="left", no_wrap=True)  # a spec label stays on one line
    for col in ("EW-IRMSE", "gain@5%", "gain@10%", "gain@25%", "cov@stop", "n/N@stop"):
        table.add_column(col, justify="right")
    for name, s in summary.items():
        g = s["gain_db"]
        table.add_row(
            escape(name), _fmt(s["ew_irmse"]), _fmt(g["5"]), _fmt(g["10"]), _fmt(g["25"]),
            _fmt(s["coverage_at_stop"], 3), _fmt(s["mean_fraction_at_stop"], 3),
        )
    Console(soft_wrap=False, width=max(Console().width, 150)).print(table)  # as rank: logs keep whole rows
    if cfg.multi_target:
        typer.echo(f"targets ({result.split.correlation} correlation): {', '.join(result.split.targets)}")
    if result.split.dropped_twins:
        twins = ", ".join(result.split.dropped_twins)
        typer.echo(f"dropped from the reference pool (exact twins of a target): {twins}")
    typer.echo(f"wall time {result.wall_time:.1f} s ({result.backend}, {result.workers} worker(s))")


# The flags every ``reproduce`` table shares.
REPRO_WORKERS = typer.Option(None, "--workers", help="Worker processes. [default: all cores]")
REPRO_BACKEND = typer.Option("local", "--backend", help="local, ray or dask.")
REPRO_ADDRESS = typer.Option(None, "--address", help="ray/dask cluster address. [default: local]")
REPRO_OUT = typer.Option(None, "--out", help="Directory for raw results: " + OUT_RULE)
REPRO_FORMAT = typer.Option(None, "--format", help=FORMAT_HELP)
REPRO_PROGRESS = PROGRESS
REPRO_ORDERS = typer.Option(
    "shared", "--orders", help="shared: one random item order per seed for all targets (fast); independent: one per "
    "target.")
REPRO_JSON = typer.Option(False, "--json", help="Print one JSON object.")


def _run_reproduction(plan: list[tuple], workers: int | None, backend: str, address: str | None,
                      progress: bool | None, as_json: bool, out: Path | None) -> dict[str, tuple]:
    """Run each ``(key, ScoreMatrix, BacktestConfig)`` of ``plan``: {key: (BacktestResult, summary)}.

    The key is also the file prefix in ``--out`` (``ifeval_interpolation_``) and the name of the folder of
    its finished tasks there (``tasks/ifeval_interpolation``).
    """
    from activeeval.experiments.runner import run_backtest
    from activeeval.experiments.tables import summarize

    results: dict[str, tuple] = {}
    for key, matrix, config in plan:
        label = key.rstrip("_").replace("_", " ")
        store = _task_store(out, key.rstrip("_"))
        with interruptible(out), progress_bar(label, progress and not as_json) as update:
            res = run_backtest(matrix, config, workers=workers, backend=backend, address=address, progress=update,
                               checkpoint=store)
        results[key] = (res, summarize(res))
        if not as_json:
            typer.echo(f"{label}: {res.wall_time:.1f} s", err=True)
    return results


def _write_reproduction(out: Path | None, force: bool, results: dict[str, tuple], output_format: str,
                        name: str, meta: dict) -> None:
    """Raw results of every run (prefixed by its key) and ``{name}.json`` with ``meta``, all or nothing."""
    if out is None:
        return
    with results_folder(out, force) as tmp:
        for key, (res, summ) in results.items():
            _write_result(res, summ, tmp, key, output_format, plots=False)
        (tmp / f"{name}.json").write_text(json.dumps(meta, indent=2) + "\n")


def _print_reproduction(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]], width: int = 150) -> None:
    """A Rich table of ours next to the paper's, at least ``width`` characters wide; text columns left-aligned."""
    table = Table(title=title)
    text = {"dataset", "row", "method", "note"}
    for col in columns:
        table.add_column(col, justify="left" if col in text else "right", no_wrap=col == "method")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    Console(soft_wrap=False, width=max(Console().width, width)).print(table)  # as rank: logs keep whole rows


def _reproduce_datasets(datasets: str, known: tuple[str, ...], what: str) -> list[str]:
    """The names of --datasets, each one of ``known`` (else an error naming --datasets and ``what`` exists)."""
    wanted = [d.strip().lower() for d in datasets.split(",") if d.strip()]
    for d in wanted:
        if d not in known:
            raise ConfigurationError(f"--datasets: {what}, got {d!r}")
    if not wanted:
        raise ConfigurationError(f"--datasets must name at least one dataset: {what}")
    return wanted


@reproduce_app.command("table1")
@cli_errors
def table1_command(
    seeds: int = typer.Option(200, "--seeds", help="Seeds per (dataset, regime); the paper used 200."),
    datasets: str = typer.Option("ifeval,musr", "--datasets", help="Comma-separated: ifeval, musr."),
    methods: str = typer.Option(",".join(ALL_METHODS), "--methods", help="Comma-separated method names."),
    workers: int | None = REPRO_WORKERS,
    backend: str = REPRO_BACKEND,
    address: str | None = REPRO_ADDRESS,
    out: Path | None = REPRO_OUT,
    force: bool = FORCE,
    output_format: str | None = REPRO_FORMAT,
    progress: bool | None = REPRO_PROGRESS,
    orders: str = REPRO_ORDERS,
    as_json: bool = REPRO_JSON,
) -> None:
    """Table 1 of the BayesAME paper (EW-IRMSE, 50 % references, binary), ours next to the paper's.

    The paper's BayesAME runs as bayesame-paper (and bayesame-paper-rs); the
    default bayesame is printed beside it (the paper has no number for it).
    """
    from activeeval.datasets import resolve
    from activeeval.experiments.protocol import BacktestConfig
    from activeeval.experiments.tables import PAPER_TABLE1

    output_format = _check_common(workers, backend, output_format)
    shared = _shared_order(orders)
    names = _parse_methods(methods)
    check_out(out, force)
    wanted = _reproduce_datasets(datasets, tuple(PAPER_TABLE1), f"Table 1 rows exist for {', '.join(PAPER_TABLE1)}")
    if BASELINE not in names:
        names = names + (BASELINE,)
    start = time.perf_counter()
    plan = [(f"{d}_{regime}_", resolve(d), BacktestConfig(methods=names, regime=regime, ref_fraction=0.5, n_targets=10,
                                                          n_seeds=seeds, shared_order=shared))
            for d in wanted for regime in ("interpolation", "extrapolation")]
    results = _run_reproduction(plan, workers, backend, address, progress, as_json, out)
    wall = time.perf_counter() - start
    rows = []
    for d in wanted:
        for name in names:
            paper = PAPER_TABLE1[d].get(name, (None, None))
            rows.append({
                "dataset": d, "method": name,
                "ours_interpolation": results[f"{d}_interpolation_"][1][name]["ew_irmse"],
                "paper_interpolation": paper[0],
                "ours_extrapolation": results[f"{d}_extrapolation_"][1][name]["ew_irmse"],
                "paper_extrapolation": paper[1],
            })
    _write_reproduction(out, force, results, output_format, "table1",
                        {"seeds": seeds, "wall_time_s": wall, "rows": rows})
    if as_json:
        print_json({"seeds": seeds, "wall_time_s": round(wall, 1), "rows": rows})
        return
    _print_reproduction(
        f"Table 1 — EW-IRMSE, 50 % references, binary; ours: {seeds} seeds; paper: 200 seeds",
        ("dataset", "method", "ours interp.", "paper interp.", "ours extrap.", "paper extrap."),
        [(r["dataset"], r["method"], _fmt(r["ours_interpolation"]), _fmt(r["paper_interpolation"]),
          _fmt(r["ours_extrapolation"]), _fmt(r["paper_extrapolation"])) for r in rows])
    typer.echo(f"wall time {wall:.1f} s")


def _table2_datasets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(datasets with paper numbers, the continuous bundled or shared sets): what --datasets of table2 takes."""
    from activeeval.data.datasets import list_datasets
    from activeeval.experiments.tables import PAPER_TABLE2

    continuous = tuple(d.name for d in list_datasets(include_shared=True) if d.kind == "continuous")
    return tuple(PAPER_TABLE2), continuous


@reproduce_app.command("table2")
@cli_errors
def table2_command(
    seeds: int = typer.Option(200, "--seeds", help="Seeds per (dataset, regime); the paper used 200."),
    datasets: str = typer.Option(
        "ifeval,musr", "--datasets",
        help="Comma-separated: ifeval, musr (the paper's rows), and the continuous sets of 'activeeval datasets "
        "--all' (alpacaeval2, wmt21_*: ours only, the paper has no numbers)."),
    targets: int = typer.Option(10, "--targets", help="Target models per (dataset, regime); the paper used 10."),
    workers: int | None = REPRO_WORKERS,
    backend: str = REPRO_BACKEND,
    address: str | None = REPRO_ADDRESS,
    out: Path | None = REPRO_OUT,
    force: bool = FORCE,
    output_format: str | None = REPRO_FORMAT,
    progress: bool | None = REPRO_PROGRESS,
    orders: str = REPRO_ORDERS,
    as_json: bool = REPRO_JSON,
) -> None:
    """Table 2 of the BayesAME paper (batch selection, App. B.1; EW-IRMSE, 50 % references), ours next to the paper's.

    Rows: BayesAME (bayesame-paper), BayesAME-RS, |A|=2 myopic (bayesame-paper played in myopic batches of two
    by the pair closed form: a backtest of its own), |A|=2 non-myopic (one random member of the best pair per
    step), Bayes-AIPW, and our default bayesame beside them. In the non-unique regime bayesame-paper selects at
    random whatever its batch options; the note column says where that happened.
    """
    from activeeval.datasets import resolve
    from activeeval.experiments.protocol import BacktestConfig
    from activeeval.experiments.tables import (
        PAPER_TABLE2,
        TABLE2_NON_MYOPIC,
        TABLE2_ROWS,
        paper_regimes,
        table2_note,
    )

    output_format = _check_common(workers, backend, output_format)
    shared = _shared_order(orders)
    check_out(out, force)
    if seeds < 1:
        raise ConfigurationError(f"--seeds must be a positive integer, got {seeds}")
    paper_sets, continuous = _table2_datasets()
    wanted = _reproduce_datasets(
        datasets, paper_sets + continuous,
        f"Table 2 rows exist for {', '.join(paper_sets)}; ours only on the continuous sets "
        f"{', '.join(continuous) or '(none found)'}")
    single = tuple(dict.fromkeys(r.label for r in TABLE2_ROWS if r.myopic_batch == 1)) + (BASELINE,)
    batches = sorted({r.myopic_batch for r in TABLE2_ROWS if r.myopic_batch > 1})
    start = time.perf_counter()
    plan: list[tuple[str, ScoreMatrix, BacktestConfig]] = []
    regimes: dict[str, dict[str, list[str]]] = {}
    for d in wanted:
        matrix = resolve(d)
        for regime in ("interpolation", "extrapolation"):
            config = BacktestConfig(methods=single, regime=regime, ref_fraction=0.5, n_targets=targets,
                                    n_seeds=seeds, shared_order=shared)
            plan.append((f"{d}_{regime}_", matrix, config))
            # myopic play is a backtest setting (all K items of a batch observed), so it needs a run of its own
            for k in batches:
                labels = tuple(r.label for r in TABLE2_ROWS if r.myopic_batch == k)
                plan.append((f"{d}_{regime}_myopic{k}_", matrix, BacktestConfig(
                    methods=labels, regime=regime, ref_fraction=0.5, n_targets=targets, n_seeds=seeds,
                    shared_order=shared, batch_size=k, myopic=True, batch_strategy="pair")))
            regimes.setdefault(d, {})[regime] = paper_regimes(matrix, config)
    results = _run_reproduction(plan, workers, backend, address, progress, as_json, out)
    wall = time.perf_counter() - start
    rows, shown = [], []
    for d in wanted:
        for r in TABLE2_ROWS:
            paper = PAPER_TABLE2.get(d, {}).get(r.key, (None, None))
            suffix = "" if r.myopic_batch == 1 else f"myopic{r.myopic_batch}_"
            rows.append({
                "dataset": d, "row": r.name, "method": r.label, "myopic_batch": r.myopic_batch,
                "ours_interpolation": results[f"{d}_interpolation_{suffix}"][1][r.label]["ew_irmse"],
                "paper_interpolation": paper[0],
                "ours_extrapolation": results[f"{d}_extrapolation_{suffix}"][1][r.label]["ew_irmse"],
                "paper_extrapolation": paper[1],
                "note": table2_note(d, r, regimes[d]),
            })
            shown.append((r.method, table2_note(d, r, regimes[d], short=True)))
    meta = {"seeds": seeds, "targets": targets, "wall_time_s": round(wall, 1), "regimes": regimes, "rows": rows}
    _write_reproduction(out, force, results, output_format, "table2", meta)
    if as_json:
        print_json(meta)
        return
    _print_reproduction(
        f"Table 2 — batch selection (App. B.1), EW-IRMSE, 50 % references, {targets} targets; ours: {seeds} seeds; "
        "paper: 200 seeds",
        ("dataset", "row", "method", "ours interp.", "paper interp.", "ours extrap.", "paper extrap.", "note"),
        [(r["dataset"], r["row"], method, _fmt(r["ours_interpolation"]), _fmt(r["paper_interpolation"]),
          _fmt(r["ours_extrapolation"]), _fmt(r["paper_extrapolation"]), note)
         for r, (method, note) in zip(rows, shown, strict=True)], width=200)
    for d in wanted:
        typer.echo(f"{d}: bayesame-paper's regime per seed (B ≥ N − N0: unique): " + "; ".join(
            f"{regime} {sum(g == 'unique' for g in regs)}/{len(regs)} unique" for regime, regs in regimes[d].items()))
    typer.echo("note: 'ours random: interp. k/S' = bayesame-paper was in the non-unique regime (B < N − N0) on k of S "
               "seeds, where it selects uniformly at random whatever its batch options: the |A|=2 rows there are "
               "random selection too (as BayesAME-RS). 'paper –: non-unique regime': the paper omits the batch rows "
               "of its MuSR for that reason. '—': no number (--json gives each note in full). non-myopic: "
               f"{TABLE2_NON_MYOPIC} (one random member of the best pair per step).")
    typer.echo(f"wall time {wall:.1f} s")

