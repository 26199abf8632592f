"""Issue 24's audit, re-run as a user (or an attacker) would: every row, as command-line runs in a temp folder.

Usage::

    python benchmarks/abuse.py            # every case (a few minutes: builds a 48 MB reference)
    python benchmarks/abuse.py --smoke    # 3 fast cases: that the script runs (tests/test_benchmarks.py)
    python benchmarks/abuse.py --keep DIR # work in DIR and keep it (to look at the files)
    python benchmarks/abuse.py --only pickle  # the cases whose description contains "pickle"
    python benchmarks/abuse.py --only 1,2,7   # rows 1, 2 and 7 of the full table

Each case runs ``python -m activeeval ...`` subprocesses (scorers are ``sh`` one-liners or tiny Python scripts)
and classifies what happened:

* ``clean error``  one ``error: ...`` line, exit code 2, and nothing it was not asked to change changed;
* ``ok``           the command succeeded and the result is right;
* ``silent wrong`` it succeeded with a wrong result (a score read as another, a pickle's code run, ...);
* ``traceback``    a Python traceback (or another exit code) instead of a message;
* ``data lost``    a file it was not asked to change is gone or changed, or recorded scores became unreadable;
* ``slow``         it worked but missed the time the issue sets (the hung scorer, the 48 MB reference);
* ``n/a``          the case cannot be tried here (said why).

The ``audit`` rows are the table of issue 24 (in its order); ``new`` rows are further hostile cases. A row is
"as it should be" when its outcome is the one the issue asks for (mostly ``clean error``; ``ok`` where the
input is valid). Rows keep their number in the full table when a subset is run. The commands' user cache is
a fresh folder of the run. Prints one table row per case, then a summary; exit code 1 if a row is not as it
should be.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix

PY = sys.executable
GOOD_ERROR = {"clean error"}
GOOD_OK = {"ok"}


@dataclass
class Result:
    rc: int
    out: str
    err: str
    seconds: float
    cpu_seconds: float  # user + system time of the process (what a loaded machine does not inflate)
    max_rss_mb: float
    ended: float  # time.time() when it exited

    @property
    def outcome(self) -> str:
        if "Traceback (most recent call last)" in self.err:
            return "traceback"
        if self.rc == 0:
            return "ok"
        if self.rc == 2 and self.err.startswith("error: ") and len(self.err.strip().splitlines()) == 1:
            return "clean error"
        return "traceback"  # another exit code, or a message of several lines

    @property
    def message(self) -> str:
        return (self.err.strip().splitlines() or [self.out.strip()])[-1] if (self.err or self.out) else ""


def cli(*args: object, cwd: Path, timeout: float = 600, fsize: int | None = None, memory: int | None = None
        ) -> Result:
    """``python -m activeeval ARGS`` in ``cwd``; its exit code, output, wall time and peak memory.

    ``fsize``: a file size limit, standing in for a full disk (writes past it fail with EFBIG); ``memory``: an
    address-space limit, so a version that buffers a flood of output fails instead of exhausting the machine.
    """
    def limit() -> None:
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if memory is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([PY, "-m", "activeeval", *map(str, args)], cwd=cwd, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, preexec_fn=limit if fsize or memory else None)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Result(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                      time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                      time.time())


def digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


@dataclass
class Case:
    source: str  # "audit" (the table) or "new"
    tried: str
    run: Callable[[Path, World], tuple[str, str]]
    good: set[str]
    smoke: bool = False


class World:
    """What the cases share: a small reference file and a session made on it, copied per case."""

    def __init__(self, root: Path) -> None:
        self.root = root
        rng = np.random.default_rng(0)
        ability = rng.uniform(0.2, 0.9, size=(24, 1))
        scores = (rng.uniform(size=(24, 80)) < ability).astype(float)
        self.matrix = ScoreMatrix(scores, [f"m{j}" for j in range(24)], [f"q{i:02d}" for i in range(80)], name="ref")
        self.ref = write_scores(self.matrix, root / "ref.csv")
        self.template = root / "template.aeval"
        r = cli("session", "new", self.template, "--reference", self.ref, "--method", "rs-mean", "--seed", "0",
                cwd=root)
        if r.rc != 0:
            raise SystemExit(f"cannot create the template session: {r.err}")

    def session(self, folder: Path, name: str = "run.aeval") -> Path:
        """A fresh session file (rs-mean on the shared reference, nothing recorded) in ``folder``."""
        path = folder / name
        shutil.copy(self.template, path)
        return path


def tells(session: Path, cwd: Path) -> list[tuple[str, float]] | None:
    """The recorded scores (item, score) as `session history` reads them back; None if it cannot."""
    r = cli("session", "history", session, "--json", cwd=cwd)
    if r.rc != 0:
        return None
    return [(e["item_id"], e["score"]) for e in json.loads(r.out) if e["kind"] == "tell"]


def asked(session: Path, cwd: Path) -> list[str]:
    r = cli("session", "history", session, "--json", cwd=cwd)
    return [e["item_id"] for e in json.loads(r.out) if e["kind"] == "ask"] if r.rc == 0 else []


# ----------------------------------------------------------------- audit rows
def minus_zero(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    r = cli("session", "record", s, "q02", "--", "-0", cwd=d)
    r2 = cli("session", "status", s, cwd=d)
    if r2.rc != 0 and "corrupted" in r2.err:
        return "data lost", f"record: {r.outcome}; then status: {r2.message}"
    if r.outcome != "ok":
        return r.outcome, r.message
    back = tells(s, d)
    return ("ok", "recorded and reads back") if back == [("q02", 0.0)] else ("silent wrong", f"reads back {back}")


def minus_zero_scorer(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    r = cli("run", "--session", s, "--max-items", "2", "--scorer", "sh -c 'echo -0.0' {item_id}", cwd=d)
    r2 = cli("session", "status", s, cwd=d)
    if r2.rc != 0 and "corrupted" in r2.err:
        return "data lost", f"run: {r.outcome}; then status: {r2.message}"
    if r.outcome != "ok":
        return r.outcome, r.message
    return ("ok", "2 scores of -0.0 recorded, status reads them") if r2.rc == 0 else (r2.outcome, r2.message)


def report_over(target: str) -> Callable[[Path, World], tuple[str, str]]:
    def case(d: Path, w: World) -> tuple[str, str]:
        s = w.session(d)
        cli("session", "record", s, "q01", "1", cwd=d)
        out = s if target == "session" else w.ref
        before = {p: digest(p) for p in (s, w.ref)}
        r = cli("session", "report", s, "--out", out, "--force", cwd=d)
        changed = [p.name for p, h in before.items() if digest(p) != h]
        if changed:
            return "data lost", f"{', '.join(changed)} overwritten ({r.message})"
        return r.outcome, r.message
    return case


def _after_timeout(d: Path, w: World, body: str) -> tuple[str, str]:
    """Run a scorer ``sh -c BODY`` with --timeout 2; how long after the scorer started `run` returned."""
    s = w.session(d)
    started = d / "started"
    script = f"date +%s.%N > {started}; {body}"
    r = cli("run", "--session", s, "--timeout", "2", "--scorer", f"sh -c {shlex.quote(script)} {{item_id}}", cwd=d)
    if not started.exists():
        return r.outcome, f"the scorer never started; {r.message}"
    after = r.ended - float(started.read_text())
    detail = f"run returned {after:.1f} s after the scorer started (timeout 2 s); {r.message}"
    return ("slow" if r.outcome == "clean error" and after > 3.0 else r.outcome), detail


def hung_scorer(d: Path, w: World) -> tuple[str, str]:
    return _after_timeout(d, w, "sleep 40; echo 1")


def default_timeout(d: Path, w: World) -> tuple[str, str]:
    r = cli("run", "--help", cwd=d)
    text = " ".join(r.out.split())
    at = text.find("--timeout")
    shown = text[at:at + 220]
    if r.rc == 0 and "[default: " in shown and "[default: none]" not in shown:
        return "ok", "run --help: --timeout ... " + shown[shown.find("[default: "):].split(",")[0].split("]")[0] + "]"
    return "silent wrong", f"no default timeout in run --help: {shown[:120]!r}"


def planted_pickle(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    for item, score in (("q01", "1"), ("q05", "0"), ("q09", "1")):
        cli("session", "record", s, item, score, cwd=d)
    marker = d / "PWNED"
    # The attacker's tool: plants a pickle wherever a session file could carry one, each under a checksum it
    # recomputes (they are not a MAC): the table `snapshots` as earlier versions wrote it (created if this version
    # writes none, with the key that version would accept), and every other blob column outside the checksummed
    # journal. If the library stores a snapshot in the file itself, it is asked to first, and that is replaced.
    attacker = f"""
import hashlib, sqlite3
s_path, marker = {str(s)!r}, {str(marker)!r}
upto, key, how = 0, "", "no snapshot API"
try:
    from activeeval.session.journal import snapshot as snap
    from activeeval.session.base import open_session
    with open_session(s_path) as s:
        s.status(); s._cost = 1e9; s._maybe_snapshot()
        upto, key = s._seq, snap.snapshot_key(s._settings, s._digest.hexdigest())
    how = "library snapshot"
except Exception as exc:
    how = f"no snapshot API ({{type(exc).__name__}})"
class Evil:
    def __reduce__(self):
        return (exec, (f"open({{marker!r}}, 'w').write('code ran')",))
import pickle as pk
evil = pk.dumps(Evil())
checksum = hashlib.sha256(evil).hexdigest()
con = sqlite3.connect(s_path)
con.execute("CREATE TABLE IF NOT EXISTS snapshots (id INTEGER PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL, "
            "key TEXT NOT NULL, info TEXT NOT NULL, checksum TEXT NOT NULL, data BLOB NOT NULL, created TEXT NOT NULL)")
con.execute("INSERT OR IGNORE INTO snapshots VALUES (1, ?, ?, '{{}}', ?, ?, '2026-01-01T00:00:00+00:00')",
            (upto, key, checksum, evil))
tables = [r[0] for r in con.execute("select name from sqlite_master where type='table'")]
done = []
for t in tables:
    cols = [(r[1], (r[2] or "").upper()) for r in con.execute(f"pragma table_info({{t}})")]
    if not any(n in ("data", "blob", "state") or ty == "BLOB" for n, ty in cols) or t in ("events", "meta"):
        continue
    for n, ty in cols:
        if n in ("data", "state") or ty == "BLOB":
            sets = f"{{n}} = ?" + (", checksum = ?" if any(c == "checksum" for c, _ in cols) else "")
            args = [evil] + ([checksum] if "checksum" in sets else [])
            if con.execute(f"update {{t}} set {{sets}}", args).rowcount:
                done.append(f"{{t}}.{{n}}")
con.commit()
print(how, done)
"""
    planted = subprocess.run([PY, "-c", attacker], capture_output=True, text=True, cwd=d)
    if planted.returncode != 0 or "[]" in planted.stdout:
        return "n/a", f"could not plant a pickle ({(planted.stdout + planted.stderr).strip()[-120:]})"
    runs = [("status", cli("session", "status", s, cwd=d))]
    runs.append(("next", cli("session", "next", s, cwd=d)))
    item = runs[-1][1].out.strip() or "q13"
    runs.append(("record", cli("session", "record", s, item, "1", cwd=d)))
    runs.append(("report", cli("session", "report", s, "--out", d / "report.html", cwd=d)))
    outcomes = ", ".join(f"{name}: {r.outcome}" for name, r in runs)
    if marker.exists():
        return "silent wrong", f"the pickle's code ran (planted in {planted.stdout.strip()}); {outcomes}"
    worst = next((r for _, r in runs if r.outcome != "ok"), runs[0][1])
    return worst.outcome, f"no code ran (planted in {planted.stdout.strip()}); {outcomes}; {worst.message}"


def non_utf8(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    # Items whose id ends in 3 print bytes that are not UTF-8 on stdout, every item on stderr.
    script = r"""case "$1" in *3) printf '\377\376\n' ;; *) printf '\377 log\n' >&2; echo 1 ;; esac"""
    r = cli("run", "--session", s, "--jobs", "4", "--max-items", "12", "--scorer",
            f"sh -c {shlex.quote(script)} sh {{item_id}}", cwd=d)
    got, handed = tells(s, d) or [], asked(s, d)
    bad = [i for i in handed if i.endswith("3")]
    lost = [i for i in handed if not i.endswith("3") and i not in dict(got)]
    if r.outcome == "traceback":
        return "traceback", r.message
    if lost:
        return "data lost", f"{len(lost)} scores of the batch not recorded: {lost}"
    if not bad:
        return r.outcome, f"no item ending in 3 was asked ({len(got)} recorded)"
    return r.outcome, f"{len(got)} recorded, {bad[0]!r} pending; {r.message}"


def reference_file(name: str, text: str | bytes) -> Callable[[Path, World], tuple[str, str]]:
    """`session new` on a reference file that must be refused (accepting it is a silent wrong)."""
    def case(d: Path, w: World) -> tuple[str, str]:
        path = d / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        r = cli("session", "new", d / "s.aeval", "--reference", path, "--method", "rs-mean", cwd=d)
        if r.outcome == "ok":
            return "silent wrong", "accepted: " + r.out.strip()[:150]
        return r.outcome, r.message
    return case


def jsonl(bad: str) -> str:
    """A long JSONL reference of 3 models x 2 items whose last record has ``bad`` in place of one field."""
    rows = [{"model": f"m{j}", "item": f"q{i}", "score": (i + j) % 2} for j in range(3) for i in range(2)]
    lines = [json.dumps(r) for r in rows]
    key = bad.split(":")[0].strip().strip('"')
    last = {k: json.dumps(v) for k, v in rows[-1].items() if k != key}
    lines[-1] = "{" + ", ".join(f'"{k}": {v}' for k, v in last.items()) + ", " + bad + "}"
    return "\n".join(lines) + "\n"


def parquet_list(d: Path, w: World) -> tuple[str, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"model": ["m0", "m1"], "q1": pa.array([[1], [0]]), "q2": [1.0, 0.0]}), d / "l.parquet")
    r = cli("session", "new", d / "s.aeval", "--reference", d / "l.parquet", "--method", "rs-mean", cwd=d)
    return r.outcome, r.message


def placeholder(d: Path, w: World) -> tuple[str, str]:
    items = ["{model}", "{item_id}", "a{model}b"] + [f"q{i}" for i in range(17)]
    rng = np.random.default_rng(1)
    ref = write_scores(ScoreMatrix(rng.integers(0, 2, size=(10, 20)).astype(float), [f"r{j}" for j in range(10)],
                                   items), d / "odd.csv")
    log = d / "argv.log"
    score = d / "score.py"
    score.write_text(f"import sys\nopen({str(log)!r}, 'a').write(repr(sys.argv[1:]) + '\\n')\n"
                     f"print(1 if sys.argv[2] in {items!r} else 'wrong item')\n")
    r = cli("run", "--session", d / "m.aeval", "--reference", ref, "--method", "rs-mean", "--targets", "ta,tb",
            "--max-items", "20", "--seed", "0", "--scorer", f"{shlex.quote(PY)} {score} {{model}} {{item_id}}", cwd=d)
    seen = [eval(line) for line in log.read_text().splitlines()] if log.exists() else []
    wrong = [a for a in seen if a[1] not in items or a[0] not in ("ta", "tb")]
    if wrong:
        return "silent wrong", f"the scorer got {wrong[0]}"
    with_text = sorted({a[1] for a in seen if "{" in a[1]})
    return r.outcome, f"{len(seen)} calls, ids passed verbatim: {with_text}; {r.message}"


def readonly_folder(d: Path, w: World) -> tuple[str, str]:
    ro = d / "rodir"
    ro.mkdir()
    os.chmod(ro, 0o555)
    mounted = False
    try:
        if os.geteuid() == 0:  # root writes into a 0555 folder anyway: make it a read-only bind mount instead
            done = subprocess.run(f"mount --bind {ro} {ro} && mount -o remount,ro,bind {ro}", shell=True,
                                  capture_output=True, text=True)
            mounted = done.returncode == 0
            if not mounted:
                return "n/a", f"running as root and cannot mount the folder read-only ({done.stderr.strip()[:80]})"
        r = cli("session", "new", ro / "new.aeval", "--reference", w.ref, "--method", "rs-mean", cwd=d)
        return r.outcome, r.message + (" (a read-only bind mount)" if mounted else "")
    finally:
        if mounted:
            subprocess.run(["umount", str(ro)], capture_output=True)
        os.chmod(ro, 0o755)


def underscore_scorer(d: Path, w: World) -> tuple[str, str]:
    s = d / "pct.aeval"  # a 0-100 scale, where 10 is a valid score
    cli("session", "new", s, "--reference", w.ref, "--method", "rs-mean", "--score-range", "0", "100", "--kind",
        "continuous", cwd=d)
    r = cli("run", "--session", s, "--max-items", "1", "--scorer", "sh -c 'echo 1_0' {item_id}", cwd=d)
    got = tells(s, d)
    if got:
        return "silent wrong", f"recorded {got}"
    return r.outcome, r.message


def big_reference(d: Path, w: World) -> tuple[str, str]:
    n_models, n_items = 2000, 12000  # 24 M cells: a 48 MB CSV of 0/1
    rng = np.random.default_rng(2)
    path = d / "big.csv"
    header = "model," + ",".join(f"q{i}" for i in range(n_items)) + "\n"
    with open(path, "w") as f:
        f.write(header)
        for j in range(n_models):
            row = (rng.uniform(size=n_items) < 0.6).astype(np.int8)
            f.write(f"m{j}," + ",".join(map(str, row.tolist())) + "\n")
    size_mb = path.stat().st_size / 1e6
    s = d / "big.aeval"
    r = cli("session", "new", s, "--reference", path, "--method", "rs-mean", "--seed", "0", cwd=d)
    if r.rc != 0:
        return r.outcome, r.message
    small = w.session(d)  # the same command on the 24 x 80 reference, in turn with it: this run's floor
    runs: dict[Path, list[Result]] = {s: [], small: []}
    for k in range(3):
        for session, runs_of in runs.items():
            r = cli("session", "record", session, f"q{k}" if session == s else f"q{k:02d}", "1", cwd=d)
            if r.rc != 0:
                return r.outcome, r.message
            runs_of.append(r)
    med, cpu, small_med, small_cpu = (statistics.median(getattr(r, attr) for r in runs[session])
                                      for session in (s, small) for attr in ("seconds", "cpu_seconds"))
    detail = (f"{size_mb:.0f} MB, {n_models * n_items / 1e6:.0f} M cells: session record median {med:.2f} s "
              f"(CPU {cpu:.2f} s; 3 calls), peak {max(r.max_rss_mb for r in runs[s]):.0f} MB; on the small "
              f"reference, in turn with it: {small_med:.2f} s (CPU {small_cpu:.2f} s)")
    return ("ok" if med < 1.0 else "slow"), detail


def semicolons(d: Path, w: World) -> tuple[str, str]:
    text = w.ref.read_text().replace(",", ";")
    (d / "semi.csv").write_text(text)
    (d / "tabs.csv").write_text(w.ref.read_text().replace(",", "\t"))
    outs = []
    for name in ("semi.csv", "tabs.csv"):
        r = cli("session", "new", d / f"{name}.aeval", "--reference", d / name, "--method", "rs-mean", cwd=d)
        if r.outcome != "ok":
            return r.outcome, f"{name}: {r.message}"
        if "(24 models x 80 items)" not in r.out:
            return "silent wrong", r.out.strip()[:150]
        outs.append(name)
    return "ok", f"{' and '.join(outs)} read as 24 models x 80 items"


# ----------------------------------------------------------------- new rows
def session_is_reference(d: Path, w: World) -> tuple[str, str]:
    ref = d / "ref.csv"
    shutil.copy(w.ref, ref)
    before = digest(ref)
    r = cli("run", "--session", ref, "--scorer", "echo 1 {item_id}", "--reference", ref, cwd=d)
    if digest(ref) != before:
        return "data lost", f"ref.csv changed ({r.message})"
    return r.outcome, r.message


def report_symlink(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    os.symlink(s, d / "report.html")
    before = digest(s)
    r = cli("session", "report", s, "--out", d / "report.html", "--force", cwd=d)
    if digest(s) != before or not (d / "report.html").is_symlink():
        return "data lost", f"the session behind the link was replaced ({r.message})"
    return r.outcome, r.message


def report_disk_full(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    old = d / "r.html"
    old.write_text("<p>the report I sent my team</p>\n")
    before = digest(old)
    r = cli("session", "report", s, "--out", old, "--force", cwd=d, fsize=2000)
    left = [p.name for p in d.iterdir() if p.name.startswith(".tmp-")]
    if digest(old) != before:
        return "data lost", f"the old report is {old.stat().st_size} bytes now ({r.message})"
    if left:
        return "silent wrong", f"temporary files left: {left}"
    return r.outcome, r.message


def backtest_foreign_folder(d: Path, w: World) -> tuple[str, str]:
    mine = d / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("years of work\n")
    r = cli("backtest", "--dataset", w.ref, "--methods", "rs-mean", "--seeds", "1", "--out", mine, "--force", cwd=d)
    if sorted(p.name for p in mine.iterdir()) != ["chapter1.tex"]:
        return "data lost", f"the folder now holds {sorted(p.name for p in mine.iterdir())}"
    return r.outcome, r.message


def flood(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    r = cli("run", "--session", s, "--timeout", "2", "--scorer", "sh -c yes {item_id}", cwd=d, memory=4 << 30)
    return r.outcome, f"peak memory {r.max_rss_mb:.0f} MB (limit 4 GB of address space); {r.message}"


def escaped_grandchild(d: Path, w: World) -> tuple[str, str]:
    pidfile = d / "pid"
    try:
        return _after_timeout(d, w, f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 30' & sleep 30")
    finally:
        if pidfile.exists():
            try:
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def odd_number(text: str) -> Callable[[Path, World], tuple[str, str]]:
    def case(d: Path, w: World) -> tuple[str, str]:
        s = w.session(d)
        r = cli("run", "--session", s, "--max-items", "1", "--scorer", f"sh -c 'echo {text}' {{item_id}}", cwd=d)
        got = tells(s, d)
        return ("silent wrong", f"recorded {got}") if got else (r.outcome, r.message)
    return case


def record_underscore(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    r = cli("session", "record", s, "q01", "1_0", cwd=d)
    got = tells(s, d)
    return ("silent wrong", f"recorded {got}") if got else (r.outcome, r.message)


def out_of_range_in_batch(d: Path, w: World) -> tuple[str, str]:
    s = w.session(d)
    script = 'case "$1" in *3) echo 7 ;; *) echo 0 ;; esac'
    r = cli("run", "--session", s, "--jobs", "4", "--max-items", "12", "--scorer",
            f"sh -c {shlex.quote(script)} sh {{item_id}}", cwd=d)
    got, handed = tells(s, d) or [], asked(s, d)
    lost = [i for i in handed if not i.endswith("3") and i not in dict(got)]
    if lost:
        return "data lost", f"{len(lost)} valid scores of the batch not recorded"
    return r.outcome, f"{len(got)} recorded; {r.message}"


CASES = [
    Case("audit", "session record s.aeval q02 -- -0, then session status", minus_zero, GOOD_OK, smoke=True),
    Case("audit", "run --scorer \"sh -c 'echo -0.0'\" (2 items), then session status", minus_zero_scorer, GOOD_OK),
    Case("audit", "session report run.aeval --out run.aeval --force", report_over("session"), GOOD_ERROR, smoke=True),
    Case("audit", "session report run.aeval --out ref.csv --force", report_over("reference"), GOOD_ERROR),
    Case("audit", "run --timeout 2 --scorer \"sh -c 'sleep 40; echo 1' {item_id}\"", hung_scorer, GOOD_ERROR),
    Case("audit", "run --help: a default --timeout", default_timeout, GOOD_OK),
    Case("audit", "snapshot blob replaced by a pickle (checksum recomputed), then session status/next/record/report",
         planted_pickle, GOOD_OK | GOOD_ERROR),
    Case("audit", "scorer printing non-UTF-8 bytes (stdout or stderr), --jobs 4", non_utf8, GOOD_ERROR),
    Case("audit", "Parquet reference with a list column", parquet_list, GOOD_ERROR),
    Case("audit", 'JSONL reference with "score": [1]', reference_file("l.jsonl", jsonl('"score": [1]')), GOOD_ERROR,
         smoke=True),
    Case("audit", 'JSONL reference with "score": {"v": 1}', reference_file("o.jsonl", jsonl('"score": {"v": 1}')),
         GOOD_ERROR),
    Case("audit", 'JSONL reference with "model": {"x": "m0"}',
         reference_file("id.jsonl", jsonl('"model": {"x": "m0"}')), GOOD_ERROR),
    Case("audit", 'JSONL reference with "score": true', reference_file("b.jsonl", jsonl('"score": true')),
         GOOD_ERROR),
    Case("audit", "item ids containing {model} / {item_id} in a multi-target run", placeholder, GOOD_OK),
    Case("audit", "session new rodir/new.aeval in a read-only folder", readonly_folder, GOOD_ERROR),
    Case("audit", "a scorer printing 1_0 (a 0-100 session)", underscore_scorer, GOOD_ERROR),
    Case("audit", "a 48 MB reference (24 M cells): session record", big_reference, GOOD_OK),
    Case("audit", "a semicolon- and a tab-separated .csv reference", semicolons, GOOD_OK),
    Case("new", "run --session ref.csv (the reference given as the session file)", session_is_reference, GOOD_ERROR),
    Case("new", "session report --out LINK --force, LINK a symlink to the session", report_symlink, GOOD_ERROR),
    Case("new", "session report over an old report with the disk full (2 kB file limit)", report_disk_full,
         GOOD_ERROR),
    Case("new", "backtest --out a folder of other files --force", backtest_foreign_folder, GOOD_ERROR),
    Case("new", "a scorer flooding stdout (yes) with --timeout 2", flood, GOOD_ERROR),
    Case("new", "a scorer whose grandchild leaves its group (setsid) holding the pipes", escaped_grandchild,
         GOOD_ERROR),
    Case("new", "a scorer printing Arabic-Indic 1 (U+0661)", odd_number("\u0661"), GOOD_ERROR),
    Case("new", "a scorer printing nan", odd_number("nan"), GOOD_ERROR),
    Case("new", "session record s.aeval q01 1_0", record_underscore, GOOD_ERROR),
    Case("new", "a scorer printing an out-of-range 7 in a --jobs 4 batch", out_of_range_in_batch, GOOD_ERROR),
    Case("new", "a reference with decimal commas (0,5; semicolon-separated)",
         reference_file("eu.csv", "model;q1;q2\nm0;0,5;1\nm1;1;0\nm2;0;0\n"), GOOD_ERROR),
    Case("new", "a JSONL reference with a 5000-digit score",
         reference_file("huge.jsonl", jsonl('"score": ' + "9" * 5000)), GOOD_ERROR),
    Case("new", "a reference that is UTF-16 text",
         reference_file("u16.csv", "model,q1,q2\nm0,1,0\nm1,0,1\nm2,1,1\n".encode("utf-16")), GOOD_ERROR),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--smoke", action="store_true", help="3 fast cases: that the script runs (CI)")
    ap.add_argument("--keep", type=Path, help="work in this folder and keep it")
    ap.add_argument("--only", metavar="TEXT|ROWS",
                    help="only the cases whose description contains TEXT, or the rows ROWS of the full table "
                         "(comma-separated numbers, e.g. 1,2,7)")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="abuse-"))
    root.mkdir(parents=True, exist_ok=True)
    # The commands' user cache (parsed references, snapshots): a fresh folder of the run, as on a first use,
    # never the home folder's.
    os.environ["ACTIVEEVAL_CACHE"] = str(root / "user-cache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the commands run from compiled bytecode, as installed
    start = time.perf_counter()
    try:
        world = World(root)
        rows = ({int(x) for x in args.only.split(",")} if args.only and args.only.replace(",", "").isdigit()
                else None)
        cases = [(n, c) for n, c in enumerate(CASES, start=1) if (c.smoke or not args.smoke) and (
            args.only is None or (n in rows if rows is not None else args.only in c.tried))]
        print("| # | source | tried | outcome | as it should be | detail |\n|---|---|---|---|---|---|")
        outcomes: Counter[str] = Counter()
        bad = []
        for n, case in cases:  # numbered as in the full table
            folder = root / f"case{n:02d}"
            folder.mkdir()
            ref_before = digest(world.ref)
            try:
                outcome, detail = case.run(folder, world)
            except Exception as exc:
                outcome, detail = "traceback", f"the case itself failed: {type(exc).__name__}: {exc}"
            if digest(world.ref) != ref_before:
                outcome, detail = "data lost", "the shared reference file changed; " + detail
                write_scores(world.matrix, world.ref, overwrite=True)
            ok = outcome in case.good
            outcomes[outcome] += 1
            if not ok and outcome != "n/a":
                bad.append(n)
            detail = " / ".join(detail.split("\n")).replace(str(root), "$TMP")
            detail = (detail[:230] + " ...").replace("|", "\\|") if len(detail) > 230 else detail.replace("|", "\\|")
            print(f"| {n} | {case.source} | {case.tried.replace('|', '/')} | {outcome} | "
                  f"{'yes' if ok else 'n/a' if outcome == 'n/a' else '**no**'} | {detail} |", flush=True)
        summary = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
        print(f"\n{len(cases)} cases ({'smoke' if args.smoke else 'selected' if args.only else 'full'}): {summary}; "
              f"{len(cases) - len(bad) - outcomes['n/a']} as they should be, {len(bad)} not"
              + (f" (rows {', '.join(map(str, bad))})" if bad else "")
              + f"; {time.perf_counter() - start:.0f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
