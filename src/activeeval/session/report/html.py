"""A self-contained HTML report of a session.

One file, no external resources. The page names the model (the session's
label, else the file name), then the result and the stopping conditions,
the settings in words (numbers rounded, options named), the trajectory chart
(the estimate with its 95 % band, and the interval width against the ε2
target on a log axis), and the table of items used. The chart is inline SVG
(:mod:`activeeval._svg`): no plotting library, so every install draws it.
"""

from __future__ import annotations

import html
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from activeeval._files import atomic_output, check_output
from activeeval._svg import trajectory_svg
from activeeval.gp.prior import INTERVAL_ONLY, Calibration
from activeeval.session.base import method_options_of
from activeeval.session.report.results import own_files
from activeeval.session.session import Session

__all__ = ["readable_options", "render_report", "write_report"]

# Names of the method options a reader meets in the settings (the rest are shown by their own name).
OPTION_NAMES = {
    "hyperparameters": "kernel fitted on the references",
    "calibration": "interval calibration",
    "alpha": "amplitude α",
    "beta": "inverse lengthscale β",
    "sigma2": "noise σ²",
    "gamma": "linear-term variance γ",
    "tau0": "level variance τ0",
    "tau1": "slope variance τ1",
    "n_pseudo": "pseudo-targets",
    "n_items": "items",
    "nlml": "neg. log marginal likelihood",
    "converged": "converged",
    "seed": "seed",
    "factor": "widening factor",
    "rms": "RMS of standardised errors",
    "n_z": "errors measured",
    "noise": "noise",
    "selection": "item selection",
    "calibrate_by": "calibration applied",
    "warmup": "items drawn at random first",
}


def _number(v: float) -> str:
    return f"{v:.4g}"


def _readable(value: Any) -> str:
    """An option's value for a reader: numbers to 4 significant digits, mappings as named parts."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict):
        return "; ".join(f"{OPTION_NAMES.get(k, k)} {_readable(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_readable(v) for v in value)
    return str(value)


def readable_options(options: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, value) rows of a method's options in words: the reference fit and the calibration spelled out."""
    rows = []
    # which factor the run applies: a calibration holds the factors by budget whatever calibrate_by says, but only
    # "budget" and the capped variants read them (a session stored before the option: "pooled")
    by = options.get("calibrate_by", "pooled")
    for key, value in options.items():
        if key == "calibration" and isinstance(value, dict) and "factor" in value:
            pooled = float(value["factor"])
            # the factor the run applies at each n/N the calibration measured (Calibration.factor_at's rule)
            cal = Calibration(factor=pooled, fractions=value.get("fractions") or (), factors=value.get("factors") or ())
            factors = [cal.factor_at(f, by) for f in cal.fractions] if by != "pooled" else []
            scaled = (f"interval scaled {_number(min(factors))}-{_number(max(factors))}x by the share of items "
                      f"scored (pooled over them: {_number(pooled)}x"
                      + (", never above it" if by in INTERVAL_ONLY else "") + ")" if factors
                      else f"interval widened {_number(pooled)}x")
            text = (f"{scaled}: reference models playing the target ({value.get('n_pseudo', '?')} of them, "
                    f"{value.get('n_items', '?')} items) had errors {_number(value.get('rms', float('nan')))}x the "
                    "model's standard deviation")
            rows.append((OPTION_NAMES[key], text))
        else:
            rows.append((OPTION_NAMES.get(key, key), _readable(value)))
    return rows


def _time(stamp: str) -> str:
    """A stored UTC time to the second, as a person reads it."""
    try:
        return datetime.fromisoformat(stamp).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError):
        return str(stamp)


def _chart(session: Session, epsilon2: float) -> str:
    traj = session.trajectory
    cis = [e.ci() for e in traj]
    score_range = session.settings["reference"].get("score_range")
    return trajectory_svg([e.mean for e in traj], [c[0] for c in cis], [c[1] for c in cis],
                          [e.width() for e in traj], epsilon2, tuple(score_range) if score_range else None)


def _table(rows: list[list[Any]], header: list[str] | None = None, cls: str = "") -> str:
    head = "" if header is None else (
        "<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr></thead>")
    first = "th" if header is None else "td"  # key-value tables: the key is a row header
    body = "".join(
        f"<tr><{first}>{html.escape(str(r[0]))}</{first}>"
        + "".join(f"<td>{html.escape(str(c))}</td>" for c in r[1:]) + "</tr>"
        for r in rows
    )
    attr = f' class="{cls}"' if cls else ""
    return f"<table{attr}>{head}<tbody>{body}</tbody></table>"


def _reference_text(settings: dict[str, Any]) -> str:
    ref, src = settings["reference"], settings["reference_source"]
    where = {"file": f"file {src.get('path')}", "dataset": f"bundled dataset {src.get('name')}"}.get(
        src.get("type"), f"in-memory matrix {src.get('name')}")
    read = src.get("read") or {}
    opts = "".join(f", {k.replace('_', ' ')} {_readable(v)}" for k, v in read.items())
    return f"{where}: {ref['n_models']} models × {ref['n_items']} items, {ref['kind']}{opts}"


def _settings_rows(session: Session) -> list[list[Any]]:
    st = session.settings
    stop = session.stopping_settings
    kw = st["method_kwargs"]
    budget = "none" if stop["max_items"] is None else f"{stop['max_items']} items"
    rule = (f"stop once at least {stop['window']} items are scored, the estimate moved by at most "
            f"{stop['epsilon1']:g} over the last {stop['window']}, and the 95 % interval is at most "
            f"{stop['epsilon2']:g} wide; budget: {budget}")
    options = {k: v for k, v in method_options_of(st).items() if k != "seed"}
    missing = {"models": "drop reference models that miss any score",
               "items": "drop items that miss any score"}[st.get("missing", "models")]
    rows = [
        ["method", st.get("method_spec", st["method"])],
        *([f"method: {name}", value] for name, value in readable_options(options)),
        ["stopping rule", rule],
        ["seed", kw.get("seed")],
        ["reference", _reference_text(st)],
        ["missing reference scores", missing],
    ]
    changes = [e for e in session.history() if e["kind"] == "set"]
    for e in changes:
        rows.append(["changed", f"{_time(e['time'])}: " + ", ".join(f"{k} = {v}" for k, v in e["settings"].items())])
    rows += [
        ["reference fingerprint", st["reference"]["fingerprint"][:16]],
        ["session file", str(session.path)],
        ["created", _time(st.get("created", ""))],
        ["activeeval version", st.get("library_version", "")],
    ]
    return rows


def render_report(session: Session) -> str:
    """The report page as a string."""
    status = session.status()
    d = status.to_dict()
    stop_settings = session.stopping_settings
    chart = _chart(session, stop_settings["epsilon2"])
    name = session.label or session.path.name
    stop = f"yes ({status.stop_reason})" if status.stop else "no: keep scoring items"
    waiting = ", ".join(c.name for c in status.waiting_for if c.rule == "precision")
    summary = _table(
        [
            ["estimate", f"{d['estimate']:.4f}"],
            ["95 % interval", f"[{d['ci_low']:.4f}, {d['ci_high']:.4f}]"],
            ["items used", f"{d['n_used']} of {d['n_items']} ({100 * d['n_used'] / max(d['n_items'], 1):.1f} %)"],
            ["pending (asked, not recorded)", len(d["pending"])],
            ["stopping rule met", stop + (f"; waiting for {waiting}" if waiting else "")],
        ],
        cls="result",
    )
    cond_rows = [
        [c.name,
         "not yet" if c.value is None else (f"{c.value:.0f}" if c.name in ("window", "budget") else f"{c.value:.4f}"),
         f"{'≥' if c.name in ('window', 'budget') else '≤'} {c.threshold:g}", "met" if c.met else "not met"]
        for c in status.conditions
    ]
    conditions = _table(cond_rows, ["condition", "now", "needed", ""], cls="conditions")
    notes = "".join(f'<p class="note">Note: {html.escape(n)}</p>\n' for n in status.estimate.notes)
    traj = session.trajectory
    obs_rows = []
    for k, ((iid, score), est) in enumerate(zip(session.observations, traj, strict=True), start=1):
        lo, hi = est.ci()
        obs_rows.append([k, iid, f"{score:g}", f"{est.mean:.4f}", f"[{lo:.4f}, {hi:.4f}]"])
    items = _table(obs_rows, ["#", "item", "score", "estimate after", "95 % interval after"], cls="items")
    plot = f'<figure class="chart">{chart}</figure>'
    title = f"activeeval report: {html.escape(name)}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 960px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
thead th {{ background: #f3f3f3; }}
tbody th {{ font-weight: 600; background: #fafafa; }}
figure.chart {{ margin: 0.5em 0 1.5em; }}
figure.chart svg {{ max-width: 100%; height: auto; }}
p.note {{ background: #fff6e0; border-left: 4px solid #e0a000; padding: 0.4em 0.8em; }}
</style></head><body>
<h1>{title}</h1>
<h2 id="result">Result</h2>
{summary}
{notes}{conditions}
<h2 id="settings">Settings</h2>
{_table(_settings_rows(session), cls="settings")}
<h2 id="trajectory">Estimate trajectory</h2>
{plot}
<h2 id="items">Items used ({len(obs_rows)})</h2>
{items}
</body></html>
"""


def write_report(session: Session, out: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the report to ``out`` and return its path.

    An existing ``out`` is refused unless ``overwrite=True``; the session's own file and its reference file
    are refused even then, and the report is written whole or not at all (:mod:`activeeval._files`).
    """
    own = own_files(session)
    check_output(out, overwrite=overwrite, protected=own, what="report")  # before the work of rendering
    text = render_report(session)
    with atomic_output(out, overwrite=overwrite, protected=own, what="report") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out).expanduser()
