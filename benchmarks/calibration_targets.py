"""Do the calibration's pseudo-targets err like the real targets? Standardised errors before any calibration.

The default's calibration plays reference models as pseudo-targets with the main reference fit's kernel
(``fold_fit="shared"``), and 20 of the references were that fit's own pseudo-targets: are their errors optimistic
(in-sample)? This plays, on the efficiency protocol's splits (50 % references per seed, ``--targets`` targets ×
``--seeds`` seeds, split draw 0, the backtest's method seeds), the default BayesAME with the seed's main fit and
calibration, and prints the root mean square of z = (R̂ − R) / sd, sd the model-based one *before* the calibration
factor, at 2.5, 5 and 10 % of N, over the runs still model-based there (the calibration too counts a pseudo-target
only while it has not switched; the switch tests read the calibrated sd, as in a real run), for three groups:

* ``in-fit``: each reference that was one of the main fit's pseudo-targets, played against every other reference;
* ``out-of-fit``: each other reference, the same way;
* ``target``: the real targets, against every reference.

An RMS near 1 is an honest model-based sd; the calibration factor is meant to bring the real targets there. Then the
95 % quantile of |z| over 1.96, the factor that would make exactly 95 % of these runs' intervals cover: below the
RMS where the errors are heavy-tailed (most runs well predicted, a few far off), where an RMS factor over-covers. With
``--per-target`` it also lists the real targets with the largest RMS z at 2.5 % of N (the targets of one draw are
few: their RMS carries the draw's noise).

Usage (repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/calibration_targets.py --dataset math --regime interpolation
    OPENBLAS_NUM_THREADS=1 python benchmarks/calibration_targets.py --dataset math --per-target
    OPENBLAS_NUM_THREADS=1 python benchmarks/calibration_targets.py --dataset math --no-switch   # every run, factor 1
    python benchmarks/calibration_targets.py --smoke
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.methods.bayesame import BayesAME
from activeeval.methods.registry import make_method

FRACTIONS = (0.025, 0.05, 0.10)
Z95 = 1.959963984540054


def _errors(ref, truth: np.ndarray, seed: int, fit, calibration, checks: list[int]) -> list[float]:
    """z at each n of ``checks`` for one target played with the fit: its error over the model-based sd before the
    calibration factor (nan once the run has switched to the design-based estimate; ``calibration=None``: no switch)."""
    method = BayesAME(ref, seed=seed, hyperparameters=fit, calibration=calibration,
                      extrapolation="off" if calibration is None else "auto")
    out = []
    for n in range(1, max(checks) + 1):
        item = method.select()
        method.observe(item, float(truth[item]))
        if n in checks:
            est = method.estimate()
            uncalibrated = est.std / (method.calibration_factor if calibration is not None else 1.0)
            out.append((est.mean - float(truth.mean())) / uncalibrated if method.mode == "model" else math.nan)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="math")
    parser.add_argument("--regime", default="interpolation")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--per-target", action="store_true", help="also the targets with the largest RMS z")
    parser.add_argument("--no-switch", action="store_true",
                        help="never switch (every run counted), and no calibration")
    parser.add_argument("--smoke", action="store_true", help="mmlu, 2 targets x 1 seed: seconds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.dataset, args.targets, args.seeds, args.per_target = "mmlu", 2, 1, True
    start = time.perf_counter()
    matrix = datasets.load(args.dataset)
    split = make_split(matrix, args.regime, n_targets=args.targets, split_seed=0)
    targets = split.targets[: args.targets]
    checks = [max(2, round(f * matrix.n_items)) for f in FRACTIONS]
    groups: dict[str, list[list[float]]] = {g: [[] for _ in checks] for g in ("in-fit", "out-of-fit", "target")}
    per_target: dict[str, list[float]] = {t: [] for t in targets}
    n_refs = 0
    for s in range(args.seeds):
        ref = matrix.select_models(list(sample_references(split.pool, 0.5, s, 0)))
        n_refs = ref.n_models
        main = make_method("bayesame", ref, seed=method_seed(0, s, 0))  # the default: its main fit, calibration
        fit = main.fit_
        calibration = None if args.no_switch else main.calibration_
        # the fit's pseudo-targets, drawn as fit_hyperparameters draws them
        rng = np.random.default_rng(np.random.SeedSequence([0, 0xF17]))
        in_fit = set(rng.choice(n_refs, size=min(fit.n_pseudo, n_refs), replace=False).tolist())
        seed = method_seed(0, s, 0)
        for j in range(n_refs):
            others = ref.select_models([ref.model_ids[i] for i in range(n_refs) if i != j])
            for c, z in enumerate(_errors(others, ref.scores[j], seed, fit, calibration, checks)):
                if not math.isnan(z):
                    groups["in-fit" if j in in_fit else "out-of-fit"][c].append(z)
        for t in targets:
            zs = _errors(ref, matrix.model_scores(t).astype(float), seed, fit, calibration, checks)
            if not math.isnan(zs[0]):
                per_target[t].append(zs[0])
            for c, z in enumerate(zs):
                if not math.isnan(z):
                    groups["target"][c].append(z)
    print(f"{args.dataset} {args.regime}: RMS of z (runs) at n = {checks} (2.5 / 5 / 10 % of N); {args.seeds} seeds, "
          f"{len(targets)} targets, {n_refs} references")
    for name, per_n in groups.items():
        print(f"  {name:11s}", "  ".join(f"{np.sqrt(np.mean(np.square(v))):.3f} ({len(v)})" if v else "  -  "
                                         for v in per_n))
    print("95 % quantile of |z| / 1.96 (the factor that would cover 95 % of these runs exactly; RMS is what the "
          "calibration uses):")
    for name, per_n in groups.items():
        print(f"  {name:11s}", "  ".join(f"{np.quantile(np.abs(v), 0.95) / Z95:.3f} ({len(v)})" if v else "  -  "
                                         for v in per_n))
    if args.per_target:
        rms = {t: float(np.sqrt(np.mean(np.square(v)))) for t, v in per_target.items() if v}
        print(f"the targets with the largest RMS z at n = {checks[0]} (over {args.seeds} seeds):")
        for t in sorted(rms, key=rms.__getitem__, reverse=True)[:5]:
            print(f"  {t[:45]:45s} score {matrix.model_scores(t).mean():.3f}  RMS z {rms[t]:.2f}  "
                  f"mean z {np.mean(per_target[t]):+.2f}")
    print(f"wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
