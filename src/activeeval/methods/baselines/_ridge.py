"""scikit-learn's ``BayesianRidge``, reimplemented in the eigenbasis of the centred Gram matrix.

The algorithm, its defaults and its stopping rule are those of
``sklearn.linear_model.BayesianRidge`` (scikit-learn 1.9,
``sklearn/linear_model/_bayes.py``): with ``fit_intercept=True`` the design
X (n_samples × n_features) and the target y are centred, α starts at
1/(Var y + ε_mach) and λ at 1, and each of at most ``max_iter`` = 300 rounds

1. computes the posterior mean β = (Xᵀ X + (λ/α) I)⁻¹ Xᵀ y and the residual
   sum of squares sse = ‖y − X β‖²,
2. sets γ = Σ_k α e_k / (λ + α e_k) over the eigenvalues e_k of Xᵀ X, then
   λ ← (γ + 2 λ₁) / (‖β‖² + 2 λ₂) and α ← (n − γ + 2 α₁) / (sse + 2 α₂),
3. stops when (from the second round on) the change of β since the previous
   round has L1 norm < ``tol`` = 1e-3;

after the loop β is recomputed once with the final α and λ, and the
intercept is ȳ − x̄ᵀ β. α₁ = α₂ = λ₁ = λ₂ = 1e-6.

What differs is only how it is computed. scikit-learn takes an SVD of X and
multiplies matrices at every round; here the smaller of the two centred Gram
matrices, XᵀX (p × p, "primal", used when n > p) or XXᵀ (n × n, "dual",
used when n ≤ p, where scikit-learn also switches formula) is
eigendecomposed once and every round costs O(k) per target in its eigenbasis
(k = min(n, p)): with the projections z = Vᵀ Xᵀ y (primal) or w = Uᵀ y
(dual) and r = λ/α,

* primal: β = V c, c_k = z_k/(e_k + r), ‖β‖² = Σ c_k², sse = ‖y‖² − Σ c_k² (e_k + 2r);
* dual:   β = Xᵀ U a, a_k = w_k/(e_k + r), ‖β‖² = Σ e_k a_k², sse = r² Σ a_k².

The primal sse is a difference: when it falls below 10⁻³ ‖y‖² (a near
interpolation) it is recomputed from the residual vector y − X β instead,
as scikit-learn computes it.

The stopping rule needs the L1 norm of a change of β in the original basis,
which the eigenbasis does not preserve; its L2 norm (‖Δc‖ or (Σ e_k Δa_k²)^½)
bounds it from both sides, L2 ≤ L1 ≤ √p · L2, so β is formed (O(p k)) only
for the rounds that those bounds cannot decide. The rounds of many fits (any
number of targets y sharing X, and any number of designs) run together as
one vectorised loop, each fit with its own α, λ and number of rounds,
exactly as separate scikit-learn fits would stop (:func:`fit_many`).

Eigenvalues are clipped at 0 and those below max(n, p) · ε_mach · e_max are
set to 0 (they are round-off of the Gram product: the null space of X), with
the projections on those directions, which are round-off too.

For a sequence of designs that grow one row (primal) or one column (dual) at
a time, :class:`GramTracker` keeps the decomposition current through rank-one
updates (LAPACK's secular-equation solver ``dlaed9``, as in divide-and-conquer
eigensolvers: O(k²) plus one k × k matrix product instead of a new
eigendecomposition), falling back to ``numpy.linalg.eigh`` if that routine is
unavailable.

Why this module stays
---------------------
scikit-learn (an optional extra) would refit by an SVD per n and per target,
and numpy's ``eigh`` of every updated Gram matrix (the fallback above, the
"short exact eigenbasis solution") is a different eigensolver: both change
the last bits of every Bayes-AIPW and Bayes-RS-Learn result (the fallback by
up to ~4e-15 in R̂ and Var_R; ``activeeval backtest --dataset ifeval
--methods bayes-rs-learn,proeval --seeds 5 --json`` then prints an
EW-IRMSE of 75.67488841067319 instead of 75.67488841067298), which the golden
backtest (``benchmarks/golden.py``) forbids. The rank-one path also halves
the replays' cost: on IFEval (215 references × 541 items, 5 targets) the
Bayes-AIPW replay takes 1.1 s instead of 2.3 s and Bayes-RS-Learn 1.3 s
instead of 2.8 s; on MuSR (215 × 756) 2.0 s instead of 4.9 s and 1.7 s
instead of 3.3 s (best of 3, one BLAS thread, ``_dlaed9`` patched to None
for the fallback). The ctypes binding is one short function (:func:`_dlaed9`)
that checks the routine's C signature and returns None when it cannot be
loaded, so a scipy build without it only runs slower.

Posterior covariance
--------------------
:meth:`RidgeFit.quad` and :meth:`RidgeFit.sigma` use the proper posterior
covariance Σ_β = (α XᵀX + λ I)⁻¹ over the whole feature space, so along the
null space of X (always present when n ≤ p) the variance is the prior's 1/λ.
In the dual this is evaluated through the Woodbury identity,
dᵀ Σ_β d = (‖d‖² − Σ_k (u_kᵀ X d)² / (e_k + r)) / λ. scikit-learn ≥ 1.7
computes the same ``sigma_`` (it takes the full SVD when n_samples <
n_features); older versions (1.3–1.6) kept only the reduced SVD's directions
when n_samples ≤ n_features: the row space of X plus one arbitrary direction
of the null space with a zero singular value (a LAPACK artefact), giving a
variance 0 instead of 1/λ along the rest of the null space. The tests check
coefficients, intercept, α, λ and the number of rounds against scikit-learn in
both regimes, ``sigma_`` where the two definitions agree, and Σ_β against the
explicit inverse everywhere.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from activeeval._lapack import capsule_routine

__all__ = [
    "MAX_ITER",
    "TOL",
    "GramEigen",
    "GramTracker",
    "RidgeFit",
    "eigen_from_gram",
    "eigens_adding_columns",
    "eigens_adding_rows",
    "fit_bayesian_ridge",
    "fit_eigen",
    "fit_in_blocks",
    "fit_many",
    "rank_one_update",
]

MAX_ITER = 300
TOL = 1e-3
ALPHA_1 = ALPHA_2 = LAMBDA_1 = LAMBDA_2 = 1e-6
_EPS = float(np.finfo(np.float64).eps)
_SSE_CHECK = 1e-3  # primal: below this fraction of ||y||^2 the sse is taken from the residual vector
_MARGIN = 1e-6  # relative slack of the L1-norm bounds before computing the norm exactly


# ------------------------------------------------------------ decompositions
def _threshold(values: np.ndarray, size: int) -> np.ndarray:
    """Clip at 0 and zero what the Gram product cannot tell from 0 (below size · ε · e_max)."""
    values = np.maximum(values, 0.0)
    if values.size:
        values[values <= size * _EPS * values.max()] = 0.0
    return values


def eigen_from_gram(gram: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigendecomposition of a Gram matrix, with its round-off zeros made exact.

    Negative eigenvalues are clipped to 0 and eigenvalues below
    ``size`` · ε_mach · e_max (``size`` = the larger dimension of the design)
    are set to 0: the Gram product cannot resolve them from 0.
    """
    values, vectors = np.linalg.eigh(gram)
    return _threshold(values, size), vectors


@dataclass(frozen=True, eq=False)
class GramEigen:
    """The centred design and the eigendecomposition of its smaller Gram matrix.

    Attributes
    ----------
    xc : ndarray of shape (n_samples, n_features)
        The centred design X − x̄.
    x_offset : ndarray of shape (n_features,)
        x̄, the column means of X.
    dual : bool
        True: ``vectors`` diagonalise X_c X_cᵀ (n × n, used when n ≤ p);
        False: X_cᵀ X_c (p × p).
    values : ndarray of shape (k,)
        Eigenvalues, ≥ 0; exact zeros on the null space.
    vectors : ndarray of shape (k, k)
        Orthonormal eigenvectors (columns).
    """

    xc: np.ndarray
    x_offset: np.ndarray
    dual: bool
    values: np.ndarray
    vectors: np.ndarray

    @property
    def n_samples(self) -> int:
        return self.xc.shape[0]

    @property
    def n_features(self) -> int:
        return self.xc.shape[1]

    @property
    def null(self) -> np.ndarray:
        """Boolean mask of the zero eigenvalues."""
        return self.values == 0.0

    @classmethod
    def from_design(cls, x: np.ndarray, *, dual: bool | None = None) -> GramEigen:
        """Centre ``x`` (n_samples × n_features) and decompose X_c X_cᵀ if n ≤ p, else X_cᵀ X_c."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            raise ValueError(f"the design must be a non-empty 2-D array, got shape {x.shape}")
        x_offset = x.mean(axis=0)
        xc = x - x_offset
        if dual is None:
            dual = xc.shape[0] <= xc.shape[1]
        gram = xc @ xc.T if dual else xc.T @ xc
        return cls.from_gram(xc, x_offset, gram, dual=dual)

    @classmethod
    def from_gram(cls, xc: np.ndarray, x_offset: np.ndarray, gram: np.ndarray, *, dual: bool) -> GramEigen:
        """Wrap a centred design with its Gram matrix (e.g. one updated incrementally)."""
        values, vectors = eigen_from_gram(gram, max(xc.shape))
        return cls(xc, x_offset, bool(dual), values, vectors)

    @classmethod
    def from_eigen(
        cls, xc: np.ndarray, x_offset: np.ndarray, values: np.ndarray, vectors: np.ndarray, *, dual: bool
    ) -> GramEigen:
        """Wrap a centred design with a decomposition of its Gram matrix (e.g. from :class:`GramTracker`)."""
        return cls(xc, x_offset, bool(dual), _threshold(values, max(xc.shape)), vectors)

    # ----------------------------------------------------------- projections
    def project_targets(self, yc: np.ndarray) -> np.ndarray:
        """Eigenbasis coordinates of centred targets ``yc`` (T × n): z = Vᵀ X_cᵀ y or w = Uᵀ y, (T × k)."""
        if self.dual:
            return yc @ self.vectors
        z = (yc @ self.xc) @ self.vectors
        z[:, self.null] = 0.0  # Xᵀy has no component on the null space of X
        return z

    def project_features(self, d: np.ndarray) -> np.ndarray:
        """g = Vᵀ d (primal) or Uᵀ X_c d (dual) for the rows d of ``d`` (m × p), (m × k)."""
        if not self.dual:
            return d @ self.vectors
        g = (d @ self.xc.T) @ self.vectors
        g[:, self.null] = 0.0  # X_cᵀ u = 0 on the null space
        return g

    def to_coef(self, c: np.ndarray) -> np.ndarray:
        """Coefficients β (T × p) from eigenbasis coordinates ``c`` (T × k): V c or X_cᵀ U a."""
        if not self.dual:
            return c @ self.vectors.T
        a = np.where(self.null, 0.0, c)
        return (a @ self.vectors.T) @ self.xc


# -------------------------------------------------------- rank-one updates
def _dlaed9() -> Callable[..., None] | None:
    """LAPACK's ``dlaed9`` from scipy's Cython LAPACK table, or None if it cannot be loaded."""
    # 32-bit integers and doubles, as the routine is declared in scipy's table
    return capsule_routine("dlaed9", b"void (int *, int *, int *, int *,", 13)


def _secular(poles: np.ndarray, w: np.ndarray, rho: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Eigen-decomposition of diag(poles) + ρ w wᵀ (poles strictly increasing, ‖w‖ = 1, ρ > 0).

    Returns (eigenvalues ascending, eigenvectors as columns), or None if
    ``dlaed9`` is unavailable or fails.
    """
    routine = _dlaed9()
    if routine is None:
        return None
    k = poles.size
    dlamda = np.array(poles, dtype=np.float64)  # dlaed9 overwrites its inputs
    ww = np.array(w, dtype=np.float64)
    out = np.empty(k)
    work = np.empty((k, k), order="F")
    vecs = np.empty((k, k), order="F")
    kk, one, info = ctypes.c_int(k), ctypes.c_int(1), ctypes.c_int(0)
    r = ctypes.c_double(rho)
    ref = ctypes.byref
    routine(
        ref(kk), ref(one), ref(kk), ref(kk), out.ctypes.data, work.ctypes.data, ref(kk), ref(r),
        dlamda.ctypes.data, ww.ctypes.data, vecs.ctypes.data, ref(kk), ref(info),
    )  # fmt: skip
    if info.value != 0 or not np.all(np.isfinite(out)) or not np.all(np.isfinite(vecs)):
        return None
    return out, vecs


def rank_one_update(
    values: np.ndarray, vectors: np.ndarray, delta: np.ndarray, rho: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Eigen-decomposition of V diag(d) Vᵀ + ρ δ δᵀ (ρ > 0) from that of V diag(d) Vᵀ.

    The divide-and-conquer merge step of LAPACK (``dlaed2`` deflation, then
    the ``dlaed9`` secular-equation solver with Gu & Eisenstat's
    orthogonality-preserving eigenvectors): with ξ = Vᵀδ, eigenpairs whose
    ξ component is negligible, or that are (nearly) tied with the next one
    after a rotation, stay as they are; the rest solve a secular equation.
    ``values`` must be ascending. Returns (values ascending, vectors), or
    None if the LAPACK routine is unavailable (the caller then decomposes
    the updated matrix directly).
    """
    xi = vectors.T @ delta
    norm2 = float(xi @ xi)
    if norm2 == 0.0 or rho == 0.0:
        return values, vectors
    rho_eff = rho * norm2
    z = xi / math.sqrt(norm2)
    d = np.array(values, dtype=np.float64)
    tol = 8.0 * _EPS * max(float(np.abs(d).max()), rho_eff)
    live = np.flatnonzero(rho_eff * np.abs(z) > tol)
    if live.size == 0:
        return values, vectors
    v = vectors
    keep = live
    if live.size > 1:
        zl, dl = z[live], d[live]
        tau = np.hypot(zl[1:], zl[:-1])
        if np.any(np.abs((dl[1:] - dl[:-1]) * (zl[1:] / tau) * (zl[:-1] / tau)) <= tol):
            keep, v = _deflate_close(d, v, z, live, tol)
    w = z[keep]
    w_norm2 = float(w @ w)
    solved = _secular(d[keep], w / math.sqrt(w_norm2), rho_eff * w_norm2)
    if solved is None:
        return None
    new_values, s = solved
    if keep.size == d.size:
        d, v = new_values, v @ s
    else:
        v = v.copy() if v is vectors else v
        d[keep] = new_values
        v[:, keep] = v[:, keep] @ s
        if np.any(np.diff(d) < 0):
            order = np.argsort(d, kind="stable")
            d, v = d[order], v[:, order]
    return d, v


def _deflate_close(
    d: np.ndarray, vectors: np.ndarray, z: np.ndarray, live: np.ndarray, tol: float
) -> tuple[np.ndarray, np.ndarray]:
    """``dlaed2``'s second deflation: rotate pairs of (nearly) equal eigenvalues onto one ξ component.

    Updates ``d`` and ``z`` in place; returns (indices kept for the secular
    equation, rotated copy of the vectors).
    """
    v = vectors.copy()
    keep: list[int] = []
    zs = z.tolist()
    ds = d.tolist()
    prev = int(live[0])
    for j in live[1:].tolist():
        s, c = zs[prev], zs[j]
        tau = math.hypot(c, s)
        c, s = c / tau, -s / tau
        if abs((ds[j] - ds[prev]) * c * s) <= tol:
            zs[j], zs[prev] = tau, 0.0
            vp, vj = v[:, prev].copy(), v[:, j].copy()
            v[:, prev] = c * vp + s * vj
            v[:, j] = c * vj - s * vp
            t = ds[prev] * c * c + ds[j] * s * s
            ds[j] = ds[prev] * s * s + ds[j] * c * c
            ds[prev] = t
        else:
            keep.append(prev)
        prev = j
    keep.append(prev)
    d[:] = ds
    z[:] = zs
    return np.array(keep, dtype=np.intp), v


class GramTracker:
    """A Gram matrix and its eigendecomposition, kept current under rank-one additions.

    Parameters
    ----------
    gram : ndarray of shape (k, k)
        The starting Gram matrix (copied), decomposed with ``numpy.linalg.eigh``.
    refresh : int
        Decompose the accumulated matrix afresh every ``refresh`` updates, so
        round-off of the updates cannot accumulate.
    """

    def __init__(self, gram: np.ndarray, *, refresh: int = 64) -> None:
        self.gram = np.array(gram, dtype=np.float64)
        self.values, self.vectors = np.linalg.eigh(self.gram)
        self.refresh = int(refresh)
        self._since = 0

    def add(self, delta: np.ndarray, rho: float = 1.0) -> None:
        """Add ρ δ δᵀ (ρ ≥ 0)."""
        self.gram += rho * np.outer(delta, delta)
        self._since += 1
        updated = None
        if self._since < self.refresh:
            updated = rank_one_update(self.values, self.vectors, delta, rho)
        if updated is None:
            self.values, self.vectors = np.linalg.eigh(self.gram)
            self._since = 0
        else:
            self.values, self.vectors = updated


def eigens_adding_rows(x: np.ndarray, sizes: Iterable[int]) -> Iterator[GramEigen]:
    """:meth:`GramEigen.from_design` of ``x[:n]`` for the consecutive ``sizes`` n (samples added one by one).

    The dual n × n Gram matrix from scratch while n ≤ p; then the p × p one,
    from scratch at the first such n and then by one rank-one update per row
    (Welford: X_cᵀX_c gains ((n − 1)/n) δδᵀ, δ = x_n − x̄_{n−1}).
    """
    tracker: GramTracker | None = None
    prev_offset = None  # x̄ of the rows before the current one
    for n in sizes:
        rows = x[:n]
        x_offset = rows.mean(axis=0)
        xc = rows - x_offset
        if n <= x.shape[1]:
            yield GramEigen.from_gram(xc, x_offset, xc @ xc.T, dual=True)
        else:
            if tracker is None:
                tracker = GramTracker(xc.T @ xc)
            else:
                tracker.add(rows[-1] - prev_offset, (n - 1) / n)
            yield GramEigen.from_eigen(xc, x_offset, tracker.values, tracker.vectors, dual=False)
        prev_offset = x_offset


def eigens_adding_columns(x: np.ndarray, sizes: Iterable[int]) -> Iterator[GramEigen]:
    """:meth:`GramEigen.from_design` of ``x[:, :n]`` for the consecutive ``sizes`` n (features added one by one).

    The primal n × n Gram matrix from scratch while n < n_samples; then the
    dual one, from scratch at the first such n and then by one rank-one
    update per column (a new feature adds its centred column's outer
    product to X_c X_cᵀ).
    """
    tracker: GramTracker | None = None
    for n in sizes:
        cols = x[:, :n]
        x_offset = cols.mean(axis=0)
        xc = cols - x_offset
        if x.shape[0] > n:
            yield GramEigen.from_gram(xc, x_offset, xc.T @ xc, dual=False)
        else:
            if tracker is None:
                tracker = GramTracker(xc @ xc.T)
            else:
                tracker.add(xc[:, -1])
            yield GramEigen.from_eigen(xc, x_offset, tracker.values, tracker.vectors, dual=True)


# -------------------------------------------------------------------- fits
@dataclass(frozen=True, eq=False)
class RidgeFit:
    """Bayesian ridge fits of T targets on one design (scikit-learn's attributes, one row per target).

    Attributes
    ----------
    eigen : GramEigen
    y_offset : ndarray of shape (T,)
        ȳ of each target.
    alpha, lambda_ : ndarrays of shape (T,)
        Noise and weight precisions (scikit-learn's ``alpha_``, ``lambda_``).
    n_iter : ndarray of int, shape (T,)
        Rounds run (``n_iter_``).
    coef_eig : ndarray of shape (T, k)
        Posterior means in the eigenbasis (c or a, see the module docstring).
    """

    eigen: GramEigen
    y_offset: np.ndarray
    alpha: np.ndarray
    lambda_: np.ndarray
    n_iter: np.ndarray
    coef_eig: np.ndarray

    @cached_property
    def coef(self) -> np.ndarray:
        """Posterior means β, (T × p) (``coef_``)."""
        return self.eigen.to_coef(self.coef_eig)

    @property
    def intercept(self) -> np.ndarray:
        """ȳ − x̄ᵀ β, (T,) (``intercept_``)."""
        return self.y_offset - self.coef @ self.eigen.x_offset

    def linear(self, g: np.ndarray) -> np.ndarray:
        """dᵀ β for projected rows ``g`` = ``eigen.project_features(d)`` (m × k): (T × m)."""
        return self.coef_eig @ g.T

    def quad(self, g: np.ndarray, d_sq: np.ndarray | None = None) -> np.ndarray:
        """dᵀ Σ_β d with the proper Σ_β = (α X_cᵀX_c + λ I)⁻¹, for each target and row: (T × m).

        ``g`` = ``eigen.project_features(d)``; the dual also needs ``d_sq`` = ‖d‖²
        (the Woodbury form, (‖d‖² − Σ_k g_k²/(e_k + r)) / λ). Clipped at 0.
        """
        e = self.eigen.values
        g2 = g * g
        if not self.eigen.dual:
            return (1.0 / (self.alpha[:, None] * e + self.lambda_[:, None])) @ g2.T
        if d_sq is None:
            raise ValueError("the dual form needs d_sq = ||d||^2")
        r = self.lambda_ / self.alpha
        inner = (1.0 / (e + r[:, None])) @ g2.T
        return np.maximum(np.asarray(d_sq)[None, :] - inner, 0.0) / self.lambda_[:, None]

    def sigma(self, target: int = 0) -> np.ndarray:
        """The full posterior covariance Σ_β (p × p) of one target."""
        ev = self.eigen
        a, lam = float(self.alpha[target]), float(self.lambda_[target])
        if not ev.dual:
            return (ev.vectors / (a * ev.values + lam)) @ ev.vectors.T
        keep = ~ev.null
        b = ev.xc.T @ ev.vectors[:, keep]
        inner = (b / (ev.values[keep] + lam / a)) @ b.T
        return (np.eye(ev.n_features) - inner) / lam

    def predict(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """scikit-learn's ``predict(x, return_std=True)``, squared: (mean, variance), each (T × m).

        The mean is ȳ + (x − x̄)ᵀβ (= xᵀβ + intercept), the variance
        (x − x̄)ᵀ Σ_β (x − x̄) + 1/α with the proper Σ_β.
        """
        x = np.atleast_2d(np.asarray(x, dtype=np.float64))
        d = x - self.eigen.x_offset
        g = self.eigen.project_features(d)
        mean = self.y_offset[:, None] + self.linear(g)  # = x β + (ȳ − x̄ᵀβ)
        var = self.quad(g, np.einsum("ij,ij->i", d, d))
        return mean, var + (1.0 / self.alpha)[:, None]


@dataclass(frozen=True)
class _Settings:
    max_iter: int = MAX_ITER
    tol: float = TOL
    alpha_1: float = ALPHA_1
    alpha_2: float = ALPHA_2
    lambda_1: float = LAMBDA_1
    lambda_2: float = LAMBDA_2


def fit_bayesian_ridge(x: np.ndarray, y: np.ndarray, **settings: float) -> RidgeFit:
    """``BayesianRidge(**settings).fit(x, y)`` for each row of ``y`` ((n,) or (T, n)) sharing ``x``.

    ``settings``: max_iter, tol, alpha_1, alpha_2, lambda_1, lambda_2
    (scikit-learn's names and defaults).
    """
    return fit_eigen(GramEigen.from_design(x), y, **settings)


def fit_eigen(eigen: GramEigen, y: np.ndarray, **settings: float) -> RidgeFit:
    """Fit every row of ``y`` (T × n_samples, or (n_samples,)) on the decomposed design ``eigen``."""
    return fit_many([eigen], [y], **settings)[0]


def fit_many(eigens: Sequence[GramEigen], ys: Sequence[np.ndarray], **settings: float) -> list[RidgeFit]:
    """Fit the targets ``ys[i]`` (T_i × n_i) on the designs ``eigens[i]``, all rounds vectorised together.

    Each fit is exactly :func:`fit_eigen` of its own (the rounds of every
    target follow scikit-learn's, including where it stops); running them
    together only shares the Python overhead of the loop.
    """
    opts = _Settings(**settings)  # type: ignore[arg-type]
    groups = []
    for eigen, y in zip(eigens, ys, strict=True):
        y = np.atleast_2d(np.asarray(y, dtype=np.float64))
        if y.shape[1] != eigen.n_samples:
            raise ValueError(f"y has {y.shape[1]} samples but the design has {eigen.n_samples}")
        y_offset = y.mean(axis=1)
        yc = y - y_offset[:, None]
        groups.append(_Group(eigen, y_offset, yc, eigen.project_targets(yc), y.var(axis=1)))
    results = _em_many(groups, opts)
    return [
        RidgeFit(g.eigen, g.y_offset, alpha, lam, n_iter, coef)
        for g, (alpha, lam, n_iter, coef) in zip(groups, results, strict=True)
    ]


def fit_in_blocks(
    eigens: Iterable[GramEigen], targets: Callable[[GramEigen], np.ndarray], block: int
) -> Iterator[RidgeFit]:
    """:func:`fit_many` of ``targets(eigen)`` on each design, ``block`` consecutive designs at a time.

    Yields the fits in the order of ``eigens``; ``block`` bounds the designs
    held at once.
    """
    pending: list[GramEigen] = []
    for eigen in eigens:
        pending.append(eigen)
        if len(pending) == block:
            yield from fit_many(pending, [targets(e) for e in pending])
            pending = []
    if pending:
        yield from fit_many(pending, [targets(e) for e in pending])


@dataclass(frozen=True, eq=False)
class _Group:
    eigen: GramEigen
    y_offset: np.ndarray
    yc: np.ndarray
    proj: np.ndarray
    y_var: np.ndarray


def _em_many(
    groups: Sequence[_Group], opts: _Settings
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """The evidence-maximisation rounds of ``BayesianRidge.fit`` for every target of every group at once.

    Every (group, target) is a row (:class:`_Rows`). The loop runs in the
    eigenbasis only and records α and λ at every round (:func:`_em_rounds`).
    A row leaves the loop once its L1 bounds prove it converged; the rounds
    where the bounds could not decide are checked afterwards with the exact
    L1 norm (:func:`_first_exact_pass`), and the first round that passes is
    where scikit-learn stops. Rows whose primal sse needs the residual
    vector go to :func:`_em_exact`.

    Returns (alpha, lambda, n_iter, coef_eig) per group.
    """
    rows = _Rows.stack(groups)
    h_alpha, h_lam, certain, slow, cand_rows, cand_rounds = _em_rounds(rows, opts)
    # rows never proven converged ran every round; slow rows (redone below) may have left earlier
    stop = np.where(certain >= 0, certain, min(opts.max_iter, len(h_alpha) - 1) - 1)
    if cand_rows:
        _first_exact_pass(groups, rows.starts, h_alpha, h_lam, slow, cand_rows, cand_rounds, stop, opts.tol)
    n_rows = rows.e.shape[0]
    final_alpha = h_alpha[stop + 1, np.arange(n_rows)]
    final_lam = h_lam[stop + 1, np.arange(n_rows)]
    n_iter = stop + 1

    out = []
    for gi, g in enumerate(groups):
        lo, hi = rows.starts[gi], rows.starts[gi + 1]
        a, lm, ni = final_alpha[lo:hi].copy(), final_lam[lo:hi].copy(), n_iter[lo:hi].copy()
        redo = np.flatnonzero(slow[lo:hi])
        if redo.size:
            a[redo], lm[redo], ni[redo] = _em_exact(g.eigen, g.proj[redo], g.yc[redo], g.y_var[redo], opts)
        coef = g.proj / (g.eigen.values + (lm / a)[:, None])
        out.append((a, lm, ni, coef))
    return out


@dataclass(frozen=True, eq=False)
class _Rows:
    """Every (group, target) of :func:`_em_many` as one row; rows ``starts[i]:starts[i + 1]`` are group i's.

    Eigenvalues ``e`` and squared projections ``p2`` are padded with zeros to
    a common width (a zero direction adds nothing to any sum).
    """

    starts: np.ndarray
    e: np.ndarray
    p2: np.ndarray
    yy: np.ndarray  # ||y_c||^2
    y_var: np.ndarray
    n_samples: np.ndarray
    dual: np.ndarray
    sqrt_p: np.ndarray  # sqrt(n_features), the L1 / L2 bound

    @classmethod
    def stack(cls, groups: Sequence[_Group]) -> _Rows:
        sizes = [g.proj.shape[0] for g in groups]
        starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp)
        n_rows = int(starts[-1])
        width = max(g.eigen.values.size for g in groups)
        rows = cls(
            starts, np.zeros((n_rows, width)), np.zeros((n_rows, width)), np.empty(n_rows), np.empty(n_rows),
            np.empty(n_rows), np.empty(n_rows, dtype=bool), np.empty(n_rows),
        )  # fmt: skip
        for g, lo, hi in zip(groups, starts[:-1], starts[1:], strict=True):
            k = g.eigen.values.size
            rows.e[lo:hi, :k] = g.eigen.values
            rows.p2[lo:hi, :k] = g.proj * g.proj
            rows.yy[lo:hi] = np.einsum("ij,ij->i", g.yc, g.yc)
            rows.y_var[lo:hi] = g.y_var
            rows.n_samples[lo:hi] = g.eigen.n_samples
            rows.dual[lo:hi] = g.eigen.dual
            rows.sqrt_p[lo:hi] = math.sqrt(g.eigen.n_features)
        return rows


def _em_rounds(
    rows: _Rows, opts: _Settings
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """The rounds of every row in the eigenbasis, until each is proven converged (or slow, or out of rounds).

    Returns α and λ at the start of each round (rounds + 1, rows), the round
    at which the bounds proved each row converged (−1: never), the rows whose
    primal sse needs the residual vector, and the (rows, rounds) that the
    bounds could not decide.
    """
    n_rows = rows.e.shape[0]
    tol = opts.tol
    alpha = 1.0 / (rows.y_var + _EPS)
    lam = np.ones(n_rows)
    hist_alpha, hist_lam = [alpha.copy()], [lam.copy()]  # values at the start of each round
    certain = np.full(n_rows, -1)  # round at which the bounds prove convergence
    slow = np.zeros(n_rows, dtype=bool)
    cand_rows: list[np.ndarray] = []
    cand_rounds: list[np.ndarray] = []
    active = np.arange(n_rows)
    e, p2, dl, sp = rows.e, rows.p2, rows.dual, rows.sqrt_p
    inv_old = np.empty(rows.e.shape)
    for it in range(opts.max_iter):
        if active.size == 0:
            break
        r = lam[active] / alpha[active]
        inv = 1.0 / (e + r[:, None])
        gamma = np.einsum("ij,ij->i", e, inv)
        q = p2 * inv * inv
        s0 = q.sum(axis=1)
        s1 = np.einsum("ij,ij->i", e, q)
        coef_sq = np.where(dl, s1, s0)
        sse = np.where(dl, r * r * s0, rows.yy[active] - s1 - 2.0 * r * s0)
        low = ~dl & (sse < _SSE_CHECK * rows.yy[active])
        lam[active] = (gamma + 2.0 * opts.lambda_1) / (coef_sq + 2.0 * opts.lambda_2)
        alpha[active] = (rows.n_samples[active] - gamma + 2.0 * opts.alpha_1) / (sse + 2.0 * opts.alpha_2)
        hist_alpha.append(alpha.copy())
        hist_lam.append(lam.copy())
        drop = low
        if it != 0:
            w = p2 * (inv - inv_old) ** 2
            l2 = np.sqrt(np.where(dl, np.einsum("ij,ij->i", e, w), w.sum(axis=1)))
            sure = sp * l2 < tol * (1.0 - _MARGIN)
            maybe = ~sure & (l2 < tol * (1.0 + _MARGIN))
            if maybe.any():
                cand_rows.append(active[maybe])
                cand_rounds.append(np.full(int(maybe.sum()), it))
            certain[active[sure]] = it
            drop = drop | sure
        slow[active[low]] = True
        if drop.any():
            keep = ~drop
            active, e, p2, dl, sp, inv = active[keep], e[keep], p2[keep], dl[keep], sp[keep], inv[keep]
        inv_old = inv
    return np.array(hist_alpha), np.array(hist_lam), certain, slow, cand_rows, cand_rounds


def _first_exact_pass(
    groups: Sequence[_Group],
    starts: np.ndarray,
    h_alpha: np.ndarray,
    h_lam: np.ndarray,
    slow: np.ndarray,
    cand_rows: list[np.ndarray],
    cand_rounds: list[np.ndarray],
    stop: np.ndarray,
    tol: float,
) -> None:
    """Lower ``stop`` (in place) to the first undecided round whose exact ‖Δβ‖₁ is below ``tol``.

    One matrix product per group; slow rows are left to :func:`_em_exact`.
    """
    rows, rounds = np.concatenate(cand_rows), np.concatenate(cand_rounds)
    ok = ~slow[rows]
    rows, rounds = rows[ok], rounds[ok]
    passed = np.zeros(rows.size, dtype=bool)
    group_of = np.searchsorted(starts, rows, side="right") - 1
    for gi in np.unique(group_of):
        sel = np.flatnonzero(group_of == gi)
        g = groups[gi]
        ev = g.eigen.values
        proj = g.proj[rows[sel] - starts[gi]]
        r_now = h_lam[rounds[sel], rows[sel]] / h_alpha[rounds[sel], rows[sel]]
        r_prev = h_lam[rounds[sel] - 1, rows[sel]] / h_alpha[rounds[sel] - 1, rows[sel]]
        delta = proj / (ev + r_now[:, None]) - proj / (ev + r_prev[:, None])
        passed[sel] = np.abs(g.eigen.to_coef(delta)).sum(axis=1) < tol
    # the first passing round of a row, if before its proven one
    np.minimum.at(stop, rows[passed], rounds[passed])


def _em_exact(
    eigen: GramEigen, proj: np.ndarray, yc: np.ndarray, y_var: np.ndarray, opts: _Settings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rounds of ``BayesianRidge.fit`` for targets whose sse needs the residual vector.

    Same as :func:`_em_many` but with β's change checked as it goes and, in
    the primal, an sse below ``_SSE_CHECK`` · ‖y‖² recomputed as
    ‖y − X β‖² (the difference ‖y‖² − Σ c_k² (e_k + 2r) loses too many
    digits there). Returns (alpha, lambda, n_iter).
    """
    e = eigen.values
    dual = eigen.dual
    n_samples = float(eigen.n_samples)
    sqrt_p = math.sqrt(float(eigen.n_features))
    yy = np.einsum("ij,ij->i", yc, yc)
    n_targets = proj.shape[0]
    alpha = 1.0 / (y_var + _EPS)
    lam = np.ones(n_targets)
    n_iter = np.full(n_targets, opts.max_iter, dtype=np.int64)
    active = np.arange(n_targets)
    c_old = np.empty((0, e.size))
    for it in range(opts.max_iter):
        if active.size == 0:
            break
        a, lm, p = alpha[active], lam[active], proj[active]
        r = lm / a
        c = p / (e + r[:, None])
        c2 = c * c
        if dual:
            coef_sq = c2 @ e
            sse = r * r * c2.sum(axis=1)
        else:
            coef_sq = c2.sum(axis=1)
            sse = yy[active] - c2 @ e - 2.0 * r * coef_sq
            low = sse < _SSE_CHECK * yy[active]
            if low.any():
                resid = yc[active[low]] - eigen.to_coef(c[low]) @ eigen.xc.T
                sse[low] = np.einsum("ij,ij->i", resid, resid)
        gamma = (e / (e + r[:, None])).sum(axis=1)
        lam[active] = (gamma + 2.0 * opts.lambda_1) / (coef_sq + 2.0 * opts.lambda_2)
        alpha[active] = (n_samples - gamma + 2.0 * opts.alpha_1) / (sse + 2.0 * opts.alpha_2)
        if it != 0:
            done = _converged(eigen, c - c_old, opts.tol, sqrt_p)
            if done.any():
                n_iter[active[done]] = it + 1
                active, c = active[~done], c[~done]
        c_old = c
    return alpha, lam, n_iter


def _converged(eigen: GramEigen, delta: np.ndarray, tol: float, sqrt_p: float) -> np.ndarray:
    """scikit-learn's test ‖Δβ‖₁ < tol for changes ``delta`` given in the eigenbasis (rows)."""
    d2 = delta * delta
    l2 = np.sqrt(d2 @ eigen.values if eigen.dual else d2.sum(axis=1))
    done = sqrt_p * l2 < tol * (1.0 - _MARGIN)
    unsure = ~done & (l2 < tol * (1.0 + _MARGIN))
    if unsure.any():
        l1 = np.abs(eigen.to_coef(delta[unsure])).sum(axis=1)
        done[unsure] = l1 < tol
    return done
