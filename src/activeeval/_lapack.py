"""LAPACK's Cholesky routines without Python's global lock, for work that several threads share.

SciPy's wrappers (``scipy.linalg.lapack``) hold the GIL while LAPACK runs, so
threads that call them take turns. The same routines from SciPy's Cython LAPACK
table (``scipy.linalg.cython_lapack``), called through ctypes, release it: the
same library and the same arithmetic, bit for bit, so threads factorise at
once (the reference fit's pseudo-targets, :class:`activeeval.gaussian.LeaveOneOutNLML`).
Where the table lacks a routine or declares it otherwise (another SciPy build),
each function falls back to SciPy's wrapper: the same numbers, one thread at a time.

Every function takes a square float64 array in Fortran order (column-major:
LAPACK's) and works on its lower triangle in place.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from functools import cache

import numpy as np

__all__ = ["capsule_routine", "load", "potrf_lower", "potri_lower", "potrs_lower"]

_LOWER = ctypes.c_char(b"L")
#: How scipy's table must declare each routine (32-bit integers) for it to be called here.
_DECLARED = {"dpotrf": b"void (char *, int *,", "dpotri": b"void (char *, int *,",
             "dpotrs": b"void (char *, int *, int *,"}


@cache
def capsule_routine(name: str, declared: bytes, n_args: int) -> Callable[..., None] | None:
    """LAPACK's ``name`` from scipy's Cython table as a ctypes function of ``n_args`` pointers, or None.

    ``declared`` is how the table must declare it (the start of its C signature,
    e.g. ``b"void (char *, int *,"``: 32-bit integers); anything else is None.
    ctypes releases the GIL for the call.
    """
    try:
        from scipy.linalg import cython_lapack

        capsule = cython_lapack.__pyx_capi__[name]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        signature = get_name(capsule)
        if signature is None or not signature.startswith(declared):
            return None
        return ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * n_args)(get_pointer(capsule, signature))
    except Exception:  # pragma: no cover - depends on the scipy build
        return None


def load() -> bool:
    """Resolve the routines now (importing SciPy's LAPACK); True if all are called without the GIL.

    Call it before starting threads that use them: the first import of
    ``scipy.linalg`` loads SciPy's BLAS library, which activeeval's thread
    limit then takes over (:func:`activeeval._threads.refresh`), and that must
    not happen inside :func:`activeeval._threads.serial_blas`.
    """
    found = [capsule_routine(name, _DECLARED[name], n_args) for name, n_args in (("dpotrf", 5), ("dpotri", 5),
                                                                                 ("dpotrs", 8))]
    if not all(found):  # the fallbacks' module, imported here too
        import scipy.linalg.lapack  # noqa: F401
    return all(found)


def _square(a: np.ndarray) -> int:
    if a.dtype != np.float64 or a.ndim != 2 or a.shape[0] != a.shape[1] or not a.flags.f_contiguous:
        raise ValueError("expected a square float64 array in Fortran order")
    if not a.flags.writeable:
        raise ValueError("expected a writeable array (it is overwritten)")
    return int(a.shape[0])


def _in_place(name: str, a: np.ndarray, keyword: str) -> int:
    """LAPACK's ``name`` (``dpotrf`` or ``dpotri``: one lower triangle in, one out) on ``a`` in place; its ``info``.
    ``keyword``: the SciPy wrapper's option that lets it work in place (the fallback)."""
    n = _square(a)
    if n == 0:
        return 0
    routine = capsule_routine(name, _DECLARED[name], 5)
    if routine is not None:
        size, info = ctypes.c_int(n), ctypes.c_int(0)
        routine(ctypes.byref(_LOWER), ctypes.byref(size), a.ctypes.data, ctypes.byref(size), ctypes.byref(info))
        return int(info.value)
    from scipy.linalg import lapack

    options = {"lower": 1, keyword: 1, **({"clean": 0} if name == "dpotrf" else {})}
    out, info = getattr(lapack, name)(a, **options)
    if not np.shares_memory(out, a):  # pragma: no cover - f2py works in place on a Fortran array
        a[...] = out
    return int(info)


def potrf_lower(a: np.ndarray) -> int:
    """Cholesky factor L of ``a`` in place (its lower triangle; the rest left as it was); LAPACK's ``info``
    (0: done; k > 0: the leading minor of order k is not positive definite)."""
    return _in_place("dpotrf", a, "overwrite_a")


def potri_lower(factor: np.ndarray) -> int:
    """(L Lᵀ)⁻¹'s lower triangle in place of L's (the rest left as it was); LAPACK's ``info``."""
    return _in_place("dpotri", factor, "overwrite_c")


def potrs_lower(factor: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """(x, info): x solves L Lᵀ x = ``b`` (a vector) from the lower factor L; ``b`` is not changed."""
    n = _square(factor)
    x = np.array(b, dtype=float, copy=True)
    if x.shape != (n,):
        raise ValueError(f"expected a vector of length {n}, got shape {x.shape}")
    if n == 0:
        return x, 0
    routine = capsule_routine("dpotrs", _DECLARED["dpotrs"], 8)
    if routine is None:
        from scipy.linalg import lapack

        out, info = lapack.dpotrs(factor, b, lower=1)
        return np.asarray(out, dtype=float), int(info)
    size, one, info = ctypes.c_int(n), ctypes.c_int(1), ctypes.c_int(0)
    routine(ctypes.byref(_LOWER), ctypes.byref(size), ctypes.byref(one), factor.ctypes.data, ctypes.byref(size),
            x.ctypes.data, ctypes.byref(size), ctypes.byref(info))
    return x, int(info.value)
