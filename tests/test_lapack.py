"""activeeval._lapack: LAPACK's Cholesky routines without the GIL, the same numbers as SciPy's wrappers."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from scipy.linalg import lapack

from activeeval import _lapack
from activeeval._lapack import load, potrf_lower, potri_lower, potrs_lower


def spd(n: int, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).normal(size=(n, n))
    return a @ a.T / max(n, 1) + np.eye(n)


@pytest.fixture(params=["table", "fallback"])
def path(request, monkeypatch):
    """Each test on both paths: scipy's Cython table through ctypes, and scipy's wrappers (as where it is missing)."""
    if request.param == "fallback":
        monkeypatch.setattr(_lapack, "capsule_routine", lambda *args: None)
    else:
        assert load(), "this scipy's Cython LAPACK table declares the routines as expected"
    return request.param


@pytest.mark.parametrize("n", [1, 5, 64, 201])
def test_factor_inverse_and_solve_are_scipys_to_the_last_bit(path: str, n: int) -> None:
    k = spd(n, n)
    b = np.random.default_rng(1).normal(size=n)
    ours = np.array(k, order="F")  # a copy: a 1 × 1 array is already in Fortran order
    assert potrf_lower(ours) == 0
    theirs, info = lapack.dpotrf(k, lower=1, clean=0)
    lower = np.tril_indices(n)
    assert info == 0 and np.array_equal(ours[lower], theirs[lower])
    x, info = potrs_lower(ours, b)
    assert info == 0 and np.array_equal(x, lapack.dpotrs(theirs, b, lower=1)[0])
    assert np.allclose(k @ x, b)
    assert potri_lower(ours) == 0
    inv, info = lapack.dpotri(theirs, lower=1)
    assert info == 0 and np.array_equal(ours[lower], inv[lower])
    assert np.allclose(np.tril(ours) + np.tril(ours, -1).T, np.linalg.inv(k))


def test_not_positive_definite_is_lapacks_info(path: str) -> None:
    k = np.asfortranarray(np.diag([1.0, -1.0, 2.0]))
    assert potrf_lower(k) == 2  # the leading minor of order 2


def test_bad_arrays_are_refused_and_empty_ones_are_done(path: str) -> None:
    with pytest.raises(ValueError, match="Fortran order"):
        potrf_lower(np.ascontiguousarray(spd(3, 0)[:, :2]))
    with pytest.raises(ValueError, match="Fortran order"):
        potrf_lower(np.ones((3, 3), dtype=np.float32, order="F"))
    frozen = np.asfortranarray(spd(3, 0))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        potri_lower(frozen)
    with pytest.raises(ValueError, match="length 3"):
        potrs_lower(np.asfortranarray(spd(3, 0)), np.ones(2))
    empty = np.zeros((0, 0), order="F")
    assert potrf_lower(empty) == 0 and potri_lower(empty) == 0
    assert potrs_lower(empty, np.zeros(0))[0].shape == (0,)


def test_threads_factorise_at_once_with_the_same_numbers() -> None:
    """Many threads on many matrices give each matrix what one thread gives it (the routines keep no state)."""
    mats = [spd(120, s) for s in range(8)]
    alone = []
    for k in mats:
        a = np.array(k, order="F")
        potrf_lower(a)
        potri_lower(a)
        alone.append(a)
    together: list[np.ndarray | None] = [None] * len(mats)

    def work(i: int) -> None:
        a = np.array(mats[i], order="F")
        potrf_lower(a)
        potri_lower(a)
        together[i] = a

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(mats))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))
