"""The one table of the CLI's flags: the library names options as Python keywords, the CLI prints these.

A library error names an option with :func:`activeeval.exceptions.option` (``seed=`` in Python);
:func:`activeeval.cli.plain.cli_message` prints the flag from :data:`FLAGS` instead (``--seed``). The table
is keyed by the option's Python name, or by the key :func:`~activeeval.exceptions.option` was given where
one keyword has different flags in different commands (``inspect.model_args``). A value a message shows
is printed after the flag (``--score-range LOW HIGH``); a boolean option whose flag says the value
(``--force``, ``--non-myopic``) is keyed ``name=value``. ``tests/test_library_speaks_python.py`` checks
that every option a library message names is here, and that every flag here is one a command takes.

Importable without Typer (the light path of later session commands prints through it).
"""

from __future__ import annotations

__all__ = ["FLAGS"]

FLAGS: dict[str, str] = {
    # sessions
    "seed": "--seed",
    "method": "--method",
    "epsilon1": "--epsilon1",
    "epsilon2": "--epsilon2",
    "window": "--window",
    "max_items": "--max-items",
    "missing": "--missing",
    "label": "--label",
    "prior_weights": "--prior-weights",
    "reference": "--reference",
    "targets": "--targets",
    "target": "--target",
    "k": "--k",
    "models": "--models",
    "min_items": "--min-items",
    "budget_per_model": "--budget-per-model",
    "pairing": "--pairing",
    "jobs": "--jobs",
    "scorer": "--scorer",
    "timeout": "--timeout",
    "overwrite=True": "--force",
    # reading a reference
    "kind": "--kind",
    "score_range": "--score-range",
    "duplicate_models": "--duplicate-models",
    "exclude_models": "--exclude-models",
    "data_dir": "--data-dir",
    "item_column": "--item-column",
    "score_column": "--score-column",
    # harness results and logs
    "metric": "--metric",
    "filter": "--filter",
    "split": "--split",
    "generator": "--generator",
    "score_name": "--score-name",
    "value_map": "--value-map",
    # harnesses
    "task": "--task",
    "model": "--model",
    "model_args": "--model-args",
    "include_path": "--include-path",
    "verbose": "--verbose",
    "epochs": "--epochs",
    "inspect.model_args": "--model-arg",
    "inspect.task_args": "--task-arg",
    # backtests
    "methods": "--methods",
    "regime": "--regime",
    "ref_fraction": "--refs",
    "n_targets": "--targets",
    "n_seeds": "--seeds",
    "batch_size": "--batch-size",
    "batch_strategy": "--batch-strategy",
    "myopic": "--myopic",
    "myopic=False": "--non-myopic",
    "correlation": "--correlation",
    "backend": "--backend",
    "address": "--address",
    # ranking backtests
    "calibration": "--calibration",
    "response": "--response",
    "local_error": "--local-error",
    "holdout": "--holdout",
    "folds": "--folds",
    # the dashboard
    "host": "--host",
    "port": "--port",
}

