"""Ablation: CAT's error on reference pseudo-targets, with and without the references' local error check.

Five folds of each dataset's complete models: each fold in turn plays the new
models, the others are the references (calibrated exactly as for a real run,
error model included). Every held-out model takes ``--items`` CAT items; its
estimate θ̂ is compared with its full-benchmark ability θ* (on the fold's
scale) under four variances:

* ``model``   the pooled error model alone, c·SE² + τ²·(N − n)/N (``local_error=False``);
* ``local``   the shipped check (:class:`activeeval.methods.cat.LocalError`):
  the references' own errors θ*_j − θ̂_j(S) on the target's items S, weighted
  by how close θ̂_j(S) is to θ̂, shrunk, never below ``model``;
* ``centred`` the alternative that measures the references' truths from the
  target's θ̂, Σ w (θ*_j − θ̂)² (it adds the kernel window's own spread);
* ``global``  the references' unweighted MSE on S (no locality).

Printed per dataset: mean z², the share of |z| > 2.5 (tails; 1.2 % for a
Gaussian), and the pairwise honesty that the ranker needs — over every pair
of held-out models of a fold, the pairs the variance calls confident at
γ = 0.95 (|Δθ̂| / √(v_a + v_b) > 1.645), how many of those are wrong, and
how many the variances themselves expect wrong (Σ Φ(−|z|) over them).

    OPENBLAS_NUM_THREADS=1 python benchmarks/cat_local_error.py --datasets alpacaeval2,musr --items 20
"""

from __future__ import annotations

import argparse
import itertools
import time
import warnings

import numpy as np
from scipy.stats import norm

from activeeval import datasets
from activeeval.methods.cat import LOCAL_ERROR_SHRINK, ContinuousCAT, fit_calibration

VARIANTS = ("model", "local", "centred", "global")
Z_CONF = 1.6448536269514722  # one-sided 95 %


def variances(cat: ContinuousCAT, v_model: float) -> dict[str, float]:
    loc = cat._local
    est, truth = loc.estimates(), loc.truth
    w = np.exp(-0.5 * (est - cat.theta) ** 2 / v_model)
    ess = w.sum() ** 2 / (w @ w)

    def shrunk(v: float, n: float) -> float:
        return max(v_model, (n * v + LOCAL_ERROR_SHRINK * v_model) / (n + LOCAL_ERROR_SHRINK))

    return {
        "model": v_model,
        "local": cat.ability().var,
        "centred": shrunk(float(w @ (truth - cat.theta) ** 2 / w.sum()), ess),
        "global": shrunk(float(np.mean((truth - est) ** 2)), float(truth.size)),
    }


def run(name: str, n_items: int, folds: int = 5, max_items: int = 0) -> dict[str, dict[str, float]]:
    m, _ = datasets.load(name).dropna("models")
    if max_items:
        m = m.select_items(list(m.item_ids[:max_items]))
    perm = np.random.default_rng(7).permutation(m.n_models)
    z = {v: [] for v in VARIANTS}
    conf = {v: 0 for v in VARIANTS}
    wrong = {v: 0 for v in VARIANTS}
    expected = {v: 0.0 for v in VARIANTS}
    for f in range(folds):
        held = perm[f::folds]
        ref = m.drop_models([m.model_ids[j] for j in held])
        cal = fit_calibration(ref.scores)
        rows = []
        for j in held:
            row = m.scores[j]
            cat = ContinuousCAT(ref, calibration=cal, seed=0)
            for _ in range(n_items):
                i = cat.select()
                cat.observe(i, row[i])
            truth = float(np.ravel(cal.true_ability(cal.scale(row[None])))[0])
            v_model = cal.error_scale * cat.se**2 + cal.error_floor * (cat.n_items - n_items) / cat.n_items
            var = variances(cat, v_model)
            for v in VARIANTS:
                z[v].append((cat.theta - truth) / np.sqrt(var[v]))
            rows.append((cat.theta, truth, var))
        for (ta, sa, va), (tb, sb, vb) in itertools.combinations(rows, 2):
            for v in VARIANTS:
                zab = abs(ta - tb) / np.sqrt(va[v] + vb[v])
                if zab > Z_CONF:
                    conf[v] += 1
                    expected[v] += float(norm.sf(zab))
                    wrong[v] += (ta > tb) != (sa > sb) and sa != sb
    out = {}
    for v in VARIANTS:
        zz = np.asarray(z[v])
        out[v] = {"mean_z2": float(np.mean(zz**2)), "tail": float(np.mean(np.abs(zz) > 2.5)),
                  "conf": conf[v], "wrong": wrong[v], "expected": expected[v], "n": zz.size}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="alpacaeval2,wmt21_en-zh_chrf,wmt21_zh-en_chrf,mmlu,musr")
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = ap.parse_args()
    if args.smoke:  # 2 folds of math's first 40 items
        args.datasets, args.items, folds, max_items = "math", 5, 2, 40
    else:
        folds, max_items = 5, 0
    print(f"CAT pseudo-targets (5 folds of the complete models), {args.items} items each; pairs within a fold")
    head = (f"{'dataset':<17} {'variance':<8} {'models':>6} {'mean z²':>7} {'|z|>2.5':>7} {'conf pairs':>10} "
            f"{'wrong':>5} {'expected':>8}")
    print(head)
    print("-" * len(head))
    for name in [d.strip() for d in args.datasets.split(",") if d.strip()]:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # incomplete models dropped: expected
            res = run(name, args.items, folds, max_items)
        for v in VARIANTS:
            r = res[v]
            print(f"{name:<17} {v:<8} {r['n']:>6} {r['mean_z2']:>7.2f} {r['tail']:>7.3f} {r['conf']:>10} "
                  f"{r['wrong']:>5} {r['expected']:>8.1f}")
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
