"""Hypotheses for the gaps between our Table 1 and the BayesAME paper's (EW-IRMSE, 50 % references).

Every row is a *variant* of one baseline, computed from the package's fast
replays or from a small re-implementation in this file (the package is not
modified). All variants of a method see exactly the same splits, reference
samples and item orders as the package's replays (common random numbers), so
differences between rows of one method are not seed noise.

Usage (from the repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 nice -n 10 python benchmarks/paper_gaps.py               # IFEval, 50 seeds
    python benchmarks/paper_gaps.py --seeds 10 --datasets ifeval,musr --methods seq-apw

Variants (the label printed in the table is given first):

RS-Mean / Bayes-RS-Learn
    ``ours``: the package replay, unchanged (reference rows).

IRT (package: 2-PL, joint MAP item fit with a ~ N(1, 1), b ~ N(0, 3²),
exact quadrature ability posterior with θ ~ N(0, 1) after every item, R̂ = Eq. 5
with w = 1/N: observed scores + posterior-mean predictions of the unobserved)
    ``stale50 (R̂ frozen, prior before n=50)``: the paper refreshed its MCMC only
    every 50 evaluations "resulting in piecewise-constant curves": R̂(n) =
    R̂(50·⌊n/50⌋), and R̂(n < 50) = the estimate with no observation (the class's
    n = 0 estimate E_prior[Σ_i μ_i(θ)]/N; printed next to the references' mean).
    ``stale50 (first fit at n=1)``: the same, refreshed at n = 1, 51, 101, ...
    ``stale50 ability only (Eq. 5 with current s_C)``: the ability posterior is
    the one of the last refresh, the observed scores are always current (not
    piecewise constant, so less faithful to the paper's description).
    ``all items predicted``: R̂ = (1/N) Σ_all E[μ_i(θ) | s_C] (the observed
    scores not plugged in; not what the paper says, which is Eq. 5).
    ``ability prior N(0, 3²)``: a wider prior on the target's ability.
    ``item prior b ~ N(0, 1)`` (and ``+ stale50``): the item fit with a
    tighter difficulty prior; the paper does not give its MCMC priors, this
    measures how much the extrapolation number depends on them.

Seq-APW (package: greedy facility-location covering on the Pearson correlation
of the reference-score vectors, constant vectors 0 to others and 1 to identical
ones, each item to its most correlated anchor, anchors own themselves,
w = cluster size / N)
    ``Zhang sim+assign``: the similarity and the assignment of Zhang et al.'s
    ``anchor_points.py`` (np.corrcoef with NaN -> 0, so a constant item is 0 to
    everything including itself; cluster = np.argmax(corrs[anchors, :]), so an
    anchor need not own itself), with our nested greedy covering.
    ``Zhang + set-order weights``: as above, but the weights are in the order of
    ``list(set(anchors))`` (as in that file) while the scores stay in selection
    order (what a sequential port that keeps C as a list would compute).
    ``Euclidean similarity``: 1 − d/d_max with d the Euclidean distance of φ.
    ``k-center selection``: farthest-point (maximin) covering instead of
    facility location, our assignment.
    ``k-medoids refit at each n``: FasterPAM (``kmedoids`` package, init
    "random", seeded) with k = n on 1 − corr at every n (anchors not nested) and
    the original weights, on an n grid (every 10th n, RMSE curve linearly
    interpolated); skipped if ``kmedoids`` is not importable.
    ``NaN corr kept everywhere``: np.corrcoef without the NaN fix: with any
    constant item every covering gain is NaN, np.argmax takes the first NaN, so
    items are taken in index order; once a constant item is an anchor,
    np.argmax sends every item to it.
    ``NaN kept in assignment only``: Zhang's NaN -> 0 for the selection, raw
    NaN in the assignment.
    ``farthest anchor (argmax of 1−corr)``: each item joins its *least*
    correlated anchor (anchors own themselves) — an argmax on the distance
    matrix 1 − corr given to k-medoids instead of on corr.
    ``farthest anchor, Zhang assignment``: the same with anchors not forced to
    own themselves (exactly ``np.argmax((1 − corrs)[anchors, :], axis=0)``).
    ``farthest anchor, Zhang assignment, NaN kept``: both of the last two
    deviations at once (argmin of raw corr: the first NaN still wins).
    ``k-medoids refit at each n + farthest anchor``: the k-medoids variant with
    np.argmax((1 − corrs)[anchors, :], axis=0) as the assignment.
    ``weights / n not / N`` (raw and clipped to [0, 1]): R̂ = Σ (size_i / n) s_i.

ProEval (package: θ ~ N(m, empirical covariance), s = θ + N(0, σ²), σ² = 0.3 (0.01 before),
R = mean θ; random items)
    ``σ²=…``: a sweep. ProEval's own implementation (google-deepmind/proeval,
    ``BQPriorSampler``: linear kernel on the centred reference scores / √(K−1),
    i.e. the same prior) defaults to ``noise_variance=0.3``.
    ``σ²_i = m_i(1 − m_i)``: per-item Bernoulli variance of the reference mean
    (floored at 1e-3). ``Σ × 0.5``: a scaled prior (R̂ is then exactly that of
    σ² = 0.02). ``20 % diagonal shrinkage``: Σ -> 0.8 Σ + 0.2 diag(Σ).

Metric: EW-IRMSE = 100 ∫ x·100·RMSE(x) dx (SPEC §5), RMSE over seeds per target
then averaged over the 10 targets; ± is a bootstrap standard error over seeds.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from scipy.linalg import cholesky, solve_triangular
from scipy.optimize import minimize
from scipy.special import expit

from activeeval.datasets import load
from activeeval.experiments.metrics import ew_irmse, rmse_curve
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.irt.baseline import (
    ItemParams,
    ability_grid,
    grid_loglik_all,
    grid_loglik_terms,
    item_moments,
)
from activeeval.methods.base import random_order
from activeeval.methods.baselines import BayesRSLearn, IRTBaseline, ProEval, RSMean, SeqAPW, irt, proeval, seq_apw

# Paper Table 1 (binary scores, 50 % references): (interpolation, extrapolation)
PAPER = {
    "ifeval": {
        "rs-mean": (72.45, 64.54), "seq-apw": (1464.91, 488.54), "bayes-rs-learn": (76.22, 466.45),
        "proeval": (78.53, 1017.33), "irt": (79.06, 212.27),
    },
    "musr": {
        "rs-mean": (69.27, 71.28), "seq-apw": (949.90, 719.86), "bayes-rs-learn": (69.12, 289.76),
        "proeval": (68.54, 353.44), "irt": (84.51, 104.41),
    },
    "arc_challenge": {
        "rs-mean": (56.09, 53.21), "seq-apw": (1391.22, 768.83), "bayes-rs-learn": (70.84, 327.45),
        "proeval": (74.06, 364.21), "irt": (44.19, 88.58),
    },
}
METHODS = ("rs-mean", "irt", "seq-apw", "proeval", "bayes-rs-learn")
KMED_STEP = 10


# ------------------------------------------------------------------------ IRT
def fit_2pl_prior(y: np.ndarray, a_mean: float = 1.0, a_sd: float = 1.0, b_sd: float = 3.0) -> ItemParams:
    """Joint MAP 2-PL fit as :func:`activeeval.irt.baseline.fit_2pl`, with configurable item priors."""
    from activeeval.irt.baseline import _init  # same start as the package

    k, n = y.shape
    theta, a, b = _init(y)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        t, aa, bb = x[:k], x[k : k + n], x[k + n :]
        eta = t[:, None] * aa[None, :] - bb[None, :]
        nll = float(np.sum(np.logaddexp(0.0, eta) - y * eta)) + 0.5 * float(t @ t)
        nll += 0.5 * float(np.sum(((aa - a_mean) / a_sd) ** 2)) + 0.5 * float(np.sum((bb / b_sd) ** 2))
        g = expit(eta) - y
        grad = np.concatenate([g @ aa + t, g.T @ t + (aa - a_mean) / a_sd**2, -g.sum(axis=0) + bb / b_sd**2])
        return nll, grad

    x = minimize(fun, np.concatenate([theta, a, b]), jac=True, method="L-BFGS-B", options={"maxiter": 500}).x
    return ItemParams(a=x[k : k + n], b=x[k + n :], abilities=x[:k])


def irt_states(params: ItemParams, truths: np.ndarray, seed: int, prior_sd: float = 1.0):
    """Posterior weights on the ability grid after n = 0..N−1 items, and the running sums Eq. 5 needs.

    Same computation as :func:`activeeval.methods.baselines.IRTBaseline.replay` (checked against it).
    """
    n_items = truths.shape[1]
    order = random_order(int(seed), n_items)
    grid, _ = ability_grid(401)
    log_prior = -0.5 * (grid / prior_sd) ** 2
    mu, _ = item_moments(params, grid)
    u_mean = np.cumsum(np.vstack([mu.sum(axis=1), -mu[:, order].T]), axis=0)[:-1]  # Σ_U μ after n = 0..N−1
    terms = grid_loglik_terms(params, grid)
    weights = np.empty((truths.shape[0], n_items, grid.size))
    obs_sum = np.empty((truths.shape[0], n_items))
    for t, truth in enumerate(truths):
        log_lik = grid_loglik_all(params, grid, truth, terms)[:, order].T
        log_post = np.cumsum(np.vstack([log_prior, log_lik[:-1]]), axis=0)
        w = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        weights[t] = w / w.sum(axis=1, keepdims=True)
        obs_sum[t] = np.concatenate([[0.0], np.cumsum(truth[order])[:-1]])
    return weights, u_mean, mu.sum(axis=1), obs_sum


def irt_estimates(state, truths, *, estimator="eq5", refresh=None, first=50, stale="full") -> np.ndarray:
    """R̂ after n = 1..N (shape (T, N)) for one way of reading the paper's IRT."""
    weights, u_mean, all_mean, obs_sum = state
    n_items = truths.shape[1]
    est = np.empty((truths.shape[0], n_items + 1))  # index n = items observed, 0..N
    if estimator == "eq5":
        est[:, :n_items] = (obs_sum + np.einsum("tng,ng->tn", weights, u_mean)) / n_items
        est[:, n_items] = truths.mean(axis=1)  # C = E: exact
    else:  # every item predicted, observed ones too
        est[:, :n_items] = np.einsum("tng,g->tn", weights, all_mean) / n_items
        est[:, n_items] = est[:, n_items - 1]  # (one item more hardly moves it; avoids a second pass)
    if refresh is None:
        return est[:, 1:]
    n = np.arange(n_items + 1)
    last = np.where(n < first, 0, first + ((n - first) // refresh) * refresh)  # last refresh at or before n
    if stale == "full":
        return est[:, last][:, 1:]
    out = np.empty_like(est)  # stale ability posterior, current observed scores (Eq. 5)
    lr = np.minimum(last[:n_items], n_items - 1)
    out[:, :n_items] = (obs_sum + np.einsum("tng,ng->tn", weights[:, lr], u_mean)) / n_items
    out[:, n_items] = truths.mean(axis=1)
    return out[:, 1:]


def irt_variants(ref, truths, seed, info) -> dict[str, np.ndarray]:
    out = {}
    ours = IRTBaseline.replay(ref, truths, seed)[0]
    out["ours (exact posterior every n, Eq. 5)"] = ours
    if ref.kind != "binary":
        return out
    params = irt.fit_item_params(ref)
    st = irt_states(params, truths, seed)
    mine = irt_estimates(st, truths)
    assert np.allclose(mine, ours, atol=1e-9), "IRT re-implementation differs from the package replay"
    info.setdefault("irt_n0", []).append(float(irt_estimates(st, truths, refresh=10**9, first=10**9)[0, 0]))
    info.setdefault("ref_mean", []).append(float(np.nanmean(ref.scores)))
    out["stale50 (R̂ frozen, prior before n=50)"] = irt_estimates(st, truths, refresh=50, first=50)
    out["stale50 (R̂ frozen, first fit at n=1)"] = irt_estimates(st, truths, refresh=50, first=1)
    out["stale50 ability only (Eq. 5 with current s_C)"] = irt_estimates(st, truths, refresh=50, first=50,
                                                                         stale="ability")
    out["all items predicted (not Eq. 5)"] = irt_estimates(st, truths, estimator="all")
    out["all items predicted + stale50"] = irt_estimates(st, truths, estimator="all", refresh=50, first=50)
    out["ability prior N(0, 3^2)"] = irt_estimates(irt_states(params, truths, seed, prior_sd=3.0), truths)
    st_b = irt_states(fit_2pl_prior(np.asarray(ref.scores, dtype=float), b_sd=1.0), truths, seed)
    out["item prior b ~ N(0, 1)"] = irt_estimates(st_b, truths)
    out["item prior b ~ N(0, 1) + stale50"] = irt_estimates(st_b, truths, refresh=50, first=50)
    return out


# -------------------------------------------------------------------- Seq-APW
def zhang_corr(phi: np.ndarray, nan_to_zero: bool = True) -> np.ndarray:
    """np.corrcoef of the items' reference vectors (rows of phi), as in anchor_points.py."""
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.corrcoef(phi)
    if nan_to_zero:
        c[np.isnan(c)] = 0.0
    return c


def assignment_path(sim: np.ndarray, order: np.ndarray, *, mode: str = "max", own: bool = True):
    """Cluster sizes / N of every prefix of ``order``: yields weights (in selection order) for n = 1..N.

    Each item joins the anchor of largest (``mode="max"``) or smallest (``"min"``)
    ``sim``; ties keep the earliest anchor and a NaN wins over numbers, the
    first NaN for good (np.argmax / np.argmin over the anchors in selection
    order). ``own``: an anchor always owns itself (the package); otherwise it
    is assigned like any other item (anchor_points.py).
    """
    n_items = sim.shape[0]
    owner = np.full(n_items, -1, dtype=np.intp)
    best = np.full(n_items, -np.inf if mode == "max" else np.inf)
    locked = np.zeros(n_items, dtype=bool)  # owner reached through a NaN: never changes again
    counts = np.zeros(order.size, dtype=np.intp)
    for n, j in enumerate(order):
        col = sim[j]
        nan = np.isnan(col)
        moved = (col > best) if mode == "max" else (col < best)
        moved |= nan & ~locked
        moved &= ~locked
        if own:
            moved[j] = True
        idx = np.flatnonzero(moved)
        prev = owner[idx]
        counts -= np.bincount(prev[prev >= 0], minlength=order.size)
        counts[n] += idx.size
        owner[idx] = n
        best[idx] = col[idx]
        locked[idx] = nan[idx]
        if own:
            locked[j] = True
        yield counts[: n + 1] / n_items


def apw_from_path(truths: np.ndarray, order: np.ndarray, path) -> np.ndarray:
    observed = truths[:, order]
    out = np.empty(observed.shape)
    for n, w in enumerate(path):
        out[:, n] = observed[:, : n + 1] @ w
    return out


def set_order_estimates(truths: np.ndarray, order: np.ndarray, sim: np.ndarray) -> np.ndarray:
    """Zhang assignment, weights listed in list(set(anchors)) order, scores in selection order."""
    observed = truths[:, order]
    out = np.empty(observed.shape)
    for n, w in enumerate(assignment_path(sim, order, mode="max", own=False)):
        anchors = order[: n + 1]
        pos = {int(a): k for k, a in enumerate(anchors)}
        w_set = w[[pos[a] for a in list(set(anchors.tolist()))]]  # weight of the k-th anchor in set order
        out[:, n] = observed[:, : n + 1] @ w_set
    return out


def kcenter_order(sim: np.ndarray, seed: int) -> np.ndarray:
    """Farthest-point covering: start at the item most correlated with all, then the least covered item."""
    n_items = sim.shape[0]
    rng = np.random.default_rng(seed)
    first = int(np.argmax(sim.sum(axis=0)))
    order = [first]
    best = sim[:, first].copy()
    taken = np.zeros(n_items, dtype=bool)
    taken[first] = True
    for _ in range(1, n_items):
        cand = np.where(taken, np.inf, best)
        ties = np.flatnonzero(cand <= cand.min() + 1e-12)
        j = int(ties[0]) if ties.size == 1 else int(rng.choice(ties))
        order.append(j)
        taken[j] = True
        best = np.maximum(best, sim[:, j])
    return np.asarray(order)


def kmedoids_estimates(truths: np.ndarray, corr: np.ndarray, seed: int, grid: np.ndarray):
    """anchor_points.py's AnchorPointsWeightedPred refitted with k = n at each n of ``grid`` (not nested).

    Returns (nearest-anchor estimates, farthest-anchor estimates), each (T, len(grid)), or None
    without the ``kmedoids`` package.
    """
    try:
        import kmedoids
    except ImportError:
        return None
    near = np.empty((truths.shape[0], grid.size))
    far = np.empty_like(near)
    for g, k in enumerate(grid):
        sel = list(set(kmedoids.fasterpam(1 - corr, int(k), init="random", random_state=seed % 2**31).medoids.tolist()))
        for out, members in ((near, np.argmax(corr[sel, :], axis=0)), (far, np.argmin(corr[sel, :], axis=0))):
            out[:, g] = truths[:, sel] @ (np.bincount(members, minlength=len(sel)) / corr.shape[0])
    return near, far


def seq_apw_variants(ref, truths, seed, info) -> dict[str, np.ndarray]:
    out = {}
    ours = SeqAPW.replay(ref, truths, seed)[0]
    out["ours (covering, corr, anchors own, /N)"] = ours
    phi = np.asarray(ref.scores, dtype=float).T
    n_items = phi.shape[0]
    const = phi.std(axis=1) == 0
    info.setdefault("constant_items", []).append(int(const.sum()))
    sim_ours = seq_apw.item_similarity(phi)
    zc = zhang_corr(phi)
    order_z = seq_apw.covering_order(zc, seed)
    out["Zhang sim+assign (NaN->0, anchor need not own)"] = apw_from_path(
        truths, order_z, assignment_path(zc, order_z, own=False)
    )
    out["Zhang + set-order weights (misaligned)"] = set_order_estimates(truths, order_z, zc)
    sq = (phi**2).sum(axis=1)
    dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * phi @ phi.T, 0.0))
    sim_e = 1.0 - dist / dist.max()
    order_e = seq_apw.covering_order(sim_e, seed)
    out["Euclidean similarity"] = apw_from_path(truths, order_e, seq_apw.anchor_weight_path(sim_e, order_e))
    order_k = kcenter_order(sim_ours, seed)
    out["k-center (farthest-point) selection"] = apw_from_path(
        truths, order_k, seq_apw.anchor_weight_path(sim_ours, order_k)
    )
    grid = np.arange(2, n_items, KMED_STEP)
    km = kmedoids_estimates(truths, zc, seed, grid)
    if km is not None:  # on the grid; the RMSE curve is interpolated in n later
        out[f"k-medoids refit at each n (grid of {KMED_STEP})"] = ("grid", grid, km[0])
    raw = zhang_corr(phi, nan_to_zero=False)
    order_nan = np.arange(n_items) if const.any() else seq_apw.covering_order(raw, seed)
    out["NaN corr kept everywhere (index order)"] = apw_from_path(
        truths, order_nan, assignment_path(raw, order_nan, own=False)
    )
    out["NaN kept in assignment only"] = apw_from_path(truths, order_z, assignment_path(raw, order_z, own=False))
    out["farthest anchor (argmax 1-corr), anchors own"] = apw_from_path(
        truths, order_z, assignment_path(zc, order_z, mode="min", own=True)
    )
    out["farthest anchor, Zhang assignment (no own)"] = apw_from_path(
        truths, order_z, assignment_path(zc, order_z, mode="min", own=False)
    )
    out["farthest anchor, Zhang assignment, NaN kept"] = apw_from_path(
        truths, order_z, assignment_path(raw, order_z, mode="min", own=False)
    )
    if km is not None:
        out["k-medoids refit at each n + farthest anchor"] = ("grid", grid, km[1])
    scale = n_items / np.arange(1, n_items + 1)
    out["weights size/n instead of /N"] = ours * scale
    out["weights size/n, clipped to [0,1]"] = np.clip(ours * scale, 0.0, 1.0)
    return out


# -------------------------------------------------------------------- ProEval
def proeval_general(ref, truths, seed, noise, shrink: float = 0.0, scale: float = 1.0) -> np.ndarray:
    """:func:`activeeval.methods.baselines.proeval.proeval_path` with per-item noise and a modified prior."""
    m, a = proeval.proeval_factor(np.asarray(ref.scores, dtype=float))
    n_items = m.size
    order = random_order(int(seed), n_items)
    a_o, a_bar = a[order], a.mean(axis=0)
    diag = (a * a).sum(axis=1)
    cov = scale * (1 - shrink) * (a_o @ a_o.T)
    cov[np.diag_indices(n_items)] += scale * shrink * diag[order] + np.broadcast_to(noise, (n_items,))[order]
    cov_r = scale * ((1 - shrink) * (a_o @ a_bar) + shrink * diag[order] / n_items)
    chol = cholesky(cov, lower=True, check_finite=False)
    sol = solve_triangular(chol, np.column_stack([cov_r, (truths[:, order] - m[order]).T]), lower=True)
    return m.mean() + np.cumsum(sol[:, :1] * sol[:, 1:], axis=0).T


def proeval_variants(ref, truths, seed, info) -> dict[str, np.ndarray]:
    out = {}
    ours = ProEval.replay(ref, truths, seed)[0]  # the package default, sigma2 = 0.3
    check = proeval_general(ref, truths, seed, 0.3)
    assert np.allclose(check, ours, atol=1e-9), "ProEval re-implementation differs from the package replay"
    for s2 in (1e-4, 1e-3, 0.01, 0.05, 0.1, 0.3, 0.5, 1.0):
        notes = {0.3: " (package and ProEval code default)", 0.01: " (our old default)"}
        label = f"sigma2 = {s2:g}" + notes.get(s2, "")
        out[label] = ours if s2 == 0.3 else ProEval.replay(ref, truths, seed, noise_var=s2)[0]
    m = np.nanmean(np.asarray(ref.scores, dtype=float), axis=0)
    out["sigma2_i = m_i(1-m_i) (Bernoulli, floor 1e-3)"] = proeval_general(
        ref, truths, seed, np.maximum(m * (1 - m), 1e-3)
    )
    out["sigma2 = 0.01, Sigma x 0.5 (= sigma2 0.02)"] = proeval_general(ref, truths, seed, 0.01, scale=0.5)
    out["sigma2 = 0.01, 20% diagonal shrinkage"] = proeval_general(ref, truths, seed, 0.01, shrink=0.2)
    return out


def single(fn):
    def variants(ref, truths, seed, info):
        return {"ours": fn(ref, truths, seed)[0]}

    return variants


VARIANTS = {
    "rs-mean": single(RSMean.replay),
    "irt": irt_variants,
    "seq-apw": seq_apw_variants,
    "proeval": proeval_variants,
    "bayes-rs-learn": single(BayesRSLearn.replay),
}


# -------------------------------------------------------------------- driver
def ew_of(stack, truth: np.ndarray, n_items: int) -> float:
    """EW-IRMSE of a (T, S, N) array, or of ("grid", n_grid, (T, S, G)) with the RMSE interpolated in n."""
    if isinstance(stack, tuple):
        _, grid, arr = stack
        curve = np.interp(np.arange(1, n_items + 1), grid, rmse_curve(arr, truth))
        return ew_irmse(curve)
    return ew_irmse(rmse_curve(stack, truth))


def bootstrap_se(stack, truth: np.ndarray, n_items: int, n_boot: int, rng: np.random.Generator) -> float:
    arr = stack[2] if isinstance(stack, tuple) else stack
    n_seeds = arr.shape[1]
    if n_seeds < 2:
        return float("nan")
    vals = []
    for _ in range(n_boot):
        idx = rng.integers(0, n_seeds, n_seeds)
        sub = (stack[0], stack[1], arr[:, idx]) if isinstance(stack, tuple) else arr[:, idx]
        vals.append(ew_of(sub, truth, n_items))
    return float(np.std(vals, ddof=1))


def complete_refs(matrix, ids):
    ref = matrix.select_models(ids)
    ok = ~np.isnan(np.asarray(ref.scores, dtype=float)).any(axis=1)
    return ref if ok.all() else ref.select_models([m for m, keep in zip(ref.model_ids, ok, strict=True) if keep])


def run(dataset: str, methods, n_seeds: int, n_boot: int) -> list[tuple]:
    matrix = load(dataset)
    rows = {}
    for regime in ("interpolation", "extrapolation"):
        split = make_split(matrix, regime)
        truths = np.stack([matrix.model_scores(t) for t in split.targets]).astype(float)
        truth = truths.mean(axis=1)
        t0 = time.time()
        per = {meth: {} for meth in methods}
        info: dict[str, dict] = {meth: {} for meth in methods}
        for s in range(n_seeds):
            ref = complete_refs(matrix, sample_references(split.pool, 0.5, s))
            seed = method_seed(0, s, 0)
            for meth in methods:
                for label, est in VARIANTS[meth](ref, truths, seed, info[meth]).items():
                    per[meth].setdefault(label, []).append(est)
        rng = np.random.default_rng(12345)
        for meth in methods:
            for label, runs in per[meth].items():
                if isinstance(runs[0], tuple):
                    stack = ("grid", runs[0][1], np.stack([r[2] for r in runs], axis=1))
                else:
                    stack = np.stack(runs, axis=1)
                val = ew_of(stack, truth, matrix.n_items)
                se = bootstrap_se(stack, truth, matrix.n_items, n_boot, rng)
                rows.setdefault((meth, label), {})[regime] = (val, se)
            for key, vals in info[meth].items():
                print(f"# {dataset} {regime} {meth}: mean {key} over seeds = {np.mean(vals):.4f}", file=sys.stderr)
        print(f"# {dataset} {regime}: {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    return [(dataset, meth, label, r) for (meth, label), r in rows.items()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=50, help="reference samples (seeds 0..S-1), default 50")
    ap.add_argument("--datasets", default="ifeval", help="comma-separated, default ifeval")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"subset of {','.join(METHODS)}")
    ap.add_argument("--bootstrap", type=int, default=100, help="bootstrap resamples of the seeds for the ± (0: none)")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args(argv)
    if args.smoke:
        args.seeds, args.datasets, args.methods, args.bootstrap = 1, "math", "rs-mean", 0
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = set(methods) - set(METHODS)
    if unknown:
        ap.error(f"unknown methods {sorted(unknown)}; choose from {','.join(METHODS)}")
    table = []
    for ds in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        table += run(ds, methods, args.seeds, args.bootstrap)

    def fmt(v):
        val, se = v
        return f"{val:8.1f}" + (f" ± {se:5.1f}" if np.isfinite(se) else "        ")

    head = f"{'dataset':<13} {'method':<15} {'variant':<50} {'interp.':>16} {'extrap.':>16} {'paper':>18}"
    print(f"EW-IRMSE, 50 % references, {args.seeds} seeds (± bootstrap SE over seeds)")
    print(head)
    print("-" * len(head))
    for ds, meth, label, r in table:
        paper = PAPER.get(ds, {}).get(meth)
        p = f"{paper[0]:8.2f} / {paper[1]:7.2f}" if paper else "—"
        print(f"{ds:<13} {meth:<15} {label:<50} {fmt(r['interpolation']):>16} {fmt(r['extrapolation']):>16} {p:>18}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
