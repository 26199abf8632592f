"""Render a session's HTML report in headless Chromium and check what a reader sees.

Usage::

    python scripts/check_report_in_browser.py                                  # check only
    python scripts/check_report_in_browser.py --screenshot docs/report.png     # and save a screenshot

Needs Debian's Chromium (``apt-get install chromium``; ``--chromium PATH``
for another binary). Builds a real session (the bundled HELM-Lite MATH
matrix, one model held out and scored with its real scores until the
stopping rule or 60 items), writes its report, and has Chromium load it:

* the DOM Chromium built (``--dump-dom``) must have the model's name in the
  title and the heading, the sections in the order result, settings,
  trajectory, items, a result table with the estimate and the interval, the
  stopping conditions, the settings in words with readable numbers (none
  longer than 4 significant digits, as ``0.00010000000000000009`` was), no
  empty header row, and the inline SVG chart laid out by the browser: its
  width, and the ε2 target line inside the width panel, clear of its edges
  (both measured by a probe script added to a copy of the page);
* optionally a screenshot of the page.

Exits 1 with the first failed check, 0 after printing what was checked.
"""

from __future__ import annotations

import argparse
import html.parser
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [  # what Chromium needs on these machines: no sandbox as root, no network, no first-run work
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
PROBE = """<script>window.addEventListener('load', () => {
  const svg = document.querySelector('figure.chart svg');
  const b = document.body.dataset;
  b.chartWidth = svg ? String(Math.round(svg.getBoundingClientRect().width)) : '-1';
  const target = svg && svg.querySelector('line[stroke-dasharray]');
  const panels = svg ? svg.querySelectorAll(':scope > rect') : [];
  if (target && panels.length === 2) {
    const t = target.getBoundingClientRect(), p = panels[1].getBoundingClientRect();
    b.targetGap = String(Math.round(Math.min(t.top - p.top, p.bottom - t.bottom)));
  } else { b.targetGap = '-1'; }
});</script>"""


class _Page(html.parser.HTMLParser):
    """Headings, table header rows and the body's attributes of a dumped DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.h1, self.h2, self.title = "", [], ""
        self.body: dict[str, str] = {}
        self.empty_header_rows = 0
        self.tables: list[str] = []
        self.settings_text = ""
        self._tag: list[str] = []
        self._row: list[str] = []
        self._in_thead = False

    def handle_starttag(self, tag, attrs):
        self._tag.append(tag)
        if tag == "body":
            self.body = {k: v or "" for k, v in attrs}
        if tag == "table":
            self.tables.append(dict(attrs).get("class", ""))
        if tag == "thead":
            self._in_thead = True
        if tag == "tr" and self._in_thead:
            self._row = []

    def handle_endtag(self, tag):
        if tag == "tr" and self._in_thead and not "".join(self._row).strip():
            self.empty_header_rows += 1
        if tag == "thead":
            self._in_thead = False
        if self._tag:
            self._tag.pop()

    def handle_data(self, data):
        where = self._tag[-1] if self._tag else ""
        if where == "h1":
            self.h1 += data
        elif where == "h2":
            self.h2.append(data.strip())
        elif where == "title" and "svg" not in self._tag:  # the page's title, not the chart's
            self.title += data
        if self._in_thead:
            self._row.append(data)
        if self.tables and self.tables[-1] == "settings" and "table" in self._tag:
            self.settings_text += data + "\n"


def build_report(folder: Path) -> tuple[Path, str, int]:
    from activeeval import datasets
    from activeeval.session import Session
    from activeeval.session.drivers.runner import drive
    from activeeval.session.report import write_report

    full = datasets.load("math")
    target = full.model_ids[0]
    truth = dict(zip(full.item_ids, map(float, full.model_scores(target)), strict=True))
    with Session.create(folder / "s.aeval", full.drop_models([target]), seed=0, epsilon2=0.15, max_items=60,
                        label=target) as s:
        drive(s, lambda item: truth[item], jobs=1)
        n = len(s.observations)
        out = write_report(s, folder / "report.html")
    return out, target, n


def chromium(binary: str, args: list[str], folder: Path) -> str:
    proc = subprocess.run([binary, *FLAGS, f"--user-data-dir={folder / 'profile'}", *args], capture_output=True,
                          text=True, timeout=120)
    if proc.returncode != 0:
        raise SystemExit(f"chromium failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def check(page: _Page, label: str, n: int, text: str) -> list[str]:
    checks = [
        (f"activeeval report: {label}" == page.title.strip(), f"title names the model ({page.title!r})"),
        (label in page.h1, f"heading names the model ({page.h1!r})"),
        (page.h2 == ["Result", "Settings", "Estimate trajectory", f"Items used ({n})"],
         f"sections in order result, settings, plot, items ({page.h2})"),
        (page.tables[:3] == ["result", "conditions", "settings"] and page.tables[-1] == "items",
         f"result, conditions and settings tables above the items table ({page.tables})"),
        (page.empty_header_rows == 0, "no empty header row"),
        ("95 % interval" in text and "estimate" in text, "the result shows the estimate and the interval"),
        ("stop once at least" in text and "stopping rule met" in text, "the settings say the stopping rule in words"),
        ("kernel fitted on the references" in text and "interval calibration" in text
         and not re.search(r"\d\.\d{6,}", page.settings_text),
         "the method's settings are named and their numbers rounded"),
        (int(page.body.get("data-chart-width", "-1")) > 300,
         f"the chart was laid out by the browser (width {page.body.get('data-chart-width')} px)"),
        (int(page.body.get("data-target-gap", "-1")) >= 10,
         f"the ε2 target line lies inside the width panel, {page.body.get('data-target-gap')} px from its edges"),
    ]
    for ok, what in checks:
        if not ok:
            raise SystemExit(f"FAILED: {what}")
    return [what for _, what in checks]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshot", type=Path, help="also save a PNG screenshot of the page here")
    a = ap.parse_args()
    if not Path(a.chromium).exists():
        raise SystemExit(f"no Chromium at {a.chromium}: apt-get install chromium, or pass --chromium PATH")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        report, label, n = build_report(folder)
        probed = folder / "probed.html"
        text = report.read_text(encoding="utf-8")
        probed.write_text(text.replace("</body>", PROBE + "</body>"), encoding="utf-8")
        dom = chromium(a.chromium, ["--dump-dom", probed.as_uri()], folder)
        page = _Page()
        page.feed(dom)
        for what in check(page, label, n, dom):
            print(f"ok: {what}")
        if a.screenshot is not None:
            a.screenshot.parent.mkdir(parents=True, exist_ok=True)
            chromium(a.chromium, [f"--screenshot={a.screenshot.resolve()}", "--window-size=1000,1500",
                                  "--hide-scrollbars", report.as_uri()], folder)
            print(f"wrote {a.screenshot}")


if __name__ == "__main__":
    sys.exit(main())
