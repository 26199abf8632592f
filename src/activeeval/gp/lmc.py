"""The multi-target BayesAME maths: a linear model of coregionalisation over buckets (SPEC.md §2, paper §3.2).

T targets share the buckets of the reference vectors φ_b (B of them). Target
t's bucket abilities are θ^t = μ + Σ_l W[t, l] u_l with independent latent
vectors u_l ~ N(0, K_l), so the stacked prior is N(μ ⊗ 1, Σ_l (w_l w_lᵀ) ⊗ K_l);
an item of bucket b scored by target t is s ~ N(θ^t_b, N_b σ²).

:class:`LMCPosterior` is the exact posterior, updated incrementally in
observation space (nothing of size (T·B)² is ever formed):

* the Cholesky factor L of the Gram matrix G of the n observations grows by
  one row per observation (a triangular solve, O(n²));
* the new row of V = L⁻¹ Cov(observations, θ) (T × B) is found without storing
  V, through the kernel rows of the B_obs buckets observed so far, one row
  per kernel (latents on one kernel the caller supplies, a
  :class:`~activeeval.gp.kernels.Given`, share theirs):
  O(n² + Σ_g min(L_g, T)·B_obs·B) over the kernel groups g of L_g latents;
  the posterior variances of every (target, bucket),
  Σ|C = Σ − VᵀV, are kept up to date by subtracting its squares, and the
  information gain of target t costs the same;
* Q = V U (each target's unobserved-count-weighted sum) and the whitened
  residuals y = L⁻¹ r give every target's R̂ and Var(R), and the T × T
  cross-covariance of the full-benchmark scores, in O(n·T²).

After a change of hyperparameters the state is rebuilt from the observations
(O(n³ + T·G²·B_obs²·B) with G shared kernels): the refit schedule of
:class:`~activeeval.methods.bayesame_multi.BayesAMEMulti` keeps that rare.

:func:`nlml` is the negative log marginal likelihood of the observations and
its analytic gradient with respect to every hyperparameter (α_l, β_l, W, σ²)
in NumPy — no autodiff dependency: the gradient is ½ tr((G⁻¹ − aaᵀ) ∂G) with
∂G elementwise products of the kernels, so an autodiff library would buy
nothing but an install of several hundred MB. :func:`adamw_fit` minimises it
with AdamW as the paper does (App. A.4), clipping α, β and σ² from below.

Each latent's kernel is a kernel object (:mod:`activeeval.gp.kernels`) with an
amplitude α and at most one more hyperparameter β: :class:`SquaredExponential`
(Eq. 1, on the distance per reference model), :class:`Matern32`, a
:class:`Given` kernel of the caller's, or any :class:`Kernel` declaring
``("alpha",)`` or ``("alpha", "beta")``. The names "se", "matern32", "fixed"
and "level" (:data:`LATENT_KERNELS`) are how :class:`LMCParams` is written in
session files and options; they are mapped to objects at that edge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from activeeval.exceptions import ConfigurationError
from activeeval.gp.kernels import Given, Kernel, Matern32, SquaredExponential

__all__ = ["FitRecord", "LMCParams", "LMCPosterior", "adamw_fit", "coupled", "fit_correlations", "icm_nlml",
           "initial_params", "nlml"]

#: The paper's lower clip of α, β and σ² after each AdamW update (App. A.4).
CLIP = 1e-4
#: The range of a latent kernel's α and β (value space).
LATENT_BOUNDS = (CLIP, 1e12)
#: The stored names of the latent kernels (session files, options), each at α = β = 1: "se", Eq. 1 (the LMC gives
#: it the distance per reference model, so ``n_refs`` is 1); "matern32", the Matérn-3/2 kernel; "fixed", the
#: caller's kernel (the single-target default's reference-fitted kernel), scaled by α, no β; "level", a second
#: kernel of the caller's (the default's level and slope terms, when each target keeps its own:
#: ``level="separate"``).
LATENT_KERNELS: dict[str, Kernel] = {
    "se": SquaredExponential(1.0, 1.0, 1, alpha_bounds=LATENT_BOUNDS, beta_bounds=LATENT_BOUNDS),
    "matern32": Matern32(1.0, 1.0, alpha_bounds=LATENT_BOUNDS, beta_bounds=LATENT_BOUNDS),
    "fixed": Given("fixed", alpha_bounds=LATENT_BOUNDS),
    "level": Given("level", alpha_bounds=LATENT_BOUNDS),
}
#: The stored names (kept for code that listed them).
KINDS = tuple(LATENT_KERNELS)


def _at(kernel: Kernel, alpha: float, beta: float) -> Kernel:
    """``kernel`` with amplitude ``alpha`` and (if it has one) ``beta``."""
    values = {"alpha": alpha, "beta": beta}
    return kernel.with_values(np.array([values[name] for name in kernel.hyperparameters], dtype=float))


def _latent_kernel(spec: Kernel | str) -> Kernel:
    """A latent's kernel from its stored name or as given; refuses what the LMC cannot fit."""
    if isinstance(spec, str):
        if spec not in LATENT_KERNELS:
            raise ConfigurationError(f"LMC kernel kinds must be among {KINDS}, got {spec!r}")
        return LATENT_KERNELS[spec]
    if not isinstance(spec, Kernel) or spec.hyperparameters not in (("alpha",), ("alpha", "beta")):
        raise ConfigurationError("an LMC latent's kernel must be a Kernel with hyperparameters ('alpha',) or "
                                 f"('alpha', 'beta') (α its amplitude), got {spec!r}")
    if spec.per_reference and getattr(spec, "n_refs", 1) != 1:
        raise ConfigurationError(f"the LMC gives {type(spec).__name__} the distance per reference model already: "
                                 f"build the latent's kernel with n_refs=1, got n_refs={spec.n_refs}")  # type: ignore[attr-defined]
    return spec


def _kind_name(kernel: Kernel) -> str | None:
    """The stored name of a latent's kernel, None if it has none."""
    unit = _at(kernel, 1.0, 1.0)
    return next((name for name, proto in LATENT_KERNELS.items() if proto == unit), None)


@dataclass(frozen=True)
class LMCParams:
    """Hyperparameters of the coregionalisation model.

    Attributes
    ----------
    alpha, beta : tuple of float, length L
        Amplitude and inverse lengthscale of each latent's kernel (the
        parameter vector :func:`adamw_fit` steps on; a kernel without β
        ignores its entry).
    kernels : tuple of Kernel or str, length L
        Each latent's kernel: a kernel object (its own α and β are replaced by
        the entries above: ``kernels[l]`` holds α_l and β_l once built), or a
        stored name of :data:`LATENT_KERNELS` ("se", "matern32", "fixed",
        "level"), mapped to its object.
    weights : tuple of tuple of float, shape (T, L)
        The mixing weights W[t, l].
    sigma2 : float
        Per-item noise scale σ² (an item of bucket b has noise variance N_b σ²).
    """

    alpha: tuple[float, ...]
    beta: tuple[float, ...]
    kernels: tuple[Kernel, ...]
    weights: tuple[tuple[float, ...], ...]
    sigma2: float

    def __post_init__(self) -> None:
        n_lat = len(self.kernels)
        if n_lat < 1 or len(self.alpha) != n_lat or len(self.beta) != n_lat:
            raise ConfigurationError("LMC hyperparameters: alpha, beta and kernels need one entry per latent")
        protos = tuple(_latent_kernel(k) for k in self.kernels)
        w = np.asarray(self.weights, dtype=float)
        if w.ndim != 2 or w.shape[1] != n_lat or not np.all(np.isfinite(w)):
            raise ConfigurationError(f"LMC weights must be finite, shape (targets, {n_lat}), got shape {w.shape}")
        for label, values in (("alpha", self.alpha), ("beta", self.beta), ("sigma2", (self.sigma2,))):
            if not all(math.isfinite(v) and v > 0 for v in values):
                raise ConfigurationError(f"LMC hyperparameters: {label} must be positive numbers, got {values}")
        kernels = tuple(_at(k, a, b) for k, a, b in zip(protos, self.alpha, self.beta, strict=True))
        object.__setattr__(self, "kernels", kernels)

    @property
    def n_latents(self) -> int:
        return len(self.kernels)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The stored names of the latents' kernels ("se", ...; a kernel without one: its class name)."""
        return tuple(_kind_name(k) or type(k).__name__ for k in self.kernels)

    @property
    def W(self) -> np.ndarray:
        return np.asarray(self.weights, dtype=float)

    def kernel(self, l: int) -> Kernel:  # noqa: E741 - the paper's latent index
        """Latent ``l``'s kernel object at α_l, β_l (a per-reference kernel has ``n_refs=1``: see
        :func:`kernel_values`)."""
        return self.kernels[l]

    def to_vector(self) -> np.ndarray:
        """(α_1..α_L, β_1..β_L, W row-major, σ²): the order of :func:`nlml`'s gradient and of :func:`adamw_fit`."""
        return np.concatenate([self.alpha, self.beta, self.W.ravel(), [self.sigma2]])

    def with_vector(self, vec: np.ndarray) -> LMCParams:
        vec = np.asarray(vec, dtype=float)
        n_lat, n_t = self.n_latents, self.W.shape[0]
        a, b = vec[:n_lat], vec[n_lat:2 * n_lat]
        w = vec[2 * n_lat:2 * n_lat + n_t * n_lat].reshape(n_t, n_lat)
        return LMCParams(tuple(map(float, a)), tuple(map(float, b)), self.kernels,
                         tuple(tuple(map(float, row)) for row in w), float(vec[-1]))

    def to_dict(self) -> dict[str, Any]:
        """The stored form: plain data, each kernel by its name in :data:`LATENT_KERNELS`."""
        names = [_kind_name(k) for k in self.kernels]
        if None in names:
            raise ConfigurationError(f"LMC hyperparameters: only the kernels {KINDS} (at their default bounds) can be "
                                     f"stored, got {[k for k, n in zip(self.kernels, names, strict=True) if n is None]}"
                                     )
        return {"alpha": list(self.alpha), "beta": list(self.beta), "kinds": names,
                "weights": [list(r) for r in self.weights], "sigma2": self.sigma2}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LMCParams:
        unknown = sorted(set(data) - {"alpha", "beta", "kinds", "weights", "sigma2"})
        if unknown:
            raise ConfigurationError(f"unknown LMC hyperparameter field(s) {unknown}")
        try:
            return cls(tuple(map(float, data["alpha"])), tuple(map(float, data["beta"])),
                       tuple(_latent_kernel(str(k)) for k in data["kinds"]),
                       tuple(tuple(map(float, r)) for r in data["weights"]), float(data["sigma2"]))
        except KeyError as exc:
            raise ConfigurationError(f"LMC hyperparameters: missing field {exc}") from exc


def initial_params(n_targets: int, n_latents: int, sigma2: float, seed: int) -> LMCParams:
    """The paper's start (App. C.1): α = β = 1, W ~ N(0, 0.01), σ² given; half SE, half Matérn-3/2 (SE first)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x1AC]))
    se, matern = LATENT_KERNELS["se"], LATENT_KERNELS["matern32"]
    kernels = tuple(se if l < (n_latents + 1) // 2 else matern for l in range(n_latents))  # noqa: E741 - l: the paper's latent index
    w = rng.normal(0.0, 0.1, size=(n_targets, n_latents))
    return LMCParams((1.0,) * n_latents, (1.0,) * n_latents, kernels, tuple(tuple(map(float, r)) for r in w),
                     float(sigma2))


def kernel_values(params: LMCParams, l: int, d2: np.ndarray, n_refs: int,  # noqa: E741
                  gradient: bool = False, fixed: np.ndarray | None = None,
                  level: np.ndarray | None = None):
    """K_l on squared distances ``d2``; with ``gradient`` also ∂K_l/∂β_l (in value space; 0 without β).

    A :class:`Given` kernel is α times the caller's values at the same pairs: ``fixed`` for its source "fixed",
    ``level`` for "level". A kernel with ``per_reference`` (Eq. 1) reads the distances per reference model, d²/K.
    """
    kernel = params.kernels[l]
    if isinstance(kernel, Given):
        given = _given_values(kernel, {"fixed": fixed, "level": level})
        k = kernel.value(given)
        return (k, np.zeros_like(k)) if gradient else k
    x = d2 / n_refs if kernel.per_reference else d2
    if not gradient:
        return kernel.value(x)
    k, grad = kernel.value_gradient(x)
    return k, (grad[..., 1] if kernel.n_dims > 1 else np.zeros_like(k))


def _given_values(kernel: Given, given: Mapping[str, Any]) -> Any:
    """The caller's values (or rows) for a :class:`Given` kernel's source."""
    values = given.get(kernel.source)
    if values is None:
        raise ConfigurationError(f"a {kernel.source!r} LMC kernel needs its values ({kernel.source}=)")
    return values


# --------------------------------------------------------------------------- NLML
def nlml(params: LMCParams, targets: np.ndarray, buckets: np.ndarray, resid: np.ndarray, counts: np.ndarray,
         d2: np.ndarray, n_refs: int, gradient: bool = True, fixed: np.ndarray | None = None,
         level: np.ndarray | None = None):
    """Negative log marginal likelihood of observations (target, bucket, s − μ_b), and its gradient.

    ``buckets`` indexes the rows of ``d2``, the squared distances between the
    distinct buckets observed (the kernels are computed once per distinct
    pair: the warm start puts every target on the same items); ``counts``
    is each observation's noise unit (its noise variance is σ² times it: N_b
    in the paper, 1 with per-item noise); ``fixed`` and ``level`` hold the values of a
    "fixed" and a "level" kernel between the distinct buckets. Returns ``inf`` (and a zero
    gradient) where the Gram matrix is not positive definite. The gradient is in the
    order of :meth:`LMCParams.to_vector`.
    """
    n = resid.size
    w = params.W[targets]  # (n, L)
    gram = np.zeros((n, n))
    kernels: list[tuple[np.ndarray, np.ndarray] | None] = []
    pick = np.ix_(buckets, buckets)
    for l in range(params.n_latents):  # noqa: E741
        values = kernel_values(params, l, d2, n_refs, gradient, fixed, level)
        kl = (values[0] if gradient else values)[pick]
        kernels.append((kl, values[1][pick]) if gradient else None)
        gram += np.outer(w[:, l], w[:, l]) * kl
    noise = params.sigma2 * counts
    gram[np.diag_indices(n)] += noise
    try:
        chol = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return (math.inf, np.zeros(params.to_vector().size)) if gradient else math.inf
    alpha_vec = cho_solve((chol, True), resid)
    value = 0.5 * float(resid @ alpha_vec) + float(np.log(np.diag(chol)).sum()) + 0.5 * n * math.log(2 * math.pi)
    if not gradient:
        return value
    inv = cho_solve((chol, True), np.eye(n))
    a_mat = inv - np.outer(alpha_vec, alpha_vec)
    n_lat, n_t = params.n_latents, params.W.shape[0]
    g_alpha, g_beta, g_w = np.zeros(n_lat), np.zeros(n_lat), np.zeros((n_t, n_lat))
    for l in range(n_lat):  # noqa: E741
        entry = kernels[l]
        assert entry is not None  # kept with the gradient
        kl, dkl = entry
        wl = w[:, l]
        h = (a_mat * kl) @ wl
        g_alpha[l] = 0.5 * float(wl @ h) / params.alpha[l]
        g_beta[l] = 0.5 * float(wl @ ((a_mat * dkl) @ wl))
        g_w[:, l] = np.bincount(targets, weights=h, minlength=n_t)
    g_sigma = 0.5 * float(np.diag(a_mat) @ counts)
    return value, np.concatenate([g_alpha, g_beta, g_w.ravel(), [g_sigma]])


@dataclass
class FitRecord:
    """One AdamW fit: when, on how many observations, how many steps, and the NLML before and after."""

    n_observed: int
    n_fit: int
    steps: int
    nlml_start: float
    nlml_end: float
    failures: int = 0


def adamw_fit(params: LMCParams, objective, steps: int, lr: float, *,
              weight_decay: float = 0.01, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
              lower: float = CLIP, frozen: np.ndarray | None = None) -> tuple[LMCParams, float, float, int]:
    """Minimise ``objective`` by AdamW (decoupled weight decay, PyTorch's defaults), clipping α, β, σ² ≥ ``lower``.

    ``frozen`` (a boolean mask over :meth:`LMCParams.to_vector`) marks
    parameters that stay where they are.

    Returns (best parameters seen, NLML at the start, best NLML, failed steps).
    A step that lands where the NLML is not finite is undone and its moment
    estimates reset, as a failed line-search step would be.
    """
    x = params.to_vector()
    n_lat = params.n_latents
    clip_idx = np.r_[np.arange(2 * n_lat), x.size - 1]
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    value, grad = objective(params)
    start = value
    best, best_x = value, x.copy()
    failures = 0
    b1, b2 = betas
    for step in range(1, int(steps) + 1):
        if not math.isfinite(value):
            break
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        m_hat = m / (1 - b1**step)
        v_hat = v / (1 - b2**step)
        new = x * (1 - lr * weight_decay) - lr * m_hat / (np.sqrt(v_hat) + eps)
        new[clip_idx] = np.maximum(new[clip_idx], lower)
        if frozen is not None:
            new[frozen] = x[frozen]
        new_value, new_grad = objective(params.with_vector(new))
        if not math.isfinite(new_value):
            failures += 1
            m[:] = 0.0
            v[:] = 0.0
            continue
        x, value, grad = new, new_value, new_grad
        if value < best:
            best, best_x = value, x.copy()
    return params.with_vector(best_x), start, best, failures


def icm_nlml(bmat: np.ndarray, targets: np.ndarray, buckets: np.ndarray, resid: np.ndarray, units: np.ndarray,
             kfixed: np.ndarray, sigma2: float, klevel: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """NLML of the intrinsic coregionalisation model Σ = B ⊗ K (one kernel K for every latent) and ∂/∂B (T × T).

    ``kfixed`` is K between the distinct buckets that ``buckets`` indexes,
    ``units`` each observation's noise unit. ∂NLML/∂B_st = ½ Σ_{i: t_i = s, j: t_j = t} (G⁻¹ − aaᵀ)_ij K_ij,
    the aggregation of (G⁻¹ − aaᵀ) ∘ K by pairs of targets. ``inf`` where G is not positive definite.
    With ``klevel`` the model is Σ = I ⊗ K_level + B ⊗ K: a kernel every target has on its own, uncoupled.
    """
    n = resid.size
    k = kfixed[np.ix_(buckets, buckets)]
    gram = bmat[np.ix_(targets, targets)] * k
    if klevel is not None:
        gram += (targets[:, None] == targets[None, :]) * klevel[np.ix_(buckets, buckets)]
    gram[np.diag_indices(n)] += sigma2 * units
    try:
        chol = np.linalg.cholesky(gram)
    except np.linalg.LinAlgError:
        return math.inf, np.zeros_like(bmat)
    a = cho_solve((chol, True), resid)
    value = 0.5 * float(resid @ a) + float(np.log(np.diag(chol)).sum()) + 0.5 * n * math.log(2 * math.pi)
    m = (cho_solve((chol, True), np.eye(n)) - np.outer(a, a)) * k
    ind = np.zeros((n, bmat.shape[0]))
    ind[np.arange(n), targets] = 1.0
    return value, 0.5 * (ind.T @ m @ ind)


def coupled(unit_rows: np.ndarray, coupling: float) -> np.ndarray:
    """B = c UUᵀ + (1 − c) I: a correlation matrix whose off-diagonal part is at most c (U with unit rows)."""
    t = unit_rows.shape[0]
    return coupling * (unit_rows @ unit_rows.T) + (1.0 - coupling) * np.eye(t)


def fit_correlations(start: np.ndarray, objective, coupling: float, *,
                     max_iter: int = 200) -> tuple[np.ndarray, float, float, int]:
    """Learn how the targets co-vary: B = c UUᵀ + (1 − c) I (:func:`coupled`), U with unit rows, by L-BFGS-B.

    Each target keeps its marginal prior (B_tt = 1: the kernel fitted for one
    target), and at most the fraction c of its prior variance is shared with
    other targets: the rest — each target's own item-level deviations —
    stays independent, so two targets that agreed on every item of the fit
    cannot be taken to agree on every other item (with c = 1 the NLML's
    optimum is then ρ = 1, and one disagreement later is a 100-σ surprise on
    binary scores). ``start`` is U (T × T); the optimisation runs over the
    unconstrained V, U = V / ‖V‖ row-wise (the gradient is projected).
    Returns (U at the optimum, start NLML, best NLML, failed evaluations).
    """
    from scipy.optimize import minimize

    shape = start.shape
    start_value, _ = objective(coupled(start, coupling))
    failures = 0

    def unit(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = v.reshape(shape)
        norm = np.sqrt((v * v).sum(1, keepdims=True))
        return v / norm, norm

    def fun(z: np.ndarray) -> tuple[float, np.ndarray]:
        nonlocal failures
        u, norm = unit(z)
        value, g_b = objective(coupled(u, coupling))
        if not math.isfinite(value):
            failures += 1
            return 1e300, np.zeros(z.size)
        g_u = coupling * (g_b + g_b.T) @ u
        g_u = (g_u - u * (u * g_u).sum(1, keepdims=True)) / norm
        return value, g_u.ravel()

    result = minimize(fun, start.ravel(), jac=True, method="L-BFGS-B", options={"maxiter": int(max_iter)})
    end = float(result.fun)
    if not (math.isfinite(end) and end <= start_value):
        return start, start_value, start_value, failures
    return unit(result.x)[0], start_value, end, failures


# --------------------------------------------------------------------------- posterior
@dataclass
class _Grow:
    """A preallocated array that grows by doubling along its first axis."""

    data: np.ndarray
    n: int = 0

    def append(self, row: np.ndarray | float) -> None:
        if self.n == self.data.shape[0]:
            bigger = np.zeros((max(2 * self.n, 16),) + self.data.shape[1:], dtype=self.data.dtype)
            bigger[: self.n] = self.data[: self.n]
            self.data = bigger
        self.data[self.n] = row
        self.n += 1

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.n]


class _PackedCholesky:
    """A lower-triangular Cholesky factor that grows by one row, stored packed row by row (BLAS tpsv solves it).

    Row-major packed lower L is column-major packed upper Lᵀ, so the two
    solves are ``dtpsv`` on the upper factor, transposed or not. A slice of a
    preallocated square buffer would be copied by every LAPACK solve (20 times
    slower at n = 5 000, measured); the packed buffer is contiguous.
    """

    def __init__(self, dense: np.ndarray | None = None) -> None:
        self.n = 0
        self.data = np.zeros(136)
        if dense is not None:
            packed = dense[np.tril_indices(dense.shape[0])]
            self.data = np.zeros(max(2 * packed.size, 136))
            self.data[: packed.size] = packed
            self.n = dense.shape[0]

    def append(self, row: np.ndarray) -> None:
        size = self.n * (self.n + 1) // 2
        need = size + row.size
        if need > self.data.size:
            bigger = np.zeros(max(2 * self.data.size, need))
            bigger[:size] = self.data[:size]
            self.data = bigger
        self.data[size:need] = row
        self.n += 1

    def solve(self, rhs: np.ndarray, transposed: bool = False) -> np.ndarray:
        """L⁻¹ rhs, or L⁻ᵀ rhs with ``transposed``."""
        from scipy.linalg.blas import dtpsv

        n = self.n
        packed = self.data[: n * (n + 1) // 2]
        return dtpsv(n, packed, x=np.array(rhs, dtype=float), lower=0, trans=0 if transposed else 1)


@dataclass
class LMCPosterior:
    """The exact LMC posterior over every target's bucket abilities, updated one observation at a time.

    Nothing of size n × T × B is stored. The latents are grouped by kernel:
    latents on one kernel the caller supplies (a :class:`Given`, "fixed" or "level") share it,
    K_g (scaled by their α), the others have one each, so the prior is
    Σ_g B_g ⊗ K_g with B_g = Σ_{l in g} α_l w_l w_lᵀ (α only for the caller's kernels) and
    only one kernel row per group and observed bucket is kept. A product with
    the cross-covariance, Σ_j g_j Cov(observation j, θ^t_b) = Σ_g Σ_j g_j B_g[t_j, t] K_g[b_j, b],
    costs O(min(L_g, T) · B_obs · B) per group, where B_obs ≤ B are the
    distinct buckets observed so far (the warm start puts every target on the
    same ones).

    Parameters
    ----------
    params : LMCParams
    counts : ndarray (B,)
        N_b.
    prior_mean : ndarray (B,)
        μ_b (shared by the targets).
    d2_row : callable b -> ndarray (B,)
        Squared distances of bucket b to every bucket (the caller caches them).
    n_refs, n_targets : int
    noise_unit : ndarray (B,), optional
        An item of bucket b has noise variance σ² · noise_unit[b] (default N_b, the paper's).
    fixed_row, level_row : callable b -> ndarray (B,), optional
        Row b of the caller's "fixed" and "level" kernels, for latents on a :class:`Given` kernel of that source.
    """

    params: LMCParams
    counts: np.ndarray
    prior_mean: np.ndarray
    d2_row: Any
    n_refs: int
    n_targets: int
    noise_unit: Any = None  # an ndarray (B,) once built: None given means N_b
    fixed_row: Any = None
    level_row: Any = None

    def __post_init__(self) -> None:
        self.counts = np.asarray(self.counts, dtype=float)
        self.noise_unit = self.counts.copy() if self.noise_unit is None else np.asarray(self.noise_unit, dtype=float)
        self.n_buckets = self.counts.size
        self.n_items = float(self.counts.sum())
        self.obs_t: list[int] = []
        self.obs_b: list[int] = []
        self.obs_s: list[float] = []
        self.unobserved = np.repeat(self.counts[:, None], self.n_targets, axis=1)  # U (B, T)
        self._R: np.ndarray  # set by _reset
        self._reset()

    # ---------------------------------------------------------------- building
    def _group(self) -> None:
        """The latents grouped by kernel, and B_g = Σ_{l in g} scale_l w_l w_lᵀ per group (G, T, T)."""
        p = self.params
        keys: list[Any] = []
        grp = np.empty(p.n_latents, dtype=np.intp)
        scale = np.ones(p.n_latents)
        for l, kernel in enumerate(p.kernels):  # noqa: E741
            key = kernel.source if isinstance(kernel, Given) else l
            if key not in keys:
                keys.append(key)
            grp[l] = keys.index(key)
            if isinstance(kernel, Given):
                scale[l] = p.alpha[l]
        w = p.W
        bg = np.zeros((len(keys), self.n_targets, self.n_targets))
        for l in range(p.n_latents):  # noqa: E741
            bg[grp[l]] += scale[l] * np.outer(w[:, l], w[:, l])
        self._keys, self._grp, self._gscale, self._B = keys, grp, scale, bg
        self._members = [np.flatnonzero(grp == g) for g in range(len(keys))]

    def _group_rows(self, b: int) -> np.ndarray:
        """K_g[b, :] for every kernel group g, shape (G, B)."""
        d2 = None
        out = np.empty((len(self._keys), self.n_buckets))
        for g, key in enumerate(self._keys):
            if isinstance(key, str):  # a Given kernel's source: the caller's rows
                out[g] = _given_values(self.params.kernels[self._members[g][0]],
                                       {"fixed": self.fixed_row, "level": self.level_row})(b)
            else:
                if d2 is None:
                    d2 = self.d2_row(b)
                out[g] = kernel_values(self.params, key, d2, self.n_refs)
        return out

    def _observed_rows(self, b: int) -> tuple[int, np.ndarray]:
        """(position of b among the observed buckets, its kernel rows per group), adding it if it is new."""
        pos = self._pos.get(b)
        if pos is None:
            rows = self._group_rows(b)
            pos = len(self._pos)
            if pos == self._R.shape[1]:
                bigger = np.zeros((self._R.shape[0], max(2 * pos, 16), self._R.shape[2]))
                bigger[:, :pos] = self._R[:, :pos]
                self._R = bigger
            self._R[:, pos] = rows
            self._pos[b] = pos
        return pos, self._R[:, pos]

    def _reset(self) -> None:
        """The prior state at the current parameters (no observation folded in)."""
        p, t_n, b_n = self.params, self.n_targets, self.n_buckets
        self._w = p.W
        self._group()
        n_g = len(self._keys)
        self._pos: dict[int, int] = {}
        self._R = np.zeros((n_g, 16, b_n))  # kernel rows of the observed buckets, per group
        self._obs_pos = _Grow(np.zeros(16, dtype=np.intp))
        self.chol = _PackedCholesky()
        self.y = _Grow(np.zeros(16))
        self.Q = _Grow(np.zeros((16, t_n)))
        self.QN = _Grow(np.zeros((16, t_n)))
        # K_g @ U and K_g @ N and the diagonals K_g[b, b], per group: one pass over the kernel rows
        self.KU = np.zeros((n_g, b_n, t_n))
        self.KN = np.zeros((n_g, b_n))
        kdiag = np.zeros((n_g, b_n))
        for b in range(b_n):
            rows = self._group_rows(b)
            self.KU[:, b, :] = rows @ self.unobserved
            self.KN[:, b] = rows @ self.counts
            kdiag[:, b] = rows[:, b]
        # (T, B): Σ_g B_g[t, t] K_g[b, b], the prior variance of θ^t_b
        self.prior_diag = np.einsum("gt,gb->tb", np.diagonal(self._B, axis1=1, axis2=2), kdiag)
        self.diag = self.prior_diag.copy()  # (T, B) posterior variances

    def set_params(self, params: LMCParams) -> None:
        """Change the hyperparameters and rebuild the posterior from the observations."""
        obs = list(zip(self.obs_t, self.obs_b, self.obs_s, strict=True))
        self.params = params
        self.unobserved = np.repeat(self.counts[:, None], self.n_targets, axis=1)
        for t, b, _ in obs:
            self.unobserved[b, t] -= 1.0
        self._reset_with(obs)

    def _reset_with(self, obs: Sequence[tuple[int, int, float]]) -> None:
        self._reset()
        n = len(obs)
        if n == 0:
            return
        t_obs = np.array([o[0] for o in obs], dtype=np.intp)
        b_obs = np.array([o[1] for o in obs], dtype=np.intp)
        s_obs = np.array([o[2] for o in obs], dtype=float)
        pos = np.array([self._observed_rows(int(b))[0] for b in b_obs], dtype=np.intp)
        gram = np.zeros((n, n))
        for g in range(len(self._keys)):
            gram += self._B[g][np.ix_(t_obs, t_obs)] * self._R[g][np.ix_(pos, b_obs)]
        gram[np.diag_indices(n)] += self.params.sigma2 * self.noise_unit[b_obs]
        chol = np.linalg.cholesky(gram)
        resid = s_obs - self.prior_mean[b_obs]
        # Cov(observation j, Σ_b u^t_b θ^t_b) = Σ_g B_g[t_j, t] (K_g U)[b_j, t], and with N for U
        b_rows = self._B[:, t_obs, :]  # (G, n, T)
        cov_u = np.einsum("gjt,gjt->jt", b_rows, self.KU[:, b_obs, :])
        cov_n = np.einsum("gjt,gj->jt", b_rows, self.KN[:, b_obs])
        self.chol = _PackedCholesky(chol)
        self.y = _Grow(_padded(solve_triangular(chol, resid, lower=True, check_finite=False)), n)
        self.Q = _Grow(_padded(solve_triangular(chol, cov_u, lower=True, check_finite=False)), n)
        self.QN = _Grow(_padded(solve_triangular(chol, cov_n, lower=True, check_finite=False)), n)
        self._obs_pos = _Grow(_padded(pos).astype(np.intp), n)
        self.obs_t, self.obs_b, self.obs_s = t_obs.tolist(), b_obs.tolist(), s_obs.tolist()
        self.diag = self.prior_diag - self._explained_variance(chol)

    def _explained_variance(self, chol: np.ndarray) -> np.ndarray:
        """diag(Cov(θ^t, obs) G⁻¹ Cov(obs, θ^t)) for every target and bucket (T, B), after a rebuild.

        With P the observation → observed-bucket indicator, the cross-covariance of
        target t is Σ_g Z_g K_g[obs buckets] with Z_g = diag(B_g[t_obs, t]) P, so the
        quadratic form is Σ_{g,g'} colsum(K_g ∘ (M_gg' K_g')) with M_gg' = Z_gᵀ G⁻¹ Z_g'
        (B_obs × B_obs): O(n³ + T·G²·(n² B_obs + B_obs² B)). When every group is one latent
        (the paper's prior), B_g = w_g w_gᵀ factorises and the L² terms are shared by
        the targets instead: O(n³ + L² (n² B_obs + B_obs² B)).
        """
        n = chol.shape[0]
        n_g, b_obs_n = len(self._keys), len(self._pos)
        ginv = cho_solve((chol, True), np.eye(n), check_finite=False)
        pos = self._obs_pos.view
        ind = np.zeros((n, b_obs_n))
        ind[np.arange(n), pos] = 1.0
        t_obs = np.asarray(self.obs_t, dtype=np.intp)
        r = self._R[:, :b_obs_n]
        out = np.zeros((self.n_targets, self.n_buckets))

        def terms(zs: list[np.ndarray], upper: bool):
            for g in range(n_g):
                gz = ginv @ zs[g]
                for g2 in range(g if upper else 0, n_g):
                    m = zs[g2].T @ gz  # Z_g2ᵀ G⁻¹ Z_g
                    yield g, g2, np.einsum("ib,ib->b", r[g2], m @ r[g])

        if n_g == self.params.n_latents:  # one latent per group: B_g[t_j, t] = scale_g W[t_j, g] W[t, g]
            w = self._w * np.sqrt(self._gscale)[None, :]
            for g, g2, q in terms([ind * w[t_obs, g][:, None] for g in range(n_g)], upper=False):
                out += np.outer(w[:, g2] * w[:, g], q)
            return out
        for t in range(self.n_targets):  # M_gg' = M_g'gᵀ: the terms above the diagonal twice
            for g, g2, q in terms([ind * self._B[g][t_obs, t][:, None] for g in range(n_g)], upper=True):
                out[t] += q if g2 == g else 2.0 * q
        return out

    def kernel_block(self, kind: str, buckets: np.ndarray) -> np.ndarray:
        """The caller's kernel of source ``kind`` ("fixed" or "level") between observed ``buckets``, from the rows
        kept."""
        g = self._keys.index(kind)
        pos = np.array([self._pos[int(b)] for b in buckets], dtype=np.intp)
        return self._R[g][np.ix_(pos, np.asarray(buckets, dtype=np.intp))]

    def _cross_apply(self, g: np.ndarray, targets: Sequence[int] | None = None) -> np.ndarray:
        """Σ_j g_j Cov(observation j, θ^t_b) for every target (or those given) and bucket: (T', B)."""
        pos = self._obs_pos.view
        b_obs_n = len(self._pos)
        t_obs = np.asarray(self.obs_t, dtype=np.intp)
        sel = np.arange(self.n_targets) if targets is None else np.asarray(list(targets), dtype=np.intp)
        out = np.zeros((sel.size, self.n_buckets))
        for k, members in enumerate(self._members):
            r = self._R[k, :b_obs_n]
            if members.size < sel.size:  # by latent: Σ_l W[t, l] scale_l (Σ_j g_j W[t_j, l] K_g[b_j, :])
                c = np.stack([np.bincount(pos, weights=g * self._w[t_obs, l], minlength=b_obs_n) for l in members])  # noqa: E741 - l: the paper's latent index
                out += (self._w[np.ix_(sel, members)] * self._gscale[members]) @ (c @ r)
            else:  # by target: Σ_j g_j B_g[t_j, t] K_g[b_j, :]
                coef = g[:, None] * self._B[k][np.ix_(t_obs, sel)]
                c = np.stack([np.bincount(pos, weights=coef[:, i], minlength=b_obs_n) for i in range(sel.size)])
                out += c @ r
        return out

    # ---------------------------------------------------------------- updates
    def observe(self, target: int, bucket: int, score: float) -> tuple[float, float]:
        """Fold in target ``target``'s score on an item of ``bucket``; returns (innovation, its variance)."""
        t, b = int(target), int(bucket)
        n = self.chol.n
        pos, rows = self._observed_rows(b)  # (G, B)
        cross_new = self._B[:, :, t].T @ rows  # (T, B): Cov(new observation, θ^{t'}_{b'}) = Σ_g B_g[t', t] K_g[b, b']
        noise = self.params.sigma2 * self.noise_unit[b]
        prior_var = float(cross_new[t, b]) + noise
        resid = score - float(self.prior_mean[b])
        if n:
            k = cross_new[np.asarray(self.obs_t, dtype=np.intp), np.asarray(self.obs_b, dtype=np.intp)]
            ell = self.chol.solve(k)
            pivot = math.sqrt(max(prior_var - float(ell @ ell), 1e-12 * prior_var))
            innovation = resid - float(ell @ self.y.view)
            g = self.chol.solve(ell, transposed=True)
            v_new = (cross_new - self._cross_apply(g)) / pivot
        else:
            ell = np.zeros(0)
            pivot = math.sqrt(prior_var)
            innovation = resid
            v_new = cross_new / pivot
        row = np.zeros(n + 1)
        row[:n] = ell
        row[n] = pivot
        self.chol.append(row)
        self.y.append(innovation / pivot)
        self.Q.append(np.einsum("tb,bt->t", v_new, self.unobserved))
        self.QN.append(v_new @ self.counts)
        self._obs_pos.append(pos)
        self.diag -= v_new * v_new
        # the item is no longer unobserved for target t: V[:, t, b] = [ℓ; v_new[t, b]] leaves its weighted sum
        self.unobserved[b, t] -= 1.0
        self.Q.view[:n, t] -= ell
        self.Q.view[n, t] -= v_new[t, b]
        self.KU[:, :, t] -= rows
        self.obs_t.append(t)
        self.obs_b.append(b)
        self.obs_s.append(float(score))
        return innovation, pivot * pivot

    # ---------------------------------------------------------------- reading
    @property
    def n_observed(self) -> int:
        return self.chol.n

    def _solve_t(self, rhs: np.ndarray) -> np.ndarray:
        return self.chol.solve(rhs, transposed=True)

    def prior_cross(self) -> np.ndarray:
        """u^tᵀ Σ^{tt'} u^{t'} for every pair of targets (T, T), at the current unobserved counts."""
        g = np.einsum("bt,gbs->gts", self.unobserved, self.KU)  # (G, T, T): U_tᵀ K_g U_s
        return np.einsum("gts,gts->ts", self._B, g)

    def sum_cov(self) -> np.ndarray:
        """Cov(Σ_b u^t_b θ^t_b, Σ_b u^s_b θ^s_b | data) for every pair (T, T) (without the items' own noise)."""
        q = self.Q.view
        return self.prior_cross() - q.T @ q

    def noise_var(self) -> np.ndarray:
        """Σ_b u^t_b σ² (noise unit)_b per target (T,): the unobserved items' own noise in N·R^t."""
        return self.params.sigma2 * (self.noise_unit @ self.unobserved)

    def weighted_means(self) -> tuple[np.ndarray, np.ndarray]:
        """(Σ_b u^t_b μ^t_b|C, Σ_b N_b μ^t_b|C) per target: the posterior means the estimators need."""
        y = self.y.view
        base_u = self.prior_mean @ self.unobserved
        base_n = float(self.prior_mean @ self.counts)
        return base_u + self.Q.view.T @ y, base_n + self.QN.view.T @ y

    def bucket_mean(self, target: int) -> np.ndarray:
        """μ^t|C per bucket (B,)."""
        if not self.chol.n:
            return self.prior_mean.copy()
        return self.prior_mean + self._cross_apply(self._solve_t(self.y.view), [int(target)])[0]

    def information_gain(self, target: int) -> np.ndarray:
        """Eq. 6 for target ``target``, an unobserved item of each bucket, given every target's data (B,)."""
        t = int(target)
        a = np.tensordot(self._B[:, t, t], self.KU[:, :, t], axes=(0, 0))
        if self.chol.n:
            a = a - self._cross_apply(self._solve_t(self.Q.view[:, t]), [t])[0]
        noise = self.params.sigma2 * self.noise_unit
        total = float(self.noise_var()[t] + self.sum_cov()[t, t])
        c = a + noise
        v = np.maximum(self.diag[t], 0.0) + noise
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = c * c / (total * v)
        ratio = np.clip(ratio, 0.0, 1.0 - 1e-15)
        ig = -0.5 * np.log1p(-ratio)
        ig[~np.isfinite(ig)] = 0.0
        return ig


def _padded(arr: np.ndarray) -> np.ndarray:
    """``arr`` in a buffer with room to grow along its first axis (the next doubling)."""
    n = arr.shape[0]
    out = np.zeros((max(2 * n, 16),) + arr.shape[1:], dtype=arr.dtype)
    out[:n] = arr
    return out
