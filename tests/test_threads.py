"""activeeval's BLAS thread limit (activeeval._threads): held in its numeric work, lifted for the user's code.

Every test first sets the process's BLAS libraries to 3 threads (a value no machine's default and not the
limit), so "the user's own setting" is recognisable whatever the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg  # noqa: F401 - SciPy's BLAS is one of the libraries limited
from threadpoolctl import threadpool_info, threadpool_limits
from typer.testing import CliRunner

from activeeval import ScoreMatrix, limit_threads
from activeeval._threads import (
    THREADS_ENV,
    WORKERS_MAX,
    active_limit,
    fixed_workers,
    user_threads,
    worker_threads,
)
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import ConfigurationError
from activeeval.methods.base import BaseMethod
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import MultiTargetMethod
from activeeval.methods.registry import METHODS, resolve_factory
from activeeval.session.session import Session

OWN = 3


def blas_threads() -> list[int]:
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]


@pytest.fixture(autouse=True)
def own_setting(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    with threadpool_limits(OWN, user_api="blas"):
        assert set(blas_threads()) == {OWN} and len(blas_threads()) >= 2  # NumPy's and SciPy's
        yield


class Recording(BaseMethod):
    """A method that notes the BLAS threads it runs with when built, selecting and observing."""

    def __init__(self, reference: ScoreMatrix, **kw: object) -> None:
        super().__init__(reference, **kw)
        self.seen = {"build": blas_threads()}

    def _select(self, rng, k, exclude):
        self.seen["select"] = blas_threads()
        return super()._select(rng, k, exclude)

    def _update(self, item: int, score: float) -> None:
        self.seen["observe"] = blas_threads()

    def _current_estimate(self) -> Estimate:
        return Estimate(mean=0.5, var=0.01, n_observed=self.n_observed, n_items=self.n_items)


def _ref() -> ScoreMatrix:
    return ScoreMatrix(np.random.default_rng(0).random((4, 6)), kind="continuous")


def test_method_calls_hold_the_limit_and_give_it_back_between_calls() -> None:
    m = Recording(_ref(), seed=0)
    assert blas_threads() == [OWN] * len(blas_threads())  # the user's code between calls: its own setting
    m.observe(m.select(), 0.5)
    assert m.seen == {k: [1] * len(blas_threads()) for k in ("build", "select", "observe")}
    assert set(blas_threads()) == {OWN}


def test_every_registered_method_limits_its_entry_points() -> None:
    for name in METHODS:
        cls = resolve_factory(name)
        points = ("__init__", "select_batch", "observe") + (("estimate",) if issubclass(cls, MultiTargetMethod) else ())
        for point in points:
            assert getattr(getattr(cls, point), "_limits_threads", False), f"{name}.{point}"


def test_scopes_nest_the_outermost_decides_and_the_env_sets_the_default(monkeypatch) -> None:
    with limit_threads(2):
        assert set(blas_threads()) == {2}
        with limit_threads(1), limit_threads():
            assert set(blas_threads()) == {2} and active_limit() == 2
        m = Recording(_ref(), seed=0)
        assert m.seen["build"] == [2] * len(blas_threads())
    assert set(blas_threads()) == {OWN}
    monkeypatch.setenv(THREADS_ENV, "2")
    assert active_limit() == 2
    assert Recording(_ref(), seed=0).seen["build"] == [2] * len(blas_threads())
    monkeypatch.setenv(THREADS_ENV, "many")
    with pytest.raises(ConfigurationError, match=f"{THREADS_ENV}='many' is not a positive integer"):
        Recording(_ref(), seed=0)
    with pytest.raises(ConfigurationError, match="threads must be a positive integer"):
        with limit_threads(0):
            pass
    assert set(blas_threads()) == {OWN}  # nothing left applied by the failures


def test_user_threads_lifts_the_limit_and_keeps_what_the_user_changed() -> None:
    with limit_threads():
        assert set(blas_threads()) == {1}
        with user_threads():
            assert set(blas_threads()) == {OWN}
            threadpool_limits(2, user_api="blas")  # the user's code changes its own setting
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {2}  # ... and gets it back


def test_a_deferred_scope_applies_at_the_first_numeric_call() -> None:
    with limit_threads(defer=True):
        assert set(blas_threads()) == {OWN}  # no numeric work yet: nothing touched
        m = Recording(_ref(), seed=0)
        assert set(blas_threads()) == {1}  # applied by the method, held for the rest of the scope
    assert m.seen["build"] == [1] * len(blas_threads()) and set(blas_threads()) == {OWN}


def test_cli_threads_flag_and_env_errors(monkeypatch) -> None:
    r = CliRunner().invoke(app, ["--threads", "0", "datasets"])
    assert r.exit_code == 2 and "error: --threads must be a positive integer" in r.stderr
    monkeypatch.setenv(THREADS_ENV, "0")
    r = CliRunner().invoke(app, ["demo", "--max-items", "3"])
    assert r.exit_code == 2
    assert r.stderr.strip() == (f"error: {THREADS_ENV}='0' is not a positive integer; set it to the number of BLAS "
                                f"threads activeeval may use, e.g. {THREADS_ENV}=1, or unset it")


SCORER = """
import json, sys
import numpy, scipy.linalg
from threadpoolctl import threadpool_info
with open(sys.argv[2], "a") as fh:
    fh.write(json.dumps([d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]) + "\\n")
print(json.load(open(sys.argv[3]))[sys.argv[1]])
"""


def test_scorer_processes_keep_their_own_threads(tmp_path: Path, monkeypatch) -> None:
    """A CLI run limits its own work (to --threads) but not the scorer's: it starts with the threads it has when run
    alone. The flag is the command's: the process (tests, a notebook calling app([...])) keeps its own limit."""
    full = ScoreMatrix(np.random.default_rng(1).integers(0, 2, (12, 30)).astype(float), kind="binary")
    ref = write_scores(full.drop_models([full.model_ids[0]]), tmp_path / "ref.csv")
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(dict(zip(full.item_ids, map(float, full.scores[0])))))
    (tmp_path / "score.py").write_text(SCORER)
    alone, log = tmp_path / "alone.jsonl", tmp_path / "threads.jsonl"
    subprocess.run([sys.executable, str(tmp_path / "score.py"), full.item_ids[0], str(alone), str(truth)], check=True,
                   capture_output=True)
    own = json.loads(alone.read_text())
    limit = 2 if set(own) == {1} else 1  # a limit the scorer would show if it leaked into it
    scorer = f"{sys.executable} {tmp_path / 'score.py'} {{item_id}} {log} {truth}"
    ours, real_tell = [], Session.tell

    def tell(self, *args, **kwargs):
        ours.append(blas_threads())
        return real_tell(self, *args, **kwargs)

    monkeypatch.setattr(Session, "tell", tell)
    r = CliRunner().invoke(app, ["--threads", str(limit), "run", "--reference", str(ref), "--session",
                                 str(tmp_path / "s.aeval"), "--scorer", scorer, "--max-items", "4", "--jobs", "2"])
    assert r.exit_code == 0, r.output
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert seen == [own] * 4
    assert [set(x) for x in ours] == [{limit}] * 4  # activeeval's own work: the flag's limit
    assert set(blas_threads()) == {OWN}  # and the command gave this process its setting back
    assert THREADS_ENV not in os.environ and active_limit() == 1  # the flag did not outlive the command


def test_kernel_sums_on_threads_hold_one_blas_thread_each_and_give_the_setting_back(monkeypatch) -> None:
    """Workers of their own, each calling BLAS: BLAS at one thread meanwhile, then the scope's limit or the user's."""
    from activeeval.gp import kernels

    seen: list[list[int]] = []
    real_exp = np.exp

    def noting_exp(*args, **kwargs):
        seen.append(blas_threads())
        return real_exp(*args, **kwargs)

    monkeypatch.setattr(kernels.np, "exp", noting_exp)
    points = np.random.default_rng(0).random((300, 4))
    kernels.kernel_sums(points, np.ones(300), -0.5, block=50, threads=2)
    assert blas_threads() == [OWN] * len(blas_threads())
    with limit_threads(2):
        kernels.kernel_sums(points, np.ones(300), -0.5, block=50)  # the scope's limit: two workers
        assert set(blas_threads()) == {2}
    assert seen and all(set(s) == {1} for s in seen)
    assert set(blas_threads()) == {OWN}


LATE_SCIPY = """
import json, sys
import numpy
from threadpoolctl import threadpool_info
from activeeval import limit_threads
from activeeval._lazy import lazy_function

def blas():
    return [d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"]

cho_factor = lazy_function("scipy.linalg:cho_factor")
seen = {"before": "scipy.linalg" in sys.modules, "own": blas()}
with limit_threads(3):
    if sys.argv[1] == "lazy":
        cho_factor(numpy.eye(3))  # imports SciPy's linear algebra (and its own BLAS) inside the scope
    elif sys.argv[1] == "optimize":
        import scipy.optimize  # a plain import inside a scope, as the default's fit does
    else:
        import scipy.special
    seen["inside"] = blas()
seen["after"] = blas()
print(json.dumps(seen))
"""


@pytest.mark.parametrize("how", ["lazy", "optimize", "special"])
def test_scipy_imported_inside_a_scope_is_limited_too(how: str) -> None:
    """SciPy's linear algebra is imported where a call needs it, maybe inside a scope that limited NumPy's BLAS
    alone — through activeeval._lazy.lazy_function or a plain import (scipy.optimize in the default's fit): its
    own BLAS is limited as soon as it is loaded, and given back after the scope."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}  # both libraries start with 1 thread, whatever the machine
    env.pop(THREADS_ENV, None)
    out = subprocess.run([sys.executable, "-c", LATE_SCIPY, how], capture_output=True, text=True, env=env,
                         check=True)
    seen = json.loads(out.stdout)
    assert seen["before"] is False and seen["own"] == [1]
    assert seen["inside"] == [3, 3]  # NumPy's and SciPy's, at the scope's limit
    assert seen["after"] == [1, 1]


FIT_IN_A_FRESH_PROCESS = """
import json, sys
import numpy as np
from threadpoolctl import threadpool_info
import activeeval.gp.prior as prior

def blas():
    return sorted(d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas")

seen = {}

class Spy(prior.ReferenceFit):  # made right after L-BFGS-B returns, inside the fit's scope
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        seen.setdefault("at_fit_end", blas())

prior.ReferenceFit = Spy
from activeeval import ScoreMatrix
from activeeval.methods.registry import resolve_factory
rng = np.random.default_rng(0)
ref = ScoreMatrix((rng.random((30, 80)) < 0.6).astype(float), kind="binary")
assert "scipy.optimize" not in sys.modules and "scipy.linalg" not in sys.modules
if sys.argv[1] == "method":
    resolve_factory("bayesame")(ref, seed=0)
else:  # the public function, called directly (no method's scope around it)
    prior.fit_hyperparameters(ref, seed=0)
seen["after"] = blas()
print(json.dumps(seen))
"""


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS runs at most one thread per core: needs two cores")
@pytest.mark.parametrize("how", ["method", "direct"])
@pytest.mark.parametrize("limit", ["1", None])
def test_the_default_fit_in_a_fresh_process_runs_at_the_limit(how: str, limit: str | None) -> None:
    """End to end: a fresh process builds the default, whose fit imports SciPy inside the method's scope; SciPy's
    BLAS runs at the limit there (the hole this closes cost 8x under load), and has its own setting after. With no
    limit set the fit's pseudo-targets run on worker threads (`worker_threads`), which first import SciPy's LAPACK
    outside their one-BLAS-thread block: imported first inside it, NumPy's BLAS stayed at one thread afterwards."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}  # the user's own setting, not the limit (OpenBLAS caps at cores)
    env.pop(THREADS_ENV, None)
    if limit is not None:
        env[THREADS_ENV] = limit
    env["ACTIVEEVAL_CACHE"] = "off"
    out = subprocess.run([sys.executable, "-c", FIT_IN_A_FRESH_PROCESS, how], capture_output=True, text=True, env=env,
                         check=True)
    seen = json.loads(out.stdout)
    assert seen["at_fit_end"] == [1, 1], seen
    assert seen["after"] == [2, 2], seen


def test_worker_threads_are_the_cores_unless_a_limit_was_asked_for(monkeypatch) -> None:
    """activeeval's own workers (the fit's pseudo-targets, the kernel sums) use the cores, up to WORKERS_MAX, where
    no limit was set, whatever the BLAS limit (1 by default); a limit set by argument or environment decides."""
    cores = min(len(os.sched_getaffinity(0)), WORKERS_MAX)
    assert worker_threads() == cores
    with limit_threads():
        assert active_limit() == 1 and worker_threads() == cores
    with limit_threads(1):
        assert worker_threads() == 1
        with limit_threads():  # an inner scope: the outermost one decides
            assert worker_threads() == 1
    with limit_threads(3):
        assert worker_threads() == 3
    monkeypatch.setenv(THREADS_ENV, "2")
    assert worker_threads() == 2
    with limit_threads():
        assert worker_threads() == 2
        with fixed_workers(1):  # a backtest task: what it says, whatever the scopes
            assert worker_threads() == 1
        assert worker_threads() == 2


def test_a_backtest_task_runs_one_worker_inside_a_command_that_set_no_limit(monkeypatch) -> None:
    """The CLI opens a scope that sets no limit (the cores are then the default for a session's fit); a backtest
    task inside it, or in a process forked from it, runs its own parallel work on the task's thread count."""
    from activeeval.experiments import runner

    seen: list[int] = []
    monkeypatch.setattr(runner, "play_task", lambda *args: seen.append(worker_threads()))
    with limit_threads(defer=True):
        runner._task(None, None, None, "bayesame", 0, 1)  # type: ignore[arg-type]
        runner._task(None, None, None, "bayesame", 0, 2)  # type: ignore[arg-type]
        assert worker_threads() == min(len(os.sched_getaffinity(0)), WORKERS_MAX)
    assert seen == [1, 2]


def test_a_scope_in_another_thread_limits_blas_after_the_main_thread_used_one() -> None:
    """threadpoolctl (3.8 on) lets one Python thread at a time set OpenBLAS's threads, the first to do so, until
    released: activeeval releases it when its outermost scope ends, so a later scope in another thread (the
    dashboard's worker, a user's pool) limits too, and gives the setting back."""
    import threading

    with limit_threads(1):
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {OWN}
    seen: list[list[int]] = []

    def work() -> None:
        with limit_threads(2):
            seen.append(blas_threads())
        seen.append(blas_threads())

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [[2] * len(seen[0]), [OWN] * len(seen[0])]
    with limit_threads(1):  # and the main thread again after it
        assert set(blas_threads()) == {1}
