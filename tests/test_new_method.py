"""Adding a method is one module and one registry call (issue 29 item 4).

A toy method — items in order, the mean of the scores seen — is registered
with one :func:`~activeeval.methods.registry.register` call and nothing else,
then played by every engine: the backtest runner, a session (create, ask,
tell, status, reopen), a ranking simulation with its baselines, ``activeeval
rank`` and a ranking session. The engines ask its
:class:`~activeeval.methods.capabilities.Capabilities`, never its name; the
built-ins' declared capabilities are checked against what the classes do.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Sequence

import numpy as np
import pytest
from typer.testing import CliRunner

from activeeval import datasets
from activeeval.cli import app
from activeeval.data.io import write_scores
from activeeval.exceptions import ConfigurationError
from activeeval.experiments import ranking_eval
from activeeval.experiments.protocol import BacktestConfig
from activeeval.experiments.runner import run_backtest, takes_batch_options
from activeeval.methods import registry
from activeeval.methods.base import BaseMethod
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.session import Session
from activeeval.session.ranking import RankSession

TOY = "in-order-test"


class InOrder(BaseMethod):
    """Items in order; the mean of the scores seen, its variance the sample's with the finite-population
    correction (a prior one of the reference's mean score before two items)."""

    name = TOY
    capabilities = Capabilities(ranks=True)

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> list[int]:
        skip = set(exclude)
        return [int(i) for i in self.unobserved() if int(i) not in skip][:k]

    def _update(self, item: int, score: float) -> None:
        pass  # the state is the observed scores BaseMethod keeps

    def _current_estimate(self) -> Estimate:
        n, big_n = self.n_observed, self.n_items
        seen = np.asarray(self.observed_scores, dtype=float)
        if n < 2:
            mean = float(self.reference.scores.mean()) if n == 0 else float(seen[0])
            return Estimate(mean=mean, var=float(self.reference.scores.mean(axis=1).var()) + 0.01, n_observed=n,
                            n_items=big_n)
        return Estimate(mean=float(seen.mean()), var=float(seen.var(ddof=1) / n * (1 - n / big_n)), n_observed=n,
                        n_items=big_n)


@pytest.fixture()
def toy():
    registry.register(TOY, InOrder)  # the one registry line
    yield TOY
    registry.unregister(TOY)


@pytest.fixture(scope="module")
def alpaca():
    full, _ = datasets.load("alpacaeval2").dropna("models")
    return full.select_items(full.item_ids[:60]).select_models(full.model_ids[:30])


def _running_mean(scores: np.ndarray) -> np.ndarray:
    return np.cumsum(scores) / np.arange(1, scores.size + 1)


def test_the_toy_method_runs_in_a_backtest(toy, alpaca) -> None:
    config = BacktestConfig(methods=(toy, "rs-mean"), n_targets=3, n_seeds=2)
    res = run_backtest(alpaca, config, workers=1)
    assert res.methods == [toy, "rs-mean"] and res.means[toy].shape == (3, 2, alpaca.n_items)
    for t, target in enumerate(res.split.targets):  # items in order: the running mean of the target's scores
        want = _running_mean(np.asarray(alpaca.model_scores(target), dtype=float))
        for s in range(2):
            np.testing.assert_allclose(res.means[toy][t, s], want, rtol=0, atol=1e-12)
    assert np.all(res.vars[toy][:, :, -1] == 0.0)  # every item seen: no uncertainty left
    assert not takes_batch_options(toy)


def test_the_toy_method_runs_in_a_session(toy, alpaca, tmp_path) -> None:
    ref = alpaca.drop_models(alpaca.model_ids[:1])
    ref_file = write_scores(ref, tmp_path / "ref.csv")
    target = dict(zip(alpaca.item_ids, map(float, alpaca.model_scores(alpaca.model_ids[0]))))
    path = tmp_path / "s.aeval"
    with Session.create(path, ref_file, method=toy, seed=1, max_items=20) as s:
        first = s.ask(2)
        assert [a.item_id for a in first] == list(ref.item_ids[:2])  # in order, two at once
        for a in first:
            s.tell(a.item_id, target[a.item_id])
        while not s.status().stop:
            (asked,) = s.ask()
            s.tell(asked.item_id, target[asked.item_id])
        status = s.status()
    assert status.stop and status.estimate.n_observed == 20
    assert status.estimate.mean == pytest.approx(np.mean([target[i] for i in ref.item_ids[:20]]), abs=1e-12)
    with Session.open(path) as again:  # rebuilt from the journal
        assert again.status().estimate == status.estimate


def test_the_toy_method_ranks_in_a_simulation_with_its_baselines(toy, alpaca) -> None:
    assert toy in ranking_eval.rank_methods() and toy in ranking_eval.RANK_METHODS  # derived from capabilities
    models = list(alpaca.model_ids[:3])
    rec = ranking_eval.simulate_ranking(alpaca, models, method=toy, budget_per_model=10, min_items=5, n_boot=50)
    assert sorted(rec.adaptive.ranking) == sorted(models)
    for m in models:  # each model's method took the first items, in order
        n = rec.adaptive.items_per_model[m]
        assert list(rec.adaptive.items[m]) == list(range(n))
        assert rec.adaptive.means[m] == pytest.approx(float(np.mean(alpaca.model_scores(m)[:n])), abs=1e-12)
    assert rec.items_random > 0 and rec.items_fixed > 0 and rec.items_static > 0
    with pytest.raises(ConfigurationError, match="applies to method='cat' only"):
        ranking_eval.simulate_ranking(alpaca, models, method=toy, local_error=True)


def test_the_toy_method_ranks_from_the_command_line_and_in_a_ranking_session(toy, alpaca, tmp_path) -> None:
    data = write_scores(alpaca, tmp_path / "all.csv")
    models = list(alpaca.model_ids[:3])
    r = CliRunner().invoke(app, ["rank", "--dataset", str(data), "--models", ",".join(models), "--method", toy,
                                 "--budget-per-model", "10", "--min-items", "5", "--json"])
    assert r.exit_code == 0, r.output
    payload = json.loads(r.output)
    assert payload["method"] == toy and payload["scale"] == "score"
    r = CliRunner().invoke(app, ["rank", "--dataset", str(data), "--models", ",".join(models), "--method", toy,
                                 "--calibration", "paper"])
    assert r.exit_code != 0 and f"--calibration applies to --method cat only, not {toy!r}" in r.output

    ref = alpaca.drop_models(models)
    truth = {m: dict(zip(alpaca.item_ids, map(float, alpaca.model_scores(m)))) for m in models}
    with RankSession.create(tmp_path / "r.aeval", ref, models, method=toy, seed=2, budget_per_model=8,
                            min_items=3) as s:
        while (a := s.ask()) is not None:
            s.tell(a.model, a.item_id, truth[a.model][a.item_id])
        st = s.status()
    assert st.stop_reason in ("confident", "budget") and sorted(st.result.ranking) == sorted(models)
    for m in models:
        n = st.result.items_per_model[m]
        assert st.result.means[m] == pytest.approx(np.mean([truth[m][i] for i in ref.item_ids[:n]]), abs=1e-12)


def test_capabilities_come_from_register_or_the_class_and_leave_with_unregister() -> None:
    def factory(reference, **options):
        return InOrder(reference, **options)

    registry.register("toy-factory", factory)
    try:
        assert registry.capabilities("toy-factory") == Capabilities()  # a bare factory: the defaults
        assert "toy-factory" not in ranking_eval.rank_methods()
        registry.register("toy-factory", factory, capabilities=Capabilities(ranks=True))
        assert registry.capabilities("toy-factory").ranks and "toy-factory" in ranking_eval.rank_methods()
        with pytest.raises(ConfigurationError, match="must be an activeeval.methods.registry.Capabilities"):
            registry.register("toy-factory", factory, capabilities={"ranks": True})  # type: ignore[arg-type]
    finally:
        registry.unregister("toy-factory")
    assert "toy-factory" not in registry.METHODS and "toy-factory" not in registry._REGISTERED_CAPABILITIES
    with pytest.raises(ConfigurationError, match="unknown method"):
        registry.capabilities("toy-factory")
    with pytest.raises(ConfigurationError, match="ranking_scale"):
        Capabilities(ranking_scale="ability")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="multi-target"):
        Capabilities(multi_target=True, batch=True)


@pytest.mark.parametrize("name", list(registry._BUILTIN))
def test_each_builtin_declares_what_its_class_does(name: str) -> None:
    cls = registry.resolve_factory(name)
    caps = registry.capabilities(name)
    # a class under one that declares capabilities declares its own (none inherits, e.g., "ranks" by accident)
    if any("capabilities" in vars(base) for base in inspect.getmro(cls)[1:]):
        assert "capabilities" in vars(cls), f"{cls.__name__} inherits its capabilities; declare them"
    assert caps.ranking_scale == ("theta" if callable(getattr(cls, "ability", None)) else "score")
    params = registry.method_parameters(name)
    assert caps.batch == (not caps.multi_target and {"batch_strategy", "batch_size", "myopic"} <= set(params))
    assert caps.multi_target == (list(inspect.signature(cls).parameters)[:2] == ["reference", "targets"])
    if caps.shared_calibration is not None:
        assert {"calibration", "response", "local_error"} <= set(params)


def test_the_ranking_choices_are_unchanged() -> None:
    assert ranking_eval.rank_methods() == ["cat", "bayesame", "bayesame-paper", "bayesame-multi",
                                           "bayesame-multi-paper"]
    assert ranking_eval.RANK_METHODS == ("cat", "bayesame", "bayesame-paper")


def test_the_toy_method_runs_in_activeeval_backtest(toy, alpaca, tmp_path) -> None:
    data = write_scores(alpaca, tmp_path / "all.csv")
    r = CliRunner().invoke(app, ["backtest", "--dataset", str(data), "--methods", toy, "--targets", "2", "--seeds",
                                 "2", "--workers", "1", "--json"])
    assert r.exit_code == 0, r.output
    note, _, body = r.output.partition("\n")
    assert note == "note: added rs-mean (the baseline of RMSE Gain)"
    summary = json.loads(body)["methods"]
    assert list(summary) == [toy, "rs-mean"] and 0 <= summary[toy]["coverage_at_stop"] <= 1
