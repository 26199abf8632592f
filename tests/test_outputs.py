"""No command destroys a file it was not asked to create (issue 24, item 2): activeeval._files and its users."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval._files import RESULTS_MARKER, atomic_output, output_folder
from activeeval.cli import app
from activeeval.data.io import read_scores, write_scores
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, StorageError

runner = CliRunner()


def _matrix(n_models: int = 6, n_items: int = 20, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    return ScoreMatrix(np.round(rng.uniform(size=(n_models, n_items)), 3), [f"m{j}" for j in range(n_models)],
                       [f"q{i}" for i in range(n_items)], name="small")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".tmp-", ".old-")))


# ------------------------------------------------------------------ files
def test_an_existing_file_is_refused_unless_asked(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    out.write_text("precious\n")
    with pytest.raises(ConfigurationError, match=r"score file '.*r.csv' exists; pass overwrite=True to overwrite it"):
        write_scores(_matrix(), out)
    assert out.read_text() == "precious\n"
    os.chmod(out, 0o640)
    write_scores(_matrix(), out, overwrite=True)
    assert read_scores(out, kind="continuous").fingerprint() == _matrix().fingerprint()
    assert out.stat().st_mode & 0o777 == 0o640  # an overwritten file keeps its permissions
    assert _leftovers(tmp_path) == []


def test_protected_files_are_refused_even_when_asked_however_they_are_named(tmp_path: Path, monkeypatch) -> None:
    ref = tmp_path / "ref.csv"
    ref.write_text("precious\n")
    (tmp_path / "sub").mkdir()
    os.symlink(ref, tmp_path / "link.csv")
    os.link(ref, tmp_path / "hard.csv")
    (tmp_path / "ref.csv-journal").write_text("side\n")
    monkeypatch.chdir(tmp_path / "sub")
    for name in (ref, "../ref.csv", tmp_path / "sub" / ".." / "ref.csv", tmp_path / "link.csv",
                 tmp_path / "hard.csv"):
        with pytest.raises(ConfigurationError, match="a file this command reads; refusing to write over it even"):
            write_scores(_matrix(), name, overwrite=True, protected=[ref])
    with pytest.raises(ConfigurationError, match="a file this command reads"):  # SQLite's side files too
        with atomic_output(tmp_path / "ref.csv-journal", overwrite=True, protected=[ref]):
            pass
    inputs = tmp_path / "harness-output"  # an input folder (reference build --from lm-eval DIR): nothing inside it
    inputs.mkdir()
    (inputs / "samples.jsonl").write_text("{}\n")
    with pytest.raises(ConfigurationError, match=r"lies in '.*harness-output', a folder this command reads"):
        write_scores(_matrix(), inputs / "samples.jsonl", overwrite=True, protected=[inputs])
    assert ref.read_text() == "precious\n" and (tmp_path / "ref.csv-journal").read_text() == "side\n"


def test_an_sqlite_database_is_never_overwritten(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "other.csv"
    sqlite3.connect(db).execute("create table t (x)").connection.commit()
    with pytest.raises(ConfigurationError, match="is an SQLite database .*even with overwrite=True"):
        write_scores(_matrix(), db, overwrite=True)
    assert db.read_bytes().startswith(b"SQLite format 3\x00")


def test_a_write_failing_midway_leaves_the_old_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    out.write_text("the old report\n")
    with pytest.raises(StorageError, match=r"cannot write report .*No space left on device.*nothing was changed"):
        with atomic_output(out, overwrite=True, what="report") as tmp:
            with open(tmp, "w") as f:
                f.write("half of the new rep")
                f.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert out.read_text() == "the old report\n"
    assert _leftovers(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="needs RLIMIT_FSIZE")
def test_a_real_short_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    """A real failing write (the file size limit, as a full disk): the process gets EFBIG mid-file."""
    out = write_scores(_matrix(), tmp_path / "ref.csv")
    before = out.read_bytes()
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "from activeeval.data.matrix import ScoreMatrix\n"
        "from activeeval.data.io import write_scores\n"
        "from activeeval.exceptions import StorageError\n"
        "import numpy as np\n"
        "m = ScoreMatrix(np.full((50, 400), 0.123456789), [f'm{j}' for j in range(50)], [f'q{i}' for i in range(400)])\n"
        "try:\n"
        f"    write_scores(m, {str(out)!r}, overwrite=True)\n"
        "except StorageError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(7)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 7, done.stderr
    assert "File too large" in done.stdout and "nothing was changed" in done.stdout
    assert out.read_bytes() == before
    assert _leftovers(tmp_path) == []


def test_a_new_file_gets_the_umask_permissions_and_missing_folders_are_named(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        out = write_scores(_matrix(), tmp_path / "new.jsonl")
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == 0o640
    with pytest.raises(ConfigurationError, match=r"folder '.*nope' does not exist"):
        write_scores(_matrix(), tmp_path / "nope" / "x.csv")
    (tmp_path / "dir.csv").mkdir()
    with pytest.raises(ConfigurationError, match=r"is a folder; give the path of a file"):
        write_scores(_matrix(), tmp_path / "dir.csv")


# ------------------------------------------------------------------ folders
def test_a_results_folder_is_new_or_ours(tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("years of work\n")
    for overwrite in (False, True):
        with pytest.raises(ConfigurationError, match="a folder of other files .* even with overwrite=True"):
            with output_folder(foreign, overwrite=overwrite):
                pass
    out = tmp_path / "res"
    with output_folder(out) as tmp:
        (tmp / "a.csv").write_text("1\n")
    assert (out / RESULTS_MARKER).is_file() and (out / "a.csv").read_text() == "1\n"
    with pytest.raises(ConfigurationError, match="holds the results of an earlier run; pass overwrite=True"):
        with output_folder(out):
            pass
    with pytest.raises(RuntimeError):  # a failed run leaves the earlier results as they were
        with output_folder(out, overwrite=True) as tmp:
            (tmp / "b.csv").write_text("2\n")
            raise RuntimeError("the backtest crashed")
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "a.csv"]
    with output_folder(out, overwrite=True) as tmp:
        (tmp / "b.csv").write_text("2\n")
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "b.csv"]
    assert _leftovers(tmp_path) == []


def test_the_kept_work_of_an_interrupted_run_is_the_commands_own(tmp_path: Path) -> None:
    """``resumable``: an unfinished run's work in the folder (backtest --out DIR keeps DIR/tasks) is no file of
    another's, and goes when the results replace the folder; an earlier run's results still need overwrite."""
    out = tmp_path / "res"
    (out / "tasks").mkdir(parents=True)
    (out / "tasks" / "task-0.npz").write_bytes(b"kept")
    with pytest.raises(ConfigurationError, match="a folder of other files"):
        with output_folder(out):
            pass
    with output_folder(out, resumable="tasks") as tmp:
        (tmp / "a.csv").write_text("1\n")
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "a.csv"]  # the kept tasks went with it
    (out / "tasks").mkdir()  # a --force re-run interrupted in the earlier results: they still need overwrite
    with pytest.raises(ConfigurationError, match="holds the results of an earlier run; pass overwrite=True"):
        with output_folder(out, resumable="tasks"):
            pass
    with output_folder(out, overwrite=True, resumable="tasks") as tmp:
        (tmp / "b.csv").write_text("2\n")
    assert sorted(p.name for p in out.iterdir()) == [RESULTS_MARKER, "b.csv"]
    (tmp_path / "file").mkdir()
    (tmp_path / "file" / "tasks").write_text("a file named tasks is not the kept work\n")
    with pytest.raises(ConfigurationError, match="a folder of other files"):
        with output_folder(tmp_path / "file", overwrite=True, resumable="tasks"):
            pass
    assert _leftovers(tmp_path) == []


def test_backtest_out_refuses_a_folder_of_other_files_before_running(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine\n")
    r = runner.invoke(app, ["backtest", "--dataset", "math", "--out", str(tmp_path), "--force"])
    assert r.exit_code == 2
    assert "is a folder of other files (1 entries) that activeeval did not write" in r.stderr
    assert "even with --force" in r.stderr and "overwrite=True" not in r.stderr


# ------------------------------------------------------------------ session report
def test_session_report_protects_the_session_and_its_reference(tmp_path: Path, monkeypatch) -> None:
    ref = write_scores(_matrix(12, 30), tmp_path / "ref.csv")
    f = tmp_path / "run.aeval"
    assert runner.invoke(app, ["session", "new", str(f), "--reference", str(ref), "--method", "rs-mean",
                               "--seed", "0"]).exit_code == 0
    assert runner.invoke(app, ["session", "record", str(f), "q3", "0.5"]).exit_code == 0
    session_bytes, ref_bytes = f.read_bytes(), ref.read_bytes()
    monkeypatch.chdir(tmp_path)
    for out in ("run.aeval", "./run.aeval", str(ref), "../" + tmp_path.name + "/ref.csv"):
        for force in ([], ["--force"]):
            r = runner.invoke(app, ["session", "report", str(f), "--out", out, *force])
            assert r.exit_code == 2, (out, r.output)
            assert "a file this command reads; refusing to write over it even with --force" in r.stderr
    assert f.read_bytes() == session_bytes and ref.read_bytes() == ref_bytes
    r = runner.invoke(app, ["session", "report", str(f), "--out", "r.html"])
    assert r.exit_code == 0 and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    (tmp_path / "r.html").write_text("edited by hand\n")
    r = runner.invoke(app, ["session", "report", str(f), "--out", "r.html"])
    assert r.exit_code == 2 and r.stderr.startswith("error: report 'r.html' exists; pass --force to overwrite")
    assert (tmp_path / "r.html").read_text() == "edited by hand\n"
    r = runner.invoke(app, ["session", "report", str(f), "--out", "r.html", "--force"])
    assert r.exit_code == 0 and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert _leftovers(tmp_path) == []
