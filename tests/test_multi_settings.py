"""BayesAMEMulti's settings groups (issue 29 item 2): ``model`` (MultiModelSettings) and ``refit`` (RefitSettings).

The flat keywords of before (``BayesAMEMulti(ref, targets, coupling=0.8)``, ``bayesame-multi[coupling=0.8]``,
a stored session's options) build the same method, bit for bit, as the group objects; each group refuses a bad
value with the message the hand-written checks gave; the registry lists and writes every option flat.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

from activeeval.exceptions import ConfigurationError
from activeeval.gp.prior import FitSettings, ReferencePrior
from activeeval.methods.bayesame_multi import BayesAMEMulti, BayesAMEMultiPaper, MultiModelSettings, RefitSettings
from activeeval.methods.registry import (
    check_method_spec,
    flatten_options,
    make_method,
    method_parameters,
    parse_method_spec,
)
from activeeval.session import MultiSession
from activeeval.settings import Settings, flatten, takes_settings

#: the flat options the constructor took before it had groups (its 28 parameters less ``reference``)
FLAT_BEFORE = {
    "targets", "seed", "missing", "warm_start", "selection", "prior", "latents", "hyperparameters", "reference_fit",
    "calibration", "reference_prior", "coupling", "level", "refit_every", "fit_steps", "min_fit_steps",
    "learning_rate", "weight_decay", "sigma2", "fit_max", "refit_growth", "n0", "estimator", "interval",
    "scale_prior", "tolerance", "cache_mb",
}


def _trace(method, truth, steps: int = 40) -> list:
    """What a run gives: the pairs chosen and every target's estimate after each step, floats as hex (bit for
    bit), then the covariance."""
    out: list = []
    for _ in range(steps):
        t, i = method.select()
        method.observe(t, i, float(truth[t, i]))
        out.append((t, i, [(float(e.mean).hex(), float(e.var).hex()) for e in method.estimates()]))
    out.append([float(v).hex() for v in np.ravel(method.covariance())])
    return out


# ------------------------------------------------------------------ the signature and the registry
def test_the_constructor_takes_ten_parameters_and_the_registry_lists_every_flat_option() -> None:
    params = [p for p in inspect.signature(BayesAMEMulti.__init__).parameters if p not in ("self", "reference",
                                                                                          "targets")]
    assert len(params) <= 10, params
    assert params[-2:] == ["model", "refit"]
    for name in ("bayesame-multi", "bayesame-multi-paper"):
        listed = method_parameters(name)
        assert set(listed) == FLAT_BEFORE and len(listed) == len(FLAT_BEFORE), sorted(set(listed) ^ FLAT_BEFORE)
    # every field of a group is one flat option, found in one group only
    names = MultiModelSettings.names() + RefitSettings.names()
    assert len(set(names)) == len(names) == 18
    assert not set(names) & set(params)


def test_flatten_options_writes_only_what_a_group_changes_and_round_trips(ifeval_3_targets) -> None:
    given = {"seed": 3, "model": MultiModelSettings(coupling=0.8, level="separate"),
             "refit": RefitSettings(refit_every=20)}
    flat = flatten_options("bayesame-multi", given)
    assert flat == {"seed": 3, "coupling": 0.8, "level": "separate", "refit_every": 20}
    json.dumps(flat)  # what a session stores
    assert flatten_options("bayesame-multi", {"model": MultiModelSettings(), "refit": RefitSettings()}) == {}
    assert flatten_options("bayesame-multi-paper", {"refit": RefitSettings(fit_steps=30)}) == {"fit_steps": 30}
    # the default's cache is 512 MB, its own group's default: nothing written, and 512 read back
    assert flatten_options("bayesame-multi", {"model": MultiModelSettings(cache_mb=512.0)}) == {}
    ref, targets, _ = ifeval_3_targets
    method = make_method("bayesame-multi", ref, targets=targets, **flat)
    assert method.model == given["model"] and method.refit == given["refit"]
    with pytest.raises(ConfigurationError, match="coupling is given twice"):
        flatten_options("bayesame-multi", {"coupling": 0.3, "model": MultiModelSettings(coupling=0.8)})


def test_a_spec_and_keywords_give_the_same_options() -> None:
    name, options = check_method_spec("bayesame-multi[coupling=0.8,refit_every=20]", {})
    assert (name, options) == ("bayesame-multi", {"coupling": 0.8, "refit_every": 20})
    same = check_method_spec("bayesame-multi", {}, {"model": MultiModelSettings(coupling=0.8),
                                                    "refit": RefitSettings(refit_every=20)})
    assert same == (name, options)
    with pytest.raises(ConfigurationError, match="has no option 'coupled'"):
        check_method_spec("bayesame-multi[coupled=0.8]", {})
    assert parse_method_spec("bayesame-multi[fit_max=None]")[1] == {"fit_max": None}


# ------------------------------------------------------------------ flat == objects, bit for bit
@pytest.mark.parametrize(("cls", "flat", "model", "refit"), [
    (BayesAMEMulti, {}, MultiModelSettings(), RefitSettings()),
    (BayesAMEMulti, {"coupling": 0.8, "level": "separate", "refit_every": 10, "fit_max": 30},
     MultiModelSettings(coupling=0.8, level="separate"), RefitSettings(refit_every=10, fit_max=30)),
    (BayesAMEMulti, {"warm_start": 0.1, "scale_prior": 3.0, "interval": "model", "estimator": "cv",
                     "cache_mb": 0.0, "refit_every": 12, "refit_growth": 0.0},
     MultiModelSettings(warm_start=0.1, scale_prior=3.0, interval="model", estimator="cv", cache_mb=0.0),
     RefitSettings(refit_every=12, refit_growth=0.0)),
    (BayesAMEMultiPaper, {"latents": 2, "sigma2": 0.05, "n0": 3, "tolerance": 0.0, "refit_every": 15,
                          "fit_steps": 20, "min_fit_steps": 4, "learning_rate": 0.02, "weight_decay": 0.0},
     MultiModelSettings(latents=2, sigma2=0.05, n0=3, tolerance=0.0),
     RefitSettings(refit_every=15, fit_steps=20, min_fit_steps=4, learning_rate=0.02, weight_decay=0.0)),
])
def test_flat_keywords_and_group_objects_build_the_same_method(ifeval_3_targets, cls, flat, model, refit) -> None:
    ref, targets, truth = ifeval_3_targets
    by_flat = cls(ref, targets, seed=7, **flat)
    by_object = cls(ref, targets, seed=7, model=model, refit=refit)
    assert (by_flat.model, by_flat.refit) == (model, refit)
    # a flat keyword next to a group object replaces that field of it
    half = cls(ref, targets, seed=7, model=model, **{k: v for k, v in flat.items() if k in RefitSettings.names()})
    assert half.refit == refit
    for name in MultiModelSettings.names():
        if name != "warm_start":  # the base class keeps the fraction in use (None → the prior's default)
            assert getattr(by_object, name) == getattr(model, name), name
    for name in RefitSettings.names():
        assert getattr(by_object, name) == getattr(refit, name), name
    assert _trace(by_flat, truth) == _trace(by_object, truth) == _trace(half, truth)


def test_the_attributes_read_as_before(ifeval_3_targets) -> None:
    ref, targets, _ = ifeval_3_targets
    m = BayesAMEMulti(ref, targets, seed=0)
    assert (m.coupling, m.level, m.latents, m.sigma2, m.n0, m.estimator, m.interval, m.scale_prior) == (
        0.5, "coupled", None, None, 10, "auto", None, 10.0)
    assert (m.tolerance, m.cache_mb, m.warm_start, m.interval_, m.estimator_) == (None, 512.0, 0.0, "scaled", "bayes")
    assert (m.refit_every, m.fit_steps, m.min_fit_steps, m.learning_rate, m.weight_decay, m.fit_max,
            m.refit_growth) == (50, 500, 50, None, 0.01, 400, 0.1)
    assert (m.selection, m.prior, m.hyperparameters, m.reference_fit, m.calibration, m.reference_prior) == (
        "round-robin", "reference", None, None, "auto", None)
    paper = BayesAMEMultiPaper(ref, targets, seed=0)
    assert (paper.prior, paper.warm_start, paper.interval_, paper.model.warm_start) == ("paper", 0.1, "model", None)
    assert BayesAMEMultiPaper(ref, targets, seed=0, model=MultiModelSettings(warm_start=0.0)).warm_items_.size == 0


# ------------------------------------------------------------------ declared constraints
@pytest.mark.parametrize(("field", "bad", "message"), [
    ("warm_start", 1.5, r"warm_start must be a fraction of the items in \[0, 1\] or None, got 1.5"),
    ("latents", 0, "latents must be an integer >= 1 or None, got 0"),
    ("coupling", 2.0, r"coupling must be a number in \[0, 1\], got 2.0"),
    ("coupling", True, r"coupling must be a number in \[0, 1\], got True"),
    ("level", "shared", "level must be 'coupled' or 'separate', got 'shared'"),
    ("sigma2", 0.0, "sigma2 must be a positive number or None, got 0.0"),
    ("n0", -1, "n0 must be an integer >= 0, got -1"),
    ("estimator", "x", "estimator must be 'auto', 'bayes' or 'cv', got 'x'"),
    ("interval", "wide", "interval must be 'scaled', 'model' or None, got 'wide'"),
    ("scale_prior", 0, "scale_prior must be a positive number, got 0"),
    ("tolerance", -1.0, r"tolerance must be >= 0 \(0 compares scores exactly\) or None, got -1.0"),
    ("cache_mb", -1.0, "cache_mb must be a number of megabytes >= 0, got -1.0"),
    ("refit_every", -3, "refit_every must be an integer >= 0 or None, got -3"),
    ("refit_every", 2.5, "refit_every must be an integer >= 0 or None, got 2.5"),
    ("fit_steps", 0, "fit_steps must be an integer >= 1, got 0"),
    ("min_fit_steps", 0, "min_fit_steps must be an integer >= 1, got 0"),
    ("learning_rate", -0.1, "learning_rate must be a positive number or None, got -0.1"),
    ("weight_decay", -1.0, "weight_decay must be a number >= 0, got -1.0"),
    ("fit_max", 1, "fit_max must be an integer >= 2 or None, got 1"),
    ("refit_growth", float("nan"), "refit_growth must be a number >= 0, got nan"),
])
def test_each_setting_refuses_a_bad_value_with_its_message(ifeval_3_targets, field, bad, message) -> None:
    group = MultiModelSettings if field in MultiModelSettings.names() else RefitSettings
    with pytest.raises(ConfigurationError, match=message):
        group(**{field: bad})
    ref, targets, _ = ifeval_3_targets
    with pytest.raises(ConfigurationError, match=message):
        BayesAMEMulti(ref, targets, **{field: bad})
    with pytest.raises(ConfigurationError, match=message):
        make_method("bayesame-multi", ref, targets=targets, **{field: bad})


def test_integers_are_kept_as_ints_and_the_top_level_choices_are_checked(ifeval_3_targets) -> None:
    assert RefitSettings(refit_every=np.int64(20), fit_max=30.0) == RefitSettings(refit_every=20, fit_max=30)
    assert type(RefitSettings(fit_max=30.0).fit_max) is int
    ref, targets, _ = ifeval_3_targets
    with pytest.raises(ConfigurationError, match="selection must be 'round-robin', 'average' or 'random', got 'x'"):
        BayesAMEMulti(ref, targets, selection="x")
    with pytest.raises(ConfigurationError, match="prior must be 'reference' or 'paper', got 'x'"):
        BayesAMEMulti(ref, targets, prior="x")
    with pytest.raises(ConfigurationError, match="model must be a MultiModelSettings"):
        BayesAMEMulti(ref, targets, model={"coupling": 0.8})
    with pytest.raises(ConfigurationError, match="refit must be a RefitSettings"):
        BayesAMEMulti(ref, targets, refit=MultiModelSettings())
    with pytest.raises(ConfigurationError, match="MultiModelSettings has no setting 'coupled'"):
        MultiModelSettings().replace(coupled=0.8)


def test_the_rules_between_options_stay(ifeval_3_targets) -> None:
    """The checks that tie a group's field to a top-level option stay in the constructor, with their messages."""
    ref, targets, _ = ifeval_3_targets
    with pytest.raises(ConfigurationError, match="level='separate' splits the reference prior's kernel"):
        BayesAMEMulti(ref, targets, prior="paper", model=MultiModelSettings(level="separate"))
    with pytest.raises(ConfigurationError, match="leave latents unset"):
        BayesAMEMulti(ref, targets, latents=2)
    shared = ReferencePrior.build(ref)
    with pytest.raises(ConfigurationError, match="leave tolerance unset"):
        BayesAMEMulti(ref, targets, reference_prior=shared, model=MultiModelSettings(tolerance=0.0))
    with pytest.raises(ConfigurationError, match="bayesame-multi-paper is the paper's prior"):
        BayesAMEMultiPaper(ref, targets, prior="reference", model=MultiModelSettings())


def test_groups_are_plain_data() -> None:
    model = MultiModelSettings(coupling=0.8, interval="model")
    refit = RefitSettings(fit_max=None, refit_growth=0)
    for group in (model, refit):
        stored = json.loads(json.dumps(group.to_dict()))
        assert type(group).from_dict(stored) == group
    assert model.changed() == {"coupling": 0.8, "interval": "model"} and refit.changed() == {"fit_max": None, "refit_growth": 0}


# ------------------------------------------------------------------ a session stores them flat
def test_a_session_stores_group_objects_flat_and_reopens_to_the_same_method(tmp_path, ifeval_3_targets) -> None:
    ref, targets, truth = ifeval_3_targets
    path = tmp_path / "m.aeval"
    with MultiSession.create(path, ref, targets, method="bayesame-multi", seed=4,
                             model=MultiModelSettings(coupling=0.8), refit=RefitSettings(refit_every=10)) as s:
        kwargs = dict(s.settings["method_kwargs"])
        assert {k: kwargs[k] for k in ("coupling", "refit_every")} == {"coupling": 0.8, "refit_every": 10}
        assert "model" not in kwargs and "refit" not in kwargs
        for _ in range(12):
            ((t, i),) = s.ask(1)
            s.tell(t, i, float(truth[targets.index(t), list(ref.item_ids).index(i)]))
        before = s.estimates()
    with MultiSession.open(path, reference=ref, cache=False) as s:  # replayed from the journal's flat options
        assert s.estimates() == before
    flat = MultiSession.create(tmp_path / "flat.aeval", ref, targets, method="bayesame-multi[coupling=0.8]", seed=4,
                               refit_every=10)
    stored = dict(flat.settings["method_kwargs"])
    flat.close()
    assert {k: v for k, v in stored.items() if k not in ("reference_fit", "calibration")} == {
        k: v for k, v in kwargs.items() if k not in ("reference_fit", "calibration")}


# ------------------------------------------------------------------ flatten against the constructor's default
def test_flatten_compares_with_the_constructors_default_object_not_the_class_defaults() -> None:
    """A group whose default in the constructor is not the class's (``FitSettings(cache_mb=512.0)``, the class
    default being 256) writes what differs from *that* object, so the flat form builds the same groups."""

    class Toy:
        @takes_settings
        def __init__(self, *, seed: int = 0, fit: FitSettings = FitSettings(cache_mb=512.0)) -> None:
            self.fit = fit

    assert FitSettings().cache_mb == 256.0
    assert Toy(tolerance=0.1).fit == FitSettings(cache_mb=512.0, tolerance=0.1)  # routed onto the 512 default
    for given in (FitSettings(), FitSettings(cache_mb=512.0), FitSettings(tolerance=0.1),
                  FitSettings(cache_mb=100.0, fit_items=50)):
        flat = flatten(Toy.__init__, {"seed": 1, "fit": given})
        assert Toy(**flat).fit == given, flat
    assert flatten(Toy.__init__, {"fit": FitSettings()}) == {"cache_mb": 256.0}
    assert flatten(Toy.__init__, {"fit": FitSettings(cache_mb=512.0)}) == {}
    assert isinstance(inspect.signature(Toy.__init__).parameters["fit"].default, Settings)
