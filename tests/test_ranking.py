"""The adaptive ranker (activeeval.ranking) and its backtest metrics (experiments.ranking_eval)."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest
from scipy.stats import norm

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, DataFormatError, InvalidScoresError, UnknownModelError
from activeeval.experiments import ranking_eval as ev
from activeeval.methods.estimate import Estimate
from activeeval.ranking import (
    AdaptiveRanker,
    RankResult,
    allocation_value,
    check_costs,
    choose_model,
    is_confident,
    load_costs,
    pairwise_confidence,
    rank_fixed_length,
    rank_random,
    rank_static,
    scale_of,
    static_subset,
    uncertain_adjacent,
)


class Fake:
    """A Method whose mean is fixed and whose variance is sd² / (1 + n)."""

    def __init__(self, mean, sd=1.0, n_items=100):
        self.mean, self.sd, self.n_items, self.n = mean, sd, n_items, 0

    def select(self, rng=None):
        return self.n

    def observe(self, item, score):
        self.n += 1

    def estimate(self):
        return Estimate(self.mean, self.sd**2 / (1 + self.n), self.n, self.n_items)


def fakes(means, sd=1.0, n_items=100):
    return lambda m: Fake(means[m], sd, n_items)


def oracle(m, i):
    return 0.5


def test_pairwise_confidence_formula():
    assert pairwise_confidence(1.0, 0.09, 0.5, 0.16) == pytest.approx(norm.cdf(0.5 / 0.5), rel=1e-12)
    assert pairwise_confidence(0.0, 1.0, 0.0, 1.0) == 0.5
    assert pairwise_confidence(1.0, 0.0, 0.0, 0.0) == 1.0 and pairwise_confidence(0.0, 0.0, 1.0, 0.0) == 0.0
    assert pairwise_confidence(0.7, 0.2, 0.1, 0.3) + pairwise_confidence(0.1, 0.3, 0.7, 0.2) == pytest.approx(1.0)


def test_confidence_band():
    assert is_confident(0.976, 0.95) and is_confident(0.024, 0.95)
    assert not is_confident(0.974, 0.95) and not is_confident(0.5, 0.95) and not is_confident(0.026, 0.95)


def test_cost_aware_choice():
    assert allocation_value(0.4, 3, 2.0) == pytest.approx(0.4 / 8)
    var = {"a": 1.0, "b": 1.0}
    n = {"a": 5, "b": 5}
    assert choose_model(["a", "b"], var, n, {"a": 1.0, "b": 0.5}) == "b"  # same SE, cheaper wins
    assert choose_model(["a", "b"], var, {"a": 1, "b": 5}, {"a": 1.0, "b": 1.0}) == "a"  # fewer items wins
    assert choose_model(["a", "b"], {"a": 4.0, "b": 1.0}, n, {"a": 2.0, "b": 1.0}) == "a"  # 4/12 > 1/6


def test_ranker_stops_when_confident_and_reports_no_ties():
    means = {"a": 3.0, "b": 0.0, "c": -3.0}
    res = AdaptiveRanker(list(means), fakes(means), oracle, min_items=10).run()
    assert res.ranking == ("a", "b", "c") and res.ties == () and res.stop_reason == "confident"
    assert res.items_per_model == {"a": 10, "b": 10, "c": 10}  # confident right after the warm-up


def test_ranker_focuses_on_the_close_pair_and_reports_ties_at_budget():
    means = {"a": 5.0, "b": 0.05, "c": 0.0}
    res = AdaptiveRanker(list(means), fakes(means), oracle, min_items=2, budget=60).run()
    assert res.stop_reason == "budget" and res.cost_spent == 60
    assert res.ties == (("b", "c"),)
    assert res.items_per_model["a"] == 2 and res.items_per_model["b"] + res.items_per_model["c"] == 58
    assert frozenset(("b", "c")) in res.uncertain_pairs()


def test_ranker_prefers_cheap_models():
    means = {"a": 0.01, "b": 0.0}
    res = AdaptiveRanker(list(means), fakes(means), oracle, min_items=1, budget=40,
                         costs={"a": 1.0, "b": 4.0}).run()
    # value ∝ 1/((n+1)² c): the balance is n_a + 1 ≈ 2 (n_b + 1) with c_b = 4 c_a.
    assert res.items_per_model["a"] > 2 * res.items_per_model["b"]
    assert res.cost_spent <= 40


def test_ranker_exhausts_items():
    means = {"a": 0.0, "b": 0.0}
    res = AdaptiveRanker(list(means), fakes(means, n_items=5), oracle, min_items=2).run()
    assert res.stop_reason == "exhausted" and res.items_per_model == {"a": 5, "b": 5}
    assert res.ties == (("a", "b"),)


def test_budget_during_warmup():
    means = {"a": 1.0, "b": 0.0}
    res = AdaptiveRanker(list(means), fakes(means), oracle, min_items=10, budget=7).run()
    assert res.stop_reason == "budget" and res.items_per_model == {"a": 4, "b": 3}


def test_random_and_fixed_baselines():
    means = {"a": 1.0, "b": 0.0, "c": 0.5}
    r = rank_random(list(means), fakes(means), oracle, budget=30, seed=0)
    assert r.n_items_used == 30 and r.ranking == ("a", "c", "b")
    f = rank_fixed_length(list(means), fakes(means), oracle, n_items=7)
    assert f.items_per_model == {"a": 7, "b": 7, "c": 7}
    r2 = rank_random(list(means), fakes(means), oracle, budget=30, costs={"a": 1, "b": 1, "c": 100}, seed=1)
    assert r2.cost_spent <= 30


def test_static_subset():
    assert static_subset(np.array([0.1, 0.9, np.nan, 0.5]), 2).tolist() == [1, 3]


def test_static_ranking_is_a_rank_result_with_sampling_variances_and_ties():
    table = {"a": [1, 1, 1, 0], "b": [1, 0, 1, 0], "c": [0, 0, 0, 0]}
    res = rank_static(list(table), np.array([0, 1, 2, 3]), lambda m, i: float(table[m][i]), n_items=40)
    assert isinstance(res, RankResult) and res.ranking == ("a", "b", "c") and res.stop_reason == "fixed"
    assert res.means == {"a": 0.75, "b": 0.5, "c": 0.0}
    assert res.variances["a"] == pytest.approx(np.var([1, 1, 1, 0], ddof=1) / 4) and res.variances["c"] == 0.0
    assert res.estimates["b"].n_items == 40 and res.items_per_model == {"a": 4, "b": 4, "c": 4}
    # a vs b: Φ(0.25 / √(0.0625 + 0.0833)) = 0.74 is undecided at γ = 0.95; b vs c: b's sd 0.29 → P 0.96
    assert res.ties == tuple(uncertain_adjacent(["a", "b", "c"], res.means, res.variances, 0.95))
    assert ("a", "b") in res.ties
    with pytest.raises(ConfigurationError, match="the static subset is empty"):
        rank_static(["a", "b"], np.array([], dtype=int), lambda m, i: 0.0)


def test_scale_choice():
    class WithAbility(Fake):
        def ability(self):
            return Estimate(10.0, 2.0, self.n, self.n_items)

    m = WithAbility(0.3)
    assert scale_of("auto", m) == (10.0, 2.0) and scale_of("estimate", m) == (0.3, 1.0)
    assert scale_of(lambda meth: (1.0, 0.5), m) == (1.0, 0.5)
    with pytest.raises(ConfigurationError, match=r"scale='ability' needs a method with an ability\(\) estimate"):
        scale_of("ability", Fake(0.0))
    with pytest.raises(ConfigurationError, match=r"scale must be 'auto', 'ability', 'estimate' or a callable"):
        scale_of("theta", m)


def test_uncertain_adjacent():
    means = {"a": 1.0, "b": 0.9, "c": -5.0}
    var = {"a": 0.1, "b": 0.1, "c": 0.1}
    assert uncertain_adjacent(["a", "b", "c"], means, var, 0.95) == [("a", "b")]


def test_ranker_errors():
    means = {"a": 0.0, "b": 1.0}
    make = fakes(means)
    with pytest.raises(ConfigurationError,
                       match=r"need at least 2 models to rank, got 1 \(\['a'\]\); pass two or more"):
        AdaptiveRanker(["a"], make, oracle)
    with pytest.raises(ConfigurationError, match=r"models to rank must be distinct; repeated: \['a'\]"):
        AdaptiveRanker(["a", "a"], make, oracle)
    for g in (0, 1, 1.5, -0.1, float("nan")):
        with pytest.raises(ConfigurationError, match=r"gamma must be in \(0, 1\) \(a confidence level such as 0.95\)"):
            AdaptiveRanker(["a", "b"], make, oracle, gamma=g)
    with pytest.raises(ConfigurationError, match=r"costs are missing for model\(s\) \['b'\]; give a positive cost"):
        AdaptiveRanker(["a", "b"], make, oracle, costs={"a": 1})
    for bad in (0, -1, "x", float("inf")):
        with pytest.raises(ConfigurationError, match=r"cost of model 'b' must be a positive number"):
            AdaptiveRanker(["a", "b"], make, oracle, costs={"a": 1, "b": bad})
    with pytest.raises(ConfigurationError, match=r"min_items must be a non-negative integer, got -1"):
        AdaptiveRanker(["a", "b"], make, oracle, min_items=-1)
    with pytest.raises(ConfigurationError,
                       match=r"budget must be a positive total cost \(or None for no limit\), got 0"):
        AdaptiveRanker(["a", "b"], make, oracle, budget=0)
    with pytest.raises(ConfigurationError, match=r"make\('a'\) returned int, not a Method"):
        AdaptiveRanker(["a", "b"], lambda m: 3, oracle).run()
    with pytest.raises(ConfigurationError, match=r"choose_model needs at least one candidate model"):
        choose_model([], {}, {}, {})
    with pytest.raises(ConfigurationError, match=r"n_items must be a positive integer, got 0"):
        rank_fixed_length(["a", "b"], make, oracle, n_items=0)
    with pytest.raises(ConfigurationError, match=r"n_items must be a positive integer, got 0"):
        static_subset(np.ones(3), 0)
    assert check_costs(None, ["a"]) == {"a": 1.0}


def test_load_costs(tmp_path):
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"a": 1, "b": 2.5}))
    assert load_costs(j) == {"a": 1, "b": 2.5}
    c = tmp_path / "c.csv"
    c.write_text("model,cost\na,1\nb,0.5\n")
    assert check_costs(load_costs(c), ["a", "b"]) == {"a": 1.0, "b": 0.5}
    t = tmp_path / "c.tsv"
    t.write_text("a\t3\nb\t4\n")
    assert load_costs(t) == {"a": "3", "b": "4"}
    with pytest.raises(ConfigurationError, match=r"costs file '.*nope.json' does not exist; give a JSON or CSV file"):
        load_costs(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(DataFormatError, match=r"costs file '.*bad.json' is not valid JSON"):
        load_costs(bad)
    arr = tmp_path / "arr.json"
    arr.write_text("[1, 2]")
    with pytest.raises(DataFormatError, match=r"must hold a JSON object \{model: cost\}"):
        load_costs(arr)
    three = tmp_path / "three.csv"
    three.write_text("a,1,2\n")
    with pytest.raises(DataFormatError, match=r"line 1: expected 'model,cost', got \['a', '1', '2'\]"):
        load_costs(three)


# ------------------------------------------------------------------ metrics
def test_kendall_and_family():
    assert ev.kendall_tau({"a": 3, "b": 2, "c": 1}, {"a": 0.9, "b": 0.5, "c": 0.1}) == pytest.approx(1.0)
    assert ev.kendall_tau({"a": 1, "b": 2, "c": 3}, {"a": 0.9, "b": 0.5, "c": 0.1}) == pytest.approx(-1.0)
    assert math.isnan(ev.kendall_tau({"a": 1, "b": 1}, {"a": 0.9, "b": 0.5}))
    with pytest.raises(ConfigurationError, match=r"predicted and true scores must cover the same models"):
        ev.kendall_tau({"a": 1}, {"b": 1})
    assert ev.model_family("meta-llama/Llama-3-8B") == "meta-llama"
    assert ev.model_family("vicuna-13b-v1.5") == "vicuna"


def test_tie_prf_conventions():
    p = lambda *xs: {frozenset(x) for x in xs}  # noqa: E731
    assert ev.tie_prf(set(), set()) == (1.0, 1.0, 1.0)
    prec, rec, f1 = ev.tie_prf(p("ab", "bc"), p("ab"))
    assert (prec, rec) == (0.5, 1.0) and f1 == pytest.approx(2 / 3)
    prec, rec, f1 = ev.tie_prf(set(), p("ab"))
    assert math.isnan(prec) and rec == 0.0 and f1 == 0.0
    prec, rec, f1 = ev.tie_prf(p("ab"), set())
    assert prec == 0.0 and math.isnan(rec) and f1 == 0.0


def test_bootstrap_ties():
    rng = np.random.default_rng(0)
    base = rng.random(400)
    s = np.stack([base, base + 1e-4 * rng.standard_normal(400), base + 0.3])
    ties = ev.bootstrap_ties(np.clip(s, 0, 2), ["a", "b", "c"], n_boot=300, seed=0)
    assert ties == {frozenset("ab")}


def test_confident_accuracy():
    means = {"a": 5.0, "b": 0.05, "c": 0.0}
    res = AdaptiveRanker(list(means), fakes(means), oracle, min_items=2, budget=20).run()
    acc, n = ev.confident_accuracy(res, {"a": 0.9, "b": 0.1, "c": 0.2})
    assert n == 2 and acc == 1.0  # (a,b), (a,c) confident and right; (b,c) is a tie
    acc, n = ev.confident_accuracy(res, {"a": 0.0, "b": 0.1, "c": 0.2})
    assert acc == 0.0


def small_matrix(seed=0, n_models=14, n_items=120):
    rng = np.random.default_rng(seed)
    theta = np.linspace(-1.5, 1.5, n_models)
    b = rng.normal(0, 1.5, n_items)
    mu = 1 / (1 + np.exp(-(theta[:, None] - b)))
    y = np.clip(mu + rng.normal(0, 1, mu.shape) * np.sqrt(0.2 * mu * (1 - mu)), 0, 1)
    return ScoreMatrix(y, [f"org{j % 3}/m{j}" for j in range(n_models)], [f"i{i}" for i in range(n_items)],
                       name="toy")


@pytest.mark.parametrize("method", ["cat", "bayesame"])
def test_simulate_ranking_end_to_end(method):
    mat = small_matrix()
    rec = ev.simulate_ranking(mat, ["org0/m0", "org1/m7", "org2/m11", "org0/m12"], method=method, seed=0,
                              budget_per_model=15)
    assert rec.items_adaptive <= 60 and rec.adaptive.cost_spent <= 60
    assert rec.items_random == rec.items_adaptive
    assert -1 <= rec.adaptive_tau <= 1 and -1 <= rec.random_tau <= 1 and -1 <= rec.static_tau <= 1
    assert rec.items_fixed == 4 * max(rec.adaptive.items_per_model.values())
    s = ev.summarize_rank_backtest([rec])
    assert s["n_runs"] == 1 and s["pct_used"] == pytest.approx(100 * rec.items_adaptive / (4 * 120))


def test_backtest_and_errors():
    mat = small_matrix()
    recs = ev.run_rank_backtest(mat, method="cat", folds=2, holdout=3, seeds=2)
    assert len(recs) == 4
    folds = ev.backtest_folds(mat, folds=3, holdout=4, seed=1)
    assert len({m for f in folds for m in f}) == 12  # disjoint
    with pytest.raises(ConfigurationError, match=r"3 folds x 5 held-out models need 15 complete models plus 2 "
                                                 r"references, but toy has 14 complete models"):
        ev.backtest_folds(mat, folds=3, holdout=5, seed=0)
    with pytest.raises(ConfigurationError, match=r"holdout must be an integer >= 2, got 1"):
        ev.backtest_folds(mat, folds=3, holdout=1, seed=0)
    unknown = re.escape(f"method must be one of {ev.rank_methods()} for ranking, got 'irt'")
    with pytest.raises(ConfigurationError, match=unknown):
        ev.run_rank_backtest(mat, method="irt")
    with pytest.raises(ConfigurationError, match=r"seeds must be a positive integer, got 0"):
        ev.run_rank_backtest(mat, seeds=0)
    with pytest.raises(UnknownModelError, match=r"unknown model 'nobody'"):
        ev.simulate_ranking(mat, ["nobody", "org0/m0"])
    y = mat.scores.copy()
    y[1, 3] = np.nan
    holed = ScoreMatrix(y, mat.model_ids, mat.item_ids)
    with pytest.raises(InvalidScoresError, match=r"model 'org1/m1' has 1 missing scores; a model to rank in "
                                                 r"simulation needs all its scores"):
        ev.simulate_ranking(holed, ["org1/m1", "org0/m0"])
    with pytest.raises(ConfigurationError, match=r"budget_per_model= must be > 0"):
        ev.simulate_ranking(mat, ["org0/m3", "org0/m0"], budget_per_model=0)
    with pytest.raises(InvalidScoresError, match=r"only 1 complete reference model\(s\) remain"):
        ev.simulate_ranking(mat.select_models(mat.model_ids[:3]), list(mat.model_ids[:2]))
    with pytest.raises(ConfigurationError, match=re.escape(f"method must be one of {ev.rank_methods()} for ranking")):
        ev.method_factory("irt", mat)


def test_family_holdout():
    mat = small_matrix()
    recs = ev.run_family_holdout(mat, ["org1"], method="cat", seeds=2)
    assert len(recs) == 2 and all(ev.model_family(m) == "org1" for m in recs[0].models)
    assert len(recs[0].models) == 5  # m1, m4, m7, m10, m13
    with pytest.raises(ConfigurationError, match=r"unknown model families \['meta'\]; families in this matrix: "
                                                 r"\['org0', 'org1', 'org2'\]"):
        ev.run_family_holdout(mat, ["meta"])
    with pytest.raises(ConfigurationError, match=re.escape(f"method must be one of {ev.rank_methods()} for ranking")):
        ev.run_family_holdout(mat, ["org1"], method="x")


# ------------------------------------------------------------ pair-aware items
class Informed(Fake):
    """A Fake that picks items in order and rates item i's information as (i mod 7)."""

    def __init__(self, mean, sd=1.0, n_items=100):
        super().__init__(mean, sd, n_items)
        self.observed_items: tuple[int, ...] = ()

    def select(self, rng=None):
        return next(i for i in range(self.n_items) if i not in self.observed_items)

    def observe(self, item, score):
        super().observe(item, score)
        self.observed_items = (*self.observed_items, int(item))

    def item_information(self):
        return np.arange(self.n_items) % 7.0


def test_next_item_reuses_the_partners_most_informative_item():
    from activeeval.ranking import next_item

    m = Informed(0.0)
    m.observe(5, 0.5)
    # own choice: the method's select()
    assert next_item(m, [12, 13, 5], pairing="own") == 0
    # partner: among the partner's items this model has not taken (12, 13), the most informative (13 % 7 = 6)
    assert next_item(m, [12, 13, 5], pairing="partner") == 13
    # nothing left to share: the method's own choice
    assert next_item(m, [5], pairing="partner") == 0
    # without item_information(): the partner's earliest item
    plain = Informed(0.0)
    plain.item_information = None
    assert next_item(plain, [40, 30], pairing="partner") == 40
    with pytest.raises(ConfigurationError, match=r"pairing= must be 'own' or 'partner'"):
        AdaptiveRanker(["a", "b"], fakes({"a": 0, "b": 1}), oracle, pairing="both")


def test_pair_partner_is_the_least_decided_pair():
    from activeeval.ranking import pair_partner

    means = {"a": 2.0, "b": 1.0, "c": 0.9}
    var = {"a": 0.5, "b": 0.5, "c": 0.5}
    assert pair_partner("b", [("a", "b"), ("b", "c")], means, var) == "c"  # b~c is closer to ½
    assert pair_partner("a", [("b", "c")], means, var) is None


def test_partner_pairing_compares_models_on_common_items():
    means = {"a": 0.0, "b": 0.05, "c": 2.0}
    make = lambda m: Informed(means[m], sd=1.0, n_items=200)  # noqa: E731
    own = AdaptiveRanker(list(means), make, oracle, min_items=3, budget=60).run()
    paired = AdaptiveRanker(list(means), make, oracle, min_items=3, budget=60, pairing="partner").run()
    shared = lambda r: len(set(r.items["a"]) & set(r.items["b"]))  # noqa: E731
    assert paired.n_items_used == own.n_items_used
    assert shared(paired) >= shared(own)
    # after the warm-up every paired item of a (b) is one b (a) had already taken, or a new own choice
    assert len(set(paired.items["a"])) == len(paired.items["a"])  # never the same item twice


def test_summary_pools_confident_pairs_and_counts_false_ties():
    summarize = ev.summarize_rank_backtest
    m = small_matrix()
    held = list(m.model_ids[:4])
    recs = [ev.simulate_ranking(m, held, method="cat", budget_per_model=15, min_items=5, seed=s, baselines=False)
            for s in range(2)]
    s = summarize(recs)
    assert s["n_pairs"] == 12
    assert s["n_confident"] == sum(r.n_confident for r in recs)
    if s["n_confident"]:
        right = sum(r.n_correct_confident for r in recs)
        assert s["pooled_confident_accuracy"] == right / s["n_confident"]
    assert s["ties_reported"] == pytest.approx(1 - s["n_confident"] / 12)
    distinct = sum(r.n_distinct for r in recs)
    if distinct:
        assert s["false_tie_rate"] == sum(r.n_false_ties for r in recs) / distinct
    for r in recs:
        assert r.n_false_ties <= r.n_distinct <= r.n_pairs
        assert r.n_correct_confident <= r.n_confident


def test_expected_wrong_sums_the_doubt_of_the_confident_pairs():
    from activeeval.ranking import RankResult

    means = {"a": 1.0, "b": 0.0, "c": -0.05}
    variances = {"a": 0.1, "b": 0.1, "c": 0.1}
    est = {m: Estimate(mean=0.5, var=0.01, n_observed=5, n_items=10) for m in means}
    res = RankResult(ranking=("a", "b", "c"), means=means, variances=variances, estimates=est,
                     items_per_model={m: 5 for m in means}, cost_spent=15.0, ties=(("b", "c"),),
                     stop_reason="budget", gamma=0.95)
    want = sum(norm.cdf(-(means[x] - means[y]) / np.sqrt(0.2)) for x, y in (("a", "b"), ("a", "c")))
    assert res.confidence("a", "b") > 0.95 and frozenset(("b", "c")) in res.uncertain_pairs()
    assert ev.expected_wrong(res) == pytest.approx(want, rel=1e-9)
