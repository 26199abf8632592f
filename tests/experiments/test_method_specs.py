"""Method specs (``name[key=value,...]``): parsing, validation, and that a spec runs exactly its options."""

from __future__ import annotations

import numpy as np
import pytest

from activeeval.datasets import load
from activeeval.exceptions import ConfigurationError
from activeeval.experiments.protocol import BacktestConfig, make_split, method_seed, sample_references
from activeeval.experiments.runner import check_methods, run_backtest
from activeeval.experiments.simulate import run_fixed
from activeeval.methods.registry import make_method, method_spec, parse_method_spec, split_method_list


def test_split_method_list_keeps_commas_inside_brackets() -> None:
    assert split_method_list("rs-mean, bayesame-paper[noise=learned,refit_every=25] ,irt,") == [
        "rs-mean", "bayesame-paper[noise=learned,refit_every=25]", "irt",
    ]
    with pytest.raises(ConfigurationError, match="unclosed"):
        split_method_list("bayesame-paper[noise=learned")
    with pytest.raises(ConfigurationError, match="unbalanced"):
        split_method_list("bayesame]")


def test_parse_method_spec_reads_typed_values_and_round_trips() -> None:
    name, options = parse_method_spec("bayesame-paper[noise=learned, refit_every=25, sigma2=1e-3, weights=none, x=true]")
    assert name == "bayesame-paper"
    assert options == {"noise": "learned", "refit_every": 25, "sigma2": 1e-3, "weights": None, "x": True}
    assert type(options["refit_every"]) is int and type(options["sigma2"]) is float
    assert parse_method_spec("irt") == ("irt", {})
    assert parse_method_spec("irt[]") == ("irt", {})
    label = method_spec("proeval", {"noise_var": 0.5})
    assert label == "proeval[noise_var=0.5]" and parse_method_spec(label) == ("proeval", {"noise_var": 0.5})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bayesame-paper[noise]", "cannot read the option 'noise'; write key=value"),
        ("bayesame[=learned]", "cannot read the option '=learned'"),
        ("bayesame-paper[noise=learned,noise=fixed]", "option 'noise' is given twice"),
        ("bayesame noise", "cannot read the method"),
        ("bayesam[noise=learned]", "unknown method 'bayesam' (did you mean 'bayesame'?)"),
        ("bayesame-paper[nois=learned]", "bayesame-paper has no option 'nois' (did you mean 'noise'?); its options are:"),
        ("proeval[refit_every=3]", "proeval has no option 'refit_every'"),
        ("bayesame-paper[seed=3]", "'seed' is set by the backtest protocol"),
        ("rs-mean[epsilon2=0.01]", "'epsilon2' is set by the backtest protocol"),
    ],
)
def test_bad_specs_are_named(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError) as err:
        check_methods(("rs-mean", spec))
    assert message in str(err.value)


def test_labels_are_canonical_and_deduplicated() -> None:
    assert check_methods(("bayesame-paper[ noise = learned ]", "bayesame-paper[noise=learned]", "bayesame")) == (
        "bayesame-paper[noise=learned]", "bayesame",
    )


def test_a_bad_option_value_fails_before_any_run(small_ifeval) -> None:
    config = BacktestConfig(methods=("rs-mean", "bayesame-paper[noise=lerned]"), n_targets=2, n_seeds=1)
    with pytest.raises(ConfigurationError, match=r"method 'bayesame-paper\[noise=lerned\]': .*noise"):
        run_backtest(small_ifeval, config, workers=1)


@pytest.mark.parametrize(
    ("spec", "name", "options"),
    [
        ("proeval[noise_var=0.05]", "proeval", {"noise_var": 0.05}),  # through the fast replay
        ("bayesame-paper[refit_every=10,noise=learned]", "bayesame-paper", {"refit_every": 10, "noise": "learned"}),
    ],
)
def test_a_spec_runs_the_method_with_its_options_beside_the_default(small_ifeval, spec, name, options) -> None:
    config = BacktestConfig(methods=(name, spec), n_targets=2, n_seeds=1)
    result = run_backtest(small_ifeval, config, workers=1)
    split = make_split(small_ifeval, "interpolation", 2)
    reference = small_ifeval.select_models(sample_references(split.pool, 0.5, 0))
    target = split.targets[1]
    played = make_method(name, reference, seed=method_seed(0, 0, 0), **options)
    run_fixed(played, small_ifeval.model_scores(target), small_ifeval.n_items)
    np.testing.assert_allclose(result.means[spec][1, 0], [e.mean for e in played.trajectory], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.vars[spec][1, 0], [e.var for e in played.trajectory], rtol=1e-9, atol=1e-12)
    assert not np.allclose(result.means[spec], result.means[name])  # the options changed something


def test_bayesame_rs_spec_is_copied_only_from_bayesame_with_the_same_options() -> None:
    m = load("musr")  # a subset where BayesAME selects at random (see test_runner_fast)
    rng = np.random.default_rng(0)
    models = [m.model_ids[i] for i in sorted(rng.choice(m.n_models, 40, replace=False))]
    matrix = m.select_models(models).select_items(m.item_ids[:70])
    rs, ame = "bayesame-paper-rs[refit_every=20]", "bayesame-paper[refit_every=20]"
    both = run_backtest(matrix, BacktestConfig(methods=("bayesame-paper", ame, rs), n_targets=2, n_seeds=1), workers=1)
    alone = run_backtest(matrix, BacktestConfig(methods=(rs,), n_targets=2, n_seeds=1), workers=1)
    np.testing.assert_array_equal(both.means[rs], alone.means[rs])
    np.testing.assert_array_equal(both.means[rs], both.means[ame])
    assert not np.array_equal(both.means[rs], both.means["bayesame-paper"])
