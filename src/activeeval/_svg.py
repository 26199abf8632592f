"""A session's trajectory as an inline SVG chart: no dependency, the same on every install.

Two panels over "items scored": the estimate with its 95 % band, and the
interval width on a logarithmic axis with the ε2 target as a dashed line (a
width falls from about the score range to a few hundredths, so on a linear
axis the target would lie flat on the axis). The SVG is plain text inside the
report's HTML: scalable, searchable, and drawn by any browser.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

__all__ = ["log_ticks", "nice_ticks", "trajectory_svg"]

WIDTH, TOP_H, LOW_H = 760, 300, 210
LEFT, RIGHT, PAD = 64, 16, 30
BAND, LINE, WIDTH_LINE, TARGET = "#9ecae1", "#08519c", "#238b45", "#cb181d"


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round ticks (1, 2 or 5 × 10^k apart) covering [lo, hi]."""
    if not hi > lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(count, 1)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks, x = [], first
    while x <= hi + step * 1e-9:
        ticks.append(round(x, 12))
        x += step
    return ticks


def log_ticks(lo: float, hi: float) -> list[float]:
    """Ticks at 1, 2 and 5 × 10^k within [lo, hi] (lo > 0); the decades alone when they span many."""
    k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    mults = (1,) if k1 - k0 > 4 else (1, 2, 5)
    return [m * 10.0**k for k in range(k0, k1 + 1) for m in mults if lo <= m * 10.0**k <= hi]


def _fmt(v: float) -> str:
    return f"{v:.3g}" if v != 0 else "0"


class _Axes:
    def __init__(self, y0: float, height: float, xmax: int, ylo: float, yhi: float, log: bool) -> None:
        self.y0, self.h, self.xmax, self.log = y0, height, max(xmax, 2), log
        self.ylo, self.yhi = (math.log10(ylo), math.log10(yhi)) if log else (ylo, yhi)

    def x(self, n: float) -> float:
        return LEFT + (n - 1) / (self.xmax - 1) * (WIDTH - LEFT - RIGHT)

    def y(self, v: float) -> float:
        v = math.log10(max(v, 1e-300)) if self.log else v
        v = min(max(v, self.ylo), self.yhi)
        return self.y0 + self.h - (v - self.ylo) / (self.yhi - self.ylo) * self.h

    def path(self, xs: Sequence[float], ys: Sequence[float]) -> str:
        points = (f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in zip(xs, ys, strict=True))
        return " ".join(("M" if i == 0 else "L") + p for i, p in enumerate(points))

    def frame(self, yticks: Sequence[float], ylabel: str, xticks: Sequence[int], xlabel: str | None) -> list[str]:
        x1 = WIDTH - RIGHT
        out = [f'<rect x="{LEFT}" y="{self.y0}" width="{x1 - LEFT}" height="{self.h}" fill="none" stroke="#999"/>']
        for t in yticks:
            y = self.y(t)
            out.append(f'<line x1="{LEFT}" x2="{x1}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
            out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
        for t in xticks:
            x = self.x(t)
            out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{self.y0}" y2="{self.y0 + self.h}" stroke="#f0f0f0"/>')
            if xlabel is not None:
                out.append(f'<text x="{x:.1f}" y="{self.y0 + self.h + 16}" text-anchor="middle">{t}</text>')
        mid = self.y0 + self.h / 2
        out.append(f'<text x="14" y="{mid:.1f}" transform="rotate(-90 14 {mid:.1f})" '
                   f'text-anchor="middle">{html.escape(ylabel)}</text>')
        if xlabel is not None:
            out.append(f'<text x="{(LEFT + x1) / 2:.1f}" y="{self.y0 + self.h + 34}" '
                       f'text-anchor="middle">{html.escape(xlabel)}</text>')
        return out


def _legend(x: float, y: float, items: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    for i, (swatch, label) in enumerate(items):
        yy = y + 16 * i
        out.append(f'<g transform="translate({x:.1f},{yy:.1f})">{swatch}<text x="24" y="4">{html.escape(label)}</text>'
                   "</g>")
    return out


def trajectory_svg(means: Sequence[float], lows: Sequence[float], highs: Sequence[float], widths: Sequence[float],
                   epsilon2: float, score_range: tuple[float, float] | None = None) -> str:
    """The chart of a trajectory (one value per item scored, oldest first) against the ε2 target, as SVG text."""
    n = len(means)
    height = PAD + TOP_H + PAD + LOW_H + 44
    title = "Estimate with its 95 % interval after each scored item, and the interval width against the target"
    parts = [f'<svg viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
             f'height="{height}" role="img" aria-labelledby="chart-title" font-family="system-ui, sans-serif" '
             f'font-size="12"><title id="chart-title">{title}</title>']
    xs = list(range(1, n + 1))
    xticks = [int(t) for t in nice_ticks(1, max(n, 2), 6) if 1 <= t <= max(n, 2) and float(t).is_integer()]
    if n == 0:
        lo, hi = score_range if score_range is not None else (0.0, 1.0)
    else:
        lo, hi = min(lows), max(highs)
        if hi - lo < 1e-9:
            lo, hi = lo - 0.05, hi + 0.05
    ticks = nice_ticks(lo, hi)
    top = _Axes(PAD, TOP_H, n, min(ticks[0], lo), max(ticks[-1], hi), log=False)
    parts += top.frame(ticks, "estimated benchmark score", xticks, None)
    if n:
        band = top.path(xs, highs) + " " + top.path(xs[::-1], lows[::-1]).replace("M", "L", 1) + " Z"
        parts.append(f'<path d="{band}" fill="{BAND}" fill-opacity="0.6" stroke="none"/>')
        parts.append(f'<path d="{top.path(xs, means)}" fill="none" stroke="{LINE}" stroke-width="2"/>')
        parts += _legend(WIDTH - RIGHT - 170, PAD + 14, [
            (f'<rect x="0" y="-5" width="18" height="10" fill="{BAND}"/>', "95 % interval"),
            (f'<line x1="0" x2="18" stroke="{LINE}" stroke-width="2"/>', "estimate"),
        ])
    else:
        parts.append(f'<text x="{WIDTH / 2}" y="{PAD + TOP_H / 2}" text-anchor="middle">no scores recorded yet</text>')
    positive = [w for w in widths if w > 0]
    wlo = min([*positive, epsilon2]) / 3.0  # the target stays clear of the axis when the widths end near it
    whi = max([*positive, epsilon2]) * 1.5
    low_axes = _Axes(PAD + TOP_H + PAD, LOW_H, n, wlo, whi, log=True)
    parts += low_axes.frame(log_ticks(wlo, whi), "95 % interval width (log)", xticks, "items scored")
    target_y = low_axes.y(epsilon2)
    parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{target_y:.1f}" y2="{target_y:.1f}" stroke="{TARGET}" '
                 'stroke-width="1.5" stroke-dasharray="6 4"/>')
    if n:
        parts.append(f'<path d="{low_axes.path(xs, widths)}" fill="none" stroke="{WIDTH_LINE}" stroke-width="2"/>')
    parts += _legend(WIDTH - RIGHT - 170, PAD + TOP_H + PAD + 14, [
        (f'<line x1="0" x2="18" stroke="{WIDTH_LINE}" stroke-width="2"/>', "interval width"),
        (f'<line x1="0" x2="18" stroke="{TARGET}" stroke-width="1.5" stroke-dasharray="6 4"/>',
         f"target ε2 = {epsilon2:g}"),
    ])
    parts.append("</svg>")
    return "\n".join(parts)
