"""Watch the live dashboard in headless Chromium while `activeeval run` writes a session.

Usage::

    python scripts/check_dashboard_in_browser.py                              # check only
    python scripts/check_dashboard_in_browser.py --screenshots docs/          # and save docs/dashboard*.png

Needs Debian's Chromium (``apt-get install chromium``; ``--chromium PATH`` for
another binary) and the dashboard extra. In a temporary folder it makes three
sessions on bundled data (one model evaluated on 200 items of HELM-Lite MATH, two models
evaluated together, four models ranked on AlpacaEval 2, each scored with its
real scores), starts ``activeeval dashboard FOLDER --port 0``, and drives
Chromium over the DevTools protocol (``--remote-debugging-pipe``: no network,
no extra package). With the page open, it checks what a reader sees:

* the list has the three sessions; the single-target view shows the estimate,
  the interval, the four stopping conditions, the notes and one row per item
  scored, and the chart's interval band;
* ``activeeval run`` resumes that session with a larger ``--max-items`` while
  the dashboard reads it every 0.2 s: the run finishes (the read-only
  dashboard never locks it out) and the same page, never reloaded, shows the
  new items and estimate;
* the multi-target view shows one section per target; the ranking view the
  ranking, the pairwise-confidence matrix (one cell per pair) and the ties.

Exits 1 with the first failed check, 0 after printing what was checked.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
N_FIRST, N_MORE = 20, 12  # items scored before the page opens, and by the run while it is open
SCORER = """import sys, json
truth = json.load(open(sys.argv[1]))
print(truth[sys.argv[2]])
"""


class DevTools:
    """A minimal Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (fds 3 and 4 of Chromium)."""

    def __init__(self, binary: str, profile: Path, width: int, height: int) -> None:
        to_browser_r, to_browser_w = os.pipe()
        from_browser_r, from_browser_w = os.pipe()
        # The child must read commands on fd 3 and write answers on fd 4: duplicate both above 9 first, so that
        # placing one cannot close the other.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]

        def place() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [binary, *FLAGS, "--remote-debugging-pipe", f"--user-data-dir={profile}", f"--window-size={width},{height}",
             "about:blank"], pass_fds=(3, 4), preexec_fn=place, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in (to_browser_r, from_browser_w, *high):
            os.close(fd)
        self._out = os.fdopen(to_browser_w, "wb", buffering=0)
        self._in = os.fdopen(from_browser_r, "rb", buffering=0)
        self._next = 0
        self._answers: dict[int, Any] = {}
        self._cond = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Emulation.setDeviceMetricsOverride", page=True, width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def _read(self) -> None:
        buf = b""
        while chunk := self._in.read(65536):
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._cond:
                        self._answers[msg["id"]] = msg
                        self._cond.notify_all()

    def call(self, method: str, page: bool = False, timeout: float = 30.0, **params: Any) -> Any:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if page:
            msg["sessionId"] = self.session
        self._out.write(json.dumps(msg).encode() + b"\0")
        with self._cond:
            if not self._cond.wait_for(lambda: self._next in self._answers, timeout=timeout):
                raise SystemExit(f"FAILED: Chromium did not answer {method} within {timeout:g} s")
            answer = self._answers.pop(self._next)
        if "error" in answer:
            raise SystemExit(f"FAILED: Chromium refused {method}: {answer['error']}")
        return answer.get("result", {})

    def page(self, expression: str, strict: bool = True) -> Any:
        """Evaluate JavaScript in the page; its (JSON-able) value (None on an error, unless ``strict``)."""
        out = self.call("Runtime.evaluate", page=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in out:
            if not strict:
                return None
            detail = out["exceptionDetails"]
            shown = (detail.get("exception") or {}).get("description") or detail.get("text")
            raise SystemExit(f"FAILED: the page's script failed: {shown}")
        return out["result"].get("value")

    def wait(self, expression: str, what: str, timeout: float = 60.0) -> Any:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            value = self.page(expression, strict=False)  # the page may be between two documents
            if value:
                return value
            time.sleep(0.1)
        state = self.page("JSON.stringify({...document.body.dataset, live: document.getElementById('live')"
                          "?.textContent, url: location.href})")
        raise SystemExit(f"FAILED: {what} (waited {timeout:g} s; the page: {state})")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", page=True, format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except SystemExit:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def make_sessions(folder: Path) -> dict[str, Any]:
    """Three sessions on bundled data; the single-target one stops at N_FIRST items, for the run to resume.

    Each reference is a file (a session made from a matrix in memory needs it again to be opened, which the
    dashboard cannot give; it shows such a session's error instead)."""
    from activeeval import datasets
    from activeeval.data.io import write_scores
    from activeeval.session import Session
    from activeeval.session.drivers.runner import drive, drive_multi, drive_ranking
    from activeeval.session.multi import MultiSession
    from activeeval.session.ranking import RankSession

    math_ = datasets.load("math")
    math_ = math_.select_items(math_.item_ids[:200])  # the first 200 items: the fit takes seconds, not tens
    target = math_.model_ids[0]
    truth = dict(zip(math_.item_ids, map(float, math_.model_scores(target)), strict=True))
    (folder / "truth.json").write_text(json.dumps(truth))
    write_scores(math_.drop_models([target]), folder / "math_ref.csv")
    with Session.create(folder / "math.aeval", folder / "math_ref.csv", seed=0, max_items=N_FIRST, label=target) as s:
        drive(s, lambda item: truth[item], jobs=1)

    pair = list(math_.model_ids[1:3])
    scores = {t: dict(zip(math_.item_ids, map(float, math_.model_scores(t)), strict=True)) for t in pair}
    write_scores(math_.drop_models(pair).select_items(math_.item_ids[:120]), folder / "math_ref2.csv")
    with MultiSession.create(folder / "two-models.aeval", folder / "math_ref2.csv", pair, seed=1, max_items=15,
                             label="two models on MATH") as m:
        drive_multi(m, lambda t, item: scores[t][item], jobs=2)

    alpaca = datasets.load("alpacaeval2")
    ranked = list(alpaca.model_ids[:4])
    ranked_scores = {t: dict(zip(alpaca.item_ids, map(float, alpaca.model_scores(t)), strict=True)) for t in ranked}

    class Lookup:
        def score_many(self, items: list[str], model: str | None = None) -> list[float]:
            return [ranked_scores[str(model)][i] for i in items]

        def stop(self) -> None:
            pass

    write_scores(alpaca.drop_models(ranked), folder / "alpaca_ref.csv")
    with RankSession.create(folder / "ranking.aeval", folder / "alpaca_ref.csv", ranked, method="rs-mean", seed=2,
                            budget_per_model=12, min_items=4, missing="items", label="four models ranked") as r:
        drive_ranking(r, Lookup())
    return {"target": target, "ranked": ranked}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--screenshots", type=Path, help="save dashboard.png and dashboard-ranking.png in this folder")
    a = ap.parse_args()
    if not Path(a.chromium).exists():
        raise SystemExit(f"no Chromium at {a.chromium}: apt-get install chromium, or pass --chromium PATH")
    from activeeval.dashboard.data import session_id

    ok = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        info = make_sessions(folder)
        (folder / "score.py").write_text(SCORER)
        server = subprocess.Popen([sys.executable, "-m", "activeeval", "dashboard", str(folder), "--port", "0",
                                   "--interval", "0.2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        browser = None
        try:
            line = server.stdout.readline()  # type: ignore[union-attr]
            if "http://" not in line:
                raise SystemExit(f"FAILED: the dashboard did not start: {line}{server.stderr.read()}")  # type: ignore
            url = line.split()[2]
            single = session_id(folder / "math.aeval")
            browser = DevTools(a.chromium, folder / "profile", 1100, 1500)
            browser.call("Page.navigate", page=True, url=f"{url}#s={single}")
            browser.wait(f"document.body.dataset.selected === '{single}' && document.body.dataset.nUsed === "
                         f"'{N_FIRST}'", f"the page shows the session with {N_FIRST} items")
            seen = browser.page("""(() => { const d = document.getElementById('detail');
                return {sessions: document.body.dataset.sessions, h2: d.querySelector('h2').textContent,
                        cards: [...d.querySelectorAll('.card .k')].map(e => e.textContent),
                        conditions: [...d.querySelectorAll('table')][0].querySelectorAll('tbody tr').length,
                        items: d.querySelectorAll('.scroll tbody tr').length,
                        band: !!d.querySelector('svg.estimate path.band'),
                        threshold: !!d.querySelector('svg.width line.threshold'),
                        notes: [...d.querySelectorAll('h3')].some(h => h.textContent === 'When to doubt'),
                        text: d.textContent}; })()""")
            checks = [
                (seen["sessions"] == "3", f"the list shows the 3 sessions ({seen['sessions']})"),
                (seen["h2"] == info["target"], f"the heading names the model ({seen['h2']!r})"),
                (seen["cards"] == ["estimate", "95% interval", "items used", "stop"],
                 f"estimate, interval, items used and stop are shown ({seen['cards']})"),
                (f"{N_FIRST} / " in seen["text"] and "stopped (budget)" in seen["text"],
                 "the items used and the stop reason are shown"),
                (seen["conditions"] == 4, f"the 4 stopping conditions against their thresholds ({seen['conditions']})"),
                (seen["items"] == N_FIRST, f"one row per item scored ({seen['items']})"),
                (seen["band"] and seen["threshold"], "the interval band and the epsilon2 line are drawn"),
                (seen["notes"], "the notes on when to doubt the estimate have their place"),
            ]
            for good, what in checks:
                if not good:
                    raise SystemExit(f"FAILED: {what}")
                ok.append(what)
            before = browser.page("Number(document.body.dataset.updates)")

            run = subprocess.run(
                [sys.executable, "-m", "activeeval", "run", "--session", str(folder / "math.aeval"),
                 "--max-items", str(N_FIRST + N_MORE), "--jobs", "4", "--scorer",
                 f"{sys.executable} {folder / 'score.py'} {folder / 'truth.json'} {{item_id}}"],
                capture_output=True, text=True, timeout=300)
            if run.returncode != 0:
                raise SystemExit(f"FAILED: `activeeval run` beside the dashboard: {run.stderr.strip()[-800:]}")
            ok.append(f"`activeeval run` recorded {N_MORE} more scores while the dashboard read the file every 0.2 s")
            browser.wait(f"document.body.dataset.nUsed === '{N_FIRST + N_MORE}' && "
                         f"document.querySelectorAll('#detail .scroll tbody tr').length === {N_FIRST + N_MORE}",
                         "the open page shows the new scores")
            after = browser.page("Number(document.body.dataset.updates)")
            ok.append(f"the open page (never reloaded; {after - before} updates) shows {N_FIRST + N_MORE} items")
            if a.screenshots is not None:
                browser.screenshot(a.screenshots / "dashboard.png")
                ok.append(f"wrote {a.screenshots / 'dashboard.png'}")

            multi = session_id(folder / "two-models.aeval")
            browser.call("Page.navigate", page=True, url=f"{url}#s={multi}")
            n = browser.wait(f"document.body.dataset.selected === '{multi}' && "
                             "document.querySelectorAll('#detail .target').length",
                             "the multi-target session shows its targets")
            if n != 2:
                raise SystemExit(f"FAILED: one section per target ({n})")
            ok.append("the multi-target session has one section per target, each with its chart and conditions")

            rank = session_id(folder / "ranking.aeval")
            browser.call("Page.navigate", page=True, url=f"{url}#s={rank}")
            cells = browser.wait(f"document.body.dataset.selected === '{rank}' && "
                                 "document.querySelectorAll('#detail table.matrix td.p').length",
                                 "the ranking shows its pairwise-confidence matrix")
            text = browser.page("document.getElementById('detail').textContent")
            k = len(info["ranked"])
            if cells != k * k or "ties:" not in text or not all(m in text for m in info["ranked"]):
                raise SystemExit(f"FAILED: the ranking shows its {k} models, a {k}x{k} matrix and the ties ({cells})")
            ok.append(f"the ranking shows its {k} models, the {k}x{k} pairwise-confidence matrix and the ties")
            if a.screenshots is not None:
                browser.screenshot(a.screenshots / "dashboard-ranking.png")
                ok.append(f"wrote {a.screenshots / 'dashboard-ranking.png'}")
        finally:
            if browser is not None:
                browser.close()
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    for what in ok:
        print(f"ok: {what}")


if __name__ == "__main__":
    sys.exit(main())
