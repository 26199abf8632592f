"""The report's chart and settings, and the backtest's gain plot (issue 27, item 6): a chart on every install whose
ε2 line is visible, settings a person can read, and a gain axis fitted to the informative part of the run."""

from __future__ import annotations

import re

import numpy as np
import pytest

from activeeval._svg import log_ticks, nice_ticks, trajectory_svg
from activeeval.experiments.plots import informative_limits
from activeeval.session import Session
from activeeval.session.report import readable_options, render_report


def test_ticks_are_round_and_cover_the_range() -> None:
    assert nice_ticks(0.23, 0.71) == [0.2, 0.3, 0.4, 0.5, 0.6, 0.7]
    assert nice_ticks(1, 437, 6) == [0, 100, 200, 300, 400]
    assert log_ticks(0.02, 1.9) == [0.02, 0.05, 0.1, 0.2, 0.5, 1.0]
    assert log_ticks(1e-5, 10) == [1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0]  # many decades: decades alone


def _panels_and_target(svg: str) -> tuple[list[tuple[float, float]], float]:
    rects = [(float(y), float(y) + float(h)) for y, h in re.findall(r'<rect x="64" y="([\d.]+)" width="[\d.]+" '
                                                                     r'height="([\d.]+)"', svg)]
    (target,) = re.findall(r'<line [^>]*y1="([\d.]+)" y2="\1" stroke="#cb181d"', svg)
    return rects, float(target)


def test_the_target_line_lies_well_inside_the_width_panel() -> None:
    """Widths fall from the whole range (1.8) to a few hundredths: on a linear axis ε2 would sit on the axis."""
    n = np.arange(1, 301)
    widths = 1.8 / np.sqrt(n) ** 1.3
    means = 0.5 + 0.2 / n
    svg = trajectory_svg(list(means), list(means - widths / 2), list(means + widths / 2), list(widths), 0.03,
                         (0.0, 1.0))
    (_top, bottom), target = _panels_and_target(svg)
    assert bottom[0] + 20 < target < bottom[1] - 20  # 20 px clear of both edges
    linear = bottom[1] - (0.03 - widths.min()) / (widths.max() - widths.min()) * (bottom[1] - bottom[0])
    assert bottom[1] - linear < 2  # what a linear axis would have done
    assert "target ε2 = 0.03" in svg and "95 % interval" in svg and svg.count("<path") == 3  # band, estimate, width


def test_an_empty_session_has_a_chart_that_says_so() -> None:
    svg = trajectory_svg([], [], [], [], 0.03)
    assert "no scores recorded yet" in svg and svg.startswith("<svg") and svg.endswith("</svg>")


def test_settings_are_named_and_rounded() -> None:
    rows = dict(readable_options({
        "hyperparameters": {"alpha": 0.0123456789, "beta": 11.094082559416258, "sigma2": 0.00010000000000000009,
                            "converged": True},
        "calibration": {"factor": 1.2119849239992908, "rms": 1.2119849239992908, "n_pseudo": 429, "n_items": 541},
        "selection": "random",
    }))
    assert rows["kernel fitted on the references"] == ("amplitude α 0.01235; inverse lengthscale β 11.09; "
                                                       "noise σ² 0.0001; converged yes")
    assert rows["interval calibration"] == ("interval widened 1.212x: reference models playing the target (429 of "
                                            "them, 541 items) had errors 1.212x the model's standard deviation")
    assert rows["item selection"] == "random"
    rows = dict(readable_options({"calibration": {"factor": 1.2, "rms": 1.2, "n_pseudo": 82, "n_items": 437,
                                                  "fractions": [0.01, 0.5], "factors": [0.7123456, 1.31]},
                                  "calibrate_by": "budget", "warmup": 10}))
    assert rows["interval calibration"].startswith("interval scaled 0.7123-1.31x by the share of items scored "
                                                   "(pooled over them: 1.2x): reference models playing")
    assert rows["calibration applied"] == "budget" and rows["items drawn at random first"] == "10"
    # the default applies the pooled factor at every n, though its calibration holds the factors by budget too
    calibration = {"factor": 1.2, "rms": 1.2, "n_pseudo": 82, "n_items": 437, "fractions": [0.01, 0.5],
                   "factors": [0.7123456, 1.31]}
    rows = dict(readable_options({"calibration": calibration, "calibrate_by": "pooled"}))
    assert rows["interval calibration"].startswith("interval widened 1.2x: reference models playing")
    assert dict(readable_options({"calibration": calibration}))["interval calibration"] == rows["interval calibration"]
    rows = dict(readable_options({"calibration": calibration, "calibrate_by": "capped"}))
    assert rows["interval calibration"].startswith("interval scaled 0.7123-1.2x by the share of items scored "
                                                   "(pooled over them: 1.2x, never above it)")
    rows = dict(readable_options({"calibration": calibration, "calibrate_by": "capped1"}))
    assert rows["interval calibration"].startswith("interval scaled 1-1.2x by the share of items scored")


def test_the_report_shows_the_default_s_settings_in_words(tmp_path, math_split) -> None:
    ref, truth = math_split
    with Session.create(tmp_path / "s.aeval", ref, seed=0, max_items=5) as s:
        for a in s.ask(5):
            s.tell(a.item_id, truth[a.item_id])
        page = render_report(s)
    settings = page[page.index('<table class="settings">'):page.index("</table>", page.index('class="settings"'))]
    assert "method: kernel fitted on the references" in settings and "method: interval calibration" in settings
    assert not re.search(r"\d\.\d{6,}", settings)  # no 0.00010000000000000009
    assert "<svg" in page and "data:image/png" not in page


@pytest.mark.parametrize("spike", [90.0, np.inf])
def test_the_gain_axis_fits_the_informative_part(spike: float) -> None:
    fraction = np.linspace(0.01, 1.0, 100)
    gain = np.clip(20 * fraction, 0, 12)  # a method 12 dB better than RS-Mean after 60 % of the items
    gain[-3:] = [40.0, 70.0, spike]  # n -> N: both errors vanish, their ratio does not
    lo, hi = informative_limits(fraction, gain)
    assert lo < 0 < 10 < hi < 12  # zero in view, the first half of the run fills the axis
    assert informative_limits([0.9, 1.0], [np.nan, 80.0]) is None
