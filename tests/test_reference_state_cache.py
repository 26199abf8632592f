"""Issue 26, item 2: the default BayesAME's reference fit and calibration, derived once and kept in the user cache."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from activeeval import user_cache
from activeeval._cache import clear_caches
from activeeval.data.matrix import ScoreMatrix
from activeeval.methods import bayesame
from activeeval.methods.bayesame import BayesAME
from activeeval.session import Session

KINDS = ("bayesame_fit", "bayesame_calibration")


@pytest.fixture()
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(folder))
    clear_caches()  # the process's memo would answer before the disk
    yield folder
    clear_caches()


@pytest.fixture()
def derivations(monkeypatch) -> list[str]:
    """The reference fits (not a calibration's fold fits) and calibrations actually computed from here on."""
    calls: list[str] = []
    fit, cal = bayesame._fit_hyperparameters, bayesame.calibrate
    monkeypatch.setattr(bayesame, "_fit_hyperparameters",
                        lambda *a: (a[-1] is None and calls.append("fit")) or fit(*a))  # a[-1]: start
    monkeypatch.setattr(bayesame, "calibrate", lambda *a, **k: calls.append("calibration") or cal(*a, **k))
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
