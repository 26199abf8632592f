"""`activeeval session ...` and `activeeval run` through Typer's CliRunner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.session import Session

runner = CliRunner()

SCORER = """\
import json, sys
item = sys.argv[2]
if item in sys.argv[3:]:
    print("harness crashed on " + item, file=sys.stderr)
    sys.exit(3)
scores = json.load(open(sys.argv[1]))
print("log line: scoring", item)
print(scores[item] if item != "{bad}" else "n/a")
"""


def _scorer(tmp_path: Path, target: dict[str, float], fail_on: tuple[str, ...] = (), bad: str = "") -> str:
    script = tmp_path / "score.py"
    script.write_text(SCORER.replace("{bad}", bad))
    t = tmp_path / "target.json"
    t.write_text(json.dumps(target))
    return " ".join([sys.executable, str(script), str(t), "{item_id}", *fail_on])


def invoke(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def test_new_next_record_status_report(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    r = invoke("session", "new", f, "--reference", math_ref_file, "--epsilon2", "0.2", "--max-items", "3", "--seed", "4")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"created {f}: method bayesame, reference 'math_ref' (82 models x 437 items)")
    r = invoke("session", "next", f, "--k", "2", "--json")
    assert r.exit_code == 0, r.output
    asked = json.loads(r.stdout)
    assert [sorted(a) for a in asked] == [["index", "item_id", "reference_mean"]] * 2
    ids = [a["item_id"] for a in asked]
    r = invoke("session", "next", f)
    assert r.exit_code == 0 and len(r.stdout.split()) == 1
    ids.append(r.stdout.strip())
    for iid in ids[:2]:
        r = invoke("session", "record", f, iid, target[iid])
        assert r.exit_code == 0, r.output
        assert r.stdout.startswith(f"recorded {iid} = {target[iid]}")
    r = invoke("session", "record", f, ids[0], target[ids[0]])
    assert r.exit_code == 0 and "nothing changed" in r.stdout
    r = invoke("session", "status", f, "--json")
    st = json.loads(r.stdout)
    assert set(st) >= {"estimate", "ci_low", "ci_high", "n_used", "n_items", "pending", "stop"}
    assert (st["n_used"], st["n_items"], st["pending"], st["stop"]) == (2, 437, [ids[2]], False)
    r = invoke("session", "record", f, ids[2], target[ids[2]])
    assert "stop: yes (budget)" in r.stdout
    r = invoke("session", "history", f)
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 6
    out = tmp_path / "report.html"
    r = invoke("session", "report", f, "--out", out)
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert "<svg" in page and "<h2 id=\"items\">Items used (3)</h2>" in page
    assert all(iid in page for iid in ids) and "bayesame" in page and "stopping rule met" in page
    assert "http" not in page.replace("http-equiv", "")  # self-contained: nothing fetched


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "1"], "error: unknown item 'nope' in score matrix 'math_ref'"),
        (["math-00001", "0.5"], "error: score for item 'math-00001' is 0.5 but score matrix 'math_ref' is binary"),
        (["math-00001", "nan"], "error: score for item 'math-00001' is 'nan', which is not a finite number"),
        (["math-00001", "high"], "error: score for item 'math-00001' is 'high', which is not a number"),
        (["math-00001", "1_0"], "error: score for item 'math-00001' is '1_0', which is not a number (digit"),
        (["math-00000", "0"], "error: item 'math-00000' already has score 1 recorded; refusing to change it to 0"),
        (["math-00001"], "error: give ITEM_ID and SCORE"),
    ],
)
def test_record_errors_exit_2_and_keep_everything(tmp_path, math_ref_file, args, message) -> None:
    f = tmp_path / "s.aeval"
    assert invoke("session", "new", f, "--reference", math_ref_file).exit_code == 0
    assert invoke("session", "record", f, "math-00000", "1").exit_code == 0
    r = invoke("session", "record", f, *args)
    assert r.exit_code == 2
    assert r.stderr.startswith(message), r.stderr
    with Session.open(f) as s:
        assert s.observations == (("math-00000", 1.0),)


def test_file_errors_exit_2(tmp_path, math_ref_file) -> None:
    junk = tmp_path / "junk.aeval"
    junk.write_text("hello")
    r = invoke("session", "status", junk)
    assert r.exit_code == 2
    assert r.stderr == f"error: '{junk}' is not an activeeval session file, or it is corrupted (file is not a database)\n"
    r = invoke("session", "status", tmp_path / "none.aeval")
    assert r.exit_code == 2 and "no session file" in r.stderr
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", math_ref_file)
    math_ref_file.write_text(math_ref_file.read_text().replace(",0", ",1", 1))
    r = invoke("session", "next", f)
    assert r.exit_code == 2 and "changed since the session was created" in r.stderr and str(math_ref_file) in r.stderr


def test_record_from_plain_csv_and_jsonl(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    invoke("session", "new", f, "--reference", math_ref_file, "--seed", "0")
    items = list(target)[:6]
    (tmp_path / "a.csv").write_text("item_id,score\n" + "".join(f"{i},{target[i]:g}\n" for i in items[:4]))
    r = invoke("session", "record", f, "--from", tmp_path / "a.csv", "--all")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"recorded 4 score(s) from {tmp_path / 'a.csv'} (0 already recorded")
    (tmp_path / "b.jsonl").write_text("".join(json.dumps({"item": i, "correct": int(target[i])}) + "\n" for i in items))
    r = invoke("session", "record", f, "--from", tmp_path / "b.jsonl", "--all")
    assert r.exit_code == 0 and "recorded 2 score(s)" in r.stdout and "(4 already recorded" in r.stdout
    # A file with one bad row records nothing.
    (tmp_path / "c.csv").write_text(f"item_id,score\n{list(target)[10]},1\nbogus,1\n")
    r = invoke("session", "record", f, "--from", tmp_path / "c.csv", "--all")
    assert r.exit_code == 2 and "unknown item 'bogus'" in r.stderr
    with Session.open(f) as s:
        assert len(s.observations) == 6
    r = invoke("session", "record", f, "x", "1", "--from", tmp_path / "a.csv")
    assert r.exit_code == 2 and r.stderr == "error: give either ITEM_ID SCORE or --from FILE, not both\n"


def test_run_until_stop_then_resume_is_a_noop(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    scorer = _scorer(tmp_path, target)
    r = invoke("run", "--reference", math_ref_file, "--scorer", scorer, "--session", f, "--max-items", "6", "--seed", "2", "--json")
    assert r.exit_code == 0, r.output
    st = json.loads(r.stdout)
    assert (st["n_used"], st["stop_reason"], st["pending"]) == (6, "budget", [])
    with Session.open(f) as s:
        assert all(score == target[iid] for iid, score in s.observations)
        n_events = len(s.history())
    r = invoke("run", "--scorer", scorer, "--session", f)
    assert r.exit_code == 0 and "stop: yes (budget)" in r.stdout
    with Session.open(f) as s:
        assert len(s.history()) == n_events
    r = invoke("run", "--scorer", scorer, "--session", f, "--seed", "3")
    assert r.exit_code == 2
    assert "exists with other settings: --seed 3 (session has 2)" in r.stderr


def test_run_jobs_gives_the_same_journal(tmp_path, continuous_ref_file, continuous_split) -> None:
    _, target = continuous_split
    scorer = _scorer(tmp_path, target)
    tells = {}
    for jobs in (1, 3):
        f = tmp_path / f"s{jobs}.aeval"
        r = invoke("run", "--reference", continuous_ref_file, "--scorer", scorer, "--session", f,
                   "--max-items", "9", "--seed", "5", "--jobs", jobs)
        assert r.exit_code == 0, r.output
        with Session.open(f) as s:
            tells[jobs] = (s.observations, s.estimate())
    # Batches of 3 differ from one-at-a-time selection, but each run is recorded in ask order and
    # fully determined by the seed: re-running with --jobs 3 reproduces it exactly.
    f = tmp_path / "again.aeval"
    invoke("run", "--reference", continuous_ref_file, "--scorer", scorer, "--session", f,
           "--max-items", "9", "--seed", "5", "--jobs", "3")
    with Session.open(f) as s:
        assert (s.observations, s.estimate()) == tells[3]
    assert len(tells[1][0]) == len(tells[3][0]) == 9


def test_run_scorer_failure_keeps_recorded_scores_and_resumes(tmp_path, math_ref_file, math_split) -> None:
    _, target = math_split
    f = tmp_path / "s.aeval"
    # Find the 4th item the run will ask for, and make the scorer fail on it.
    with Session.create(tmp_path / "probe.aeval", math_ref_file, max_items=8, seed=9) as probe:
        order = []
        for _ in range(4):
            (a,) = probe.ask(1)
            probe.tell(a.item_id, target[a.item_id])
            order.append(a.item_id)
    bad = order[3]
    r = invoke("run", "--reference", math_ref_file, "--scorer", _scorer(tmp_path, target, fail_on=(bad,)),
               "--session", f, "--max-items", "8", "--seed", "9")
    assert r.exit_code == 2
    # stderr may open with the forecast (issue 27); the error is the first line that says "error:".
    (error,) = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert error.startswith(f"error: scorer failed on item {bad!r}: ")
    assert "exited with code 3; stderr: harness crashed on " + bad in r.stderr
    with Session.open(f) as s:
        assert [i for i, _ in s.observations] == order[:3]
        assert s.pending == (bad,)
    r = invoke("run", "--scorer", _scorer(tmp_path, target, bad=bad), "--session", f)
    assert r.exit_code == 2
    assert f"error: scorer printed no number for item {bad!r}: " in r.stderr
    assert "printed 'n/a' on stdout, which is not a number; the last line of its output must be the score" in r.stderr
    r = invoke("run", "--scorer", _scorer(tmp_path, target), "--session", f)
    assert r.exit_code == 0, r.output
    with Session.open(f) as s:
        assert [i for i, _ in s.observations][:4] == order
        assert len(s.observations) == 8


def test_run_argument_errors(tmp_path, math_ref_file) -> None:
    r = invoke("run", "--scorer", "echo 1", "--session", tmp_path / "s.aeval", "--reference", math_ref_file)
    assert r.exit_code == 2 and "has no {item_id} placeholder" in r.stderr
    r = invoke("run", "--scorer", "echo {item_id}", "--session", tmp_path / "s.aeval")
    assert r.exit_code == 2 and "does not exist yet: give --reference to create it" in r.stderr
    r = invoke("run", "--scorer", "no-such-binary-xyz {item_id}", "--session", tmp_path / "s.aeval",
               "--reference", math_ref_file, "--seed", "0")
    assert r.exit_code == 2 and "command not found: 'no-such-binary-xyz'" in r.stderr
    r = invoke("run", "--scorer", "echo 7 {item_id}", "--session", tmp_path / "s.aeval")
    assert r.exit_code == 2 and "printed '7 math-" in r.stderr
