"""Stopping rules (activeeval.stopping): the driver's, never a method's."""

from __future__ import annotations

import numpy as np
import pytest
from test_methods import small  # the small reference matrix the method tests use

from activeeval import BayesAME, BayesAMEPaper
from activeeval.exceptions import ConfigurationError
from activeeval.methods.estimate import Estimate
from activeeval.stopping import AnyOf, BudgetRule, WindowCIRule, conditions_of, default_rule, stop_reason


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon2": 0}, "epsilon2= must be > 0"),
        ({"epsilon1": -1}, "epsilon1= must be >= 0"),
        ({"window": 0}, "window= must be a positive integer"),
        ({"max_items": 0}, "max_items= must be a positive integer"),
    ],
)
def test_stopping_configuration_errors(kwargs: dict, message: str) -> None:
    """The stopping rule is the driver's, not the method's: its bad values are refused where it is built."""
    with pytest.raises(ConfigurationError, match=message):
        default_rule(**kwargs)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        BayesAMEPaper(small(), **kwargs)  # a method takes no stopping option


def test_stopping_rules() -> None:
    def traj(means: list[float], var: float) -> list[Estimate]:
        return [Estimate(m, var, j + 1, 100) for j, m in enumerate(means)]

    rule = WindowCIRule(epsilon1=0.01, epsilon2=0.1, window=3)
    assert rule.check(traj([0.5, 0.5], 1e-6)) is None  # window not reached
    assert rule.check(traj([0.9, 0.5, 0.505, 0.508], 1e-6)) == "precision"
    assert rule.check(traj([0.5, 0.52, 0.5], 1e-6)) is None  # range 0.02 > epsilon1
    # width 2*1.96*sd > 0.1 when sd = 0.03
    assert rule.check(traj([0.5, 0.5, 0.5], 0.03**2)) is None
    assert BudgetRule(3).check(traj([0.1] * 3, 1.0)) == "budget"
    assert AnyOf((rule, BudgetRule(2))).check(traj([0.1, 0.9], 1.0)) == "budget"
    assert default_rule(max_items=5).check(traj([0.1] * 5, 1.0)) == "budget"


def test_bayesame_stops_on_precision_with_binary_data() -> None:
    ref = small("binary", n_models=8, n_items=200, seed=3)
    truth = (np.random.default_rng(1).random(200) < 0.4).astype(float)
    method = BayesAME(ref, seed=0)
    rule = default_rule(epsilon2=0.3, epsilon1=0.2)
    while stop_reason(rule, method) is None:
        i = method.select()
        method.observe(i, truth[i])
    assert stop_reason(rule, method) == "precision"
    assert method.n_observed >= 30  # window W = 30
    assert method.estimate().width() <= 0.3


def test_conditions_and_exhaustion() -> None:
    trajectory = [Estimate(0.5, 1e-8, j + 1, 4) for j in range(4)]
    rule = default_rule(epsilon2=0.1, window=3, max_items=10)
    names = [(c.rule, c.name, c.met) for c in conditions_of(rule, trajectory)]
    assert names == [("precision", "window", True), ("precision", "stability", True),
                     ("precision", "width", True), ("budget", "budget", False)]

    class Done:
        n_items, n_observed, trajectory = 4, 4, ()

    assert stop_reason(BudgetRule(100), Done()) == "exhausted"  # every item observed: whatever the rule


def test_the_stop_rule_is_one_value_with_its_defaults_defined_once() -> None:
    from activeeval.stopping import DEFAULT_STOP, StopRule, WindowCIRule, default_rule

    assert DEFAULT_STOP == StopRule() == StopRule.from_dict({})
    assert (DEFAULT_STOP.epsilon1, DEFAULT_STOP.epsilon2, DEFAULT_STOP.window) == (
        WindowCIRule().epsilon1, WindowCIRule().epsilon2, WindowCIRule().window)
    rule = StopRule(epsilon2=0.05, max_items=40)
    assert StopRule.from_dict(rule.to_dict()) == rule
    assert StopRule.from_dict({"epsilon2": 0.05, "n_max": 40}) == rule  # older files spelled the budget n_max
    assert rule.rule() == default_rule(epsilon2=0.05, max_items=40)
    with pytest.raises(ConfigurationError, match="max_items= must be a positive integer, got 0"):
        StopRule(max_items=0)
    with pytest.raises(ConfigurationError, match="max_items= must be a positive integer, got True"):
        StopRule(max_items=True)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="epsilon2= must be > 0"):
        StopRule(epsilon2=0)


def test_no_module_spells_the_stopping_defaults_again() -> None:
    """The defaults 0.005 / 0.03 / 30 live in activeeval.stopping; a signature or option elsewhere takes them from
    there (a second spelling drifts the day the first changes)."""
    import ast
    from pathlib import Path

    import activeeval

    root = Path(activeeval.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "stopping.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            args = getattr(node, "args", None)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and isinstance(args, ast.arguments):
                named = list(zip(reversed(args.args), reversed(args.defaults))) + [
                    (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
                for arg, default in named:
                    if isinstance(default, ast.Call) and default.args:  # typer.Option(0.03, "--epsilon2", ...)
                        default = default.args[0]
                    if arg.arg in ("epsilon1", "epsilon2", "window") and isinstance(default, ast.Constant) and \
                            default.value is not None:
                        found.append(f"{path.relative_to(root)}:{default.lineno} {arg.arg}={default.value!r}")
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and \
                    node.target.id in ("epsilon1", "epsilon2", "window") and isinstance(node.value, ast.Constant):
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.target.id} = {node.value.value!r}")
    assert found == [], "stopping defaults spelled outside activeeval.stopping:\n" + "\n".join(found)


def test_a_stop_rule_round_trips_through_json_exactly() -> None:
    """What a session stores of its stopping settings reads back as the same rule, for any valid values."""
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from activeeval.stopping import StopRule

    @settings(max_examples=200, deadline=None)
    @given(st.floats(min_value=0, max_value=1e6, allow_nan=False), st.floats(min_value=1e-300, max_value=1e6),
           st.integers(1, 10_000), st.one_of(st.none(), st.integers(1, 10**9)))
    def check(e1: float, e2: float, window: int, max_items: int | None) -> None:
        rule = StopRule(e1, e2, window, max_items)
        back = StopRule.from_dict(json.loads(json.dumps(rule.to_dict())))
        assert back == rule and back.to_dict() == rule.to_dict()

    check()
