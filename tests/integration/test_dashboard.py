"""The live dashboard: in headless Chromium while `activeeval run` writes, its JSON, and its read-only reads.

The browser checks live in ``scripts/check_dashboard_in_browser.py`` (also the
command that made ``docs/dashboard.png``). ``.ci/run`` installs Chromium, so CI
always runs that test; elsewhere it is skipped when no Chromium is found.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.session import Session

pytest.importorskip("starlette", reason='the dashboard extra is not installed (pip install "activeeval[dashboard]")')
pytest.importorskip("uvicorn", reason='the dashboard extra is not installed (pip install "activeeval[dashboard]")')

from activeeval.dashboard.data import Board, session_id

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_dashboard_in_browser.py"


@pytest.fixture
def reference(tmp_path) -> tuple[Path, dict[str, float]]:
    rng = np.random.default_rng(3)
    ability = rng.normal(size=(13, 1))
    scores = (rng.normal(size=(13, 60)) + ability > 0).astype(float)
    ref = tmp_path / "ref.csv"
    write_scores(ScoreMatrix(scores[1:], [f"m{k}" for k in range(12)], [f"i{j}" for j in range(60)]), ref)
    return ref, {f"i{j}": float(scores[0, j]) for j in range(60)}


def test_dashboard_in_headless_chromium(tmp_path) -> None:
    binary = shutil.which("chromium")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI must have Chromium (.ci/run installs Debian's chromium package)")
        pytest.skip("no Chromium (apt-get install chromium) to render the dashboard in")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--chromium", binary, "--screenshots", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("ok: ") == 14
    assert "ok: the open page (never reloaded; " in proc.stdout  # it updated itself while the run wrote
    for name in ("dashboard.png", "dashboard-ranking.png"):
        shot = (tmp_path / name).read_bytes()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000  # a page, not a blank


def test_reads_never_lock_out_a_writer(tmp_path, reference) -> None:
    """A board reading in a loop beside a writer with a short lock timeout: every write goes through."""
    ref, truth = reference
    path = tmp_path / "s.aeval"
    with Session.create(path, ref, method="rs-mean", seed=0, label="target"):
        pass
    board, seen, errors = Board([tmp_path]), [], []
    done, read_once = threading.Event(), threading.Condition()

    def read() -> None:
        while not done.is_set():
            try:
                (entry,) = board.sessions()
                assert "error" not in entry, entry
                with read_once:
                    seen.append(entry["status"]["n_used"])
                    read_once.notify_all()
            except Exception as exc:
                errors.append(exc)
                with read_once:
                    read_once.notify_all()
                return
        board.close()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        with Session.open(path, timeout=0.5) as s:  # a writer that gives up after 0.5 s on a lock
            for item in list(truth)[:40]:
                with read_once:  # the reader goes on reading; the writer lets it finish one read per score
                    n = len(seen)
                    read_once.wait_for(lambda: len(seen) > n or errors, timeout=30)  # noqa: B023 - called within this iteration
                s.tell(item, truth[item])
    finally:
        done.set()
        reader.join()
    assert not errors, errors
    assert len(seen) >= 40 and seen == sorted(seen) and len(set(seen)) >= 20  # read as the scores came in
    with Board([path]) as final:
        assert final.sessions()[0]["status"]["n_used"] == 40


def test_the_json_the_page_reads(tmp_path, reference) -> None:
    from starlette.testclient import TestClient

    from activeeval.dashboard.server import create_app
    from activeeval.session.multi import MultiSession
    from activeeval.session.ranking import RankSession

    ref, truth = reference
    with Session.create(tmp_path / "one.aeval", ref, method="rs-mean", seed=0, label="mine") as s:
        for item in list(truth)[:5]:
            s.tell(item, truth[item])
        status = s.status().to_dict()
    with MultiSession.create(tmp_path / "two.aeval", ref, ["a", "b"], method="rs-mean", seed=0) as m:
        m.tell("a", "i0", 1.0)
    with RankSession.create(tmp_path / "rank.aeval", ref, ["a", "b", "c"], method="rs-mean", seed=0) as r:
        r.tell("b", "i1", 1.0)
    (tmp_path / "broken.aeval").write_bytes(b"not a session")
    with TestClient(create_app([tmp_path], interval=1.5)) as client:
        page = client.get("/").text
        assert "const INTERVAL = 1500;" in page
        assert " src=" not in page and " href=" not in page and "https://" not in page  # nothing from elsewhere
        listed = client.get("/api/sessions").json()["sessions"]
        by_name = {e["name"]: e for e in listed}
        assert sorted(by_name) == ["broken.aeval", "one.aeval", "rank.aeval", "two.aeval"]
        assert "is not an activeeval session file" in by_name["broken.aeval"]["error"]
        one = client.get(f"/api/sessions/{session_id(tmp_path / 'one.aeval')}").json()
        assert (one["kind"], one["label"], one["status"]) == ("single", "mine", status)
        assert [p["n"] for p in one["trajectory"]] == [1, 2, 3, 4, 5]
        assert [it["item_id"] for it in one["items"]] == list(truth)[:5]
        two = client.get(f"/api/sessions/{session_id(tmp_path / 'two.aeval')}").json()
        assert list(two["targets"]) == ["a", "b"] and two["targets"]["a"]["items"] == [{"item_id": "i0", "score": 1.0}]
        rank = client.get(f"/api/sessions/{session_id(tmp_path / 'rank.aeval')}").json()
        p = rank["matrix"]["p"]
        assert len(p) == 3 and all(p[i][i] is None for i in range(3))
        assert all(abs(p[i][j] + p[j][i] - 1) < 1e-12 for i in range(3) for j in range(3) if i != j)
        assert rank["items"] == [{"model": "b", "item_id": "i1", "score": 1.0}]
        assert client.get("/api/sessions/0123456789ab").status_code == 404
        assert client.get("/api/sessions/../../etc").status_code == 404
    # Read-only: nothing was written to the session files.
    assert not list(tmp_path.glob("*-journal")) and not list(tmp_path.glob("*-wal"))


def test_cli_errors_name_the_flag(tmp_path) -> None:
    runner = CliRunner()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = runner.invoke(app, ["dashboard", str(tmp_path), "--port", str(port)])
    assert r.exit_code == 2
    assert r.stderr == (f"error: port {port} on 127.0.0.1 is in use; choose another with --port N (or --port 0 for "
                        "any free one)\n")
    r = runner.invoke(app, ["dashboard", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "no such file or folder" in r.stderr
    r = runner.invoke(app, ["dashboard", str(tmp_path), "--interval", "0"])
    assert r.exit_code == 2 and "--interval must be a positive number" in r.stderr


def test_the_base_cli_does_not_load_the_extras() -> None:
    code = ("import sys, activeeval, activeeval.cli; "
            "print(json.dumps(sorted(m for m in ('starlette', 'uvicorn', 'inspect_ai') if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
