"""Settings as objects (issue 29, item 2): declared constraints, the flat form, and the stored form."""

from __future__ import annotations

import inspect
import json
import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.gp.acquisition import BatchSettings
from activeeval.gp.prior import FitSettings
from activeeval.methods.bayesame import BayesAME, DesignSettings
from activeeval.methods.registry import check_method_spec, flatten_options, make_method, method_parameters
from activeeval.settings import Flag, Integer, Number, OneOf, Settings, flat_options, setting, takes_settings


# ------------------------------------------------------------------ the constraints
def test_one_of_names_every_choice_and_refuses_a_flag_for_a_number() -> None:
    with pytest.raises(ConfigurationError, match=r"^floor must be 'wilson' or 'effective', got 'wide'$"):
        OneOf("wilson", "effective")("floor", "wide")
    with pytest.raises(ConfigurationError, match="must be 1, 2 or 3, got True"):
        OneOf(1, 2, 3)("k", True)  # True == 1, but a flag is not a count
    with pytest.raises(ConfigurationError, match="got 1"):
        OneOf("1", "2")("k", 1)  # a number is not the word
    assert OneOf(None, "auto")("x", None) is None
    assert OneOf("auto")("x", np.str_("auto")) == "auto"


@pytest.mark.parametrize("bad", [1.5, -1, "3", True, float("nan"), float("inf"), None])
def test_integer_refuses_what_is_no_whole_number_in_range(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"warmup must be a non-negative integer, got"):
        Integer(0, phrase="a non-negative integer")("warmup", bad)


def test_integer_keeps_whole_numbers_as_int() -> None:
    assert Integer(0)("n", 10.0) == 10 and type(Integer(0)("n", 10.0)) is int
    assert type(Integer(0)("n", np.int64(3))) is int
    assert Integer(1, optional=True)("n", None) is None
    with pytest.raises(ConfigurationError, match="must be an integer from 1 to 3, got 4"):
        Integer(1, 3)("n", 4)


def test_number_bounds_open_and_closed() -> None:
    positive = Number(0, low_open=True, phrase="a positive number")
    with pytest.raises(ConfigurationError, match="scale_prior must be a positive number, got 0"):
        positive("scale_prior", 0)
    assert Number(0)("t", 0) == 0
    assert type(Number(0)("t", 3)) is int  # kept as given: a stored form and the results it feeds unchanged
    for bad in (float("nan"), float("inf"), "1", False):
        with pytest.raises(ConfigurationError):
            Number()("t", bad)
    with pytest.raises(ConfigurationError, match=r"must be a number >= 0 and < 1 or None, got 1"):
        Number(0, 1, high_open=True, optional=True)("t", 1)


def test_flag() -> None:
    assert Flag()("myopic", np.bool_(False)) is False
    with pytest.raises(ConfigurationError, match="myopic must be true or false, got 'yes'"):
        Flag()("myopic", "yes")
    with pytest.raises(ConfigurationError, match="got 1"):
        Flag()("myopic", 1)


# ------------------------------------------------------------------ a Settings class
@dataclass(frozen=True)
class _Toy(Settings):
    size: int = setting(3, Integer(1))
    kind: str = setting("a", OneOf("a", "b"))
    rate: float | None = setting(None, Number(0, optional=True))

    def check(self) -> None:
        if self.kind == "b" and self.size < 2:
            raise ConfigurationError("kind 'b' needs size >= 2")


def test_settings_check_fields_in_order_then_the_rule_between_them() -> None:
    assert _Toy(size=2.0).size == 2
    with pytest.raises(ConfigurationError, match="size must be an integer >= 1, got 0"):
        _Toy(size=0, kind="c")  # the first field's message first
    with pytest.raises(ConfigurationError, match="needs size >= 2"):
        _Toy(size=1, kind="b")
    with pytest.raises(ConfigurationError, match=r"_Toy has no setting 'sise'; its settings are: size, kind, rate"):
        _Toy().replace(sise=2)


def test_changed_and_the_stored_form() -> None:
    toy = _Toy(kind="b", rate=0.5)
    assert toy.changed() == {"kind": "b", "rate": 0.5}
    assert toy.changed(_Toy(kind="b")) == {"rate": 0.5}
    assert _Toy().changed() == {}
    assert _Toy(size=3.0).changed() == {}  # normalised to the default's int
    assert _Toy.from_dict(json.loads(json.dumps(toy.to_dict()))) == toy
    with pytest.raises(ConfigurationError, match="no setting 'colour'"):
        _Toy.from_dict({"colour": 1})


GROUPS = (FitSettings, DesignSettings, BatchSettings)


def _valid(cls: type[Settings]) -> st.SearchStrategy[Settings]:
    """Any valid settings object of ``cls`` (values drawn per field; invalid draws are filtered)."""
    choices = {
        "fit_items": st.integers(2, 5000), "fit_seed": st.integers(0, 2**31), "n_pseudo": st.integers(1, 100),
        "level_prior": st.booleans(), "linear": st.booleans(),
        "tolerance": st.none() | st.floats(0, 1e3, allow_subnormal=True),
        "calibrate_by": st.sampled_from(["budget", "capped", "capped1", "pooled"]), "cache_mb": st.floats(0, 1e6),
        "fold_fit": st.sampled_from(["refit", "shared"]),
        "extrapolation": st.sampled_from(["auto", "off"]), "switch_until": st.none() | st.integers(0, 10**6),
        "warmup": st.integers(0, 1000), "scale_prior": st.floats(1e-9, 1e9),
        "controls": st.sampled_from([None, "none", "model", "model+near", "near+ridge", "model+near+ridge"]),
        "floor": st.sampled_from(["wilson", "effective", "split"]),
        "interval": st.sampled_from(["symmetric", "sides", "wilson"]),
        "design_variance": st.sampled_from(["residuals", "increments"]),
        "switch_z": st.floats(0, 10) | st.integers(0, 10),
        "sample_by": st.sampled_from(["sd", "gain"]), "sample_uniform": st.floats(1e-6, 1.0),
        "switch_draw": st.sampled_from(["sampled", "uniform"]), "switch_weight": st.floats(1e-6, 1.0),
        "batch_strategy": st.sampled_from(["greedy", "pair", "lars", "dpp", "kmeans"]),
        "batch_size": st.integers(1, 10**6), "myopic": st.booleans(),
    }
    return st.fixed_dictionaries({name: choices[name] for name in cls.names()}).map(lambda d: cls(**d))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(GROUPS).flatmap(_valid))
def test_every_group_reads_back_exactly_through_json(group: Settings) -> None:
    stored = json.loads(json.dumps(group.to_dict()))
    back = type(group).from_dict(stored)
    assert back == group
    for name in group.names():
        a, b = getattr(back, name), getattr(group, name)
        assert type(a) is type(b) and (a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


def test_the_groups_of_bayesame_cover_every_option_once() -> None:
    routed = flat_options(BayesAME.__init__)
    names = [n for cls in GROUPS for n in cls.names()]
    assert len(names) == len(set(names)) == len(routed)
    assert set(routed) == set(names)
    sig = inspect.signature(BayesAME.__init__)
    assert len([p for p in sig.parameters if p not in ("self", "reference")]) <= 10
    assert set(method_parameters("bayesame")) == set(names) | {
        "seed", "missing", "selection", "prior", "hyperparameters", "calibration"}


# ------------------------------------------------------------------ the flat form
def test_takes_settings_refuses_a_name_two_groups_share() -> None:
    @dataclass(frozen=True)
    class _Other(Settings):
        size: int = setting(1, Integer(1))

    with pytest.raises(TypeError, match="setting 'size' of b= is also a setting of a="):
        class _Bad:
            @takes_settings
            def __init__(self, *, a: _Toy = _Toy(), b: _Other = _Other()) -> None:
                pass

    with pytest.raises(TypeError, match="setting 'size' of a= is also a parameter"):
        class _Bad2:
            @takes_settings
            def __init__(self, *, size: int = 1, a: _Toy = _Toy()) -> None:
                pass


def test_flat_keywords_replace_fields_of_the_group_given() -> None:
    class Holder:
        @takes_settings
        def __init__(self, *, a: _Toy = _Toy(rate=1.0)) -> None:
            self.a = a

    assert Holder(size=5).a == _Toy(size=5, rate=1.0)  # the constructor's default group, then the flat keyword
    assert Holder(a=_Toy(kind="b"), size=4).a == _Toy(kind="b", size=4)
    with pytest.raises(ConfigurationError, match="a must be a _Toy"):
        Holder(a={"size": 4})
    with pytest.raises(ConfigurationError, match="size must be an integer >= 1, got 0"):
        Holder(size=0)
    assert flat_options(Holder.__init__) == {"size": "a", "kind": "a", "rate": "a"}


@pytest.fixture(scope="module")
def small_reference() -> ScoreMatrix:
    rng = np.random.default_rng(0)
    ability = rng.normal(size=(14, 1))
    difficulty = rng.normal(size=(1, 60))
    scores = (rng.uniform(size=(14, 60)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return ScoreMatrix(scores, [f"m{i}" for i in range(14)], [f"q{j}" for j in range(60)], name="toy")


def _run(method: BayesAME, target: np.ndarray, steps: int = 12) -> list[tuple[int, float, float]]:
    out = []
    for _ in range(steps):
        item = int(method.select())
        method.observe(item, float(target[item]))
        est = method.estimate()
        out.append((item, est.mean, est.var))
    return out


def test_the_flat_form_and_the_object_form_build_the_same_method(small_reference: ScoreMatrix) -> None:
    target = (np.random.default_rng(1).uniform(size=60) < 0.6).astype(float)
    common = {"seed": 3, "calibration": None}
    flat = BayesAME(small_reference, **common, warmup=3, floor="effective", fit_items=40, batch_size=2)
    grouped = BayesAME(small_reference, **common, design=DesignSettings(warmup=3, floor="effective"),
                       fit=FitSettings(fit_items=40), batch=BatchSettings(batch_size=2))
    built = make_method("bayesame", small_reference, **common, warmup=3, floor="effective", fit_items=40,
                        batch_size=2)
    assert flat.design == grouped.design == built.design and flat.fit == grouped.fit == built.fit
    assert (flat.warmup, flat.floor, flat.batch_size) == (3, "effective", 2)
    runs = [_run(m, target) for m in (flat, grouped, built)]
    assert runs[0] == runs[1] == runs[2]  # bit for bit


def test_a_bad_option_names_itself_whichever_form(small_reference: ScoreMatrix) -> None:
    with pytest.raises(ConfigurationError, match="warmup must be a non-negative integer, got -1"):
        BayesAME(small_reference, warmup=-1)
    with pytest.raises(ConfigurationError, match="warmup must be a non-negative integer, got -1"):
        DesignSettings(warmup=-1)
    with pytest.raises(ConfigurationError, match="selection must be 'auto', 'active', 'random', 'sampled' or 'hybrid'"):
        BayesAME(small_reference, selection="best")
    with pytest.raises(TypeError):
        BayesAME(small_reference, warmupp=1)  # an unknown keyword is Python's TypeError, as before


def test_groups_given_as_objects_are_stored_flat() -> None:
    """A session stores its method options as JSON: a group object becomes the fields it changes."""
    assert flatten_options("bayesame", {"seed": 1, "design": DesignSettings(warmup=10, floor="split")}) == {
        "seed": 1, "warmup": 10, "floor": "split"}
    name, options = check_method_spec("bayesame[fit_items=200]", {}, {"design": DesignSettings(warmup=10)})
    assert (name, options) == ("bayesame", {"fit_items": 200, "warmup": 10})
    with pytest.raises(ConfigurationError, match="given twice"):
        check_method_spec("bayesame[warmup=5]", {}, {"design": DesignSettings(warmup=10)})
    assert flatten_options("rs-mean", {"seed": 2}) == {"seed": 2}


def test_a_session_stores_a_group_object_as_its_flat_options(tmp_path, small_reference: ScoreMatrix) -> None:
    from activeeval.session import Session

    path = tmp_path / "s.aeval"
    session = Session.create(path, reference=small_reference, seed=0, design=DesignSettings(warmup=4),
                             calibration=None)
    assert session.settings["method_spec"] == "bayesame[warmup=4,calibration=None]"
    again = Session.open(path, reference=small_reference)
    assert again.method.warmup == 4 and again.method.design == DesignSettings(warmup=4)


@settings(max_examples=12, deadline=None)
@given(switch_z=st.floats(0, 10) | st.integers(0, 10), interval=st.sampled_from(["symmetric", "sides", "wilson"]))
def test_a_sessions_switch_and_interval_read_back_exactly(tmp_path_factory, small_reference: ScoreMatrix,
                                                          switch_z: float, interval: str) -> None:
    """The two options whose defaults changed at stop 46, stored by the session whatever their value (given or
    the default), reopen to the same value, bit for bit, and the reopened method plays with them."""
    from activeeval.session import Session

    path = tmp_path_factory.mktemp("s") / "s.aeval"
    given = {} if interval == "sides" else {"interval": interval}  # the default, stored all the same
    Session.create(path, reference=small_reference, seed=0, calibration=None, switch_z=switch_z, **given)
    again = Session.open(path, reference=small_reference)
    stored = again.settings["method_kwargs"]
    assert stored["switch_z"] == float(switch_z) and stored["interval"] == interval
    assert again.method.switch_z == float(switch_z) and again.method.interval == interval


# ------------------------------------------------------------------ the sessions' groups
def test_a_session_takes_its_stopping_rule_and_reading_as_objects_or_keywords(tmp_path,
                                                                               small_reference: ScoreMatrix) -> None:
    from activeeval.session import Session
    from activeeval.session.reference import ReadSettings
    from activeeval.stopping import StopRule

    a = Session.create(tmp_path / "a.aeval", reference=small_reference, seed=0, method="rs-mean",
                       stop=StopRule(epsilon2=0.05, max_items=20))
    b = Session.create(tmp_path / "b.aeval", reference=small_reference, seed=0, method="rs-mean",
                       epsilon2=0.05, max_items=20)
    assert a.stopping_settings == b.stopping_settings == {"epsilon1": 0.005, "epsilon2": 0.05, "window": 30,
                                                          "max_items": 20}
    with pytest.raises(ConfigurationError, match="only apply when reading a score file"):
        Session.create(tmp_path / "c.aeval", reference=small_reference, read=ReadSettings(kind="binary"))
    with pytest.raises(ConfigurationError, match="must be 'binary' or 'continuous'"):
        ReadSettings(kind="ordinal")
    assert not (tmp_path / "c.aeval").exists()


def test_the_ranking_stop_checks_its_fields_with_their_flags() -> None:
    from activeeval.cli.plain import cli_message
    from activeeval.session.ranking import RankStop

    with pytest.raises(ConfigurationError) as info:
        RankStop(min_items=-1)
    assert str(info.value) == "min_items= must be a non-negative integer, got -1"
    assert cli_message(info.value).startswith("--min-items must be a non-negative integer")
    with pytest.raises(ConfigurationError, match=r"budget_per_model= must be > 0 or None, got 0"):
        RankStop(budget_per_model=0)
    with pytest.raises(ConfigurationError, match=r"gamma must be in \(0, 1\)"):
        RankStop(gamma=1.0)
    assert RankStop(min_items=4.0).min_items == 4


def test_every_session_kind_creates_with_a_dozen_parameters_or_so() -> None:
    from activeeval.session import MultiSession, Session
    from activeeval.session.ranking import RankSession

    for kind in (Session, MultiSession, RankSession):
        params = [p for p in inspect.signature(kind.create).parameters.values()
                  if p.kind != p.VAR_KEYWORD and p.name != "cls"]
        assert len(params) <= 13, (kind.__name__, len(params))


def test_a_backtest_config_holds_its_method_options_flat() -> None:
    """Group objects in a backtest's method options are written flat: one form for the runs, the checkpoint's
    identity and the results (and prior weights by model id, in a group, are still narrowed per split)."""
    from activeeval.experiments.protocol import BacktestConfig
    from activeeval.methods.bayesame_paper import PaperModelSettings

    weights = {"m0": 1.0, "m1": 2.0}
    config = BacktestConfig(methods=("bayesame", "bayesame-paper"), method_options={
        "bayesame": {"design": DesignSettings(warmup=3), "fit_items": 50},
        "bayesame-paper": {"model": PaperModelSettings(weights=weights, n0=5)}})
    assert config.method_options["bayesame"] == {"warmup": 3, "fit_items": 50}
    paper = config.method_options["bayesame-paper"]
    assert set(paper) == {"n0", "weights"} and paper["n0"] == 5 and dict(paper["weights"]) == weights
    flat = BacktestConfig(methods=("bayesame",), method_options={"bayesame": {"warmup": 3, "fit_items": 50}})
    assert flat.method_options["bayesame"] == config.method_options["bayesame"]
