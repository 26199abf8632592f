"""Session commands at scale: `session new`, `next`, `record`, `status` as whole processes.

Usage::

    python benchmarks/bench_session.py                                  # 1 000 / 5 000 / 20 000 items x 50 models
    python benchmarks/bench_session.py --items 20000 --methods rs-mean --repeats 3
    python benchmarks/bench_session.py --items 12000 --models 2000 --methods rs-mean,bayesame --repeats 3
                                                                        # a 48 MB reference (24 M cells, issue 24)
    python benchmarks/bench_session.py --items 20000 --methods bayesame --no-cache
                                                                        # every command without the user cache
    python benchmarks/bench_session.py --smoke                          # 200 items x 20 models, rs-mean, 1 run

    python benchmarks/bench_session.py --items 20000 --methods bayesame --commands new --repeats 3
                                                                        # `session new` only: first and second
    mkdir /tmp/mainsrc && git archive main src | tar -x -C /tmp/mainsrc
    python benchmarks/bench_session.py --items 20000 --methods bayesame --commands new --repeats 3 \
        --base-src /tmp/mainsrc/src                                     # paired with another version's code

Setup: a synthetic binary reference (50 models, a 1PL response model, seed 0)
written as a wide CSV, the format a user's reference usually has. Each
command is run as its own process (``python -m activeeval ...``), as a user
runs it, so the times include Python start-up and imports; peak memory is
the process's maximum resident set and CPU its user + system time
(``wait4``). The user cache (parsed reference files, the default's reference
fit and calibration, session snapshots) is a fresh folder of the run
(``ACTIVEEVAL_CACHE``), as on a user's first use; ``--no-cache`` runs every
command with ``activeeval --no-cache`` (no parse cache, no stored fit, no
snapshots: what the cache buys). ``new`` is run ``--repeats`` times, each
on a fresh file with a fresh cache folder (a user's first session on the
reference), and each followed by ``new, 2nd``: another session on the same
reference, with the cache the first one left (what every later session,
backtest or ``rank`` on that reference pays; ``--seed 0`` like the first,
whose cost forecast is then reused, or ``--second-seed N``, whose forecast
is made anew); then, on one session,
``next`` / ``record`` (of the item just handed out) / ``status`` are each
run ``--repeats`` times (``--commands new`` skips them). The table shows
medians and maxima (and, first, those of ``activeeval --version``: the
start-up every command pays), the session file's size, and, for ``new``, how much
of it is building the method (timed in-process, the same construction the
session does, without the user cache): the rest is the session machinery (reading the reference,
fingerprint, journal, snapshot).

``--base-src DIR`` runs every command a second time with another version's
code (``PYTHONPATH=DIR``, e.g. main's ``src`` from ``git archive``): each
repeat runs one version's ``new`` and ``new, 2nd`` and then the other's
(which goes first alternates; each with a fresh cache folder of its own),
so that both see the same load; the rows say which version ran (``this``
or ``base``).

Targets (issue 10): ``new`` ≤ 5 s and ≤ 300 MB, every later command ≤ 1 s,
at 20 000 items x 50 models. Issue 24: later commands under 1 s on a 48 MB
reference (2 000 models x 12 000 items).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_reference(n_items: int, n_models: int, folder: Path) -> Path:
    """The reference CSV, written by a child process (so this one stays small: a child's peak memory, as the
    system counts it, starts at its parent's)."""
    path = folder / f"ref{n_items}.csv"
    code = f"""
import numpy as np
from activeeval.data.io import write_scores
from activeeval.data.matrix import ScoreMatrix
rng = np.random.default_rng(0)
p = 1 / (1 + np.exp(-(rng.normal(size=({n_models}, 1)) - rng.normal(size=(1, {n_items})))))
scores = (rng.random(({n_models}, {n_items})) < p).astype(float)
m = ScoreMatrix(scores, [f"model{{j:02d}}" for j in range({n_models})], [f"item{{i:05d}}" for i in range({n_items})],
                name="synth{n_items}")
write_scores(m, {str(path)!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    return path


def run(args: list[str], cpu: list[float] | None = None, src: Path | None = None) -> tuple[float, float, str]:
    """(wall seconds, peak RSS MB, stdout) of ``python -m activeeval ARGS`` (with the code under ``src`` when
    given); its CPU seconds appended to ``cpu``."""
    env = {**os.environ, "PYTHONPATH": str(src)} if src is not None else None
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "activeeval", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    out = proc.stdout.read()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"activeeval {' '.join(args)} failed: {err.strip()}")
    if cpu is not None:
        cpu.append(usage.ru_utime + usage.ru_stime)
    return wall, usage.ru_maxrss / 1024, out


def build_seconds(method: str, ref: Path, src: Path | None = None) -> float:
    """In-process time to build the method on the reference (what the session's creation cannot avoid)."""
    code = ("import time; from activeeval.data.io import read_scores; from activeeval.methods.registry import "
            f"make_method, parse_method_spec; m = read_scores({str(ref)!r}); "
            f"name, opts = parse_method_spec({method!r}); t = time.perf_counter(); "
            "make_method(name, m, seed=0, **opts); print(time.perf_counter() - t)")
    env = {**os.environ, "ACTIVEEVAL_CACHE": "off"}  # the whole build, not a stored fit
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                env=env).stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", default="1000,5000,20000", help="comma-separated item counts")
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--methods", default="bayesame,rs-mean", help="comma-separated method specs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--smoke", action="store_true", help="200 items x 20 models, rs-mean, one run of each command")
    ap.add_argument("--no-cache", action="store_true", help="run every command with `activeeval --no-cache`")
    ap.add_argument("--commands", default="new,next,record,status",
                    help="`new` alone skips the later commands (`new` is always run: they need a session)")
    ap.add_argument("--base-src", type=Path, help="also run every command with this src folder's code, paired")
    ap.add_argument("--second-seed", type=int, default=0,
                    help="seed of `new, 2nd` (default 0, the first's: its forecast, keyed by the seed, is then reused)")
    a = ap.parse_args()
    flags = ["--no-cache"] if a.no_cache else []
    if a.smoke:
        a.items, a.models, a.methods, a.repeats = "200", 20, "rs-mean", 1
    versions: list[tuple[str, Path | None]] = [("this", None)]
    if a.base_src is not None:
        versions.append(("base", a.base_src.resolve()))
    header = (f"{'code':<5} {'items':>6} {'models':>6} {'method':<24} {'command':<8} {'median s':>9} {'max s':>7} "
              f"{'CPU s':>6} {'peak MB':>8} {'file MB':>8}  note")
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # the commands run from compiled bytecode, as installed
        # the floor of every command on this machine now: start-up and imports alone (`activeeval --version`)
        for version, src in versions:
            floor_cpu: list[float] = []
            floor = [run(["--version"], floor_cpu, src)[0] for _ in range(a.repeats)]
            print(f"{version:<5} {'':>6} {'':>6} {'':<10} {'start-up':<8} {statistics.median(floor):>9.2f} "
                  f"{max(floor):>7.2f} {statistics.median(floor_cpu):>6.2f} {'':>8} {'':>8}  "
                  "python -m activeeval --version", flush=True)

        def row(version: str, n_items: int, method: str, cmd: str, times: list[float], cpus: list[float],
                peaks: list[float], size: float, note: str = "") -> None:
            print(f"{version:<5} {n_items:>6} {a.models:>6} {method:<24} {cmd:<8} {statistics.median(times):>9.2f} "
                  f"{max(times):>7.2f} {statistics.median(cpus):>6.2f} {max(peaks):>8.0f} {size:>8.1f}  {note}",
                  flush=True)

        for n_items in (int(x) for x in a.items.split(",")):
            ref = make_reference(n_items, a.models, folder)
            for method in a.methods.split(","):
                runs = {(v, c): ([], [], []) for v, _ in versions
                        for c in ("new", "new, 2nd", "next", "record", "status")}

                def timed(version: str, src: Path | None, cmd: str, args: list[str]) -> str:
                    times, cpus, peaks = runs[version, cmd]  # noqa: B023 - called within this iteration
                    wall, peak, out = run([*flags, *args], cpus, src)
                    times.append(wall)
                    peaks.append(peak)
                    return out

                files: dict[str, Path] = {}
                for r in range(a.repeats):
                    for version, src in versions[:: -1 if r % 2 else 1]:  # alternating which goes first
                        # the commands' user cache: fresh for each first session, and never the home's
                        os.environ["ACTIVEEVAL_CACHE"] = str(folder / f"cache{n_items}-{method}-{r}-{version}")
                        for cmd, seed in (("new", 0), ("new, 2nd", a.second_seed)):
                            f = folder / f"s{n_items}-{method}-{r}-{version}{'b' if cmd != 'new' else ''}.aeval"
                            timed(version, src, cmd, ["session", "new", str(f), "--reference", str(ref), "--seed",
                                                      str(seed), "--method", method])
                        files[version] = f
                later = [c for c in ("next", "record", "status") if c in a.commands.split(",")]
                for version, src in versions:
                    build = build_seconds(method, ref, src)
                    f = files[version]
                    os.environ["ACTIVEEVAL_CACHE"] = str(folder / f"cache{n_items}-{method}-{a.repeats - 1}-{version}")
                    size = f.stat().st_size / 1e6
                    row(version, n_items, method, "new", *runs[version, "new"], size,
                        f"method build {build:.2f} s in-process")
                    row(version, n_items, method, "new, 2nd", *runs[version, "new, 2nd"], size,
                        f"same reference, the cache warm, seed {a.second_seed}")
                    for _ in range(a.repeats if later else 0):
                        out = timed(version, src, "next", ["session", "next", str(f)]) if "next" in later else ""
                        item = out.split()[0] if out else None
                        if "record" in later and item is not None:
                            timed(version, src, "record", ["session", "record", str(f), item, "1"])
                        if "status" in later:
                            timed(version, src, "status", ["session", "status", str(f)])
                    size = f.stat().st_size / 1e6
                    for cmd in later:
                        if runs[version, cmd][0]:
                            row(version, n_items, method, cmd, *runs[version, cmd], size)


if __name__ == "__main__":
    main()
