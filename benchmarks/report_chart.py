"""The report's chart on every install: matplotlib as a base dependency, or a chart of our own in SVG? (issue 27)

Measures what each would cost a plain ``pip install activeeval``:

* install size: the files of matplotlib and of every distribution it pulls
  in that activeeval's base dependencies do not (read from the installed
  distributions' records);
* import time: a fresh interpreter importing ``matplotlib.pyplot`` (Agg)
  against one importing ``activeeval._svg``, median of ``--repeats`` runs,
  each minus the same run's bare interpreter start;
* one chart of a session's trajectory (``--items`` scores): render time
  (median in-process) and bytes in the report, as the PNG the report used to
  embed (matplotlib, the former code) and as the SVG it embeds now.

    python benchmarks/report_chart.py
    python benchmarks/report_chart.py --smoke
"""

from __future__ import annotations

import argparse
import base64
import io
import re
import statistics
import subprocess
import sys
import time
from importlib import metadata

BASE = ("numpy", "scipy", "pandas", "typer", "rich", "threadpoolctl")


def _closure(names: tuple[str, ...]) -> set[str]:
    """The distributions ``names`` need, recursively (extras and markers that do not apply left out)."""
    seen: set[str] = set()
    todo = [n.lower() for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[ ;<>=!~\[(]", req, maxsplit=1)[0].lower().replace("_", "-"))
    return seen


def _size_mb(names: set[str]) -> float:
    total = 0
    for name in names:
        dist = metadata.distribution(name)
        for f in dist.files or []:
            try:
                total += dist.locate_file(f).stat().st_size
            except OSError:
                continue
    return total / 2**20


def _import_seconds(code: str, repeats: int) -> float:
    """Median seconds of ``python -c code`` minus the same run's ``python -c pass``."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        t1 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        t2 = time.perf_counter()
        out.append((t2 - t1) - (t1 - t0))
    return statistics.median(out)


def _trajectory(n_items: int) -> tuple[list[float], list[float], list[float], list[float]]:
    from activeeval import datasets
    from activeeval.experiments.simulate import hold_out, run_fixed
    from activeeval.methods.registry import make_method

    split = hold_out(datasets.load("math"), None, 0)
    m = make_method("rs-mean", split.reference, seed=0)
    run_fixed(m, split.truth, n_items)
    traj = m.trajectory
    cis = [e.ci() for e in traj]
    return [e.mean for e in traj], [c[0] for c in cis], [c[1] for c in cis], [e.width() for e in traj]


def _png(means, lows, highs, widths, epsilon2: float) -> str:
    """The chart the report embedded before (matplotlib, Agg): base64 PNG."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, (ax, aw) = plt.subplots(2, 1, figsize=(7.5, 5.2), dpi=110, sharex=True, height_ratios=(3, 2))
    n = list(range(1, len(means) + 1))
    ax.fill_between(n, lows, highs, alpha=0.25, label="95 % interval")
    ax.plot(n, means, lw=1.6, label="estimate")
    aw.plot(n, widths, lw=1.4, color="C2", label="interval width")
    aw.axhline(epsilon2, color="C3", ls="--", lw=1.2, label=f"target ε2 = {epsilon2:g}")
    for a in (ax, aw):
        a.legend(loc="best", fontsize=8)
        a.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _render_seconds(render, repeats: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        size = len(render())
        times.append(time.perf_counter() - t0)
    return statistics.median(times), size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--items", type=int, default=300, help="scores in the charted session")
    ap.add_argument("--smoke", action="store_true", help="seconds: one repeat, 30 scores")
    a = ap.parse_args()
    if a.smoke:
        a.repeats, a.items = 1, 30
    from activeeval._svg import trajectory_svg

    extra = _closure(("matplotlib",)) - _closure(BASE)
    print(f"matplotlib for the base install: {_size_mb(extra):.1f} MB in {len(extra)} distributions "
          f"({', '.join(sorted(extra))})")
    mpl = _import_seconds("import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot", a.repeats)
    svg_import = _import_seconds("import activeeval._svg", a.repeats)
    print(f"import (median of {a.repeats}, minus a bare interpreter): matplotlib.pyplot {mpl:.3f} s, "
          f"activeeval._svg {svg_import:.3f} s")
    traj = _trajectory(a.items)
    png_s, png_b = _render_seconds(lambda: _png(*traj, 0.03), a.repeats)
    svg_s, svg_b = _render_seconds(lambda: trajectory_svg(*traj, 0.03, (0.0, 1.0)), a.repeats)
    print(f"one chart of {a.items} scores: PNG (matplotlib) {png_s:.3f} s, {png_b / 1024:.0f} KiB base64; "
          f"SVG {svg_s:.4f} s, {svg_b / 1024:.0f} KiB ({png_s / svg_s:.0f}x faster, same run)")


if __name__ == "__main__":
    main()
