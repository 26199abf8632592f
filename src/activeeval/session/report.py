"""A self-contained HTML report of a session.

One file, no external resources: the trajectory plot is a PNG (matplotlib,
Agg backend) embedded as base64. Needs ``pip install "activeeval[plot]"``.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from pathlib import Path
from typing import Any

from activeeval.exceptions import ConfigurationError, StorageError
from activeeval.session.session import Session

__all__ = ["render_report", "write_report"]


def _plot_png(session: Session) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigurationError(
            'the HTML report needs matplotlib: pip install "activeeval[plot]"'
        ) from None
    traj = session.trajectory
    fig, ax = plt.subplots(figsize=(7.5, 3.6), dpi=110)
    if traj:
        n = list(range(1, len(traj) + 1))
        means = [e.mean for e in traj]
        cis = [e.ci() for e in traj]
        ax.fill_between(n, [c[0] for c in cis], [c[1] for c in cis], alpha=0.25, label="95 % interval")
        ax.plot(n, means, lw=1.6, label="estimate")
        ax.set_xlim(1, max(len(traj), 2))
    else:
        ax.text(0.5, 0.5, "no scores recorded yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("items scored")
    ax.set_ylabel("estimated benchmark score")
    ax.grid(alpha=0.3)
    if traj:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _table(rows: list[list[Any]], header: list[str]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_report(session: Session) -> str:
    """The report page as a string."""
    status = session.status()
    d = status.to_dict()
    settings = session.settings
    png = _plot_png(session)
    stop = f"yes ({status.stop_reason})" if status.stop else "no: keep scoring items"
    summary = _table(
        [
            ["estimate", f"{d['estimate']:.4f}"],
            ["95 % interval", f"[{d['ci_low']:.4f}, {d['ci_high']:.4f}]"],
            ["items used", f"{d['n_used']} of {d['n_items']}"],
            ["pending (asked, not recorded)", len(d["pending"])],
            ["stopping rule met", stop],
        ],
        ["", ""],
    )
    traj = session.trajectory
    obs_rows = []
    for k, ((iid, score), est) in enumerate(zip(session.observations, traj), start=1):
        lo, hi = est.ci()
        obs_rows.append([k, iid, f"{score:g}", f"{est.mean:.4f}", f"[{lo:.4f}, {hi:.4f}]"])
    items = _table(obs_rows, ["#", "item", "score", "estimate after", "95 % interval after"])
    ref = settings["reference"]
    settings_rows = [
        ["session file", str(session.path)],
        ["method", settings["method"]],
        *[[k, json.dumps(v)] for k, v in sorted(settings["method_kwargs"].items())],
        ["reference", json.dumps(settings["reference_source"])],
        ["reference shape", f"{ref['n_models']} models x {ref['n_items']} items ({ref['kind']})"],
        ["reference fingerprint", ref["fingerprint"]],
        ["created", settings.get("created", "")],
        ["activeeval version", settings.get("library_version", "")],
    ]
    title = f"activeeval session report: {html.escape(session.path.name)}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 960px; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }}
td, th {{ border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }}
th {{ background: #f3f3f3; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>{title}</h1>
<h2>Result</h2>
{summary}
<h2>Estimate trajectory</h2>
<img alt="estimate and 95 % interval after each scored item" src="data:image/png;base64,{png}">
<h2>Items used ({len(obs_rows)})</h2>
{items}
<h2>Settings</h2>
{_table(settings_rows, ["setting", "value"])}
</body></html>
"""


def write_report(session: Session, out: str | os.PathLike[str]) -> Path:
    """Write the report to ``out`` and return its path."""
    text = render_report(session)
    p = Path(out)
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StorageError(f"cannot write report {str(p)!r}: {exc}") from None
    return p
