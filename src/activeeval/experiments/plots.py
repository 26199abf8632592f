"""PNG plots of a backtest (matplotlib, Agg backend): RMSE Log, RMSE Gain, cost–accuracy, coverage."""

from __future__ import annotations

from pathlib import Path

from activeeval.exceptions import ConfigurationError

__all__ = ["INFORMATIVE", "informative_limits", "plots_available", "write_plots"]

#: The part of the run (fraction of the items) whose gain the RMSE Gain plot's axis is fitted to.
INFORMATIVE = 0.5


def plots_available() -> bool:
    """Whether matplotlib can be imported (the backtest then writes its PNG plots)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def informative_limits(fraction, values, upto: float = INFORMATIVE) -> tuple[float, float] | None:
    """The y-range of ``values`` over ``fraction <= upto``, padded, with 0 in it (None if nothing finite there).

    The RMSE Gain of an exact method grows without bound as n -> N (its error and RS-Mean's both vanish,
    their ratio does not): fitted to every point, the axis would run to ~90 dB and squash the first 20 %
    of the run, the part that matters.
    """
    import numpy as np

    f, v = np.asarray(fraction, dtype=float), np.asarray(values, dtype=float)
    body = v[(f <= upto) & np.isfinite(v)]
    if body.size == 0:
        return None
    lo, hi = min(float(body.min()), 0.0), max(float(body.max()), 0.0)
    pad = 0.08 * (hi - lo) if hi > lo else 1.0
    return lo - pad, hi + pad


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ConfigurationError(
            'plots need matplotlib: pip install "activeeval[plot]" (or skip the plots)'
        ) from exc
    return plt


def write_plots(curves, cost, out_dir: Path, title: str) -> list[Path]:
    """Write rmse_log.png, rmse_gain.png, cost_accuracy.png and coverage.png; return their paths.

    ``curves`` and ``cost`` are the frames of
    :func:`~activeeval.experiments.tables.curves_frame` and
    :func:`~activeeval.experiments.tables.cost_accuracy_frame`.
    """
    plt = _pyplot()
    out_dir = Path(out_dir)
    paths = []
    specs = [
        ("rmse_log.png", "rmse_log", "RMSE × 100", True, None),
        ("rmse_gain.png", "gain_db", "RMSE Gain vs RS-Mean (dB)", False, None),
        ("coverage.png", "coverage", "realised coverage of the 95 % interval", False, 0.95),
    ]
    for fname, col, ylabel, logy, hline in specs:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, g in curves.groupby("method", sort=False):
            if g[col].notna().any():
                ax.plot(100 * g["fraction"], g[col], label=name, lw=1.2)
        if col == "gain_db":
            limits = informative_limits(curves["fraction"], curves[col])
            if limits is not None:
                ax.set_ylim(*limits)
                ax.axhline(0.0, color="k", lw=0.6)
                ax.text(0.99, 0.02, f"axis fitted to n ≤ {INFORMATIVE:.0%} of N (the gain grows without bound as "
                        "n → N)", transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="0.35")
        if logy:
            ax.set_yscale("log")
            # exact methods reach round-off (~1e-14) at n = N; keep the axis on the informative range
            body = curves.loc[(curves["fraction"] <= 0.95) & (curves[col] > 0), col]
            if not body.empty:
                ax.set_ylim(bottom=float(body.min()) / 3)
        if hline is not None:
            ax.axhline(hline, color="k", ls=":", lw=1)
        ax.set_xlabel("coreset size n (% of N)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / fname, dpi=120)
        plt.close(fig)
        paths.append(out_dir / fname)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, g in cost.groupby("method", sort=False):
        ax.plot(100 * g["mean_fraction"], g["rmse_log"], marker="o", label=name, lw=1.2)
    ax.set_yscale("log")
    ax.set_xlabel("mean coreset size at stop (% of N)")
    ax.set_ylabel("RMSE at stop × 100")
    ax.set_title(title + " — cost–accuracy (ε2 sweep)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "cost_accuracy.png", dpi=120)
    plt.close(fig)
    paths.append(out_dir / "cost_accuracy.png")
    return paths
