"""BayesAMEPaper's settings as objects (issue 29 item 2): ``model`` (PaperModelSettings) and ``batch``
(BatchSettings) — declared constraints with the messages the hand-written checks had, the flat form and the
object form building the same method bit for bit, the weights kept as plain data, and the registry's flat names."""

from __future__ import annotations

import copy
import inspect
import json

import numpy as np
import pytest

from activeeval import BayesAMEPaper, ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.gp.acquisition import BatchSettings
from activeeval.methods.bayesame_paper import BayesAMEPaperRS, ModelWeights, PaperModelSettings
from activeeval.methods.registry import flatten_options, make_method, method_parameters
from activeeval.session import Session

MODEL_FIELDS = ("n0", "sigma2", "alpha", "beta", "refit_every", "estimator", "weights", "noise", "likelihood",
                "logit_eps")
BATCH_FIELDS = ("batch_strategy", "batch_size", "myopic")


def reference(kind: str = "binary", n_models: int = 6, n_items: int = 40, seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = rng.random((n_models, n_items))
    if kind == "binary":
        scores = (scores < 0.5).astype(float)
    return ScoreMatrix(scores, item_ids=[f"q{i}" for i in range(n_items)], model_ids=[f"m{k}" for k in range(n_models)],
                       kind=kind, score_range=(0.0, 1.0), name="toy")


def played(method: BayesAMEPaper, truth: np.ndarray, n: int) -> tuple[list[int], np.ndarray]:
    """The items ``method`` picks over ``n`` steps and the bytes of every estimate along the way."""
    items, numbers = [], []
    for _ in range(n):
        i = int(method.select())
        method.observe(i, float(truth[i]))
        items.append(i)
        est = method.estimate()
        numbers.extend([est.mean, est.var])
    numbers.extend(method.posterior()[0])
    numbers.extend(method.posterior()[1])
    return items, np.asarray(numbers, dtype=np.float64)


def assert_same_run(a: BayesAMEPaper, b: BayesAMEPaper, truth: np.ndarray, n: int = 25) -> None:
    items_a, numbers_a = played(a, truth, n)
    items_b, numbers_b = played(b, truth, n)
    assert items_a == items_b
    assert numbers_a.tobytes() == numbers_b.tobytes()  # bit for bit, not approximately


# --------------------------------------------------------------- the signature
def test_the_constructor_takes_two_groups_and_five_options() -> None:
    params = [p for p in inspect.signature(BayesAMEPaper.__init__).parameters if p not in ("self", "reference")]
    assert params == ["seed", "missing", "selection", "tolerance", "cache_mb", "model", "batch"]
    assert len(params) <= 10
    assert PaperModelSettings.names() == MODEL_FIELDS
    assert BatchSettings.names() == BATCH_FIELDS


@pytest.mark.parametrize("name", ["bayesame-paper", "bayesame-paper-rs"])
def test_method_parameters_list_every_flat_option(name: str) -> None:
    params = method_parameters(name)
    for flat in ("seed", "missing", "selection", "tolerance", "cache_mb", *MODEL_FIELDS, *BATCH_FIELDS):
        assert flat in params, flat
    assert "model" not in params and "batch" not in params  # a group is written flat
    assert "weights" in params  # what the session's prior_weights_option asks


# ------------------------------------------------------------- the constraints
BAD = [
    # the messages of the hand-written checks they replace (tests/test_methods.py and test_logit.py match them too)
    ({"estimator": "x"}, "estimator must be 'auto', 'bayes' or 'cv', got 'x'"),
    ({"sigma2": 0.0}, "sigma2 must be a positive number"),
    ({"sigma2": float("nan")}, "sigma2 must be a positive number"),
    ({"alpha": 0.0}, "alpha must be a number >= 1e-05, got 0.0"),
    ({"beta": float("inf")}, "beta must be a number >= 1e-05"),
    ({"refit_every": -3}, "refit_every must be a non-negative integer or None, got -3"),
    ({"refit_every": 2.5}, "refit_every must be a non-negative integer"),
    ({"n0": -1}, "n0 must be a non-negative integer, got -1"),
    ({"noise": "auto"}, "noise must be 'fixed' or 'learned', got 'auto'"),
    ({"likelihood": "probit"}, "likelihood must be 'gaussian' or 'logit', got 'probit'"),
    ({"logit_eps": 0.5}, r"logit_eps must be a number in \(0, 0.5\), got 0.5; e.g. 1e-3"),
    ({"logit_eps": 0}, r"logit_eps must be a number in \(0, 0.5\)"),
    ({"logit_eps": True}, r"logit_eps must be a number in \(0, 0.5\)"),
    ({"weights": "heavy"}, "weights must be one number per reference model"),
    ({"weights": [[1.0, 2.0]]}, "weights must be one number per reference model"),
    ({"weights": 3.0}, "weights must be one number per reference model"),
    ({"weights": {"m0": "a"}}, "prior weights: the weight of 'm0' must be a number, got 'a'"),
    ({"weights": {"m0": True}}, "prior weights: the weight of 'm0' must be a number, got True"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD)
def test_the_model_group_refuses_bad_values_with_the_old_messages(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PaperModelSettings(**kwargs)
    with pytest.raises(ConfigurationError, match=message):  # the flat form: the same check, the same words
        BayesAMEPaper(reference(), **kwargs)
    with pytest.raises(ConfigurationError, match=message):
        make_method("bayesame-paper-rs", reference(), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"selection": "greedy"}, "selection must be 'auto', 'active' or 'random', got 'greedy'"),
        ({"tolerance": -1}, r"tolerance must be >= 0 \(0 compares scores exactly\)"),
        ({"cache_mb": -1.0}, "cache_mb must be a number of megabytes >= 0"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"batch_size": 41}, "batch_size"),  # larger than the benchmark
        ({"myopic": "no"}, "myopic must be true or false"),
        ({"batch_strategy": "best"}, "batch_strategy"),
        ({"model": BatchSettings()}, "model must be a PaperModelSettings"),
        ({"batch": PaperModelSettings()}, "batch must be a BatchSettings"),
        ({"weights": [1, 2]}, r"weights must be 6 non-negative numbers \(one per reference model\)"),
        ({"weights": [1, 1, 1, 1, 1, -1]}, "weights must be 6 non-negative numbers"),
        ({"weights": [0.0] * 6}, "with a positive sum"),
        ({"weights": [1, 1, 1, 1, 1, float("nan")]}, "weights must be 6 non-negative numbers"),
        ({"weights": {"m0": 1.0}}, r"prior weights: no weight for 5 reference model\(s\)"),
    ],
)
def test_the_other_options_and_the_reference_dependent_rules(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        BayesAMEPaper(reference(), **kwargs)


def test_rules_across_the_groups_and_the_reference_stay_in_the_constructor() -> None:
    with pytest.raises(ConfigurationError, match="likelihood='logit' selects greedily"):
        BayesAMEPaper(reference(), model=PaperModelSettings(likelihood="logit"),
                      batch=BatchSettings(batch_strategy="pair"))
    with pytest.raises(ConfigurationError, match="likelihood='logit' selects greedily"):
        BayesAMEPaper(reference(), likelihood="logit", myopic=False)
    unbounded = ScoreMatrix(reference("continuous").scores * 50, kind="continuous", score_range=None)
    with pytest.raises(ConfigurationError, match="likelihood='logit' needs bounded scores"):
        BayesAMEPaper(unbounded, model=PaperModelSettings(likelihood="logit"))


def test_values_are_normalised_as_before() -> None:
    s = PaperModelSettings(n0=12.0, refit_every=25.0, sigma2=1, logit_eps=0.01)
    assert s.n0 == 12 and type(s.n0) is int and s.refit_every == 25 and type(s.refit_every) is int
    assert s.sigma2 == 1 and type(s.sigma2) is int  # kept as given; the method reads float(sigma2)
    method = BayesAMEPaper(reference(), model=s, seed=0)
    assert method.n0 == 12 and method.refit_every == 25 and method.sigma2_ == 1.0 and type(method.sigma2_) is float
    assert type(method.logit_eps) is float
    assert BayesAMEPaper(reference(), refit_every=None).refit_every == 0
    assert BayesAMEPaper(reference(), refit_every=0).refit_every == 0


# ----------------------------------------------------------------- the weights
def test_weights_by_position_are_a_tuple_of_floats_and_give_the_same_bits() -> None:
    ref = reference()
    raw = [3, 1, 4, 1, 5, 9]
    forms = [raw, tuple(raw), np.array(raw), np.array(raw, dtype=np.float32), [float(x) for x in raw]]
    for form in forms:
        s = PaperModelSettings(weights=form)
        assert s.weights == (3.0, 1.0, 4.0, 1.0, 5.0, 9.0)
        assert isinstance(s.weights, tuple) and all(type(x) is float for x in s.weights)
    # what the method computed from the weights as given, before they were stored as a tuple
    w = np.asarray(raw, dtype=float)
    w = w / w.sum()
    for form in forms:
        method = BayesAMEPaper(ref, seed=0, weights=form)
        phi = method.buckets.phi
        assert (method._mu_prior.tobytes() == (phi @ w).tobytes())
        assert method._feat.tobytes() == (phi * np.sqrt(ref.n_models * w)[None, :]).tobytes()
    truth = reference(seed=3).scores[0]
    assert_same_run(BayesAMEPaper(ref, seed=1, weights=np.array(raw)),
                    BayesAMEPaper(ref, seed=1, model=PaperModelSettings(weights=tuple(map(float, raw)))), truth)


def test_weights_by_model_id_are_a_read_only_mapping_that_stays_plain_data() -> None:
    ref = reference()
    by_id = {"m5": 9, "m0": 3, "m1": 1.0, "m2": np.float64(4), "m3": np.int64(1), "m4": 5}
    s = PaperModelSettings(weights=by_id)
    assert isinstance(s.weights, ModelWeights) and s.weights == {k: float(v) for k, v in by_id.items()}
    assert all(type(v) is float for v in s.weights.values())
    with pytest.raises(TypeError, match="read-only"):
        s.weights["m0"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        s.weights.update(m0=2.0)  # type: ignore[union-attr]
    assert hash(s) == hash(PaperModelSettings(weights=dict(by_id)))  # a frozen group is hashable
    assert copy.deepcopy(s) == s and copy.copy(s.weights) == s.weights
    assert json.loads(json.dumps(s.to_dict()))["weights"] == s.weights  # stored as a JSON object
    assert PaperModelSettings.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    # by id equals by position, bit for bit
    truth = reference(seed=4).scores[1]
    assert_same_run(BayesAMEPaper(ref, seed=2, weights=by_id),
                    BayesAMEPaper(ref, seed=2, weights=[3, 1, 4, 1, 5, 9]), truth)


def test_weights_of_a_model_dropped_for_missing_scores_are_dropped_too() -> None:
    scores = reference().scores.copy()
    scores[2, 4] = np.nan
    ref = ScoreMatrix(scores, item_ids=[f"q{i}" for i in range(40)], model_ids=[f"m{k}" for k in range(6)],
                      kind="binary")
    with pytest.warns(Warning, match="missing"):
        method = BayesAMEPaper(ref, seed=0, model=PaperModelSettings(weights={f"m{k}": k + 1 for k in range(6)}))
    assert method.reference.n_models == 5


# ------------------------------------------------------ flat form = object form
CASES = [
    {},
    {"refit_every": 5, "noise": "learned"},
    {"n0": 30, "estimator": "bayes", "sigma2": 1e-3, "alpha": 0.7, "beta": 2.0, "refit_every": None},
    {"weights": [1, 2, 3, 4, 5, 6], "refit_every": 10},
    {"likelihood": "logit", "logit_eps": 0.01, "refit_every": 10},
    {"batch_strategy": "pair", "batch_size": 2, "myopic": False, "refit_every": 8},
    {"selection": "active", "tolerance": 0.0, "cache_mb": 0.0, "refit_every": 7},
]


def _grouped(options: dict) -> dict:
    model = {k: v for k, v in options.items() if k in MODEL_FIELDS}
    batch = {k: v for k, v in options.items() if k in BATCH_FIELDS}
    rest = {k: v for k, v in options.items() if k not in model and k not in batch}
    return {**rest, "model": PaperModelSettings(**model), "batch": BatchSettings(**batch)}


@pytest.mark.parametrize("kind", ["binary", "continuous"])
@pytest.mark.parametrize("options", CASES)
def test_the_flat_form_and_the_object_form_build_the_same_method_bit_for_bit(kind: str, options: dict) -> None:
    ref = reference(kind)
    truth = reference(kind, seed=5).scores[2]
    flat = BayesAMEPaper(ref, seed=3, **options)
    grouped = BayesAMEPaper(ref, seed=3, **_grouped(options))
    assert flat.model == grouped.model and flat.batch == grouped.batch
    for name in (*MODEL_FIELDS, *BATCH_FIELDS, "selection", "tolerance"):
        if name not in ("weights", "refit_every"):  # weights is the group's; refit_every is resolved (None → 0)
            assert getattr(flat, name) == getattr(grouped, name), name
    assert_same_run(flat, grouped, truth)
    spec = make_method("bayesame-paper", ref, seed=3, **options)  # a spec's options reach the same method
    assert_same_run(spec, BayesAMEPaper(ref, seed=3, **_grouped(options)), truth)


def test_a_flat_keyword_changes_that_field_of_a_group_given() -> None:
    method = BayesAMEPaper(reference(), model=PaperModelSettings(noise="learned", n0=3), refit_every=9)
    assert method.model == PaperModelSettings(noise="learned", n0=3, refit_every=9)
    assert (method.noise, method.n0, method.refit_every) == ("learned", 3, 9)


def test_the_method_still_exposes_each_option_as_an_attribute() -> None:
    method = BayesAMEPaper(reference(), seed=0, n0=11, sigma2=0.01, alpha=2.0, beta=3.0, refit_every=20,
                           estimator="cv", noise="learned", batch_strategy="pair", batch_size=2, myopic=False,
                           tolerance=0.0)
    assert (method.n0, method.sigma2, method.alpha, method.beta, method.refit_every, method.estimator,
            method.noise, method.likelihood, method.tolerance) == (11, 0.01, 2.0, 3.0, 20, "cv", "learned",
                                                                   "gaussian", 0.0)
    assert (method.batch_strategy, method.batch_size, method.myopic) == ("pair", 2, False)
    assert method.batch == BatchSettings(batch_strategy="pair", batch_size=2, myopic=False)


def test_the_rs_version_takes_the_groups_and_repeats_the_paper_method() -> None:
    ref = reference()
    truth = reference(seed=6).scores[0]
    flat = BayesAMEPaperRS(ref, seed=4, noise="learned", refit_every=5)
    grouped = BayesAMEPaperRS(ref, seed=4, model=PaperModelSettings(noise="learned", refit_every=5))
    assert flat.selection == grouped.selection == "random"
    assert_same_run(flat, grouped, truth)
    with pytest.raises(ConfigurationError, match="BayesAME-RS selects items at random"):
        BayesAMEPaperRS(ref, selection="auto")
    # fewer buckets than N − N0 (six binary models, 40 items): the non-unique regime, random items, repeated
    assert BayesAMEPaperRS.repeats(ref, model=PaperModelSettings(n0=0)) is BayesAMEPaperRS.repeats(ref, n0=0) is True
    # N0 ≥ N: the unique regime, information gain, not repeated
    assert BayesAMEPaperRS.repeats(ref, model=PaperModelSettings(n0=40)) is BayesAMEPaperRS.repeats(ref, n0=40) is False


# ------------------------------------------------------ registry and sessions
def test_a_group_given_as_an_object_is_stored_flat() -> None:
    options = {"model": PaperModelSettings(noise="learned", weights={"m0": 1, "m1": 2}),
               "batch": BatchSettings(batch_size=2), "tolerance": 0.0}
    flat = flatten_options("bayesame-paper", options)
    assert flat == {"noise": "learned", "weights": {"m0": 1.0, "m1": 2.0}, "batch_size": 2, "tolerance": 0.0}
    assert json.loads(json.dumps(flat)) == flat  # what a session journal writes
    with pytest.raises(ConfigurationError, match="noise is given twice"):
        flatten_options("bayesame-paper", {"noise": "fixed", "model": PaperModelSettings(noise="learned")})


def test_a_session_made_with_the_groups_stores_and_replays_the_flat_options(tmp_path) -> None:
    ref = reference()
    truth = reference(seed=7).scores[3]
    weights = {f"m{k}": float(k + 1) for k in range(6)}
    grouped = Session.create(tmp_path / "grouped.aeval", ref, method="bayesame-paper", seed=1,
                             model=PaperModelSettings(noise="learned", refit_every=4, weights=weights))
    flat = Session.create(tmp_path / "flat.aeval", ref, method="bayesame-paper", seed=1, noise="learned",
                          refit_every=4, weights=weights)
    assert grouped.settings["method_kwargs"] == flat.settings["method_kwargs"]
    assert grouped.settings["method_kwargs"]["weights"] == weights
    for session in (grouped, flat):
        for _ in range(10):
            (asked,) = session.ask()
            session.tell(asked.item_id, float(truth[asked.index]))
    reopened = Session.open(tmp_path / "grouped.aeval", reference=ref)
    a, b, c = grouped.estimate(), flat.estimate(), reopened.estimate()
    assert (a.mean, a.var) == (b.mean, b.var) == (c.mean, c.var)
