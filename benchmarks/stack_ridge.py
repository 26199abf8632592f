"""Research (issue 25, items 3-4): the default's model-based estimate stacked with a model-space regression.

On the default BayesAME's own items (its model-based selection does not depend on the target's scores), a
regression across the reference models predicts the rest of the benchmark from the scores so far: each
reference's label is its mean over the items not yet scored, its features its scores on the scored items, and
R̂ = (Σ scored + (N − n) · prediction) / N (:func:`regression_estimate`; "ridge" is RS-learn's RidgeCV with the
penalty chosen by leave-one-out error, on the default's items instead of random ones). The stacked estimate is

    R̂ = R̂_gp + w (R̂_reg − R̂_gp),   sd = c · sd_gp   (or c · sqrt(sd_gp² + (R̂_reg − R̂_gp)²): "disagree")

with sd_gp the model's own standard deviation (its scale, without its calibration factor), and w and c measured
at each n/N on the calibration's fold runs — reference models as pseudo-targets of a model built on the other
folds, played as ``activeeval.gp.prior.calibrate`` plays them (:func:`fold_runs`) — never on the target: w the
least-squares weight in [0, 1], c the root mean square of the stacked z, below 1 raised to its one-sided 90 %
bound and kept in [0.5, 3] (the default's factor-by-budget rules). Runs that switched to the design-based
estimate keep it. Variants (``--variants``):

* ``ridge``, ``mean``, ``partial``: the regression on the scored items' scores (RidgeCV), on their mean alone
  (least squares), or on the mean unpenalised and RidgeCV on what it leaves;
* ``gated``: ``ridge``, applied only while the target's mean on the scored items lies between the q and 1 − q
  quantiles of the references' means on the same items (``--gate-q``; fold runs classed the same way);
* ``disagree``: ``ridge`` with the disagreement in the interval (above);
* ``both``: ``gated`` and ``disagree``;
* ``est``: ``disagree``, applied only while the model's estimate lies between the q and 1 − q quantiles of the
  references' full scores (fold runs classed against their own references).
* ``edge``: ``est``, with w and c also measured on *edge runs* — the top (bottom) tenth of the references, at
  least 3, as pseudo-targets of a model built on the references below (above) a gap of another tenth, as the
  extrapolation protocol sets a new best model against older ones — classed by the same gate: at each n the
  smaller w and the larger c of the two pools (the edge pool where it has ``EDGE_MIN`` runs), so that the stack
  is honest for the reference-like runs and for the beyond-the-references runs the gate lets through;
  ``edge-ridge`` the same without the disagreement in the interval.
* ``edge-t``: ``edge`` with the estimate gate replaced by bins of how far the model's estimate lies beyond the
  references' q and 1 − q quantiles, in its own sd (``T_BINS``; none beyond the last): w and c measured and
  applied per bin.

The table compares each with the default on the same runs (the efficiency protocol: 50 % references, split draw
0, the targets of ``benchmarks/efficiency.py``, ``--seeds`` seeds). Run without the user cache (the fits are
the default's either way; the cache only saves time)::

    OPENBLAS_NUM_THREADS=1 ACTIVEEVAL_CACHE=off python benchmarks/stack_ridge.py --seeds 4
    OPENBLAS_NUM_THREADS=1 ACTIVEEVAL_CACHE=off python benchmarks/stack_ridge.py --seeds 4 \
        --datasets musr,ifeval,arc_challenge,mmlu --variants default,ridge,mean,partial
    OPENBLAS_NUM_THREADS=1 ACTIVEEVAL_CACHE=off python benchmarks/stack_ridge.py --seeds 4 --variants default,edge
    python benchmarks/stack_ridge.py --smoke                              # seconds: CI keeps it running
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from statistics import NormalDist

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.gp.prior import _calibration_folds, _calibration_grid, fit_hyperparameters
from activeeval.methods import bayesame as bm
from activeeval.methods.baselines.peers import RS_LEARN_ALPHAS
from activeeval.methods.registry import sharing_factory

Z = NormalDist().inv_cdf(0.975)
DATASETS = ("ifeval", "musr", "arc_challenge", "mmlu", "gsm", "math", "commonsense", "alpacaeval2", "mmlu_pro",
            "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")
FEW = {"mmlu_pro": 10, "wmt21_en-zh_chrf": 10, "wmt21_zh-en_chrf": 8}
KINDS = ("ridge", "mean", "partial")
#: variant -> (regression kind, gate, disagreement in the interval, edge runs)
VARIANTS = {"ridge": ("ridge", None, False, False), "mean": ("mean", None, False, False),
            "partial": ("partial", None, False, False), "gated": ("ridge", "rank", False, False),
            "disagree": ("ridge", None, True, False), "both": ("ridge", "rank", True, False),
            "est": ("ridge", "estimate", True, False), "edge": ("ridge", "estimate", True, True),
            "edge-t": ("ridge", "bins", True, True),
            "edge-ridge": ("ridge", "estimate", False, True)}
#: fewest edge runs at an n for their pool to count there
EDGE_MIN = 5
DEFAULT_VARIANTS = "default,ridge,disagree,both,est"
# rows of a fold run's record: error of the model, its sd, the two gates, each kind's error, then (_T) the distance
_GP, _SD, _RANK, _EST = 0, 1, 2, 3
_T = 4 + len(KINDS)  # after each kind's error: how far beyond the references' quantiles the estimate is, in its sd
#: ``edge-t``'s bins of that distance: the stack measured and applied separately in each, none beyond the last
T_BINS = ((-math.inf, -1.0), (-1.0, 0.5))


def regression_estimate(ref: np.ndarray, items, y: np.ndarray, n_items: int, kind: str = "ridge") -> np.ndarray:
    """R̂ of each target from a regression across the references (see the module); ``y`` (T, n) on ``items``."""
    s = np.asarray(items)
    mask = np.ones(n_items, dtype=bool)
    mask[s] = False
    z, label = ref[:, s], ref[:, mask].mean(1)
    k_refs, n = label.size, s.size
    y = np.atleast_2d(y)
    if kind in ("mean", "partial"):
        a = np.column_stack([np.ones(k_refs), z.mean(1)])
        a_pinv = np.linalg.pinv(a)
        coef = a_pinv @ label
        a_t = np.column_stack([np.ones(y.shape[0]), y.mean(1)])
        base = a_t @ coef
        if kind == "mean":
            return (y.sum(1) + (n_items - n) * base) / n_items
        proj = a @ a_pinv
        r, zc, yc, lev = label - a @ coef, z - proj @ z, y - a_t @ (a_pinv @ z), np.diag(proj)
    else:
        zm = z.mean(0)
        r, zc, yc, lev = label - label.mean(), z - zm, y - zm, np.full(k_refs, 1.0 / k_refs)
        base = np.full(y.shape[0], label.mean())
    d, u = np.linalg.eigh(zc @ zc.T)
    d = np.maximum(d, 0.0)
    ur = u.T @ r
    best = (math.inf, RS_LEARN_ALPHAS[0])
    for alpha in RS_LEARN_ALPHAS:  # RidgeCV: the leave-one-out error of each penalty
        shrink = d / (d + alpha)
        hat = np.einsum("kj,j,kj->k", u, shrink, u) + lev
        mse = float(np.mean(((r - u @ (shrink * ur)) / np.maximum(1.0 - hat, 1e-12)) ** 2))
        if mse < best[0]:
            best = (mse, alpha)
    pred = base + (yc @ zc.T) @ (u @ (ur / (d + best[1])))
    return (y.sum(1) + (n_items - n) * pred) / n_items


def beyond_in_sd(mean, sd, lo: float, hi: float):
    """How far the model's estimate lies beyond [lo, hi], in its own sd (negative inside: the distance to the
    nearer end)."""
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    return np.maximum(mean - hi, lo - mean) / np.maximum(sd, 1e-300)


def inner_rank(ref: np.ndarray, items, y: np.ndarray, q: float) -> np.ndarray:
    """Whether each target's mean on ``items`` (``y`` (T, n) its scores there) lies between the q and 1 − q
    quantiles of the references' means on the same items."""
    lo, hi = np.quantile(ref[:, items].mean(1), (q, 1.0 - q))
    means = np.atleast_2d(y).mean(1)
    return (means >= lo) & (means <= hi)


def fold_runs(reference, fit_g, truths: np.ndarray, seed: int, grid, q: float) -> list[np.ndarray]:
    """The calibration's fold runs (``bayesame._model_based_runs``, which ``calibrate`` plays), with the
    regressions: at each n of ``grid``, one record (rows: see ``_GP`` …, then each of ``KINDS``, then ``_T``) per
    pseudo-target still model-based."""
    ref = np.asarray(reference.scores, dtype=float)
    full_lo, full_hi = np.quantile(ref.mean(1), (q, 1.0 - q))
    truth_r = truths.mean(1)
    n_items = reference.n_items
    out = []
    for items, mean, sd, active in bm._model_based_runs(reference, fit_g, truths, seed, grid, bm.WARMUP, None):
        ok = active & (sd > 0)
        y = truths[:, items]
        rows = [mean - truth_r, sd, inner_rank(ref, items, y, q), (mean >= full_lo) & (mean <= full_hi)]
        rows += [regression_estimate(ref, items, y, n_items, k) - truth_r for k in KINDS]
        rows.append(beyond_in_sd(mean, sd, full_lo, full_hi))
        out.append(np.stack(rows)[:, ok])
    return out


def stack_weights(reference, fit, variants, q: float, folds: int = 5, max_items: int = 1000, seed: int = 0) -> dict:
    """Per variant: (n/N, w, c) at each n of the calibration's grid, from its fold runs (``calibrate``'s folds,
    fits and item subset)."""
    scores = np.asarray(reference.scores, dtype=float)
    k_refs = scores.shape[0]
    # the calibration's folds as stop 43 measured them (each fold's kernel refitted: the default then)
    sub, folds_played = _calibration_folds(reference, fit, folds=folds, max_items=max_items, seed=seed,
                                           fold_fit="refit")
    n_sub = sub.n_items
    grid = _calibration_grid(n_sub)[0]
    records: list[list[np.ndarray]] = [[] for _ in grid]
    for g, fold_ref, fit_g, truths in folds_played:
        for j, rec in enumerate(fold_runs(fold_ref, fit_g, np.asarray(truths, float), seed + g, grid, q)):
            records[j].append(rec)
    edge: list[list[np.ndarray]] = [[] for _ in grid]
    if any(VARIANTS[v][3] for v in variants if v in VARIANTS):
        # edge runs: the top (bottom) tenth of the references, at least 3, against the models below (above) a gap
        # of another tenth — reference models beyond the models they are predicted from, as a new best model is
        full = scores.mean(1)
        order = np.argsort(-full, kind="stable")
        k_edge, gap = max(3, int(round(0.1 * k_refs))), int(round(0.1 * k_refs))
        for side, ranked in enumerate((order, order[::-1])):
            group, rest = ranked[:k_edge], ranked[k_edge + gap:]
            if rest.size < 10:
                continue
            ids = [reference.model_ids[i] for i in np.sort(rest)]
            fit_e = fit_hyperparameters(reference.select_models(ids), n_pseudo=8, n_items=150, seed=seed,
                                        level_prior=fit.tau0 > 0, linear=fit.gamma > 0, start=fit)
            for j, rec in enumerate(fold_runs(sub.select_models(ids), fit_e, np.asarray(sub.scores[group], float),
                                              seed + 100 + side, grid, q)):
                edge[j].append(rec)
    out = {}
    for v in variants:
        kind, gate, disagree, use_edge = VARIANTS[v]
        if gate == "bins":
            out[v] = [_weights(grid, records, n_sub, kind, b, disagree, use_edge, edge=edge) for b in T_BINS]
        else:
            out[v] = _weights(grid, records, n_sub, kind, gate, disagree, use_edge, edge=edge)
    return out


def _weights(grid, records, n_sub: int, kind: str, gate, disagree: bool, use_edge: bool = False, edge=None):
    fracs, ws, cs = [], [], []
    for j, (n, parts) in enumerate(zip(grid, records, strict=True)):
        pools = [np.concatenate(parts, axis=1)]
        if use_edge and edge is not None and edge[j]:
            pools.append(np.concatenate(edge[j], axis=1))
        if isinstance(gate, tuple):  # a bin of the distance beyond the references (edge-t)
            pools = [e[:, (e[_T] >= gate[0]) & (e[_T] < gate[1])] for e in pools]
        elif gate is not None:
            pools = [e[:, e[_RANK if gate == "rank" else _EST] > 0.5] for e in pools]
        if pools[0].shape[1] < 10:
            continue
        pools = [pools[0]] + [e for e in pools[1:] if e.shape[1] >= EDGE_MIN]
        # the weight no pool would lower, and the factor every pool needs at it
        w = min(_stack_weight(e, kind) for e in pools)
        fracs.append(n / n_sub)
        ws.append(w)
        cs.append(max(_stack_factor(e, kind, w, disagree) for e in pools))
    return np.array(fracs), np.array(ws), np.array(cs)


def _stack_weight(e: np.ndarray, kind: str) -> float:
    err_gp, delta = e[_GP], e[4 + KINDS.index(kind)] - e[_GP]
    return float(np.clip(-(err_gp @ delta) / max(float(delta @ delta), 1e-300), 0.0, 1.0))


def _stack_factor(e: np.ndarray, kind: str, w: float, disagree: bool) -> float:
    from scipy.special import gammaincinv

    err_gp, sd, delta = e[_GP], e[_SD], e[4 + KINDS.index(kind)] - e[_GP]
    z = (err_gp + w * delta) / (np.sqrt(sd**2 + delta**2) if disagree else sd)
    m = z.size
    rms = float(np.sqrt(np.mean(z**2)))
    if rms < 1.0:
        rms = min(1.0, rms * math.sqrt(m / (2.0 * gammaincinv(m / 2, 0.10))))
    return min(max(rms, 0.5), 3.0)


def _at(fracs: np.ndarray, values: np.ndarray, f: float) -> float:
    return float(np.interp(math.log(f), np.log(fracs), values))


def play(ds: str, regime: str, seeds: int, targets: int | None, budgets, at_n, variants, q: float,
         max_items: int | None = None) -> dict:
    """Per variant, rows (n, R, R̂, variance, random sampling's variance) of every run at each n of the table
    (on a random ``max_items`` of the items when given: the smoke run)."""
    matrix = datasets.load(ds)
    if max_items is not None and matrix.n_items > max_items:
        keep = np.sort(np.random.default_rng(0).choice(matrix.n_items, size=max_items, replace=False))
        matrix = matrix.select_items(keep.tolist())
    split = make_split(matrix, regime, targets or FEW.get(ds, 20), 0)
    n_items = matrix.n_items
    ns = sorted({max(2, round(b * n_items)) for b in budgets} | {n for n in at_n if n < n_items})
    stacked = [v for v in variants if v != "default"]
    rows: dict[str, list] = {v: [] for v in variants}
    for s in range(seeds):
        reference = matrix.select_models(sample_references(split.pool, 0.5, s, 0))
        ref = np.asarray(reference.scores, dtype=float)
        full_lo, full_hi = np.quantile(ref.mean(1), (q, 1.0 - q))
        make = sharing_factory("bayesame", reference)
        weights = stack_weights(reference, make(seed=0).fit_, stacked, q)
        for target in split.targets:
            truth = np.asarray(matrix.model_scores(target), dtype=float)
            big_r, s2 = truth.mean(), truth.var(ddof=1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                method = make(seed=method_seed(0, s, 0))
                items: list[int] = []
                for n in range(1, max(ns) + 1):
                    item = method.select()
                    method.observe(item, float(truth[item]))
                    items.append(int(item))
                    if n not in ns:
                        continue
                    e, f = method.estimate(), n / n_items
                    rs_var = s2 * (1 - f) / n
                    if "default" in rows:
                        rows["default"].append((n, big_r, e.mean, e.var, rs_var))
                    y = truth[items][None, :]
                    for v in stacked:
                        kind, gate, disagree, _ = VARIANTS[v]
                        mean, var = e.mean, e.var
                        sd0 = math.sqrt(e.var) / method.calibration_factor
                        if gate == "bins":
                            t = float(beyond_in_sd(e.mean, sd0, full_lo, full_hi))
                            hit = [w for b, w in zip(T_BINS, weights[v], strict=True) if b[0] <= t < b[1]]
                            fracs, ws, cs = hit[0] if hit else (np.zeros(0),) * 3
                        else:
                            fracs, ws, cs = weights[v]
                        inside = (gate in (None, "bins") or (gate == "rank" and bool(inner_rank(ref, items, y, q)[0]))
                                  or (gate == "estimate" and full_lo <= e.mean <= full_hi))
                        if method.mode == "model" and fracs.size and inside:
                            reg = float(regression_estimate(ref, items, y, n_items, kind)[0])
                            mean = e.mean + _at(fracs, ws, f) * (reg - e.mean)
                            var = _at(fracs, cs, f) ** 2 * (sd0**2 + ((reg - e.mean) ** 2 if disagree else 0.0))
                            if e.bounds is not None:
                                mean = min(max(mean, e.bounds[0]), e.bounds[1])
                        rows[v].append((n, big_r, mean, var, rs_var))
    return {"ns": ns, "rows": {v: np.array(r, dtype=float) for v, r in rows.items()}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--regimes", default="interpolation,extrapolation")
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"default and any of {', '.join(VARIANTS)}")
    p.add_argument("--seeds", type=int, default=4)
    p.add_argument("--targets", type=int, default=None, help="targets per split (default: the efficiency table's)")
    p.add_argument("--gate-q", type=float, default=0.1, help="the gates' quantile q (default 0.1)")
    p.add_argument("--max-items", type=int, default=None, help="play on a random subset of this many items")
    p.add_argument("--smoke", action="store_true",
                   help="seconds: AlpacaEval 2 (200 of its items), one seed, two targets, every variant")
    a = p.parse_args(argv)
    budgets: tuple[float, ...] = (0.025, 0.05, 0.10, 0.25)
    at_n: tuple[int, ...] = (25, 50, 100, 200)
    if a.smoke:
        a.datasets, a.regimes, a.seeds, a.targets, budgets, at_n = "alpacaeval2", "interpolation", 1, 2, (0.1,), ()
        a.variants = "default," + ",".join(VARIANTS)
        a.max_items = 200
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v != "default" and v not in VARIANTS]
    if unknown:
        p.error(f"--variants: unknown {', '.join(unknown)}; choose from default, {', '.join(VARIANTS)}")
    start = time.perf_counter()
    print(f"{'dataset':17s} {'regime':6s} {'n':>5s}  " + "  ".join(f"{v:>22s}" for v in variants)
          + "   (each: coverage / median ESS / MAE x100)")
    summary: dict[str, list] = {v: [] for v in variants}
    for ds in a.datasets.split(","):
        for regime in a.regimes.split(","):
            out = play(ds, regime, a.seeds, a.targets, budgets, at_n, variants, a.gate_q, a.max_items)
            for n in out["ns"]:
                cells = []
                for v in variants:
                    r = out["rows"][v]
                    r = r[r[:, 0] == n]
                    err = np.abs(r[:, 2] - r[:, 1])
                    cov = float(np.mean(err <= Z * np.sqrt(r[:, 3])))
                    ess = float(np.median(r[:, 4] / np.maximum(r[:, 3], 1e-300)))
                    cells.append(f"{cov:.3f} / {ess:5.2f} / {100 * err.mean():5.2f}")
                    summary[v].append((regime, cov, ess))
                print(f"{ds:17s} {regime[:6]:6s} {n:5d}  " + "  ".join(f"{c:>22s}" for c in cells), flush=True)
    for v in variants:
        for regime in a.regimes.split(","):
            s = np.array([(c, e) for g, c, e in summary[v] if g == regime])
            if s.size:
                print(f"# {v} {regime}: {len(s)} cells; coverage below 0.93 in {int(np.sum(s[:, 0] < 0.93))}, "
                      f"above 0.97 in {int(np.sum(s[:, 0] > 0.97))}; median ESS < 1 in {int(np.sum(s[:, 1] < 1))}, "
                      f"median of the cells' median ESS {np.median(s[:, 1]):.2f}")
    print(f"# wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
