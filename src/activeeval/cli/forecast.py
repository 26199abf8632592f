"""The cost forecast as the commands print it (``session new``, ``run``, ``demo``): see :mod:`activeeval.forecast`."""

from __future__ import annotations

from typing import Any

import typer

FORECAST = typer.Option(
    None, "--forecast/--no-forecast",
    help="Before starting, print the expected items to the stopping rule (and with --max-items the interval width "
         "then), from reference models playing the target (bayesame). [default: when it takes a few seconds at "
         "most; --forecast: always]")


def forecast_lines(f: Any, built_reference: tuple[int, int] | None = None, each: str = "") -> list[str]:
    """The forecast in words; with ``built_reference`` (models, items of a reference the user built), the break-even.
    ``each`` is said after the items (" for each target" in a session of several)."""
    from activeeval.forecast import break_even

    n = f.n_items
    lines = [f"forecast: about {f.median} of {n} items{each} to the stop (80 % of runs: {f.low}-{f.high}), from "
             f"{f.n_pseudo} reference models playing the target"]
    if f.max_items is not None and f.width_at_budget is not None:
        mid, lo, hi = f.width_at_budget
        stopped = f.reasons.get("budget", 0) + f.reasons.get("exhausted", 0)
        lines.append(f"forecast: expected 95 % interval width at --max-items {f.max_items}: {mid:.3f} (80 %: "
                     f"{lo:.3f}-{hi:.3f}); the budget stops {stopped} of {f.n_pseudo} pseudo-targets")
    outside = f.reasons.get("outside", 0)
    if outside:
        lines.append(f"forecast: {outside} of {f.n_pseudo} fell outside the references' range (such runs draw items at "
                     "random and are counted as running to the end)")
    if f.extrapolated_from is not None:
        lines.append(f"forecast: beyond {f.extrapolated_from} items the interval's narrowing is extrapolated")
    if built_reference is not None:
        k, items = built_reference
        models = break_even(k, items, f.median)
        cost = f"building the reference took {k} models x {items} items = {k * items} item evaluations"
        lines.append(f"break-even: {cost}; at about {items - f.median} items saved per model it pays for itself after "
                     f"{models} evaluated models" if models is not None else
                     f"break-even: {cost}; the forecast saves no items per model, so it never pays for itself")
    return lines


def session_forecast(s: Any, say: Any, asked: bool) -> dict[str, Any] | None:
    """The forecast of a new session: its printed lines and data; or ``{"note": ...}`` when not ``asked`` for and it
    would take more than a few seconds; None when the session's method has none."""
    from activeeval.forecast import AUTO_WORK, forecast_session, session_method

    method = session_method(s)
    if method is None:
        return None
    f = forecast_session(s, lambda k, n: say(f"forecasting the cost: reference models playing the target (pass {k} of "
                                             f"{n})"), max_work=None if asked else AUTO_WORK)
    if f is None:
        return {"note": too_costly_note(method)}
    source = s.settings["reference_source"]
    ref = s.settings["reference"]
    built = (ref["n_models"], ref["n_items"]) if source.get("type") == "file" else None
    each = " for each target" if s.KIND == "multi" else ""
    return {"lines": forecast_lines(f, built, each), "forecast": f.to_dict()}


def too_costly_note(method: Any) -> str:
    return (f"note: no cost forecast by default for a reference this large ({method.n_buckets} buckets of items x "
            f"{method.reference.n_models} models: more than a few seconds of work); --forecast makes it")


def forecast_or_note(method: Any, epsilon1: float, epsilon2: float, window: int, max_items: int | None,
                     asked: bool | None, say: Any) -> Any:
    """demo's forecast: the Forecast, or None after a note on stderr (no forecast for this method, or too costly)."""
    from activeeval.forecast import AUTO_WORK, forecast_items, supported

    if asked is False:
        return None
    if not supported(method) or method.reference.n_models < 3:
        if asked:
            typer.echo(no_forecast_note(method.name), err=True)
        return None
    f = forecast_items(method, epsilon1, epsilon2, window, max_items, max_work=None if asked else AUTO_WORK,
                       progress=lambda k, n: say(f"forecasting the cost: reference models playing the target "
                                                 f"(pass {k} of {n})"))
    if f is None:
        typer.echo(too_costly_note(method), err=True)
    return f


def no_forecast_note(method: str) -> str:
    return (f"note: no cost forecast for --method {method} (the forecast plays reference models through bayesame's "
            "own model)")
