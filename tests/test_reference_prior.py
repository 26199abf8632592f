"""Issue 29, item 1: the reference-fitted prior as a value (activeeval.gp.prior.ReferencePrior), shared by methods."""

from __future__ import annotations

import ast
import json
import math
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activeeval._cache import clear_caches
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.gp import prior as gp_prior
from activeeval.gp.prior import BucketPrior, Calibration, ReferenceFit, ReferencePrior
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.bayesame_multi import BayesAMEMulti

FIT = ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.01, tau0=1.0, tau1=1.0, gamma=0.02)


def _reference(seed: int = 0, n_models: int = 12, n_items: int = 60) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability, difficulty = rng.normal(size=(n_models, 1)), rng.normal(size=(1, n_items))
    scores = (rng.random((n_models, n_items)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return ScoreMatrix(scores, [f"m{j}" for j in range(n_models)], [f"i{k}" for k in range(n_items)], name="synth")


def _continuous(seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((9, 70)), 2)
    return ScoreMatrix(scores, [f"m{j}" for j in range(9)], [f"i{k}" for k in range(70)], name="cont",
                       kind="continuous", score_range=(0.0, 1.0))


# ---------------------------------------------------------------------------------------------- plain data
def _bits(value):
    """``value`` with every float as its exact bits (NaN included), for comparing plain data bit for bit."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, dict):
        return {k: _bits(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_bits(v) for v in value]
    return (type(value).__name__, value)


def _json_types_only(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_types_only(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_types_only(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str))


# the bookkeeping fields: any number, ±inf, and NaN (nlml, rms; JSON has one NaN: its sign and payload are not kept)
any_float = st.floats(allow_nan=False, allow_infinity=True) | st.just(math.nan)
positive = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False, allow_infinity=False)
counts = st.integers(min_value=0, max_value=2**53)
fits = st.builds(ReferenceFit, alpha=positive, beta=positive, sigma2=positive, tau0=any_float, tau1=any_float,
                 gamma=any_float, n_pseudo=counts, n_items=counts, nlml=any_float, converged=st.booleans(),
                 seed=counts)


@st.composite
def calibrations(draw) -> Calibration:
    fractions = sorted(draw(st.sets(st.floats(min_value=5e-324, max_value=1.0), max_size=6)))
    factors = draw(st.lists(positive, min_size=len(fractions), max_size=len(fractions)))
    return Calibration(factor=draw(positive), rms=draw(any_float), n_pseudo=draw(counts), n_items=draw(counts),
                       n_z=draw(counts), seed=draw(counts), fractions=tuple(fractions), factors=tuple(factors))


priors = st.builds(ReferencePrior, fit=fits, calibration=calibrations(),
                   tolerance=st.floats(min_value=0.0, max_value=1e300) | st.just(-0.0),
                   fingerprint=st.none() | st.text(alphabet="0123456789abcdef", min_size=64, max_size=64))


@settings(max_examples=300, deadline=None)
@given(priors)
def test_reference_prior_round_trips_through_json_bit_for_bit(prior: ReferencePrior) -> None:
    data = prior.to_dict()
    assert _json_types_only(data)
    back = ReferencePrior.from_dict(json.loads(json.dumps(data)))
    assert _bits(back.to_dict()) == _bits(data)  # every float's bits, -0.0 and NaN included
    if not any(isinstance(v, float) and math.isnan(v) for v in (*data["fit"].values(), *data["calibration"].values())):
        assert back == prior and hash(back) == hash(prior)  # (NaN != NaN: equal as values only without one)


def test_the_prior_holds_the_stored_forms_of_the_fit_and_the_calibration_unchanged() -> None:
    """Sessions and the user cache store ``ReferenceFit.to_dict()`` and ``Calibration.to_dict()``: the prior's data
    holds exactly those, so a stored fit or calibration is a prior's part as it is."""
    cal = Calibration(factor=1.25, rms=1.2, n_pseudo=12, n_items=60, n_z=90, seed=0, fractions=(0.1, 0.5),
                      factors=(1.1, 1.3))
    prior = ReferencePrior(FIT, cal, 0.0)
    data = prior.to_dict()
    assert data["fit"] == FIT.to_dict() and data["calibration"] == cal.to_dict()
    assert set(data) == {"fit", "calibration", "tolerance", "fingerprint"}
    assert ReferenceFit.from_dict(data["fit"]) == FIT and Calibration.from_dict(data["calibration"]) == cal


@pytest.mark.parametrize("data, match", [
    ({"fit": FIT.to_dict(), "calibration": Calibration(1.0).to_dict()}, "missing key"),
    ({"fit": FIT.to_dict(), "calibration": Calibration(1.0).to_dict(), "tolerance": 0.0, "extra": 1}, "unknown key"),
    ({"fit": {**FIT.to_dict(), "alpha": "0.05"}, "calibration": Calibration(1.0).to_dict(), "tolerance": 0.0},
     "fit is not a stored ReferenceFit"),
    ({"fit": FIT.to_dict(), "calibration": {"factor": 1.0}, "tolerance": 0.0}, "calibration is not a stored"),
    ({"fit": {**FIT.to_dict(), "sigma2": 0.0}, "calibration": Calibration(1.0).to_dict(), "tolerance": 0.0},
     "sigma2 must be a positive number"),
    ({"fit": FIT.to_dict(), "calibration": Calibration(1.0).to_dict(), "tolerance": -1.0}, "tolerance must be >= 0"),
    ({"fit": FIT.to_dict(), "calibration": Calibration(1.0).to_dict(), "tolerance": True}, "tolerance must be >= 0"),
    ([1, 2], "a reference prior is a mapping"),
])
def test_a_bad_stored_prior_is_refused_with_what_is_wrong(data, match) -> None:
    with pytest.raises(ConfigurationError, match=match):
        ReferencePrior.from_dict(data)


# ---------------------------------------------------------------------------------------------- one prior, shared
def _play(method: BayesAME, target: np.ndarray, n: int) -> list[tuple[int, float, float]]:
    out = []
    for _ in range(n):
        item = method.select()
        method.observe(item, float(target[item]))
        est = method.estimate()
        out.append((item, est.mean, est.var))
    return out


def test_build_is_what_bayesame_derives() -> None:
    ref = _reference()
    clear_caches()
    prior = ReferencePrior.build(ref)
    method = BayesAME(ref, seed=0)
    assert method.prior_ == prior and method.fit_ is method.prior_.fit
    assert prior.fingerprint == ref.fingerprint() and prior.tolerance == 0.0
    assert ReferencePrior.build(_continuous(), calibration=None).tolerance == 1e-3  # the default: 1e-3 of the range


@pytest.mark.parametrize("which", ["binary", "continuous"])
def test_one_prior_passed_to_two_methods_plays_as_each_building_its_own(which) -> None:
    ref = _reference() if which == "binary" else _continuous()
    first = 1.0 - ref.scores[0] if which == "binary" else ref.scores[1] ** 2
    clear_caches()
    shared = ReferencePrior.build(ref, n_pseudo=8, fit_items=50)
    played = {}
    for seed, target in ((1, first), (2, first[::-1].copy())):
        clear_caches()  # nothing of the shared prior's derivation left in the process's memo
        own = BayesAME(ref, seed=seed, n_pseudo=8, fit_items=50)
        given_prior = BayesAME(ref, seed=seed, prior=shared)
        assert given_prior.prior_ is shared and own.prior_ == shared
        assert given_prior.frozen_options() == own.frozen_options()  # what a session stores: the same
        played[seed] = _play(given_prior, target, 25)
        assert played[seed] == _play(own, target, 25)  # the same items, estimates and variances, bit for bit
    assert played[1] != played[2]  # (two targets: two plays; the comparison above is not vacuous)


def test_a_prior_is_refused_with_what_it_holds_or_on_another_reference() -> None:
    ref = _reference()
    prior = ReferencePrior(FIT, Calibration(1.0), 0.0, ref.fingerprint())
    BayesAME(ref, prior=prior, n_pseudo=20, calibration="auto")  # the defaults, spelled: fine
    for options in ({"hyperparameters": FIT}, {"calibration": None}, {"tolerance": 0.0}, {"n_pseudo": 8},
                    {"linear": False}):
        with pytest.raises(ConfigurationError, match=f"leave {next(iter(options))} unset"):
            BayesAME(ref, prior=prior, **options)
    with pytest.raises(ConfigurationError, match="built on another reference"):
        BayesAME(_reference(seed=1), prior=prior)
    with pytest.raises(ConfigurationError, match="prior must be a ReferencePrior"):
        BayesAME(ref, prior=prior.to_dict())
    BayesAME(_reference(seed=1), prior=ReferencePrior(FIT, Calibration(1.0), 0.0))  # no fingerprint: not checked


# ---------------------------------------------------------------------------------------------- the multi-target default
@pytest.mark.parametrize("cache_mb", [512.0, 0.0])
def test_the_multi_target_prior_is_the_single_target_defaults_bit_for_bit(ifeval_3_targets, cache_mb) -> None:
    """What BayesAMEMulti used to borrow from a whole BayesAME (built with half its cache_mb), it now builds
    directly: the same buckets, distances, kernel columns, level term, noise, factor and tolerance, bit for bit."""
    ref, targets, _ = ifeval_3_targets
    multi = BayesAMEMulti(ref, targets, seed=0, level="separate", cache_mb=cache_mb)
    # the former way (with the switch test of before stop 46, which the multi-target prior keeps: switch_z=None)
    single = BayesAME(ref, seed=0, selection="active", extrapolation="off", switch_z=1.959963984540054,
                      cache_mb=cache_mb / 2)
    state = multi.bucket_prior_
    assert isinstance(state, BucketPrior) and multi.reference_prior_ == single.prior_
    assert multi.tolerance_ == single.tolerance_ and multi.factor_ == single.calibration_.factor
    assert multi.params_.sigma2 == single.sigma2_
    assert (multi._d2_full is None) == (single._d2_full is None) == (cache_mb == 0.0)
    if multi._d2_full is not None:
        assert multi._d2_full.tobytes() == single._d2_full.tobytes()
    assert multi.buckets.of_item.tobytes() == single.buckets.of_item.tobytes()
    for b in range(0, multi.n_buckets, 7):
        assert state.column(b).tobytes() == single._prior_col(b).tobytes()
        level = single.kernel.tau0 + single.kernel.tau1 * float(single._m[b]) * single._m  # the former level row
        assert state.level_column(b).tobytes() == level.tobytes()
        assert multi.posterior.level_row(b).tobytes() == level.tobytes()
    assert multi.frozen_options() == {"reference_fit": single.fit_.to_dict(),
                                      "calibration": single.calibration_.to_dict()}


def test_the_multi_target_default_takes_a_shared_prior(ifeval_3_targets) -> None:
    ref, targets, truth = ifeval_3_targets
    shared = ReferencePrior.build(ref)
    own = BayesAMEMulti(ref, targets, seed=5, refit_every=10)
    given_prior = BayesAMEMulti(ref, targets, seed=5, refit_every=10, reference_prior=shared)
    assert given_prior.reference_prior_ is shared
    for _ in range(30):
        pair = own.select()
        assert given_prior.select() == pair
        own.observe(*pair, float(truth[pair]))
        given_prior.observe(*pair, float(truth[pair]))
    for t in range(len(targets)):
        a, b = own.estimate(t), given_prior.estimate(t)
        assert (a.mean, a.var) == (b.mean, b.var)
    with pytest.raises(ConfigurationError, match="leave reference_fit, calibration unset"):
        BayesAMEMulti(ref, targets, reference_prior=shared, reference_fit=FIT.to_dict(), calibration=None)
    with pytest.raises(ConfigurationError, match="needs prior='reference'"):
        BayesAMEMulti(ref, targets, prior="paper", reference_prior=shared)
    with pytest.raises(ConfigurationError, match="reference_prior must be a ReferencePrior"):
        BayesAMEMulti(ref, targets, reference_prior=shared.to_dict())


def test_bayesame_multi_reads_no_private_attribute_of_another_object() -> None:
    """Issue 29: the multi-target default borrowed BayesAME's ``_prior_col``, ``_m`` and ``_d2_full``; it now reads
    private attributes of itself (and its base class through super()) only."""
    import activeeval.methods.bayesame_multi as module

    tree = ast.parse(Path(module.__file__).read_text())
    foreign = [(node.lineno, ast.unparse(node)) for node in ast.walk(tree)
               if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
               and ast.unparse(node.value) not in ("self", "super()")]
    assert foreign == []


def test_the_old_names_are_the_new_ones() -> None:
    from activeeval.methods import bayesame

    for name in ("ReferenceFit", "fit_hyperparameters", "Calibration", "calibrate", "ReferencePrior", "WARMUP",
                 "CALIBRATION_MIN", "CALIBRATION_MIN_Z", "CALIBRATION_MAX", "SIGMA2_MIN"):
        assert getattr(bayesame, name) is getattr(gp_prior, name)


def test_the_multi_target_default_still_gives_its_single_target_default_when_asked(ifeval_3_targets) -> None:
    ref, targets, _ = ifeval_3_targets
    multi = BayesAMEMulti(ref, targets, seed=0, level="separate")
    single = multi.single_  # built on first use now, on the same prior
    assert isinstance(single, BayesAME) and single.prior_ is multi.reference_prior_ and multi.single_ is single
    assert all(single._prior_col(b).tobytes() == multi.bucket_prior_.column(b).tobytes() for b in range(5))
    assert BayesAMEMulti(ref, targets, prior="paper").single_ is None
