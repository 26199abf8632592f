"""CAT's calibration and response model, judged on reference pseudo-targets (the ablation behind the default).

The references of each dataset are cut into 5 folds (``--reps`` different
cuts); each fold in turn plays the new models: the other references are
calibrated, every held-out reference is tested by CAT for ``--items`` items,
and the held-out references are ranked by θ̂. Per configuration the table
gives the mean over folds of Kendall τ between that ranking and the ranking
by full mean score (the static subset — the ``--items`` items of largest
corrected item–total correlation, ranked by mean score — for comparison), and
the error model each configuration learns (c, τ: Var = c·SE² + τ²) with the
mean z² of the raw posterior at 20 items.

Configurations:

* ``paper``: the paper's calibration and one-slope (Rasch) model;
* ``rasch``: the consistent calibration, one slope;
* ``2pl``: the consistent calibration, two-parameter items (the default);
* ``2pl-flat``: as ``2pl`` with a prior 10 times wider (close to the flat
  prior of the paper authors' code);
* ``2pl-joint``: a full 2PL, abilities refitted jointly with the slopes (the
  2PL ability weights items by slope, so it is not monotone in mean score).

A second table checks the alternative to the error model — multiplying k in
the likelihood: RMS error of θ̂ (Rasch, consistent calibration) at 10, 20
and 40 items with k × 1 and k × 4 on each dataset.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/cat_calibration.py
    OPENBLAS_NUM_THREADS=1 python benchmarks/cat_calibration.py --datasets alpacaeval2,mmlu --reps 1
"""

from __future__ import annotations

import argparse
import dataclasses
import time
import warnings

import numpy as np
from scipy.special import expit
from scipy.stats import kendalltau

from activeeval import datasets
from activeeval.data.matrix import ScoreMatrix
from activeeval.irt import continuous as irt
from activeeval.methods.cat import AbilityPosterior, default_prior, learn_error_model

ALL = ("alpacaeval2", "wmt21_en-zh_chrf", "wmt21_zh-en_chrf", "mmlu", "arc_challenge", "musr", "gsm",
       "commonsense", "ifeval", "math", "mmlu_pro")
CONFIGS = ("paper", "rasch", "2pl", "2pl-flat", "2pl-joint")


def joint_2pl(y: np.ndarray, cal: irt.Calibration, iters: int = 30) -> irt.Calibration:
    """Full 2PL: alternate slopes/difficulties (irt.fit_item_slopes) and 2PL abilities; sd(θ) fixed at its start."""
    theta, b, a = cal.theta_ref.copy(), cal.b.copy(), np.ones(cal.n_items)
    sd0 = theta.std()
    for _ in range(iters):
        a, b = irt.fit_item_slopes(y, theta, b, cal.k)
        total = np.clip(y.mean(axis=1), 1e-3, 1 - 1e-3)[:, None] * np.ones_like(y)
        target = (y + (total - y.mean(axis=1, keepdims=True))) @ a
        lo, hi = np.full(theta.size, -50.0), np.full(theta.size, 50.0)
        for _b in range(80):  # bisection on Σ_i a_i (y_ji − σ(a_i(θ − b_i))) = 0, increasing in θ
            mid = (lo + hi) / 2
            g = expit(a[None, :] * (mid[:, None] - b[None, :])) @ a - target
            lo, hi = np.where(g < 0, mid, lo), np.where(g < 0, hi, mid)
        new = (lo + hi) / 2
        shift, scale = new.mean(), new.std() / sd0
        theta, b, a = (new - shift) / scale, (b - shift) / scale, a * scale
    noise = irt.item_noise(y, theta, a, b)
    return dataclasses.replace(cal, theta_ref=theta, b=b, slopes=a, noise=noise, b_scale=None)


def config_calibration(config: str, scores: np.ndarray) -> irt.Calibration:
    if config == "paper":
        return irt.calibrate(scores, method="paper")
    if config == "rasch":
        return irt.calibrate(scores)
    if config in ("2pl", "2pl-flat"):
        return irt.calibrate(scores, response="2pl")
    cal = irt.calibrate(scores)
    return joint_2pl(cal.scale(scores), cal)


def run_cat(cal: irt.Calibration, rows: np.ndarray, n_items: int, sd_mult: float = 1.0) -> np.ndarray:
    mean0, sd0 = default_prior(cal)
    out = []
    for row in rows:
        post = AbilityPosterior(cal, mean0, sd0 * sd_mult)
        used: set[int] = set()
        for _ in range(n_items):
            item = post.nearest(1, used)[0]
            used.add(item)
            post.update(item, float(row[item]))
        out.append(post.mean)
    return np.asarray(out)


def load(name: str, max_items: int = 0) -> ScoreMatrix:
    """The dataset's complete models (the first ``max_items`` items if given)."""
    matrix, _ = datasets.load(name).dropna("models")
    return matrix.select_items(list(matrix.item_ids[:max_items])) if max_items else matrix


def pseudo_tau(matrix: ScoreMatrix, n_items: int, reps: int) -> dict[str, float]:
    y_all = matrix.scores
    k = y_all.shape[0]
    taus: dict[str, list[float]] = {c: [] for c in (*CONFIGS, "static")}
    for rep in range(reps):
        perm = np.random.default_rng(rep).permutation(k)
        for f in range(5):
            held = perm[f::5]
            train = np.setdiff1d(np.arange(k), held)
            truth = y_all[held].mean(axis=1)
            for config in CONFIGS:
                cal = config_calibration(config, y_all[train])
                est = run_cat(cal, cal.scale(y_all[held]), n_items, 10.0 if config == "2pl-flat" else 1.0)
                taus[config].append(kendalltau(est, truth).statistic)
            cal = irt.calibrate(y_all[train], method="paper")
            subset = np.argsort(-irt.corrected_item_total_correlation(cal.scale(y_all[train])), kind="stable")[:n_items]
            taus["static"].append(kendalltau(y_all[held][:, subset].mean(axis=1), truth).statistic)
    return {c: float(np.nanmean(v)) for c, v in taus.items()}


def k_factor_rms(matrix: ScoreMatrix) -> dict[tuple[float, int], float]:
    y_all = matrix.scores
    k = y_all.shape[0]
    perm = np.random.default_rng(20240).permutation(k)
    errs: dict[tuple[float, int], list[float]] = {}
    for f in range(5):
        held = perm[f::5]
        train = np.setdiff1d(np.arange(k), held)
        base = irt.calibrate(y_all[train])
        y_held = base.scale(y_all[held])
        truth = base.true_ability(y_held)
        for factor in (1.0, 4.0):
            cal = base.with_k_factor(factor)
            mean0, sd0 = default_prior(base)
            for row, t in zip(y_held, truth, strict=True):
                post = AbilityPosterior(cal, mean0, sd0)
                used: set[int] = set()
                for n in range(1, 41):
                    item = post.nearest(1, used)[0]
                    used.add(item)
                    post.update(item, float(row[item]))
                    if n in (10, 20, 40):
                        errs.setdefault((factor, n), []).append(post.mean - float(t))
    return {key: float(np.sqrt(np.mean(np.square(v)))) for key, v in errs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default=",".join(ALL))
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--max-items", type=int, default=0, help="only each dataset's first MAX_ITEMS items (0: all)")
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:
        args.datasets, args.items, args.reps, args.max_items = "math", 20, 1, 45
    names = [d.strip() for d in args.datasets.split(",") if d.strip()]
    warnings.simplefilter("ignore")  # incomplete reference models are dropped, as documented
    print(f"pseudo-target Kendall tau at {args.items} items (5 folds x {args.reps} cuts of the references)")
    head = f"{'dataset':<17}" + "".join(f"{c:>10}" for c in (*CONFIGS, "static")) + f"{'s':>6}"
    print(head)
    print("-" * len(head))
    for name in names:
        start = time.perf_counter()
        t = pseudo_tau(load(name, args.max_items), args.items, args.reps)
        print(f"{name:<17}" + "".join(f"{t[c]:>10.3f}" for c in (*CONFIGS, "static"))
              + f"{time.perf_counter() - start:>6.0f}", flush=True)
    print("\nlearned error model Var = c·SE² + τ² (consistent calibration), "
          "and the raw posterior's mean z² at 20 items")
    head = f"{'dataset':<17}{'response':>9}{'c':>7}{'τ':>7}{'z² raw @20':>12}{'z² cal @20':>12}"
    print(head)
    print("-" * len(head))
    for name in names:
        matrix = load(name, args.max_items)
        for response in ("rasch", "2pl"):
            c, tau2, diag = learn_error_model(matrix.scores, response=response)
            i = diag["checkpoints"].index(20)
            print(f"{name:<17}{response:>9}{c:>7.2f}{np.sqrt(tau2):>7.3f}{diag['mean_z2_raw'][i]:>12.2f}"
                  f"{diag['mean_z2_calibrated'][i]:>12.2f}", flush=True)
    print("\nRMS error of θ̂ on pseudo-targets, Rasch with k × 1 and k × 4 in the likelihood")
    head = f"{'dataset':<17}" + "".join(f"{f'k×{f:g} n={n}':>12}" for f in (1.0, 4.0) for n in (10, 20, 40))
    print(head)
    print("-" * len(head))
    for name in names:
        r = k_factor_rms(load(name, args.max_items))
        print(f"{name:<17}" + "".join(f"{r[(f, n)]:>12.3f}" for f in (1.0, 4.0) for n in (10, 20, 40)), flush=True)


if __name__ == "__main__":
    main()
