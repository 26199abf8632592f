"""``activeeval rank`` and ``activeeval rank-backtest``: the adaptive ranker, for real or by simulation.

Thin layer: argument parsing and printing only; the work is in
:mod:`activeeval.ranking`, :mod:`activeeval.session.ranking` (real mode: a
crash-safe session, your scorer, lm-eval or Inspect) and
:mod:`activeeval.experiments.ranking_eval` (simulation). Heavy modules are
imported inside the commands, so other commands start fast.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import typer

from activeeval.cli import harness as h
from activeeval.cli.common import (
    DUPLICATE_MODELS,
    FORCE,
    KIND,
    MISSING,
    OUT_RULE,
    OUT_TASKS,
    SCORE_RANGE,
    app,
    check_out,
    cli_errors,
    fail,
    interrupted,
    interruptible,
    json_text,
    print_json,
    read_options,
    results_folder,
)
from activeeval.exceptions import ConfigurationError, template_of
from activeeval.methods.capabilities import Capabilities


def _method(method: str) -> str:
    """The simulation's method spec, checked (experiments.ranking_eval.check_rank_method) with the flag named."""
    from activeeval.experiments.ranking_eval import check_rank_method, rank_methods

    try:
        check_rank_method(method)
    except ConfigurationError as exc:
        if not str(exc).startswith("method must be one of"):
            raise ConfigurationError(f"--method: {template_of(exc)}") from exc
        raise ConfigurationError(
            f"--method must be one of {', '.join(rank_methods())} when simulating, got {method!r} (a ranking "
            "session, --session, takes any method spec)"
        ) from exc
    return method


def _capabilities(method: str) -> Capabilities:
    """What the method of the spec ``method`` declares (methods.registry.capabilities); the defaults for a spec
    that names no registered method (refused where the method is checked)."""
    from activeeval.methods.registry import METHODS, capabilities

    name = method.split("[", 1)[0].strip()
    return capabilities(name) if name in METHODS else Capabilities()


def _shares_calibration(method: str) -> bool:
    """Whether the method takes the ranking's calibration settings (CAT: its IRT calibration, shared)."""
    return _capabilities(method).shared_calibration is not None


def _calibration(method: str, calibration: str | None, response: str | None = None,
                 local_error: bool | None = None) -> dict[str, Any]:
    """``--calibration`` / ``--response`` / ``--[no-]local-error`` as keywords for CAT (only those given);
    refused for other methods."""
    from activeeval.irt.continuous import CALIBRATION_METHODS, RESPONSES

    out: dict[str, Any] = {}
    if calibration is not None:
        if calibration not in CALIBRATION_METHODS:
            raise ConfigurationError(f"--calibration must be consistent or paper, got {calibration!r}")
        out["calibration"] = calibration
    if response is not None:
        if response not in RESPONSES:
            raise ConfigurationError(f"--response must be 2pl or rasch, got {response!r}")
        if calibration == "paper" and response == "2pl":
            raise ConfigurationError("--response 2pl needs --calibration consistent (the paper's is one-slope only)")
        out["response"] = response
    if local_error is not None:
        out["local_error"] = bool(local_error)
    if out and not _shares_calibration(method):
        flags = " and ".join("--local-error/--no-local-error" if k == "local_error" else f"--{k}" for k in out)
        verb, obj = ("apply", "them") if len(out) > 1 else ("applies", "it")
        raise ConfigurationError(f"{flags} {verb} to --method cat only, not {method!r}; drop {obj}")
    return out


def _fmt(x: float, digits: int = 3) -> str:
    return "nan" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


@app.command("rank")
@cli_errors
def rank_command(
    dataset: str | None = typer.Option(
        None, "--dataset", help="Simulate: dataset name or score file holding the models to rank (models x items)."),
    models: str | None = typer.Option(None, "--models", help="Comma-separated model ids to rank."),
    holdout: int | None = typer.Option(None, "--holdout", help="Simulate: rank K random complete models instead."),
    session: Path | None = typer.Option(
        None, "--session", help="Rank new models for real: the session file (created if absent, resumed otherwise)."),
    reference: str | None = typer.Option(
        None, "--reference", help="With --session: reference dataset name or score file (to create the session)."),
    scorer: str | None = h.SCORER,
    harness: str | None = h.HARNESS,
    method: str = typer.Option(
        "cat", "--method", help="cat (ranks on ability θ), bayesame (on the score, one method per model) or "
        "bayesame-multi (on the joint posterior of all the models), options in brackets "
        "(bayesame-multi[coupling=0.8]); with --session any method spec."),
    gamma: float = typer.Option(0.95, "--gamma", help="Pairwise confidence level, in (0, 1)."),
    budget_per_model: float = typer.Option(20.0, "--budget-per-model", help="Total budget = this x Σ costs."),
    costs: str | None = typer.Option(None, "--costs", help="JSON {model: cost} or CSV model,cost file."),
    min_items: int = typer.Option(10, "--min-items", help="Warm-up items per model."),
    seed: int = typer.Option(0, "--seed", help="Seed of the hold-out draw and the methods."),
    calibration: str | None = typer.Option(
        None, "--calibration", help="CAT only: consistent (abilities, prior and noise on one scale, error model "
        "learned on the references) or paper (the paper's §5 formulas). [default: consistent]"),
    response: str | None = typer.Option(
        None, "--response", help="CAT only: 2pl (a slope and a noise per item) or rasch (one slope, the paper's "
        "model). [default: 2pl; rasch with --calibration paper]"),
    local_error: bool | None = typer.Option(
        None, "--local-error/--no-local-error", help="CAT only: raise each model's error to the references' own "
        "error on the items it took, where larger. [default: on; off with --calibration paper]"),
    pairing: str = typer.Option(
        "own", "--pairing", help="Item choice: own (each model's method) or partner (pair-aware: an item the "
        "other model of the undecided pair already took)."),
    missing: str = MISSING,
    kind: str | None = KIND,
    score_range: tuple[float, float] | None = SCORE_RANGE,
    duplicate_models: str | None = DUPLICATE_MODELS,
    timeout: float | None = h.TIMEOUT,
    jobs: int = typer.Option(
        1, "--jobs", "-j", help="With --session and --scorer: scorer commands to run at once; the extra ones score "
        "what the ranker will likely ask next, so the ranking is the same as with one."),
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
    model_arg: list[str] | None = h.IN_MODEL_ARG,
    task_arg: list[str] | None = h.IN_TASK_ARG,
    score_name: str | None = h.IN_SCORE_NAME,
    value_map: str | None = h.IN_VALUE_MAP,
    epochs: int | None = h.IN_EPOCHS,
    log_dir: str | None = h.IN_LOG_DIR,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Rank models adaptively: new models with --session and a scorer, or held-out models by simulation.

    With --session, the scorer (--scorer 'python score.py {model} {item_id}', --harness lm-eval with
    --model-args 'pretrained={model}', or --harness inspect, the ids being Inspect models) scores the
    (model, item) the ranker asks for, one at a time (--jobs N with --scorer: with up to N - 1 pairs it will
    likely ask next, scored at the same time), until every adjacent pair is decided at --gamma or the budget
    is spent; every score is committed to the session file, so Ctrl-C (exit 130) or a crash loses nothing:
    re-run the same command to resume.
    `activeeval session status FILE` shows the ranking, pairwise confidences and ties.
    """
    from activeeval.ranking import check_gamma, check_pairing, load_costs

    check_gamma(gamma)
    check_pairing(pairing)
    cal_kw = _calibration(method, calibration, response, local_error)
    if session is not None:
        from activeeval.session.drivers.runner import check_jobs

        if check_jobs(jobs) != 1 and harness is not None:
            raise ConfigurationError(
                f"--jobs runs several scorer commands at once and goes with --scorer; --harness {harness} runs in "
                "this process, one (model, item) at a time: drop --jobs")
        lm = {"jobs": check_jobs(jobs), "model": model, "model_args": model_args, "task": task, "metric": metric,
              "filter_name": filter_name, "include_path": include_path, "num_fewshot": num_fewshot,
              "batch_size": batch_size, "device": device, "gen_kwargs": gen_kwargs,
              "apply_chat_template": apply_chat_template, "model_arg": model_arg, "task_arg": task_arg,
              "score_name": score_name, "value_map": value_map, "epochs": epochs, "log_dir": log_dir}
        if dataset is not None or holdout is not None:
            raise ConfigurationError("--dataset/--holdout simulate a ranking; with --session give --reference and "
                                     "--models (the new models to rank)")
        _rank_session(session, reference, models, scorer, harness, method, gamma, budget_per_model,
                      load_costs(costs) if costs is not None else None, min_items, seed, missing,
                      read_options(kind, score_range, duplicate_models), timeout, lm, as_json, pairing, cal_kw)
        return
    if scorer is not None or harness is not None or reference is not None or jobs != 1:
        raise ConfigurationError("--scorer/--harness/--reference/--jobs rank new models for real: give --session FILE "
                                 "too")
    if dataset is None:
        raise ConfigurationError("give --dataset to simulate a ranking, or --session FILE to rank new models")
    _simulate(dataset, models, holdout, method, gamma, budget_per_model, costs, min_items, seed, as_json, pairing,
              cal_kw)


def _rank_session(session: Path, reference: str | None, models: str | None, scorer: str | None,
                  harness: str | None, method: str, gamma: float, budget_per_model: float,
                  costs: dict | None, min_items: int, seed: int, missing: str, read: dict[str, Any],
                  timeout: float | None, lm: dict[str, Any], as_json: bool, pairing: str = "own",
                  cal_kw: dict[str, Any] | None = None) -> None:
    from activeeval.cli.session import rank_lines
    from activeeval.ranking import RankStop
    from activeeval.session.drivers.runner import drive_ranking
    from activeeval.session.ranking import RankSession

    sc = h.make_scorer(scorer, harness, timeout=timeout, ranking=True, **lm)
    chosen = None if models is None else [m.strip() for m in models.split(",") if m.strip()]
    if session.exists():
        s = RankSession.open(session, reference=reference)
        if chosen is not None and list(chosen) != list(s.models):
            s.close()
            raise ConfigurationError(
                f"session {str(session)!r} ranks {', '.join(s.models)}, not {', '.join(chosen)}; drop --models to "
                "resume it, or choose a new --session file"
            )
    else:
        if reference is None or chosen is None:
            raise ConfigurationError(
                f"session {str(session)!r} does not exist yet: give --reference and --models M1,M2,... to create it"
            )
        stop = RankStop(gamma=gamma, min_items=min_items, budget_per_model=budget_per_model)
        s = RankSession.create(session, reference, chosen, method=method, stop=stop, costs=costs, seed=seed,
                               missing=missing, pairing=pairing, **read, **(cal_kw or {}))
    with s:
        try:
            drive_ranking(s, sc, jobs=lm["jobs"])
        except KeyboardInterrupt:
            raise interrupted(s.n_scored) from None
        st = s.status()
    if as_json:
        print_json(st.to_dict())
        return
    for line in rank_lines(st):
        typer.echo(line)


def _simulate(dataset: str, models: str | None, holdout: int | None, method: str, gamma: float,
              budget_per_model: float, costs: str | None, min_items: int, seed: int, as_json: bool,
              pairing: str = "own", cal_kw: dict[str, Any] | None = None) -> None:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from activeeval.datasets import resolve
    from activeeval.experiments.ranking_eval import complete_models, simulate_ranking
    from activeeval.ranking import RankStop, load_costs

    method = _method(method)
    if (models is None) == (holdout is None):
        raise fail("give exactly one of --models M1,M2,... or --holdout K")
    matrix = resolve(dataset)
    if models is not None:
        chosen = [m.strip() for m in models.split(",") if m.strip()]
    else:
        if holdout is None or holdout < 2:
            raise ConfigurationError(f"--holdout must be at least 2 (models to rank), got {holdout}")
        pool = complete_models(matrix)
        if holdout > len(pool) - 2:
            raise ConfigurationError(
                f"--holdout {holdout} leaves fewer than 2 reference models ({len(pool)} complete models); lower it"
            )
        chosen = [pool[j] for j in np.random.default_rng(seed).choice(len(pool), size=holdout, replace=False)]
    cost_map = load_costs(costs) if costs is not None else None
    stop = RankStop(gamma=gamma, min_items=min_items, budget_per_model=budget_per_model)
    rec = simulate_ranking(matrix, chosen, method=method, stop=stop, costs=cost_map, seed=seed, baselines=False,
                           pairing=pairing, **(cal_kw or {}))
    res = rec.adaptive
    payload = res.to_dict()
    payload["kendall_tau"] = rec.adaptive_tau
    payload["true_scores"] = rec.truth
    payload["method"] = method
    payload["scale"] = _capabilities(method).ranking_scale  # "theta" or "score"
    if as_json:
        print_json(payload)
        return
    console = Console(soft_wrap=False, width=max(Console().width, 150))
    scale = "θ" if payload["scale"] == "theta" else "score"
    table = Table(title=f"adaptive ranking ({method}, γ = {gamma:g}, ranked on {scale})", title_justify="left")
    for col in ("rank", "model", scale, f"{gamma:.0%} interval", "score est.", "full score", "items"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for row in payload["ranking"]:
        m = row["model"]
        table.add_row(str(row["rank"]), m, _fmt(row["mean"]), f"[{_fmt(row['ci_low'])}, {_fmt(row['ci_high'])}]",
                      _fmt(row["score"]), _fmt(rec.truth[m]), str(row["items"]))
    console.print(table)
    ties = ", ".join(f"{a} ~ {b}" for a, b in res.ties) or "none"
    typer.echo(f"ties (unresolved adjacent pairs): {ties}")
    typer.echo(f"items used: {res.n_items_used} ({rec.pct_used:.2f}% of full evaluation), cost {res.cost_spent:g}, "
               f"stopped: {res.stop_reason}")
    typer.echo(f"Kendall tau vs full ranking: {_fmt(rec.adaptive_tau)}")


@app.command("rank-backtest")
@cli_errors
def rank_backtest_command(
    dataset: str = typer.Option(..., "--dataset", help="Dataset name or score file (models x items)."),
    method: str = typer.Option(
        "cat", "--method", help="cat, bayesame, bayesame-paper or a joint method (bayesame-multi), options in "
        "brackets (bayesame-multi[coupling=0.8])."),
    folds: int = typer.Option(5, "--folds", help="Disjoint held-out sets per seed."),
    holdout: int = typer.Option(4, "--holdout", help="Models per held-out set."),
    seeds: int = typer.Option(20, "--seeds", help="Number of seeds (each reshuffles the folds)."),
    gamma: float = typer.Option(0.95, "--gamma", help="Pairwise confidence level, in (0, 1)."),
    budget_per_model: float = typer.Option(20.0, "--budget-per-model", help="Budget in items per model."),
    min_items: int = typer.Option(10, "--min-items", help="Warm-up items per model."),
    first_seed: int = typer.Option(0, "--first-seed", help="Seeds are first_seed .. first_seed + seeds - 1."),
    families: str | None = typer.Option(
        None, "--holdout-families", help="Family hold-out: rank these families' models, calibrate on the rest."),
    calibration: str | None = typer.Option(
        None, "--calibration",
        help="CAT only: consistent or paper (the paper's §5 calibration). [default: consistent]"),
    response: str | None = typer.Option(
        None, "--response", help="CAT only: 2pl or rasch (one slope). [default: 2pl; rasch with --calibration paper]"),
    local_error: bool | None = typer.Option(
        None, "--local-error/--no-local-error", help="CAT only: raise each model's error to the references' own "
        "error on the items it took, where larger. [default: on; off with --calibration paper]"),
    pairing: str = typer.Option("own", "--pairing", help="Item choice: own (each model's method) or partner "
                                "(pair-aware)."),
    out: Path | None = typer.Option(
        None, "--out", help="Directory for the summary and every held-out set's record: " + OUT_RULE[:-1] + "; it "
        "keeps each finished set as it completes, so an interrupted run resumes when the same command is run again."),
    force: bool = FORCE,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The paper's Table 2/3/4 protocol: adaptive vs random vs static vs fixed-length, tie detection."""
    from rich.console import Console
    from rich.table import Table

    from activeeval.datasets import resolve
    from activeeval.experiments.checkpoint import TaskStore
    from activeeval.experiments.ranking_eval import (
        record_to_json,
        run_family_holdout,
        run_rank_backtest,
        summarize_rank_backtest,
    )
    from activeeval.ranking import RankStop, check_gamma, check_pairing

    check_gamma(gamma)
    method = _method(method)
    check_pairing(pairing)
    cal_kw = _calibration(method, calibration, response, local_error)
    check_out(out, force)
    matrix = resolve(dataset)
    store = None if out is None else TaskStore(out.expanduser() / OUT_TASKS, flag="--out")
    stop = RankStop(gamma=gamma, min_items=min_items, budget_per_model=budget_per_model)
    with interruptible(out):
        if families is not None:
            fams = [f.strip() for f in families.split(",") if f.strip()]
            records = run_family_holdout(matrix, fams, method=method, seeds=seeds, stop=stop, first_seed=first_seed,
                                         pairing=pairing, checkpoint=store, **cal_kw)
            folds, holdout = 1, len(records[0].models)
        else:
            records = run_rank_backtest(matrix, method=method, folds=folds, holdout=holdout, seeds=seeds, stop=stop,
                                        first_seed=first_seed, pairing=pairing, checkpoint=store, **cal_kw)
    s = summarize_rank_backtest(records)
    shared = _shares_calibration(method)
    payload = {
        "dataset": dataset, "method": method,
        "calibration": cal_kw.get("calibration", "consistent") if shared else None,
        "response": (cal_kw.get("response") or ("rasch" if cal_kw.get("calibration") == "paper" else "2pl"))
        if shared else None,
        "local_error": cal_kw.get("local_error", cal_kw.get("calibration", "consistent") == "consistent")
        if shared else None,
        "pairing": pairing, "n_runs": s["n_runs"],
        "adaptive_tau": s["adaptive_tau"], "random_tau": s["random_tau"], "static_tau": s["static_tau"],
        "fixed_tau": s["fixed_tau"], "items": s["items_adaptive"], "pct_used": s["pct_used"],
        "tie_precision": s["tie_precision"], "tie_recall": s["tie_recall"], "tie_f1": s["tie_f1"],
        "adapt_tie_frac": s["adapt_tie_frac"], "gt_tie_frac": s["gt_tie_frac"],
        "confident_accuracy": s["confident_accuracy"],
        "pooled_confident_accuracy": s["pooled_confident_accuracy"],
        "n_confident": s["n_confident"], "n_wrong_confident": s["n_wrong_confident"],
        "expected_wrong_confident": s["expected_wrong_confident"], "n_pairs": s["n_pairs"],
        "ties_reported": s["ties_reported"], "false_tie_rate": s["false_tie_rate"],
        "item_savings_vs_fixed": s["item_savings_vs_fixed"],
        "cost_savings_vs_fixed": s["cost_savings_vs_fixed"],
        "sd": {k[:-3]: v for k, v in s.items() if k.endswith("_sd")},
    }
    if out is not None:
        with results_folder(out, force) as tmp:
            (tmp / "summary.json").write_text(json_text(payload))
            with open(tmp / "records.jsonl", "w") as fh:
                for rec in records:
                    fh.write(json.dumps(record_to_json(rec)) + "\n")
    if as_json:
        print_json(payload)
        return
    console = Console(soft_wrap=False, width=max(Console().width, 150))
    n = int(s["n_runs"])
    t1 = Table(title=f"rank-backtest {dataset} --method {method}: {n} held-out sets of {holdout} "
                     f"({seeds} seeds x {folds} folds), budget {budget_per_model:g} items/model, γ = {gamma:g}",
               title_justify="left")
    for col in ("adaptive τ", "random τ", "static τ", "fixed-length τ", "items", "% used"):
        t1.add_column(col, justify="right")
    pm = lambda k, d=3: f"{_fmt(s[k], d)} ± {_fmt(s[k + '_sd'], d)}"  # noqa: E731
    t1.add_row(pm("adaptive_tau"), pm("random_tau"), pm("static_tau"), pm("fixed_tau"), pm("items_adaptive", 1),
               f"{_fmt(s['pct_used'], 2)}%")
    console.print(t1)
    t2 = Table(title="tie detection (vs bootstrap ties of the full evaluation) and the stopping rule",
               title_justify="left")
    for col in ("adapt tie %", "GT tie %", "false ties", "tie P", "tie R", "tie F1", "confident pairs",
                "pooled conf. acc.", "item sav. vs fixed", "cost sav. vs fixed"):
        t2.add_column(col, justify="right")
    t2.add_row(f"{100 * s['adapt_tie_frac']:.0f}%", f"{100 * s['gt_tie_frac']:.0f}%",
               f"{100 * s['false_tie_rate']:.0f}%" if not math.isnan(s["false_tie_rate"]) else "nan",
               _fmt(s["tie_precision"], 2), _fmt(s["tie_recall"], 2), _fmt(s["tie_f1"], 2),
               f"{s['n_confident']} ({s['n_wrong_confident']} wrong, {s['expected_wrong_confident']:.1f} expected)",
               _fmt(s["pooled_confident_accuracy"], 3),
               f"{100 * s['item_savings_vs_fixed']:.0f}%", f"{100 * s['cost_savings_vs_fixed']:.0f}%")
    console.print(t2)
