"""Batch selection for BayesAME (paper App. B.1; SPEC.md §1 "Batch selection"): pure maths, no method state.

Notation. The posterior covariance of the bucket abilities given C (and any
pending items) is Σθ|C (B × B); an unevaluated item of bucket b scores
θ_b + ε with noise variance ``noise[b]`` (σ² N_b in the paper's method, σ² in
the default). The predictive covariance of ITEM scores is then

    Σ_ij = Σθ|C[b_i, b_j] + δ_ij noise[b_i],

so two items of one bucket are distinct candidates whose covariance is
Σθ|C[b, b] (no noise) and whose variances are Σθ|C[b, b] + noise[b]. With U
the unevaluated items (u_b of them in bucket b),

    v_i = (Σ_{E,U} 1)_i = (Σθ|C u)_{b_i} + noise[b_i]   (i ∈ U),
    N² Var(R | s_C) = 1ᵀ Σ_UU 1 = uᵀ Σθ|C u + Σ_b u_b noise[b].

The batch variance reduction of Eq. 12 (without its 1/N²) is

    β(A) = v_Aᵀ Σ_AA⁻¹ v_A,    IG(A) = −½ log(1 − β(A) / (N² Var R)),

so IG is increasing in β and Eq. 13 maximises β over |A| = k. For A = {i},
β = v_i² / Σ_ii = c_b² / v_b, the ratio inside Eq. 6.

What is here:

* :class:`BucketCovariance`: the problem as bucket-level arrays plus a
  callable giving columns of Σθ|C, with exact conditioning on one more item
  (:meth:`BucketCovariance.condition`, the rank-one update the methods use);
* :func:`batch_beta`, :func:`batch_information_gain`: β(A) by Cholesky;
* :func:`best_pair`: the |A| = 2 closed form over every pair of candidate
  items (two items of one bucket included), in blocks of bucket rows so that
  B = 5 000 never holds a B × B array; :func:`pair_batch` repeats it greedily
  for k > 2 (condition on the pair, pick the next; a last single item by Eq. 6);
* warm starts for |A| > 2 on a candidate pool (:func:`candidate_pool`, the
  top ``pool_size`` items by single-item β): :func:`lars_batch` (LARS on the
  ℓ1 relaxation g(w) = ½wᵀΣw − wᵀv, covariance form), :func:`sample_kdpp`
  (the exact k-DPP sampler of Kulesza & Taskar 2011 with the pool's
  posterior covariance as L-ensemble), :func:`kmeans_batches` (k-means++ then
  Lloyd on the reference vectors φ, one random item per cluster);
* :func:`woodbury_swap`, :func:`swap_betas`, :func:`local_search`: single-item
  swaps scored by the rank-2 Woodbury update of Σ_AA⁻¹ (O(|A|²) per
  neighbour), and :func:`smc_search`, a population of batches improved by
  local search and resampled by fitness β(A);
* :func:`select_batch`: a strategy by name, returning buckets (one entry per item).

The pool restriction (default :data:`POOL_SIZE` = 500 items) keeps the dense
pool covariance, the k-DPP's eigendecomposition (O(M³)) and the local
search's neighbourhood (O(M |A|³) per sweep) small at B = 5 000; items
outside the pool have the smallest single-item information gains. The |A| = 2
closed form (``"pair"``) always searches every pair.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.linalg import LinAlgError  # (SciPy's is this class)

from activeeval._lazy import lazy_function
from activeeval.exceptions import ConfigurationError, NumericalError, option

__all__ = [
    "POOL_SIZE",
    "STRATEGIES",
    "BucketCovariance",
    "batch_beta",
    "batch_information_gain",
    "best_pair",
    "candidate_pool",
    "check_strategy",
    "kmeans_batches",
    "lars_batch",
    "local_search",
    "pair_batch",
    "sample_kdpp",
    "select_batch",
    "smc_search",
    "swap_betas",
    "woodbury_swap",
]

# SciPy's linear algebra (about 0.4 s to import) only when a batch needs it: a session's single steps never do.
cho_factor = lazy_function("scipy.linalg:cho_factor")
cho_solve = lazy_function("scipy.linalg:cho_solve")
solve_triangular = lazy_function("scipy.linalg:solve_triangular")

#: Batch strategies of the BayesAME methods' ``batch_strategy`` (and the backtest's).
STRATEGIES = ("greedy", "pair", "lars", "dpp", "kmeans")
#: Candidate items of the |A| > 2 strategies: the top items by single-item β (see the module docstring).
POOL_SIZE = 500
#: Particles and rounds of the SMC search.
POPULATION = 8
ROUNDS = 3


def check_strategy(strategy: object, what: str | None = None) -> str:
    """``strategy`` if it is one of :data:`STRATEGIES`, else a ConfigurationError naming ``what``."""
    if strategy not in STRATEGIES:
        raise ConfigurationError(
            f"{what or option('batch_strategy')} must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    return str(strategy)


@dataclass(frozen=True)
class BucketCovariance:
    """The predictive covariance of item scores given C in the bucket model, through bucket-level arrays.

    Parameters
    ----------
    cov_cols : callable
        ``cov_cols(bs)`` → Σθ|C[:, bs], ndarray of shape (B, len(bs)) for an int array ``bs``.
    diag : ndarray of shape (B,)
        diag(Σθ|C).
    cov_u : ndarray of shape (B,)
        Σθ|C u.
    noise : ndarray of shape (B,)
        Noise variance of one item of each bucket.
    remaining : ndarray of shape (B,)
        u_b, unevaluated items per bucket (pending items count as evaluated: they are conditioned on).
    available : ndarray of shape (B,)
        Candidate items per bucket (unevaluated, not pending); ≤ ``remaining``.
    """

    cov_cols: Callable[[np.ndarray], np.ndarray]
    diag: np.ndarray
    cov_u: np.ndarray
    noise: np.ndarray
    remaining: np.ndarray
    available: np.ndarray

    @property
    def n_buckets(self) -> int:
        return int(self.diag.size)

    @property
    def scaled_var(self) -> float:
        """N² Var(R | s_C) = uᵀ Σθ|C u + Σ_b u_b noise_b (Eq. 2)."""
        return max(float(self.remaining @ self.cov_u) + float(self.remaining @ self.noise), 0.0)

    @property
    def v(self) -> np.ndarray:
        """v_i of an unevaluated item of each bucket, (Σθ|C u)_b + noise_b, shape (B,)."""
        return self.cov_u + self.noise

    @property
    def item_var(self) -> np.ndarray:
        """Σ_ii of an item of each bucket, Σθ|C[b, b] + noise_b, shape (B,)."""
        return np.maximum(self.diag, 0.0) + self.noise

    def single_beta(self) -> np.ndarray:
        """β({i}) = v_i² / Σ_ii for an item of each bucket (Eq. 6's c_b² / v_b), −inf where none is available."""
        out = self.v**2 / self.item_var
        out[self.available <= 0] = -np.inf
        return out

    def gram(self, buckets: Sequence[int] | np.ndarray) -> np.ndarray:
        """Σ_AA for items of ``buckets`` (one entry per item; repeats are distinct items of one bucket)."""
        bs = np.asarray(buckets, dtype=np.intp)
        g = self.cov_cols(bs)[bs, :]
        g = 0.5 * (g + g.T)  # exact symmetry for the Cholesky factor (round-off of VᵀV differs by order)
        g[np.diag_indices_from(g)] += self.noise[bs]
        return g

    def condition(self, b: int) -> BucketCovariance:
        """Σ|C after also conditioning on one more item of bucket b (score unknown): a new object.

        Σθ' = Σθ − k kᵀ / d, k = Σθ|C[:, b], d = k_b + noise_b; u_b and the
        available count of b drop by one; Σθ' u' = Σθ u − k − k (kᵀu') / d
        (:func:`activeeval.gp.posterior.condition_covariance`, out of place).
        """
        col = self.cov_cols(np.array([b], dtype=np.intp))[:, 0].copy()
        d = float(col[b] + self.noise[b])
        remaining = self.remaining.copy()
        remaining[b] -= 1.0
        available = self.available.copy()
        available[b] -= 1.0
        cov_u = self.cov_u - col - col * (float(col @ remaining) / d)
        diag = self.diag - col * col / d
        parent = self.cov_cols

        def cov_cols(bs: np.ndarray) -> np.ndarray:
            bs = np.asarray(bs, dtype=np.intp)
            return parent(bs) - np.outer(col, col[bs] / d)

        return BucketCovariance(cov_cols, diag, cov_u, self.noise, remaining, available)


def _cho(a: np.ndarray) -> tuple[np.ndarray, bool]:
    try:
        return cho_factor(a, lower=True, check_finite=False)
    except LinAlgError as exc:
        raise NumericalError(
            f"the batch's predictive covariance is not positive definite ({exc}); the noise variance is too "
            "small for these items (raise sigma2) or the batch repeats an item"
        ) from exc


def batch_beta(cov: BucketCovariance, buckets: Sequence[int] | np.ndarray) -> float:
    """β(A) = v_Aᵀ Σ_AA⁻¹ v_A (Eq. 12 times N²) for items of ``buckets``, by Cholesky (no inverse)."""
    bs = np.asarray(buckets, dtype=np.intp)
    if bs.size == 0:
        return 0.0
    factor, lower = _cho(cov.gram(bs))
    z = solve_triangular(factor, cov.v[bs], lower=lower, check_finite=False)
    return float(z @ z)


def batch_information_gain(beta: float, scaled_var: float) -> float:
    """IG(A) = −½ log(1 − β(A) / (N² Var R)) (App. B.1); 0 when Var R = 0."""
    if scaled_var <= 0.0:
        return 0.0
    return float(-0.5 * np.log1p(-min(max(beta / scaled_var, 0.0), 1.0 - 1e-15)))


# ------------------------------------------------------------------ |A| = 2
def pair_beta(t_i: np.ndarray, t_j: np.ndarray, s_ii: np.ndarray, s_jj: np.ndarray, s_ij: np.ndarray) -> np.ndarray:
    """The |A| = 2 closed form: β({i, j}) = (T_i² Σ_jj + T_j² Σ_ii − 2 T_i T_j Σ_ij) / (Σ_ii Σ_jj − Σ_ij²).

    Elementwise (broadcasting); T = v. NaN where the 2 × 2 matrix is singular.
    """
    den = s_ii * s_jj - s_ij * s_ij
    num = t_i * t_i * s_jj + t_j * t_j * s_ii - 2.0 * t_i * t_j * s_ij
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 1e-14 * s_ii * s_jj, num / den, np.nan)


def best_pair(cov: BucketCovariance, block: int = 256) -> tuple[int, int, float]:
    """argmax of β over every pair of candidate items: (bucket a, bucket b, β), a == b for two items of one bucket.

    Vectorised by the closed form (:func:`pair_beta`) over blocks of ``block``
    bucket rows against the candidate buckets after them (each pair once), so
    memory is O(block · B). Written with z_a = T_a / √Σ_aa and the
    correlation r_ab = Σ_ab / √(Σ_aa Σ_bb), the same β reads
    (z_a² + z_b² − 2 z_a z_b r_ab) / (1 − r_ab²): fewer passes over the block.
    Two items of one bucket b: Σ_ij = Σθ[b, b], so β = 2 v_b² / (2 Σθ[b, b] + noise_b).
    Ties go to the first pair in bucket order. Raises ValueError with fewer than 2 candidate items.
    """
    idx = np.flatnonzero(cov.available > 0)
    if cov.available[idx].sum() < 2:
        raise ValueError("a pair needs at least 2 candidate items")
    full = idx.size == cov.n_buckets
    t = cov.v[idx]
    s = cov.item_var[idx]
    inv_sd = 1.0 / np.sqrt(s)
    z = t * inv_sd
    z2 = z * z
    same_ok = cov.available[idx] >= 2
    same = np.where(same_ok, 2.0 * t * t / (2.0 * np.maximum(cov.diag[idx], 0.0) + cov.noise[idx]), -np.inf)
    best = (-np.inf, -1, -1)
    if same_ok.any():
        j = int(np.argmax(same))
        best = (float(same[j]), j, j)
    m = idx.size
    for start in range(0, m - 1, block):
        stop = min(start + block, m)
        cols = cov.cov_cols(idx[start:stop])  # (B, rows): Σθ[·, a] for the block's buckets a
        r = (cols if full else cols[idx]).T[:, start:]  # (rows, m − start): Σθ[a, b] for b ≥ the block's first
        r = r * inv_sd[start:stop, None]
        r *= inv_sd[None, start:]
        num = r * (-2.0 * z[start:stop, None])
        num *= z[None, start:]
        num += z2[start:stop, None]
        num += z2[None, start:]
        den = r
        np.multiply(r, r, out=den)
        np.subtract(1.0, den, out=den)
        with np.errstate(divide="ignore", invalid="ignore"):
            beta = np.divide(num, den, out=num, where=den > 1e-14)
        beta[den <= 1e-14] = -np.inf  # singular 2 × 2 matrix (numerically identical items)
        rows = np.arange(stop - start)
        beta[np.arange(m - start)[None, :] <= rows[:, None]] = -np.inf  # b > a only; a == b is scored above
        flat = int(np.argmax(beta))
        value = float(beta.flat[flat])
        if value > best[0]:
            i, j = divmod(flat, m - start)
            best = (value, start + int(i), start + int(j))
    value, a, b = best
    if not np.isfinite(value):
        raise ValueError("no pair of candidate items has a finite variance reduction")
    return int(idx[a]), int(idx[b]), value


def pair_batch(cov: BucketCovariance, k: int) -> list[int]:
    """k items by the |A| = 2 closed form, repeated greedily: the best pair, condition on it, the next pair, …

    An odd k ends with the best single item (Eq. 6); k = 1 is the single-item
    argmax. β is additive under conditioning (β(A ∪ A') = β(A) + β_{|A}(A')),
    so this is the greedy algorithm with steps of two items; k = 2 is exact.
    """
    chosen: list[int] = []
    while len(chosen) < k:
        if k - len(chosen) >= 2 and cov.available.sum() >= 2:
            a, b, _ = best_pair(cov)
            step = [a, b]
        else:
            step = [int(np.argmax(cov.single_beta()))]
        for bucket in step:
            chosen.append(bucket)
            if len(chosen) < k:
                cov = cov.condition(bucket)
    return chosen


# ------------------------------------------------------------------ the pool
def candidate_pool(cov: BucketCovariance, k: int, size: int = POOL_SIZE) -> np.ndarray:
    """Candidate items for |A| > 2: buckets (one entry per item) in decreasing single-item β, at most ``size``.

    A bucket contributes min(available, k) items (a batch holds at most k
    items of one bucket). Ties keep bucket order.
    """
    single = cov.single_beta()
    order = np.argsort(-single, kind="stable")
    order = order[np.isfinite(single[order])]
    copies = np.minimum(cov.available[order], k).astype(int)
    pool = np.repeat(order, copies)
    return pool[: max(int(size), int(k))]


# ------------------------------------------------------------------ warm starts
def lars_batch(gram: np.ndarray, v: np.ndarray, k: int, max_steps: int | None = None) -> np.ndarray:
    """k candidates from the LARS (lasso) path of min_w ½wᵀΣw − wᵀv + λ‖w‖₁, in covariance form.

    The homotopy of Efron et al. (2004) with the lasso modification, run on
    Σ = ``gram`` (m, m) and v (m,) directly (XᵀX and Xᵀy of the regression
    view): correlations c = v − Σw, the active set enters at the largest
    |c|, moves along the equiangular direction d_A = Σ_AA⁻¹ sign(c_A) (scaled)
    until another candidate's |c| ties or an active weight crosses zero
    (then it leaves). Stops when k candidates are active; fills any
    shortfall (the path ended) with the largest remaining v_i² / Σ_ii.

    Returns
    -------
    ndarray of int, shape (k,)
        Indices into the candidates (distinct).
    """
    m = v.size
    k = min(int(k), m)
    w = np.zeros(m)
    c = v.astype(float).copy()
    active: list[int] = [int(np.argmax(np.abs(c)))]
    steps = 4 * k + 10 if max_steps is None else int(max_steps)
    scale = float(np.abs(v).max()) or 1.0
    for _ in range(steps):
        if len(active) >= k:
            break
        a_idx = np.array(active)
        c_a = c[a_idx]
        big = float(np.abs(c_a).max())
        if big <= 1e-12 * scale:
            break
        sign = np.sign(c_a)
        factor = _cho(gram[np.ix_(a_idx, a_idx)])
        g = cho_solve(factor, sign, check_finite=False)
        norm = 1.0 / math.sqrt(max(float(sign @ g), 1e-300))
        d = norm * g
        a = gram[:, a_idx] @ d  # the correlations move by −γ a
        inactive = np.ones(m, dtype=bool)
        inactive[a_idx] = False
        with np.errstate(divide="ignore", invalid="ignore"):
            g1 = (big - c) / (norm - a)
            g2 = (big + c) / (norm + a)
        cand = np.where(inactive[:, None], np.stack([g1, g2], 1), np.inf)
        cand = np.where(cand > 1e-12, cand, np.inf)
        gamma_in = cand.min(1)
        j = int(np.argmin(gamma_in))
        gamma = float(gamma_in[j]) if np.isfinite(gamma_in[j]) else big / norm
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = -w[a_idx] / d
        cross = np.where(cross > 1e-12, cross, np.inf)
        drop = int(np.argmin(cross)) if cross.size else -1
        dropping = drop >= 0 and float(cross[drop]) < gamma
        if dropping:
            gamma = float(cross[drop])
        w[a_idx] += gamma * d
        c -= gamma * a
        if dropping:
            w[a_idx[drop]] = 0.0
            active.pop(drop)
        elif np.isfinite(gamma_in[j]):
            active.append(j)
        else:
            break  # the path reached the unpenalised optimum of the active set
    if len(active) < k:
        score = v * v / np.diagonal(gram)
        score[np.array(active, dtype=np.intp)] = -np.inf
        active.extend(int(i) for i in np.argsort(-score, kind="stable")[: k - len(active)])
    return np.array(active[:k], dtype=np.intp)


def _elementary_symmetric(lam: np.ndarray, k: int) -> np.ndarray:
    """e[l, n] = e_l(λ_1..λ_n) for l ≤ k, n ≤ m (Kulesza & Taskar 2011, Alg. 7), shape (k + 1, m + 1)."""
    m = lam.size
    e = np.zeros((k + 1, m + 1))
    e[0, :] = 1.0
    for n in range(1, m + 1):
        e[1:, n] = e[1:, n - 1] + lam[n - 1] * e[:-1, n - 1]
    return e


def sample_kdpp(
    kernel: np.ndarray, k: int, rng: np.random.Generator, eig: tuple[np.ndarray, np.ndarray] | None = None
) -> np.ndarray:
    """One exact draw of a k-DPP with L-ensemble ``kernel`` (m, m): P(A) ∝ det(L_AA), |A| = k.

    Kulesza & Taskar (2011): eigendecompose L, choose k eigenvectors with
    probabilities from the elementary symmetric polynomials (Alg. 8), then
    sample the projection DPP of their span one item at a time (Alg. 1),
    projecting the chosen item's direction out. L is scaled to largest
    eigenvalue 1 first (a k-DPP does not change with the scale of L, and
    the polynomials stay finite). O(m³) for the eigendecomposition; pass
    ``eig`` = ``np.linalg.eigh(kernel)`` to draw several samples from one.

    Returns
    -------
    ndarray of int, shape (k,)
        Distinct indices into the candidates.
    """
    lam, vecs = np.linalg.eigh(0.5 * (kernel + kernel.T)) if eig is None else eig
    lam = np.clip(lam, 0.0, None)
    m = lam.size
    k = min(int(k), m)
    if lam.max() <= 0:
        return rng.choice(m, size=k, replace=False)
    lam = lam / lam.max()
    e = _elementary_symmetric(lam, k)
    if not (np.isfinite(e[k, m]) and e[k, m] > 0):  # rank below k: no k-DPP; a uniform draw instead
        return rng.choice(m, size=k, replace=False)
    picked: list[int] = []
    remaining = k
    for n in range(m, 0, -1):
        if remaining == 0:
            break
        if n == remaining:
            picked.extend(range(n - 1, -1, -1))
            break
        if rng.random() < lam[n - 1] * e[remaining - 1, n - 1] / e[remaining, n]:
            picked.append(n - 1)
            remaining -= 1
    basis = vecs[:, picked]
    out: list[int] = []
    for _ in range(k):
        prob = (basis * basis).sum(1)
        prob[out] = 0.0
        total = prob.sum()
        i = int(rng.choice(m, p=prob / total)) if total > 0 else int(rng.choice(np.setdiff1d(np.arange(m), out)))
        out.append(i)
        if basis.shape[1] <= 1:
            continue
        j = int(np.argmax(np.abs(basis[i])))
        pivot = basis[:, j].copy()
        basis = np.delete(basis, j, axis=1)
        basis = basis - np.outer(pivot, basis[i] / pivot[i])  # orthogonal to e_i
        basis, _ = np.linalg.qr(basis)
    return np.array(out, dtype=np.intp)


def _kmeans(x: np.ndarray, k: int, rng: np.random.Generator, n_iter: int = 50) -> np.ndarray:
    """Cluster labels (m,) of k-means with k-means++ seeding (Arthur & Vassilvitskii 2007) and Lloyd's iterations."""
    m = x.shape[0]
    centres = [x[int(rng.integers(m))]]
    d2 = ((x - centres[0]) ** 2).sum(1)
    for _ in range(1, k):
        total = d2.sum()
        i = int(rng.choice(m, p=d2 / total)) if total > 0 else int(rng.integers(m))
        centres.append(x[i])
        d2 = np.minimum(d2, ((x - x[i]) ** 2).sum(1))
    c = np.array(centres)
    labels = np.full(m, -1)
    for _ in range(n_iter):
        dist = (x * x).sum(1)[:, None] + (c * c).sum(1)[None, :] - 2.0 * x @ c.T
        new = np.argmin(dist, axis=1)
        if np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            if members.any():  # an empty cluster keeps its centre
                c[j] = x[members].mean(0)
    return labels


def kmeans_batches(features: np.ndarray, k: int, n_batches: int, rng: np.random.Generator) -> list[np.ndarray]:
    """``n_batches`` batches of k candidates: k-means on ``features`` (m, K), then one random member per cluster.

    Clusters that come out empty (identical feature rows: items of one
    bucket) leave their places to uniformly drawn other candidates.
    """
    m = features.shape[0]
    k = min(int(k), m)
    labels = _kmeans(np.asarray(features, dtype=float), k, rng)
    clusters = [np.flatnonzero(labels == j) for j in range(k)]
    clusters = [c for c in clusters if c.size]
    out = []
    for _ in range(n_batches):
        batch = [int(c[rng.integers(c.size)]) for c in clusters]
        if len(batch) < k:
            rest = np.setdiff1d(np.arange(m), batch)
            batch.extend(int(i) for i in rng.choice(rest, size=k - len(batch), replace=False))
        out.append(np.array(batch, dtype=np.intp))
    return out


# ------------------------------------------------------------------ local search
def woodbury_swap(inv: np.ndarray, pos: int, d: np.ndarray) -> np.ndarray:
    """(M + U Vᵀ)⁻¹ from M⁻¹ when row and column ``pos`` of M change by ``d`` (App. B.1's rank-2 Woodbury).

    M' = M + d e_mᵀ + e_m dᵀ − d_m e_m e_mᵀ = M + U Vᵀ with
    U = [e_m, d − ½ d_m e_m], V = [d − ½ d_m e_m, e_m], and
    (M + UVᵀ)⁻¹ = M⁻¹ − M⁻¹U (I₂ + VᵀM⁻¹U)⁻¹ VᵀM⁻¹. O(|A|²).

    Parameters
    ----------
    inv : ndarray (k, k)
        M⁻¹ (symmetric).
    pos : int
        m, the swapped position.
    d : ndarray (k,)
        The new column at ``pos`` minus the old one (entry ``pos``: the change of the diagonal).
    """
    k = inv.shape[0]
    e = np.zeros(k)
    e[pos] = 1.0
    w = d - 0.5 * d[pos] * e
    u = np.stack([e, w], 1)
    v = np.stack([w, e], 1)
    inv_u = inv @ u
    small = np.eye(2) + v.T @ inv_u
    return inv - inv_u @ np.linalg.solve(small, v.T @ inv)


def swap_betas(gram: np.ndarray, v: np.ndarray, batch: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """β after swapping position p of ``batch`` for candidate c, every (p, c): shape (k, m), −inf for c in A.

    With M = Σ_AA, M⁻¹ = ``inv``, d = Σ_{A',c} − Σ_{A,A_p} (A' = A with c at
    p) and v' = v_A + (v_c − v_{A_p}) e_p: β' = v'ᵀM'⁻¹v' with M'⁻¹ from the
    rank-2 Woodbury identity (:func:`woodbury_swap`), written out for all c
    at once: x = M⁻¹v', y = M⁻¹w, β' = v'ᵀx − [x_p, wᵀx] (I₂ + VᵀM⁻¹U)⁻¹ [wᵀx, x_p]ᵀ
    with VᵀM⁻¹U = [[wᵀM⁻¹e_p, wᵀy], [M⁻¹_pp, y_p]]. O(k²) per neighbour.
    """
    k = batch.size
    m = v.size
    v_a = v[batch]
    x0 = inv @ v_a
    cols = gram[batch, :]  # (k, m): Σ_{A_j, c}
    out = np.empty((k, m))
    with np.errstate(divide="ignore", invalid="ignore"):  # a candidate already in A makes M' singular: −inf below
        for p in range(k):
            _swap_row(gram, v, batch, inv, cols, v_a, x0, p, out)
    out[~np.isfinite(out)] = -np.inf
    out[:, batch] = -np.inf
    return out


def _swap_row(gram: np.ndarray, v: np.ndarray, batch: np.ndarray, inv: np.ndarray, cols: np.ndarray,
              v_a: np.ndarray, x0: np.ndarray, p: int, out: np.ndarray) -> None:
    """Row p of :func:`swap_betas` (every candidate c in position p), written into ``out[p]``."""
    m = v.size
    d = cols - gram[batch, batch[p]][:, None]  # (k, m); row p fixed below
    d[p] = np.diagonal(gram) - gram[batch[p], batch[p]]
    w = d.T.copy()  # (m, k)
    w[:, p] -= 0.5 * d[p]
    delta = v - v_a[p]  # (m,)
    x = x0[None, :] + delta[:, None] * inv[:, p][None, :]  # M⁻¹ v'
    vprime_x = (v_a @ x.T) + delta * x[:, p]  # v'ᵀ x
    y = w @ inv  # (m, k): (M⁻¹ w)ᵀ
    a11 = 1.0 + w @ inv[:, p]  # wᵀ M⁻¹ e_p
    a12 = (w * y).sum(1)  # wᵀ M⁻¹ w
    a21 = np.full(m, inv[p, p])
    a22 = 1.0 + y[:, p]
    det = a11 * a22 - a12 * a21
    r1 = x[:, p]  # xᵀ U = [x_p, wᵀx]
    r2 = (w * x).sum(1)
    l1 = r2  # Vᵀ x = [wᵀx, x_p]
    l2 = x[:, p]
    s1 = (a22 * l1 - a12 * l2) / det
    s2 = (-a21 * l1 + a11 * l2) / det
    out[p] = vprime_x - (r1 * s1 + r2 * s2)


def _fresh(gram: np.ndarray, v: np.ndarray, batch: np.ndarray) -> tuple[np.ndarray, float]:
    """(Σ_AA⁻¹, β(A)) from a Cholesky factor: the inverse only of a k × k matrix, for the Woodbury updates."""
    factor = _cho(gram[np.ix_(batch, batch)])
    inv = cho_solve(factor, np.eye(batch.size), check_finite=False)
    return 0.5 * (inv + inv.T), float(v[batch] @ cho_solve(factor, v[batch], check_finite=False))


def local_search(
    gram: np.ndarray, v: np.ndarray, batch: np.ndarray, max_swaps: int = 200, refresh: int = 10
) -> tuple[np.ndarray, float]:
    """Best-improvement single-item swaps until none raises β(A): (batch, β), β never below the start's.

    Each sweep scores every (position, candidate) swap with :func:`swap_betas`
    and takes the best if it beats β(A) by more than a relative 1e-12
    (round-off of the Woodbury updates: not an improvement); M⁻¹ follows by
    :func:`woodbury_swap` and is refactored from scratch every ``refresh``
    swaps. The returned β is computed afresh (Cholesky).
    """
    batch = np.array(batch, dtype=np.intp)
    inv, beta = _fresh(gram, v, batch)
    for swap in range(max_swaps):
        scores = swap_betas(gram, v, batch, inv)
        flat = int(np.argmax(scores))
        p, c = divmod(flat, v.size)
        if not scores[p, c] > beta * (1.0 + 1e-12) + 1e-300:
            break
        new = batch.copy()
        new[p] = c
        if (swap + 1) % refresh == 0:
            inv, new_beta = _fresh(gram, v, new)
        else:
            d = gram[new, c] - gram[batch, batch[p]]
            inv = woodbury_swap(inv, p, d)
            new_beta = float(v[new] @ inv @ v[new])
        if new_beta <= beta:  # the fresh value disagrees with the Woodbury score: stop rather than go down
            _, checked = _fresh(gram, v, new)
            if checked <= beta:
                break
            new_beta = checked
        batch, beta = new, new_beta
    _, beta = _fresh(gram, v, batch)
    return batch, beta


def smc_search(
    gram: np.ndarray,
    v: np.ndarray,
    starts: Sequence[np.ndarray],
    rng: np.random.Generator,
    rounds: int = ROUNDS,
    population: int = POPULATION,
) -> tuple[np.ndarray, float]:
    """Local search inside sequential Monte Carlo: (best batch, its β), never worse than the best start.

    The population (``population`` batches: the warm starts, cycled) is
    improved by :func:`local_search`; for ``rounds`` rounds it is then
    resampled with probabilities ∝ β(A) (the fitness), each particle moved by
    one uniformly random swap (so copies of one particle diverge), and
    improved again. The best batch seen, warm starts included, is returned.
    """
    if not starts:
        raise ValueError("smc_search needs at least one warm start")
    m = v.size
    particles = [np.array(starts[i % len(starts)], dtype=np.intp) for i in range(max(population, 1))]
    best_batch: np.ndarray | None = None
    best = -np.inf
    for start in starts:
        beta = _fresh(gram, v, np.asarray(start, dtype=np.intp))[1]
        if beta > best:
            best_batch, best = np.array(start, dtype=np.intp), beta
    done: dict[tuple[int, ...], tuple[np.ndarray, float]] = {}  # identical particles are searched once

    def search(batch: np.ndarray) -> tuple[np.ndarray, float]:
        key = tuple(sorted(int(i) for i in batch))
        if key not in done:
            done[key] = local_search(gram, v, batch)
        return done[key]

    for r in range(rounds + 1):
        results = [search(p) for p in particles]
        fitness = np.array([b for _, b in results])
        for (batch, beta) in results:
            if beta > best:
                best_batch, best = batch, beta
        if r == rounds:
            break
        weights = np.maximum(fitness, 0.0)
        weights = weights / weights.sum() if weights.sum() > 0 else np.full(weights.size, 1.0 / weights.size)
        picks = rng.choice(len(results), size=len(results), p=weights)
        particles = []
        for i in picks:
            batch = results[int(i)][0].copy()
            outside = np.setdiff1d(np.arange(m), batch)
            if outside.size:
                batch[int(rng.integers(batch.size))] = int(outside[rng.integers(outside.size)])
            particles.append(batch)
    assert best_batch is not None, "smc_search: every warm start's objective was -inf or NaN"
    return best_batch, float(best)


# ------------------------------------------------------------------ entry point
def select_batch(
    cov: BucketCovariance,
    k: int,
    strategy: str,
    rng: np.random.Generator,
    features: np.ndarray | None = None,
    pool_size: int = POOL_SIZE,
    population: int = POPULATION,
    rounds: int = ROUNDS,
) -> list[int]:
    """k candidate items (as buckets, one entry per item; a bucket at most ``available`` times) by ``strategy``.

    ``"pair"``: :func:`pair_batch` (exact for k = 2). ``"lars"``, ``"dpp"``,
    ``"kmeans"``: warm starts on the :func:`candidate_pool` — the LARS path's
    batch (and ``population`` − 1 copies), ``population`` k-DPP draws,
    ``population`` k-means batches (``features`` (B, K): the buckets'
    reference vectors φ) — then :func:`smc_search`. k = 1 is the single-item
    argmax of Eq. 6 for every strategy. ``"greedy"`` is the methods' own
    (it breaks ties at random); it is refused here.
    """
    check_strategy(strategy)
    k = int(k)
    if k < 1:
        raise ConfigurationError(f"the batch size must be a positive integer, got {k}")
    if cov.available.sum() < k:
        left = int(cov.available.sum())
        raise ConfigurationError(f"a batch of {k} items needs {k} candidate items; only {left} left")
    if strategy == "greedy":
        raise ConfigurationError("the greedy batch is the methods' own select_batch; use pair, lars, dpp or kmeans")
    if k == 1:
        return [int(np.argmax(cov.single_beta()))]
    if strategy == "pair":
        return pair_batch(cov, k)
    pool = candidate_pool(cov, k, pool_size)
    gram = cov.gram(pool)
    v = cov.v[pool]
    if strategy == "lars":
        start = lars_batch(gram, v, k)
        starts = [start]
    elif strategy == "dpp":
        eig = np.linalg.eigh(gram)  # once for every draw
        starts = [sample_kdpp(gram, k, rng, eig) for _ in range(population)]
    else:
        if features is None:
            raise ConfigurationError("the kmeans strategy needs the buckets' reference vectors (features=)")
        starts = kmeans_batches(np.asarray(features)[pool], k, population, rng)
    batch, _ = smc_search(gram, v, starts, rng, rounds=rounds, population=population)
    return [int(b) for b in pool[batch]]
