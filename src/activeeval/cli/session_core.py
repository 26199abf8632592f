"""The bodies of ``activeeval session next / record / status``, and their options, without Typer.

They run in both paths (:mod:`activeeval.cli.light`): from Typer's app, which builds each command from the
declarations here (:func:`activeeval.cli.common.command_from`), and from the light parser, which reads a
command line with the same declarations. Output goes through :mod:`activeeval.cli.plain`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from activeeval.cli.light import Opt
from activeeval.cli.plain import cli_message, echo, fail, print_json
from activeeval.exceptions import ConfigurationError

# Options several session commands share (one definition each: session.py makes their typer.Option).
FILE = Opt("file", (), Path, ..., "The session file (SQLite).", typer_extra=(("dir_okay", False),))
REFERENCE_OVERRIDE = Opt("reference", ("--reference",), str, None,
                         "Load the reference data from here instead of where the session recorded it.")
TARGET = Opt("target", ("--target",), str, None,
             "The target model these scores are of (sessions created with --targets).")
# Inspect's options for reading its logs (`run` and `rank` take them too: activeeval.cli.harness)
SCORE_NAME = Opt("score_name", ("--score-name",), str, None,
                 "Inspect scorer whose score to record, or SCORER/KEY for a scorer with several values. [default: "
                 "the task's only scorer]")
VALUE_MAP = Opt("value_map", ("--value-map",), str, None,
                "Numbers for Inspect's string score values, over C=1,P=0.5,I=0,N=0; e.g. 'P=0'.")

NEXT = (
    FILE,
    Opt("k", ("--k", "-k"), int, 1, "How many items to hand out."),
    Opt("as_json", ("--json",), bool, False, "Print a JSON list of {item_id, index, ...}."),
    REFERENCE_OVERRIDE,
)
RECORD = (
    FILE,
    Opt("item_id", (), str, None, "Item id (omit with --from)."),
    Opt("score", (), str, None, "The target model's score on the item."),
    Opt("from_file", ("--from",), Path, None,
        "Record the scores of a results file or folder, for the items handed out by next."),
    Opt("record_all", ("--all",), bool, False, "With --from: also record items never handed out."),
    Opt("fmt", ("--format",), str, None, "lm-eval, helm, alpaca-eval, inspect or plain. [default: from the file name]"),
    Opt("metric", ("--metric",), str, None, "lm-eval/HELM metric. [default: acc / exact_match]"),
    Opt("task", ("--task",), str, None, "lm-eval or Inspect task (when --from holds several)."),
    Opt("filter_name", ("--filter",), str, None, "lm-eval filter (e.g. strict-match)."),
    Opt("split", ("--split",), str, None, "HELM split."),
    Opt("generator", ("--generator",), str, None, "AlpacaEval generator_2 to read."),
    Opt("item_column", ("--item-column",), str, None, "Plain files: item id column."),
    Opt("score_column", ("--score-column",), str, None, "Plain files: score column."),
    SCORE_NAME,
    VALUE_MAP,
    TARGET,
    REFERENCE_OVERRIDE,
)
STATUS = (
    FILE,
    Opt("as_json", ("--json",), bool, False, "Print the status as JSON."),
    REFERENCE_OVERRIDE,
)


def _open(file: Path, reference: str | None, readonly: bool = False):
    from activeeval.session.base import open_session

    return open_session(file, reference=reference, readonly=readonly)


def _open_evaluation(file: Path, reference: str | None, what: str):
    """Open a session that ``what`` works on: an evaluation of one target or of several (not a ranking)."""
    s = _open(file, reference)
    if s.KIND == "rank":
        s.close()
        raise ConfigurationError(
            f"{str(file)!r} is a ranking session; `{what}` is for evaluation sessions (ranking sessions are "
            "driven by `activeeval rank --session FILE`)"
        )
    return s


def _target_of(s: Any, file: Path, target: str | None) -> str | None:
    """The --target of a command on ``s``: required by a multi-target session, refused by a single one."""
    if s.KIND == "multi" and target is None:
        raise ConfigurationError(
            f"{str(file)!r} evaluates several targets ({', '.join(s.targets)}); name the target of these scores with "
            "--target NAME"
        )
    if s.KIND != "multi" and target is not None:
        raise ConfigurationError(
            f"{str(file)!r} evaluates one model; drop --target (it names the target in sessions created with "
            "--targets)"
        )
    return target


def _fmt(x: float | None, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _status_line(status) -> str:
    if hasattr(status, "targets"):  # a multi-target session: one line per target, then the overall stop
        return "\n".join(multi_lines(status, conditions=False))
    d = status.to_dict()
    stop = f"stop: yes ({d['stop_reason']})" if d["stop"] else "stop: no"
    pending = f", {len(d['pending'])} pending" if d["pending"] else ""
    return (
        f"estimate {d['estimate']:.4f}  95% interval [{d['ci_low']:.4f}, {d['ci_high']:.4f}]  "
        f"items used {d['n_used']}/{d['n_items']}{pending}  {stop}"
    )


_CONDITION_TEXT = {
    "window": ("items scored", ">=", "window"),
    "stability": ("R-hat range over the window", "<=", "epsilon1"),
    "width": ("95% interval width", "<=", "epsilon2"),
    "budget": ("items scored", ">=", "max-items"),
}


def condition_lines(status) -> list[str]:
    """Each stopping condition against its threshold, and what holds the stop back."""
    lines = ["stopping rule: stop when window, stability and width all hold, or the budget is reached"]
    for c in status.conditions:
        label, op, flag = _CONDITION_TEXT.get(c.name, (c.name, "<=", c.name))
        value = "not yet" if c.value is None else _fmt(c.value, 0 if c.name in ("window", "budget") else 4)
        lines.append(f"  {c.name:<9}  {label:<28} {value:>8}  {op} {flag} {c.threshold:g}  "
                     f"{'met' if c.met else 'not met'}")
    if not any(c.name == "budget" for c in status.conditions):
        lines.append("  budget     none (set one with --max-items)")
    if status.stop:
        lines.append(f"stopped by: {status.stop_reason}")
    else:
        waiting = [c.name for c in status.waiting_for if c.rule == "precision"]
        lines.append(f"waiting for: {', '.join(waiting) if waiting else 'nothing'}")
    width = next((c.value for c in status.conditions if c.name == "width" and c.value is not None), None)
    if width is not None and status.clipped:  # the rule reads the normal interval's width, not the one shown
        lo, hi = status.estimate.ci(status.level)
        lines.append(f"note: the width is the normal interval's ({_fmt(width, 4)}); the interval shown, "
                     f"[{lo:.4f}, {hi:.4f}], is clipped to the scores the benchmark can still reach")
    return lines


def multi_lines(status, conditions: bool = True) -> list[str]:
    """Each target's status line (and, with ``conditions``, its stopping conditions), then the overall stop."""
    lines: list[str] = []
    width = max(len(t) for t in status.targets)
    for target, st in status.targets.items():
        lines.append(f"{target:<{width}}  {_status_line(st)}")
        if conditions:
            lines.extend(f"{'':<{width}}  {line}" for line in condition_lines(st)[1:])
            lines.extend(f"{'':<{width}}  note: {note}" for note in st.estimate.notes)
    d = status.to_dict()
    if d["stop"]:
        lines.append(f"every target has stopped: stop: yes ({d['stop_reason']})")
    else:
        lines.append(f"running: {', '.join(d['running'])} ({len(d['running'])} of {len(d['targets'])} targets); "
                     "stop: no")
    return lines


def rank_lines(status) -> list[str]:
    """The ranking, each adjacent pair's confidence, ties and the stop."""
    d = status.to_dict()
    lines = [f"{'rank':>4}  {'model':<40} {'score':>8}  {'interval':>19} {'items':>6}"]
    notes: list[str] = []
    for row in d["ranking"]:
        interval = ("[" + _fmt(row["score_ci_low"]) + ", " + _fmt(row["score_ci_high"]) + "]"
                    if row["score_ci_low"] is not None else f"{'not shown (note)':>19}")
        lines.append(f"{row['rank']:>4}  {row['model']:<40} {_fmt(row['score'])}  {interval} {row['items']:>6}")
        notes.extend(f"note ({row['model']}): {note}" for note in row["notes"])
    lines.extend(notes)
    gamma = d["gamma"]
    for p in d["adjacent_pairs"]:
        verdict = "decided" if p["decided"] else "tie so far"
        lines.append(f"P({p['higher']} > {p['lower']}) = {p['confidence']:.3f}  ({verdict} at gamma {gamma:g})")
    ties = ", ".join(f"{a} ~ {b}" for a, b in d["ties"]) or "none"
    budget = "none" if d["budget"] is None else f"{d['budget']:g}"
    lines.append(f"ties: {ties}")
    lines.append(f"cost spent {d['cost_spent']:g} of budget {budget}; "
                 + (f"stop: yes ({d['stop_reason']})" if d["stop"] else "stop: no"))
    return lines


def next_items(file: Path, k: int, as_json: bool, reference: str | None) -> None:
    """Print the next K item ids to score (one per line) and mark them pending.

    In a session with several targets: K (target, item) pairs, one per line as TARGET<tab>ITEM_ID, of the targets
    that have not stopped.
    """
    with _open_evaluation(file, reference, "session next") as s:
        reason = s.stop_reason()
        if reason is not None:
            more = "nothing to hand out" if s.KIND == "multi" else "more items are optional"
            echo(f"note: the stopping rule is already met ({reason}); {more}", err=True)
        items = s.ask(k)
    if as_json:
        print_json([a.to_dict() for a in items])
    else:
        for a in items:
            echo(f"{a.target}\t{a.item_id}" if hasattr(a, "target") else a.item_id)


def record(
    file: Path, item_id: str | None, score: str | None, from_file: Path | None, record_all: bool,
    fmt: str | None, metric: str | None, task: str | None, filter_name: str | None, split: str | None,
    generator: str | None, item_column: str | None, score_column: str | None, score_name: str | None,
    value_map: str | None, target: str | None, reference: str | None,
) -> None:
    """Record ITEM_ID SCORE, or the scores of a results file with --from (all or nothing).

    In a session with several targets, --target NAME says whose scores they are.
    """
    if from_file is not None:
        if item_id is not None or score is not None:
            raise fail("give either ITEM_ID SCORE or --from FILE, not both")
        from activeeval.data.adapters import detect_format, read_scores_any

        kind = fmt or detect_format(from_file)
        default_metric = {"lm-eval": "acc", "helm": "exact_match"}.get(kind)
        scores = read_scores_any(
            from_file, kind, metric=metric or default_metric, task=task, filter=filter_name, split=split,
            generator=generator, item_column=item_column, score_column=score_column, score_name=score_name,
            value_map=value_map,
        )
        with _open_evaluation(file, reference, "session record") as s:
            name = _target_of(s, file, target)
            was_stopped = s.status().stop
            done = (s.record(scores, include_unasked=record_all) if name is None
                    else s.record(name, scores, include_unasked=record_all))
            status = s.status()
            written = _results_once_stopped(s, was_stopped, status)
        text = (f"recorded {done.recorded} score(s) from {from_file} ({done.already} already recorded with the "
                "same score")
        if done.skipped:
            unknown = f", {done.unknown} of them not in the reference" if done.unknown else ""
            text += f"; skipped {len(done.skipped)} not handed out by `next`{unknown}: record them too with --all"
        echo(text + ")")
        echo(_status_line(status))
        _echo_written(written)
        return
    if record_all:
        raise ConfigurationError("--all goes with --from FILE")
    if item_id is None or score is None:
        raise fail("give ITEM_ID and SCORE (e.g. `activeeval session record run.aeval mmlu-00012 1`) or --from FILE")
    if any(o is not None for o in (fmt, metric, task, filter_name, split, generator, item_column, score_column,
                                   score_name, value_map)):
        raise ConfigurationError("--format/--metric/--task/--filter/--split/--generator/--*-column/--score-name/"
                                 "--value-map need --from FILE")
    with _open_evaluation(file, reference, "session record") as s:
        name = _target_of(s, file, target)
        was_stopped = s.status().stop
        # the score is validated (and parsed) by the session
        new_score = s.tell(item_id, score) if name is None else s.tell(name, item_id, score)
        status = s.status()
        written = _results_once_stopped(s, was_stopped, status)
    of = "" if name is None else f" for target {name}"
    echo(f"recorded {item_id} = {score}{of}" if new_score
               else f"{item_id} already has score {score}{of}: nothing changed")
    echo(_status_line(status))
    _echo_written(written)


def _results_once_stopped(s: Any, was_stopped: bool, status: Any) -> Path | None:
    """The results file, written beside the session when this record met the stopping rule (else None).

    A file of other content at that path is left alone (the scores are recorded all the same): a note says
    how to write the results elsewhere.
    """
    if was_stopped or not status.stop:
        return None
    from activeeval.exceptions import ActiveEvalError
    from activeeval.session.report.results import results_path, write_results

    out = results_path(s.path)
    try:
        return write_results(s, out)
    except ActiveEvalError as exc:
        echo(f"note: the stopping rule is met, but the results file was not written ({cli_message(exc)}); "
                   f"write it with `activeeval session export {s.path} --out PATH`", err=True)
        return None


def _echo_written(path: Path | None) -> None:
    if path is not None:
        echo(f"wrote {path} (the results: settings, estimate, interval and every score)")


def status(file: Path, as_json: bool, reference: str | None) -> None:
    """Estimate, interval, items used, pending items, and each stopping condition against its threshold."""
    from activeeval.session.report.results import header

    with _open(file, reference, readonly=True) as s:
        st = s.status()
        extra = {"label": s.label}
        if s.KIND != "rank":
            extra["stopping"] = s.stopping_settings
        head = header(s) if as_json else {}
    if as_json:
        print_json({**head, **st.to_dict(), **extra})  # the results file's header, then where the session stands
        return
    if extra["label"]:
        echo(f"model: {extra['label']}")
    if s.KIND != "single":
        for line in rank_lines(st) if s.KIND == "rank" else multi_lines(st):
            echo(line)
        return
    echo(_status_line(st))
    for line in condition_lines(st):
        echo(line)
    for note in st.estimate.notes:
        echo(f"note: {note}")
