"""lm-evaluation-harness in the loop, for real: its ``dummy`` model on a local custom task, no network.

The test writes a custom task (a YAML file over a local JSON-lines file) whose
documents ask for the answer "lol" on some of them: lm-eval's dummy model
always answers "lol", so its true per-document exact match is known. The
reference models' ``--log_samples`` folders are written by the real harness
(``simple_evaluate`` + ``EvaluationTracker``, in a subprocess) with a small
registered model that answers each document right or wrong by a fixed rule.
Then, from the command line as a user would:

1. ``activeeval reference build --from lm-eval DIR... --task ... --metric exact_match``;
2. ``activeeval run --harness lm-eval --model dummy --task ... --include-path DIR`` to a budget;
3. the same command with a larger ``--max-items`` resumes the session (the
   budget change is recorded) and its journal equals an uninterrupted run's.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from activeeval.cli import app
from activeeval.data.io import read_scores
from activeeval.session import Session

pytest.importorskip("lm_eval", reason='lm-eval is not installed (pip install "activeeval[lm-eval]")')

N_DOCS = 48
N_REFS = 8
TASK = "ae_local"


def _answer(i: int) -> str:
    return "lol" if (i * 5) % 7 < 3 else f"word{i}"  # the dummy model answers "lol": right on these documents


REF_SCRIPT = """
import json, sys
from lm_eval import simple_evaluate
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model
from lm_eval.loggers import EvaluationTracker
from lm_eval.tasks import TaskManager

task_dir, out_dir, n_refs = sys.argv[1], sys.argv[2], int(sys.argv[3])
answers = {int(r["id"]): r["answer"] for r in map(json.loads, open(task_dir + "/docs.jsonl"))}

@register_model("ae-reference")
class Reference(LM):
    def __init__(self, skill=0):
        super().__init__()
        self.skill = int(skill)
    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        args = dict(a.split("=", 1) for a in arg_string.split(",") if a)
        return cls(skill=args.get("skill", 0))
    def generate_until(self, requests, disable_tqdm=False):
        out = []
        for r in requests:
            doc = int(r.arguments[0].split(":")[0].removeprefix("Q"))
            right = (doc * 3 + 2 * self.skill) % 11 < 3 + self.skill % 5
            out.append(answers[doc] if right else "no idea")
        return out
    def loglikelihood(self, requests, disable_tqdm=False):
        return [(-1.0, False)] * len(requests)
    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        return [-1.0] * len(requests)

tasks = TaskManager(include_path=task_dir, include_defaults=False)
for k in range(n_refs):
    tracker = EvaluationTracker(output_path=out_dir)
    res = simple_evaluate(model="ae-reference", model_args=f"pretrained=test/ref-{k},skill={k}", tasks=["%TASK%"],
                          task_manager=tasks, log_samples=True, evaluation_tracker=tracker, bootstrap_iters=0)
    samples = res.pop("samples")
    tracker.save_results_aggregated(results=res, samples=samples)
    tracker.save_results_samples(task_name="%TASK%", samples=samples["%TASK%"])
""".replace("%TASK%", TASK)


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"),
               TOKENIZERS_PARALLELISM="false")
    return env


@pytest.fixture(scope="module")
def lm_eval_setup(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("lm_eval")
    task_dir = root / "tasks"
    task_dir.mkdir()
    with open(task_dir / "docs.jsonl", "w") as fh:
        for i in range(N_DOCS):
            fh.write(json.dumps({"id": i, "question": f"Q{i}: what is the word?", "answer": _answer(i)}) + "\n")
    (task_dir / f"{TASK}.yaml").write_text(
        f"task: {TASK}\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {task_dir / 'docs.jsonl'}\n"
        "test_split: test\n"
        "output_type: generate_until\n"
        'doc_to_text: "{{question}}"\n'
        'doc_to_target: "{{answer}}"\n'
        "generation_kwargs:\n  until: [\"\\n\"]\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
    )
    out = root / "outputs"
    script = root / "make_references.py"
    script.write_text(REF_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(task_dir), str(out), str(N_REFS)],
                          capture_output=True, text=True, env=_env(root), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"root": root, "tasks": task_dir, "outputs": out}


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "activeeval", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_reference_build_run_and_resume_with_the_real_harness(lm_eval_setup, tmp_path) -> None:
    folders = sorted(lm_eval_setup["outputs"].iterdir())
    assert [f.name for f in folders] == [f"test__ref-{k}" for k in range(N_REFS)]
    ref = tmp_path / "ref.csv"
    r = CliRunner().invoke(app, ["reference", "build", "--from", "lm-eval", *map(str, folders), "--task", TASK,
                                 "--metric", "exact_match", "--out", str(ref)])
    assert r.exit_code == 0, r.output
    assert r.stdout == (f"wrote {ref}: {N_REFS} models x {N_DOCS} items, binary (lm-eval task '{TASK}', metric "
                        "exact_match; item ids are its doc ids)\n")
    matrix = read_scores(ref)
    assert matrix.model_ids == tuple(f"test/ref-{k}" for k in range(N_REFS))  # named from results_*.json
    assert sorted(matrix.item_ids, key=int) == [str(i) for i in range(N_DOCS)]
    truth = {str(i): float(_answer(i) == "lol") for i in range(N_DOCS)}

    env = _env(lm_eval_setup["root"])
    harness = ["--harness", "lm-eval", "--model", "dummy", "--task", TASK, "--include-path",
               str(lm_eval_setup["tasks"]), "--metric", "exact_match", "--k", "4"]
    common = ["--reference", str(ref), "--seed", "0", "--method", "bayesame-rs", "--json"]
    first = _run(["run", *harness, *common, "--session", str(tmp_path / "s.aeval"), "--max-items", "12"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    st = json.loads(first.stdout)
    assert (st["n_used"], st["stop_reason"], st["pending"]) == (12, "budget", [])
    with Session.open(tmp_path / "s.aeval") as s:
        recorded = s.observations
    assert all(score == truth[iid] for iid, score in recorded)  # exactly what the dummy model scored
    assert {score for _, score in recorded} == {0.0, 1.0}

    resumed = _run(["run", *harness, *common, "--session", str(tmp_path / "s.aeval"), "--max-items", "20"], env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "changed max-items: 12 -> 20 (recorded in the journal)" in resumed.stderr
    assert json.loads(resumed.stdout)["n_used"] == 20  # stdout: the result alone
    straight = _run(["run", *harness, *common, "--session", str(tmp_path / "t.aeval"), "--max-items", "20"], env)
    assert straight.returncode == 0, straight.stderr[-3000:]
    with Session.open(tmp_path / "s.aeval") as s, Session.open(tmp_path / "t.aeval") as t:
        assert s.observations[:12] == recorded
        assert s.observations == t.observations  # resuming changed nothing but the budget
        assert [e["kind"] for e in s.history() if e["kind"] == "set"] == ["set"]
        assert all(score == truth[iid] for iid, score in s.observations)


def test_harness_errors_name_the_flag(lm_eval_setup, tmp_path) -> None:
    ref = tmp_path / "ref.csv"
    folders = sorted(lm_eval_setup["outputs"].iterdir())
    CliRunner().invoke(app, ["reference", "build", "--from", "lm-eval", *map(str, folders), "--task", TASK,
                             "--metric", "exact_match", "--out", str(ref)])
    env = _env(lm_eval_setup["root"])
    base = ["run", "--harness", "lm-eval", "--model", "dummy", "--reference", str(ref), "--session",
            str(tmp_path / "s.aeval"), "--max-items", "4"]
    r = _run([*base, "--task", "no_such_task_xyz"], env)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1].startswith("error: lm-eval has no task 'no_such_task_xyz'")
    assert "give the folder of its YAML file with --include-path DIR" in r.stderr
    r = _run([*base, "--task", TASK, "--include-path", str(lm_eval_setup["tasks"]), "--metric", "acc"], env)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1].startswith(f"error: lm-eval task '{TASK}' has no metric 'acc' in any sample; "
                                                "metrics present: ['exact_match']")
    with Session.open(tmp_path / "s.aeval") as s:  # the failed batch stays pending, nothing is recorded
        assert s.observations == () and len(s.pending) == 4


def test_rank_with_the_real_harness(lm_eval_setup, tmp_path) -> None:
    """`rank --harness lm-eval`: {model} goes into --model-args; each ranked model is loaded once and kept."""
    folders = sorted(lm_eval_setup["outputs"].iterdir())
    ref = tmp_path / "ref.csv"
    CliRunner().invoke(app, ["reference", "build", "--from", "lm-eval", *map(str, folders), "--task", TASK,
                             "--metric", "exact_match", "--out", str(ref)])
    env = _env(lm_eval_setup["root"])
    args = ["rank", "--session", str(tmp_path / "r.aeval"), "--reference", str(ref), "--models", "dummy-a,dummy-b",
            "--harness", "lm-eval", "--model", "dummy", "--model-args", "pretrained={model}", "--task", TASK,
            "--include-path", str(lm_eval_setup["tasks"]), "--metric", "exact_match", "--method", "rs-mean",
            "--budget-per-model", "5", "--min-items", "2", "--json"]
    r = _run(args, env)
    assert r.returncode == 0, r.stderr[-3000:]
    st = json.loads(r.stdout)
    assert st["stop_reason"] == "budget" and sum(st["items_per_model"].values()) == 10
    from activeeval.session.ranking import RankSession

    truth = {str(i): float(_answer(i) == "lol") for i in range(N_DOCS)}
    with RankSession.open(tmp_path / "r.aeval") as s:
        tells = [e for e in s.history() if e["kind"] == "tell"]
    assert {e["model"] for e in tells} == {"dummy-a", "dummy-b"}
    assert all(e["score"] == truth[e["item_id"]] for e in tells)  # both are the dummy model: its real scores


def test_the_harness_runs_with_its_own_blas_threads(lm_eval_setup, tmp_path, monkeypatch) -> None:
    """`run --harness lm-eval` runs lm-eval in this process: activeeval's BLAS thread limit (activeeval._threads)
    holds in its own work (here: recording a score) and is lifted for each lm-eval call."""
    from threadpoolctl import threadpool_info, threadpool_limits

    folders = sorted(lm_eval_setup["outputs"].iterdir())
    ref = tmp_path / "ref.csv"
    CliRunner().invoke(app, ["reference", "build", "--from", "lm-eval", *map(str, folders), "--task", TASK,
                             "--metric", "exact_match", "--out", str(ref)])
    for key, value in _env(lm_eval_setup["root"]).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("ACTIVEEVAL_THREADS", raising=False)
    import lm_eval

    ours = {d["filepath"] for d in threadpool_info() if d["user_api"] == "blas"}  # NumPy's and SciPy's

    def blas() -> set[int]:  # lm-eval may load other BLAS libraries (with their own settings) as it runs
        return {d["num_threads"] for d in threadpool_info() if d["filepath"] in ours}

    seen: dict[str, list[set[int]]] = {"lm-eval": [], "activeeval": []}
    real_evaluate, real_tell = lm_eval.simple_evaluate, Session.tell

    @functools.wraps(real_evaluate)  # keeps its signature, which activeeval checks
    def evaluate(*args, **kwargs):
        seen["lm-eval"].append(blas())
        return real_evaluate(*args, **kwargs)

    def tell(self, *args, **kwargs):
        seen["activeeval"].append(blas())
        return real_tell(self, *args, **kwargs)

    monkeypatch.setattr(lm_eval, "simple_evaluate", evaluate)
    monkeypatch.setattr(Session, "tell", tell)
    with threadpool_limits(3, user_api="blas"):  # the process's own setting: no machine's default, not the limit
        r = CliRunner().invoke(app, ["run", "--harness", "lm-eval", "--model", "dummy", "--task", TASK,
                                     "--include-path", str(lm_eval_setup["tasks"]), "--metric", "exact_match", "--k",
                                     "4", "--reference", str(ref), "--seed", "0", "--method", "bayesame", "--session",
                                     str(tmp_path / "s.aeval"), "--max-items", "8"])
        assert r.exit_code == 0, r.output
        assert blas() == {3}  # given back when the command ends
    assert seen == {"lm-eval": [{3}, {3}], "activeeval": [{1}] * 8}
