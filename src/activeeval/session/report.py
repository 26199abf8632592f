"""A self-contained HTML report of a session.

One file, no external resources. The page names the model (the session's
label, else the file name), then the result and the stopping conditions,
the settings in words, the trajectory plot (estimate with its 95 % band, and
the interval width against the ε2 target), and the table of items used. The
plot is a PNG (matplotlib, Agg backend) embedded as base64; without
matplotlib (``pip install "activeeval[plot]"``) the report is written
without it and says so.
"""

from __future__ import annotations

import base64
import html
import io
import os
from pathlib import Path
from typing import Any

from activeeval._files import atomic_output, check_output
from activeeval.session.base import method_options_of
from activeeval.session.session import Session

__all__ = ["render_report", "write_report", "plot_available"]

PLOT_MISSING = 'No plot: matplotlib is not installed (pip install "activeeval[plot]").'


def plot_available() -> bool:
    """True when matplotlib can be imported (the report then has its plot)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _plot_png(session: Session, epsilon2: float) -> str | None:
    if not plot_available():
        return None
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    traj = session.trajectory
    fig, (ax, aw) = plt.subplots(2, 1, figsize=(7.5, 5.2), dpi=110, sharex=True, height_ratios=(3, 2))
    if traj:
        n = list(range(1, len(traj) + 1))
        cis = [e.ci() for e in traj]
        ax.fill_between(n, [c[0] for c in cis], [c[1] for c in cis], alpha=0.25, label="95 % interval")
        ax.plot(n, [e.mean for e in traj], lw=1.6, label="estimate")
        aw.plot(n, [e.width() for e in traj], lw=1.4, color="C2", label="interval width")
        ax.set_xlim(1, max(len(traj), 2))
        ax.legend(loc="best", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no scores recorded yet", ha="center", va="center", transform=ax.transAxes)
    aw.axhline(epsilon2, color="C3", ls="--", lw=1.2, label=f"target ε2 = {epsilon2:g}")
    aw.legend(loc="best", fontsize=8)
    aw.xaxis.set_major_locator(MaxNLocator(integer=True))  # items are counted: no 2.5 on a small session
    aw.set_xlabel("items scored")
    ax.set_ylabel("estimated benchmark score")
    aw.set_ylabel("95 % interval width")
    for a in (ax, aw):
        a.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


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
    opts = "".join(f", {k.replace('_', ' ')} {v}" for k, v in read.items())
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
        ["stopping rule", rule],
        ["seed", kw.get("seed")],
        ["reference", _reference_text(st)],
        ["missing reference scores", missing],
    ]
    if options:
        rows.insert(1, ["method options", ", ".join(f"{k} = {v}" for k, v in options.items())])
    changes = [e for e in session.history() if e["kind"] == "set"]
    for e in changes:
        rows.append(["changed", f"{e['time']}: " + ", ".join(f"{k} = {v}" for k, v in e["settings"].items())])
    rows += [
        ["reference fingerprint", st["reference"]["fingerprint"][:16]],
        ["session file", str(session.path)],
        ["created", st.get("created", "")],
        ["activeeval version", st.get("library_version", "")],
    ]
    return rows


def render_report(session: Session) -> str:
    """The report page as a string."""
    status = session.status()
    d = status.to_dict()
    stop_settings = session.stopping_settings
    png = _plot_png(session, stop_settings["epsilon2"])
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
    for k, ((iid, score), est) in enumerate(zip(session.observations, traj), start=1):
        lo, hi = est.ci()
        obs_rows.append([k, iid, f"{score:g}", f"{est.mean:.4f}", f"[{lo:.4f}, {hi:.4f}]"])
    items = _table(obs_rows, ["#", "item", "score", "estimate after", "95 % interval after"], cls="items")
    plot = (f'<img alt="estimate and 95 % interval after each scored item, and the interval width against the '
            f'target" src="data:image/png;base64,{png}">'
            if png is not None else f'<p class="noplot">{PLOT_MISSING}</p>')
    title = f"activeeval report: {html.escape(name)}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 960px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }}
thead th {{ background: #f3f3f3; }}
tbody th {{ font-weight: 600; background: #fafafa; }}
img {{ max-width: 100%; }}
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
    """Write the report to ``out`` and return its path (see :func:`plot_available` for the plot).

    An existing ``out`` is refused unless ``overwrite=True``; the session's own file and its reference file
    are refused even then, and the report is written whole or not at all (:mod:`activeeval._files`).
    """
    own = _own_files(session)
    check_output(out, overwrite=overwrite, protected=own, what="report")  # before the work of rendering
    text = render_report(session)
    with atomic_output(out, overwrite=overwrite, protected=own, what="report") as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(out).expanduser()


def _own_files(session: Session) -> list[Any]:
    """The session file and the reference file(s) it reads: never overwritten by a report."""
    source = session.settings.get("reference_source", {})
    override = getattr(session, "_override", None)  # `--reference` given when opening
    return [session.path, source.get("path") if source.get("type") == "file" else None,
            override if isinstance(override, (str, os.PathLike)) else None]
