"""Issue 26, item 2: the default BayesAME's reference fit and calibration, derived once and kept in the user cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activeeval import user_cache
from activeeval._cache import clear_caches
from activeeval.data.matrix import ScoreMatrix
from activeeval.gp import prior
from activeeval.methods.bayesame import BayesAME
from activeeval.session import Session

KINDS = ("bayesame_fit", "bayesame_calibration")


@pytest.fixture()
def cache(user_cache_folder) -> Path:
    return user_cache_folder  # (conftest.py: a fresh folder, the process's memos emptied)


@pytest.fixture()
def derivations(monkeypatch) -> list[str]:
    """The reference fits (not a calibration's fold fits) and calibrations actually computed from here on."""
    calls: list[str] = []
    fit, cal = prior._fit_hyperparameters, prior.calibrate
    monkeypatch.setattr(prior, "_fit_hyperparameters",
                        lambda *a: (a[-1] is None and calls.append("fit")) or fit(*a))  # a[-1]: start
    monkeypatch.setattr(prior, "calibrate", lambda *a, **k: calls.append("calibration") or cal(*a, **k))
    return calls


def _reference(seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability, difficulty = rng.normal(size=(12, 1)), rng.normal(size=(1, 60))
    scores = (rng.random((12, 60)) < 1 / (1 + np.exp(difficulty - ability))).astype(float)
    return ScoreMatrix(scores, [f"m{j}" for j in range(12)], [f"i{k}" for k in range(60)], name="synth")


def _entries(cache: Path) -> dict[str, list[Path]]:
    return {kind: sorted((cache / kind).glob("*.aec")) for kind in KINDS}


def _play(method: BayesAME, target: np.ndarray, n: int = 12) -> list[tuple[float, float]]:
    out = []
    for _ in range(n):
        item = method.select()
        method.observe(item, float(target[item]))
        est = method.estimate()
        out.append((est.mean, est.var))
    return out


def _derived(method: BayesAME) -> str:
    """The fit and calibration as exact text (JSON keeps every float's bits; NaN compares equal here)."""
    return json.dumps([method.fit_.to_dict(), method.calibration_.to_dict()])


def test_identical_with_and_without_the_cache(cache, derivations, monkeypatch) -> None:
    ref = _reference()
    target = 1.0 - ref.scores[0]
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    cold = BayesAME(ref, seed=3)
    assert derivations == ["fit", "calibration"] and not cache.exists()
    monkeypatch.setenv(user_cache.CACHE_ENV, str(cache))
    for expected_calls in (["fit", "calibration"], []):  # derived and stored, then read back from the disk
        clear_caches()
        derivations.clear()
        warm = BayesAME(ref, seed=3)
        assert derivations == expected_calls
        assert _derived(warm) == _derived(cold)
        assert _play(warm, target) == _play(BayesAME(ref, seed=3, hyperparameters=cold.fit_,
                                                     calibration=cold.calibration_), target)
    assert all(len(paths) == 1 for paths in _entries(cache).values())


def test_every_setting_that_changes_them_is_in_the_key(cache, derivations) -> None:
    ref = _reference()
    BayesAME(ref)
    clear_caches()
    derivations.clear()
    BayesAME(ref, fit_seed=1)  # another fit, so another calibration too
    BayesAME(_reference(seed=1))  # other reference content
    assert derivations == ["fit", "calibration"] * 2
    assert all(len(paths) == 3 for paths in _entries(cache).values())


@pytest.mark.parametrize("damage", ["bytes", "fields"])
def test_a_damaged_entry_is_rebuilt_never_trusted(cache, derivations, damage) -> None:
    ref = _reference()
    first = _derived(BayesAME(ref))
    for kind in KINDS:
        (path,) = _entries(cache)[kind]
        if damage == "bytes":  # the checksum sees it
            data = bytearray(path.read_bytes())
            data[-3] ^= 0xFF
            path.write_bytes(bytes(data))
        else:  # a sound entry under the right key whose fields are not numbers
            entry = user_cache.load(kind, path.stem)
            meta = {**entry.meta, "seed": "0", "n_pseudo": True}
            assert user_cache.store(kind, path.stem, meta)
    clear_caches()
    derivations.clear()
    assert _derived(BayesAME(ref)) == first
    assert derivations == ["fit", "calibration"]  # computed anew, and stored sound again
    clear_caches()
    derivations.clear()
    assert _derived(BayesAME(ref)) == first and derivations == []


def test_a_session_without_the_cache_leaves_none_and_a_second_session_reuses_it(tmp_path, cache, derivations) -> None:
    ref = _reference()
    Session.create(tmp_path / "a.aeval", reference=ref, seed=0, cache=False).close()
    assert derivations == ["fit", "calibration"] and not any(_entries(cache).values())
    clear_caches()
    derivations.clear()
    first = Session.create(tmp_path / "b.aeval", reference=ref, seed=0)
    first.close()
    clear_caches()
    derivations.clear()
    second = Session.create(tmp_path / "c.aeval", reference=ref, seed=0)  # another process would see the same
    assert derivations == []
    assert second.settings["method_kwargs"] == first.settings["method_kwargs"]  # the session stores them too
    second.close()


# ---------------------------------------------------------------------------------------------------------------
# The prior state (issue 26, a second session in under a second): buckets and Σ·N, kept on large references
# ---------------------------------------------------------------------------------------------------------------

STATE_KINDS = ("bayesame_buckets", "bayesame_prior_sums")
FIT = prior.ReferenceFit(alpha=0.05, beta=3.0, sigma2=0.01, tau0=1.0, tau1=1.0, gamma=0.02)


@pytest.fixture()
def state(cache, monkeypatch) -> list[str]:
    """Every reference kept (not only large ones); the bucketings and Σ·N actually derived from here on."""
    from activeeval.gp.kernels import LevelKernel

    monkeypatch.setattr(prior, "PRIOR_STATE_MIN_WORK", 0.0)
    calls: list[str] = []
    buckets, matvec = prior.bucketize, LevelKernel.matvec
    monkeypatch.setattr(prior, "bucketize", lambda *a: calls.append("buckets") or buckets(*a))
    monkeypatch.setattr(LevelKernel, "matvec", lambda *a: calls.append("sums") or matvec(*a))
    return calls


def _continuous(seed: int = 0) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((9, 80)), 2)
    scores[:, 40:] = scores[:, :40]  # repeated vectors: buckets of two
    return ScoreMatrix(scores, [f"m{j}" for j in range(9)], [f"i{k}" for k in range(80)], name="cont",
                       kind="continuous", score_range=(0.0, 1.0))


def _method(ref: ScoreMatrix, memo: bool = False, **options) -> BayesAME:
    """The default with a fixed fit; unless ``memo``, with nothing of the process's memo (the disk, or nothing)."""
    if not memo:
        clear_caches()
    return BayesAME(ref, seed=5, hyperparameters=FIT, calibration=None, **options)


def _state_of(method: BayesAME) -> list[np.ndarray]:
    b, post = method.buckets, method.posterior
    return [b.of_item, b.counts, b.phi, *b.members, post.prior_mean, post.prior_diag, post.prior_cov_counts]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
                                    for x, y in zip(a, b))


def _state_entries(cache: Path) -> dict[str, list[Path]]:
    return {kind: sorted((cache / kind).glob("*.aec")) for kind in STATE_KINDS}


@pytest.mark.parametrize("which", ["binary", "binary-tiles", "continuous"])
def test_prior_state_identical_with_and_without_the_cache(cache, state, monkeypatch, which) -> None:
    ref = _continuous() if which == "continuous" else _reference()
    options = {"cache_mb": 0.0} if which == "binary-tiles" else {}  # Σ·N by kernel_sums' tiles, not a dense product
    target = ref.scores[0] if which == "continuous" else 1.0 - ref.scores[0]
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    cold = _method(ref, **options)
    assert state == ["buckets", "sums"] and not cache.exists()
    expected = (_state_of(cold), _play(cold, target, 15))
    monkeypatch.setenv(user_cache.CACHE_ENV, str(cache))
    for calls in (["buckets", "sums"], []):  # derived and stored, then read back from the disk
        state.clear()
        warm = _method(ref, **options)
        assert state == calls
        assert _same(_state_of(warm), expected[0])
        assert _play(warm, target, 15) == expected[1]  # the same items chosen, the same estimates, bit for bit
    assert all(len(paths) == 1 for paths in _state_entries(cache).values())


def test_prior_state_key_has_every_input(cache, state) -> None:
    ref = _reference()
    _method(ref)
    state.clear()
    BayesAME(ref, seed=5, hyperparameters={**FIT.to_dict(), "beta": 2.0}, calibration=None)  # another kernel
    assert state == ["sums"]  # the same buckets
    state.clear()
    _method(ref, cache_mb=0.0)  # the tiles' sums, not the dense product's (equal to round-off only)
    _method(_continuous(), tolerance=0.1)
    _method(_continuous(), tolerance=0.2)
    _method(_reference(seed=1))
    assert state == ["sums", "buckets", "sums", "buckets", "sums", "buckets", "sums"]
    assert [len(p) for p in _state_entries(cache).values()] == [4, 6]


def test_prior_state_not_kept_for_small_references_nor_without_the_cache(cache, state, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(prior, "PRIOR_STATE_MIN_WORK", 12 * 60**2 + 1)  # just above this reference's N²·K
    _method(_reference())
    monkeypatch.setattr(prior, "PRIOR_STATE_MIN_WORK", 0.0)
    with user_cache.disabled():
        _method(_reference())
    clear_caches()
    Session.create(tmp_path / "a.aeval", reference=_reference(), seed=0, cache=False, hyperparameters=FIT.to_dict(),
                   calibration=None).close()
    assert state == ["buckets", "sums"] * 3 and not any(_state_entries(cache).values())


def _swap_two_buckets(of_item: np.ndarray) -> np.ndarray:
    out = of_item.copy()
    out[of_item == 0], out[of_item == 1] = 1, 0
    return out


def _merge_two_buckets(of_item: np.ndarray) -> np.ndarray:
    out = of_item.copy()
    out[out == out.max()] = out.max() - 1
    return out


@pytest.mark.parametrize("damage", ["bytes", "order", "merged", "dtype", "sums-nan", "sums-shape"])
def test_a_damaged_prior_state_is_rebuilt_never_trusted(cache, state, damage) -> None:
    ref = _continuous()
    target = ref.scores[1]
    expected = (_state_of(_method(ref)), _play(_method(ref), target))
    entries = _state_entries(cache)
    if damage == "bytes":  # the checksum sees it
        for paths in entries.values():
            data = bytearray(paths[0].read_bytes())
            data[-5] ^= 0x01
            paths[0].write_bytes(bytes(data))
    elif damage in ("order", "merged", "dtype"):  # sound entries under the right key, but not bucketize's grouping
        path = entries["bayesame_buckets"][0]
        entry = user_cache.load("bayesame_buckets", path.stem)
        (of_item,) = entry.arrays
        wrong = {"order": _swap_two_buckets(of_item), "dtype": of_item.astype(np.int32),
                 "merged": _merge_two_buckets(of_item)}[damage]
        meta = {"n_buckets": int(wrong.max()) + 1}
        assert user_cache.store("bayesame_buckets", path.stem, meta, [wrong])
    else:
        path = entries["bayesame_prior_sums"][0]
        (sums,) = user_cache.load("bayesame_prior_sums", path.stem).arrays
        wrong = np.where(np.arange(sums.size) == 3, np.nan, sums) if damage == "sums-nan" else sums[:-1]
        assert user_cache.store("bayesame_prior_sums", path.stem, {}, [wrong])
    state.clear()
    rebuilt = _method(ref)
    assert _same(_state_of(rebuilt), expected[0]) and _play(rebuilt, target) == expected[1]
    assert state == {"bytes": ["buckets", "sums"], "sums-nan": ["sums"], "sums-shape": ["sums"]}.get(damage, ["buckets"])
    state.clear()
    assert _same(_state_of(_method(ref)), expected[0]) and state == []  # stored sound again


def test_buckets_from_assignment_is_bucketize_or_an_error() -> None:
    from activeeval.gaussian import bucketize, buckets_from_assignment

    for phi, tol in ((_reference().scores.T, 0.0), (_continuous().scores.T, 0.05), (_continuous().scores.T, None)):
        b = bucketize(phi, tol)
        again = buckets_from_assignment(phi, b.of_item, tol)
        assert _same([again.of_item, again.counts, again.phi, *again.members], [b.of_item, b.counts, b.phi, *b.members])
        for wrong in (_swap_two_buckets(b.of_item), _merge_two_buckets(b.of_item), b.of_item[:-1], b.of_item + 1,
                      b.of_item - 1, np.where(b.of_item == 0, b.of_item.max() + 1, b.of_item)):
            with pytest.raises(ValueError):
                buckets_from_assignment(phi, wrong, tol)


def test_a_second_session_derives_no_prior_state(tmp_path, cache, state) -> None:
    ref = _reference()
    opts = {"reference": ref, "seed": 0, "hyperparameters": FIT.to_dict()}
    with Session.create(tmp_path / "a.aeval", **opts) as first:
        asked = [a.item_id for a in first.ask(3)]
    state.clear()
    clear_caches()  # as another process
    with Session.create(tmp_path / "b.aeval", **opts) as second:
        assert [a.item_id for a in second.ask(3)] == asked
    assert "buckets" not in state and "sums" not in state


def test_methods_on_one_reference_share_the_prior_state_in_the_process(cache, state, monkeypatch) -> None:
    """rank builds one method per model on the same reference: the buckets and Σ·N are derived once (with or without
    the user cache), shared read-only, and each method's results are those of a method built alone."""
    ref = _reference()
    target = 1.0 - ref.scores[2]
    monkeypatch.setenv(user_cache.CACHE_ENV, "off")
    alone = _play(_method(ref), target)
    state.clear()
    first, second = _method(ref, memo=True), _method(ref, memo=True)
    assert state == [] and second.buckets is first.buckets
    assert second.posterior.prior_cov_counts is first.posterior.prior_cov_counts
    with pytest.raises(ValueError, match="read-only"):
        first.buckets.phi[0, 0] = 2.0
    assert _play(first, target) == alone and _play(second, target) == alone
    BayesAME(ref, seed=5, hyperparameters={**FIT.to_dict(), "beta": 2.0}, calibration=None)  # another kernel
    assert state == ["sums"]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), binary=st.booleans())
def test_buckets_read_back_from_their_assignment_exactly(data, binary) -> None:
    """Property (the stored buckets' round trip): for any reference, bucketize's assignment alone gives back its
    buckets bit for bit, and an assignment with two buckets' labels swapped is refused."""
    from activeeval.gaussian import bucketize, buckets_from_assignment

    n_items = data.draw(st.integers(1, 40))
    n_refs = data.draw(st.integers(1, 5))
    if binary:
        phi = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0]), min_size=n_items * n_refs,
                                          max_size=n_items * n_refs))).reshape(n_items, n_refs)
        tol = None
    else:
        phi = np.array(data.draw(st.lists(st.sampled_from([0.0, 0.1, 0.1000001, 0.5, -0.0, 1.0]),
                                          min_size=n_items * n_refs, max_size=n_items * n_refs))).reshape(n_items, n_refs)
        tol = data.draw(st.sampled_from([None, 1e-3]))
    b = bucketize(phi, tol)
    back = buckets_from_assignment(phi, b.of_item, tol)
    for name in ("of_item", "counts", "phi"):
        x, y = getattr(b, name), getattr(back, name)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), name
    assert [m.tolist() for m in back.members] == [m.tolist() for m in b.members]
    if b.n_buckets >= 2:
        swapped = b.of_item.copy()
        swapped[b.of_item == 0], swapped[b.of_item == 1] = 1, 0
        with pytest.raises(ValueError):
            buckets_from_assignment(phi, swapped, tol)
