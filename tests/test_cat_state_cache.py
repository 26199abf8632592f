"""Issue 26, item 2 for CAT: its item calibration and the references' errors (the pseudo-target runs behind its
error model and score interval), derived once per process and kept in the user cache, so that a second `rank`,
ranking session or CAT session on the same references reads them back instead of fitting them again."""

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
from activeeval.irt import continuous as irt
from activeeval.methods import cat as cat_module
from activeeval.methods.cat import ContinuousCAT, fit_calibration

KINDS = ("cat_calibration", "cat_reference_errors")


@pytest.fixture()
def cache(user_cache_folder) -> Path:
    return user_cache_folder  # (conftest.py: a fresh folder, the process's memos emptied)


class _Calls(list):
    """What was derived: "calibration" (an item fit on every reference: not the fits of the folds and edge
    groups inside the error runs, whose scores have fewer rows) and "errors" (the reference-error runs)."""

    rows = 0


@pytest.fixture()
def derivations(monkeypatch) -> _Calls:
    """The reference calibrations and reference-error runs actually computed from here on."""
    calls = _Calls()
    fit, runs = cat_module._calibrate, cat_module._learn_reference_errors

    def counted_fit(scores, *a, **k):
        if np.shape(scores)[0] >= calls.rows:
            calls.append("calibration")
        return fit(scores, *a, **k)

    def counted_runs(scores, *a, **k):
        calls.rows = np.shape(scores)[0]  # the folds inside have fewer
        calls.append("errors")
        try:
            return runs(scores, *a, **k)
        finally:
            calls.rows = 0

    monkeypatch.setattr(cat_module, "_calibrate", counted_fit)
    monkeypatch.setattr(cat_module, "_learn_reference_errors", counted_runs)
    return calls


def _reference(seed: int = 0, n_models: int = 24, n_items: int = 50) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    ability, difficulty = rng.normal(size=(n_models, 1)), rng.normal(size=(1, n_items))
    p = 1 / (1 + np.exp(difficulty - ability))
    scores = np.clip(p + rng.normal(scale=0.15, size=p.shape), 0, 1)
    return ScoreMatrix(scores, [f"m{j}" for j in range(n_models)], [f"i{k}" for k in range(n_items)], name="synth")


def _entries(cache: Path) -> dict[str, int]:
    return {kind: len(list((cache / kind).glob("*.aec"))) for kind in KINDS}


def _same_calibration(a: irt.Calibration, b: irt.Calibration) -> bool:
    meta_a, arrays_a = a.to_arrays()
    meta_b, arrays_b = b.to_arrays()
    return meta_a == meta_b and len(arrays_a) == len(arrays_b) and all(
        x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
        for x, y in zip(arrays_a, arrays_b, strict=True))


def _play(cat: ContinuousCAT, target: np.ndarray, n: int = 12) -> list[tuple[int, float, float]]:
    out = []
    for _ in range(n):
        item = int(cat.select())
        cat.observe(item, float(target[item]))
        est = cat.estimate()
        out.append((item, est.mean, est.var))
    return out


def test_a_second_fit_reads_the_cache_and_is_identical_to_a_fit_without_it(cache, derivations, monkeypatch):
    ref = _reference()
    with user_cache.disabled():
        cold = fit_calibration(ref.scores)
    assert derivations == ["calibration", "errors"] and _entries(cache) == {k: 0 for k in KINDS}
    clear_caches()
    first = fit_calibration(ref.scores)
    assert _entries(cache) == {k: 1 for k in KINDS}
    clear_caches()  # a new process: only the disk remembers
    derivations.clear()
    second = fit_calibration(ref.scores)
    assert derivations == []  # nothing fitted again
    assert _same_calibration(cold, first) and _same_calibration(cold, second)
    assert second.interval == cold.interval and second.error_scale == cold.error_scale


def test_a_cat_with_the_cache_plays_exactly_as_one_without(cache, derivations):
    ref = _reference(1)
    target = ref.scores[0] * 0.9 + 0.05
    with user_cache.disabled():
        cold = _play(ContinuousCAT(ref, seed=3), target)
    clear_caches()
    ContinuousCAT(ref, seed=3)  # stores
    clear_caches()
    derivations.clear()
    warm = _play(ContinuousCAT(ref, seed=3), target)
    assert derivations == [] and warm == cold


def test_every_setting_that_changes_them_is_in_the_key(cache, derivations):
    ref = _reference(2)
    fit_calibration(ref.scores)
    derivations.clear()
    fit_calibration(ref.scores, response="rasch")
    assert derivations == ["calibration", "errors"]
    derivations.clear()
    fit_calibration(ref.scores, local_error=False)  # the same item fit, other runs
    assert derivations == ["errors"]
    derivations.clear()
    fit_calibration(ref.scores[:, :-1])  # other scores
    assert derivations == ["calibration", "errors"]
    derivations.clear()
    fit_calibration(ref.scores, method="paper")  # the paper's: no learned error model, but the interval's runs
    assert derivations == ["calibration", "errors"]
    derivations.clear()
    cat_module.learn_reference_errors(ref.scores, error=(1.5, 0.01))  # the error model given
    assert derivations == ["errors"]


@pytest.mark.parametrize("damage", ["bytes", "shape", "numbers"])
def test_a_damaged_entry_is_rebuilt_never_trusted(cache, derivations, damage):
    ref = _reference(3)
    good = fit_calibration(ref.scores)
    (fit_entry,) = (cache / "cat_calibration").glob("*.aec")
    (errors_entry,) = (cache / "cat_reference_errors").glob("*.aec")
    if damage == "bytes":  # a disk error: the checksum catches it
        for path in (fit_entry, errors_entry):
            data = bytearray(path.read_bytes())
            data[-5] ^= 0xFF
            path.write_bytes(bytes(data))
    else:  # a well-formed entry of the wrong values: the decoder refuses it
        cal_meta, cal_arrays = good.to_arrays()
        if damage == "shape":
            cal_arrays = [cal_arrays[0][:-1], *cal_arrays[1:]]
            user_cache.store("cat_calibration", fit_entry.stem, cal_meta, cal_arrays)
            user_cache.store("cat_reference_errors", errors_entry.stem,
                             {"c": 1.0, "tau2": 0.0, "interval": {"checkpoints": [5]}}, [])
        else:
            user_cache.store("cat_calibration", fit_entry.stem, {**cal_meta, "k": float("nan")}, cal_arrays)
            user_cache.store("cat_reference_errors", errors_entry.stem,
                             {"c": -1.0, "tau2": 0.0, "interval": good.interval.to_dict()}, [])
    clear_caches()
    derivations.clear()
    again = fit_calibration(ref.scores)
    assert derivations == ["calibration", "errors"] and _same_calibration(again, good)
    clear_caches()
    derivations.clear()
    fit_calibration(ref.scores)  # stored anew
    assert derivations == []


def test_a_ranking_session_reopens_without_fitting_cat_again(tmp_path, cache, derivations):
    from activeeval.session.ranking import RankSession

    full = _reference(4, n_models=26)
    ref = full.drop_models(["m0", "m1"])
    s = RankSession.create(tmp_path / "r.aeval", ref, ["m0", "m1"], method="cat", seed=1)
    ask = s.ask()
    s.tell(ask.model, ask.item_id, float(full.scores[full.model_index(ask.model), full.item_index(ask.item_id)]))
    s.close()
    assert derivations.count("errors") == 1
    clear_caches()
    derivations.clear()
    again = RankSession.open(tmp_path / "r.aeval", reference=ref)
    assert again.n_scored == 1 and derivations == []  # the item fit read back; the errors stored in the session
    again.close()


def test_the_calibrations_arrays_are_read_only_when_shared(cache):
    cal = fit_calibration(_reference(5).scores)
    with pytest.raises(ValueError, match="read-only"):
        cal.b[0] = 0.0


finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@settings(max_examples=40, deadline=None)
@given(n_items=st.integers(1, 12), n_models=st.integers(1, 6), data=st.data())
def test_a_calibration_reads_back_exactly_from_its_arrays(n_items, n_models, data):
    def vec(n: int) -> np.ndarray:
        return np.array(data.draw(st.lists(finite, min_size=n, max_size=n)), dtype=np.float64)

    two_pl = data.draw(st.booleans())
    interval = data.draw(st.one_of(st.none(), st.just(irt.ScoreIntervalCalibration(
        (5, 10), (1.1, None), (1.5, 2.0), (None, 1.2), (9, 2, 2), True, (0.1, 0.2), (0.0, None)))))
    cal = irt.Calibration(
        b=vec(n_items), k=data.draw(st.floats(1e-6, 1e3)), theta_ref=vec(n_models), correlation=vec(n_items),
        pool=np.array(data.draw(st.lists(st.booleans(), min_size=n_items, max_size=n_items)), dtype=bool),
        low=vec(n_items), width=vec(n_items), scaled=data.draw(st.booleans()),
        method=data.draw(st.sampled_from(["consistent", "paper"])), k_factor=data.draw(st.floats(1e-3, 1e3)),
        error_scale=data.draw(st.floats(1e-3, 1e3)), error_floor=data.draw(st.floats(0, 1e3)),
        slopes=vec(n_items) if two_pl else None, noise=vec(n_items) if two_pl else None,
        b_scale=vec(n_items) if data.draw(st.booleans()) else None, interval=interval)
    meta, arrays = cal.to_arrays()
    back = irt.Calibration.from_arrays(json.loads(json.dumps(meta)), [a.copy() for a in arrays])
    assert _same_calibration(cal, back) and back.interval == cal.interval and back.k == cal.k
