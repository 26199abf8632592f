"""ContinuousCAT's settings objects (issue 29 item 2): IRTSettings, ErrorSettings, PriorSettings.

Each group's declared constraints refuse a bad value with the message the hand-written checks gave; the flat
keywords (``ContinuousCAT(ref, local_error=False)``, ``cat[local_error=false]``, a stored session's options)
and the group objects build the same method, bit for bit; the calibration functions take the same ``irt``
object as the method, so the references' pseudo-target runs are the method's own.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.methods import cat as cat_module
from activeeval.methods.cat import (
    ContinuousCAT,
    ErrorSettings,
    IRTSettings,
    PriorSettings,
    fit_calibration,
    learn_reference_errors,
    pseudo_target_errors,
)
from activeeval.methods.registry import capabilities, flatten_options, make_method, method_parameters

GROUPS = {"irt": IRTSettings, "errors": ErrorSettings, "prior": PriorSettings}
TOP_LEVEL = ("calibration", "interval", "interval_calibration", "seed", "missing")


def small(n_models: int = 16, n_items: int = 60, seed: int = 2) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    theta, b = rng.normal(0, 1, n_models), rng.normal(0, 1.5, n_items)
    mu = 1 / (1 + np.exp(-(theta[:, None] - b[None, :])))
    y = np.clip(mu + rng.normal(0, 0.15, mu.shape), 0, 1)
    return ScoreMatrix(y, [f"m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)])


@pytest.fixture(scope="module")
def data() -> ScoreMatrix:
    return small()


@pytest.fixture(scope="module")
def ref(data: ScoreMatrix) -> ScoreMatrix:
    return data.drop_models(["m0"])


def play(method, truth: np.ndarray, n: int) -> list[int]:
    items = []
    for _ in range(n):
        i = method.select()
        method.observe(i, truth[i])
        items.append(i)
    return items


# ------------------------------------------------------------------ constraints
BAD = [
    ("response", "3pl", r"response must be 'rasch' or '2pl', got '3pl'"),
    ("scale", "log", r"scale must be 'auto', 'minmax' or 'none', got 'log'"),
    ("clip", 0.5, r"clip must be in \(0, 0.5\) \(a proportion bound before the logit\), got 0.5"),
    ("clip", 0, r"clip must be in \(0, 0.5\)"),
    ("filter_negative", 1, r"filter_negative must be true or false, got 1"),
    ("information", "max", r"information must be 'tilde' or 'full', got 'max'"),
    ("likelihood", "beta", r"likelihood must be 'quasi' or 'normal', got 'beta'"),
    ("error_model", "yes", r"error_model must be True, False or None, got 'yes'"),
    ("error_scale", 0, r"error_scale must be a positive number, got 0"),
    ("error_scale", float("inf"), r"error_scale must be a positive number, got inf"),
    ("error_floor", -0.1, r"error_floor must be a non-negative number, got -0.1"),
    ("local_error", "yes", r"local_error must be True, False or None, got 'yes'"),
    ("prior_mean", float("nan"), r"prior_mean must be a finite number, got nan"),
    ("prior_sd", -1, r"prior_sd must be a positive number, got -1"),
    ("prior_sd", 0.0, r"prior_sd must be a positive number, got 0.0"),
    ("grid_points", 2, r"grid_points must be an integer >= 3, got 2"),
    ("grid_points", 100.5, r"grid_points must be an integer >= 3, got 100.5"),
]


def _group_of(name: str) -> type:
    return next(cls for cls in GROUPS.values() if name in cls.names())


@pytest.mark.parametrize(("name", "value", "message"), BAD)
def test_each_constraint_refuses_a_bad_value_with_its_message(name, value, message, ref):
    with pytest.raises(ConfigurationError, match=message):
        _group_of(name)(**{name: value})  # the group object
    with pytest.raises(ConfigurationError, match=message):
        ContinuousCAT(ref, **{name: value})  # the flat keyword: refused before anything is fitted
    with pytest.raises(ConfigurationError, match=message):
        make_method("cat", ref, **{name: value})


def test_the_constraints_accept_the_defaults_and_normalise(ref):
    for cls in GROUPS.values():
        assert cls() == cls.from_dict(cls().to_dict())
    assert PriorSettings(grid_points=501.0).grid_points == 501 and type(PriorSettings(grid_points=501.0).grid_points) is int
    flags = ErrorSettings(error_model=np.bool_(False), local_error=np.bool_(True))
    assert flags.error_model is False and flags.local_error is True  # NumPy bools read as bools
    assert IRTSettings(filter_negative=np.bool_(False)).filter_negative is False
    assert ErrorSettings(error_floor=0).error_floor == 0  # a floor of 0 is allowed, a scale of 0 is not
    for response in (None, "rasch", "2pl"):
        assert IRTSettings(response=response).response == response


def test_interval_is_checked_at_the_top_level(ref):
    with pytest.raises(ConfigurationError, match=r"interval must be 'calibrated' or 'model', got 'wide'"):
        ContinuousCAT(ref, interval="wide")


def test_a_group_must_be_its_settings_object(ref):
    with pytest.raises(ConfigurationError, match=r"irt must be a IRTSettings"):
        ContinuousCAT(ref, irt={"response": "rasch"})
    with pytest.raises(ConfigurationError, match=r"ErrorSettings has no setting 'errors_scale'"):
        ErrorSettings().replace(errors_scale=2.0)
    with pytest.raises(TypeError, match="errors_scale"):
        ContinuousCAT(ref, errors_scale=2.0)  # an unknown keyword is still refused by the constructor


# ------------------------------------------------------------------ the signature and the registry
def test_the_constructor_takes_few_parameters_and_every_option_stays_flat():
    sig = inspect.signature(ContinuousCAT.__init__)
    params = [p for p in sig.parameters if p not in ("self", "reference")]
    assert len(params) <= 10
    assert set(params) == set(GROUPS) | set(TOP_LEVEL)
    flat = method_parameters("cat")
    fields = [name for cls in GROUPS.values() for name in cls.names()]
    assert len(set(fields)) == len(fields) == 13  # one owner per flat name
    assert set(flat) == set(fields) | set(TOP_LEVEL)  # every option, none of the group names
    assert not set(GROUPS) & set(flat)
    for name in fields:
        assert ContinuousCAT.__init__.flat_options[name] in GROUPS


def test_flatten_options_writes_groups_as_the_fields_they_change():
    options = {"irt": IRTSettings(response="rasch", information="full"), "errors": ErrorSettings(local_error=False),
               "prior": PriorSettings(), "seed": 3}
    assert flatten_options("cat", options) == {"response": "rasch", "information": "full", "local_error": False,
                                               "seed": 3}
    with pytest.raises(ConfigurationError, match="local_error is given twice"):
        flatten_options("cat", {"local_error": True, "errors": ErrorSettings(local_error=False)})


# ------------------------------------------------------------------ flat form == object form, bit for bit
FLAT = dict(response="rasch", information="full", likelihood="normal", clip=0.002, filter_negative=False,
            error_model=False, local_error=True, prior_mean=0.1, prior_sd=1.5, grid_points=501)


def _objects(flat: dict) -> dict:
    out: dict = {}
    for group, cls in GROUPS.items():
        mine = {k: v for k, v in flat.items() if k in cls.names()}
        if mine:
            out[group] = cls(**mine)
    return out


def _same_run(a, b, truth, n=12):
    assert play(a, truth, n) == play(b, truth, n)
    ea, eb = a.estimate(), b.estimate()
    assert (ea.mean, ea.var, ea.notes) == (eb.mean, eb.var, eb.notes)  # exact
    assert a.ability() == b.ability()
    ca, cb = a.calibration_, b.calibration_
    np.testing.assert_array_equal(ca.b, cb.b)
    assert (ca.k, ca.error_scale, ca.error_floor, ca.response) == (cb.k, cb.error_scale, cb.error_floor, cb.response)
    assert (ca.interval.to_dict() if ca.interval else None) == (cb.interval.to_dict() if cb.interval else None)


def test_the_flat_keywords_and_the_objects_build_the_same_method(data, ref):
    truth = data.model_scores("m0")
    flat = ContinuousCAT(ref, seed=0, **FLAT)
    objects = ContinuousCAT(ref, seed=0, **_objects(FLAT))
    assert flat.irt == objects.irt and flat.errors == objects.errors and flat.prior == objects.prior
    assert flat.grid.size == 501 and flat.information == "full" and flat.likelihood == "normal"
    assert (flat.local_error, flat.prior_mean, flat.prior_sd) == (True, 0.1, 1.5)  # the attributes read before
    _same_run(flat, objects, truth)
    # the registry and a method spec: the same again
    spec = make_method("cat", ref, seed=0, **_objects(FLAT))
    _same_run(spec, ContinuousCAT(ref, seed=0, **FLAT), truth)


def test_a_flat_keyword_replaces_that_field_of_a_group_given(ref):
    cat = ContinuousCAT(ref, seed=0, irt=IRTSettings(response="rasch"), information="full", error_model=False,
                        interval="model")
    assert cat.irt == IRTSettings(response="rasch", information="full")
    assert cat.errors == ErrorSettings(error_model=False)


def test_the_defaults_are_the_default_groups(data, ref):
    truth = data.model_scores("m0")
    plain = ContinuousCAT(ref, seed=0)
    assert (plain.irt, plain.errors, plain.prior) == (IRTSettings(), ErrorSettings(), PriorSettings())
    _same_run(plain, ContinuousCAT(ref, seed=0, irt=IRTSettings(), errors=ErrorSettings(), prior=PriorSettings()),
              truth)


def test_frozen_options_stay_flat_and_rebuild_the_same_method(data, ref):
    learned = ContinuousCAT(ref, seed=0, local_error=False)
    frozen = learned.frozen_options()
    assert set(frozen) == {"error_scale", "error_floor", "interval_calibration"}  # what sessions store: flat
    again = make_method("cat", ref, seed=0, local_error=False, **frozen)
    assert again.errors.error_scale == learned.calibration_.error_scale
    _same_run(learned, again, data.model_scores("m0"))


# ------------------------------------------------------------------ the calibration functions take irt
def test_fit_calibration_takes_the_irt_object_or_its_fields(ref):
    scores = ref.scores
    flat = fit_calibration(scores, response="rasch", clip=0.002, information="full", local_error=False)
    obj = fit_calibration(scores, irt=IRTSettings(response="rasch", clip=0.002, information="full"),
                          local_error=False)
    by_name = fit_calibration(scores=scores, irt=IRTSettings(response="rasch", clip=0.002, information="full"),
                              local_error=False)  # scores by name still works
    for cal in (obj, by_name):
        np.testing.assert_array_equal(flat.b, cal.b)
        assert (flat.k, flat.error_scale, flat.error_floor) == (cal.k, cal.error_scale, cal.error_floor)
        assert flat.interval.to_dict() == cal.interval.to_dict()
    assert flat.response == "rasch"
    with pytest.raises(ConfigurationError, match=r"response must be 'rasch' or '2pl', got '3pl'"):
        fit_calibration(scores, response="3pl")


def test_the_pseudo_target_functions_take_the_irt_object_or_its_fields(ref):
    scores = ref.scores
    irt = IRTSettings(response="rasch", likelihood="normal")
    a = pseudo_target_errors(scores, response="rasch", likelihood="normal", checkpoints=(5, 10))
    b = pseudo_target_errors(scores, irt=irt, checkpoints=(5, 10))
    assert a.keys() == b.keys()
    for n in a:
        np.testing.assert_array_equal(a[n][0], b[n][0])
        np.testing.assert_array_equal(a[n][1], b[n][1])
    c1, t1, i1 = learn_reference_errors(scores, response="rasch", likelihood="normal", local_error=True)
    c2, t2, i2 = learn_reference_errors(scores, irt=irt, local_error=True)
    assert (c1, t1, i1.to_dict()) == (c2, t2, i2.to_dict())


def test_the_methods_own_learning_uses_its_irt_settings(ref, monkeypatch):
    # the method hands its irt group on to fit_calibration whole: the pseudo-targets run its response model
    seen = []
    real = cat_module.fit_calibration

    def spy(scores, **kw):
        seen.append(kw)
        return real(scores, **kw)

    monkeypatch.setattr(cat_module, "fit_calibration", spy)
    ContinuousCAT(ref, seed=0, response="rasch", information="full", prior_sd=2.0)
    assert seen[0]["irt"] == IRTSettings(response="rasch", information="full")
    assert set(seen[0]) == {"method", "irt", "error_model", "interval", "local_error"}


def test_the_rankings_shared_calibration_is_fit_calibrations(ref):
    shared = capabilities("cat").fit_shared_calibration(ref.scores, {}, calibration="consistent", response="rasch",
                                                          local_error=False)
    direct = fit_calibration(ref.scores, irt=IRTSettings(response="rasch"), local_error=False)
    np.testing.assert_array_equal(shared.b, direct.b)
    assert (shared.k, shared.error_scale, shared.error_floor) == (direct.k, direct.error_scale, direct.error_floor)
    assert shared.interval.to_dict() == direct.interval.to_dict()
