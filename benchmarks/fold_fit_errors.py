"""The calibration's pseudo-targets against the real targets: their model-based standardised errors, by n/N.

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/fold_fit_errors.py                  # six datasets, 3 draws
    OPENBLAS_NUM_THREADS=1 python benchmarks/fold_fit_errors.py --datasets ifeval --draws 0-9
    python benchmarks/fold_fit_errors.py --smoke                                 # seconds: CI keeps it running

The default BayesAME widens (or narrows) its model-based interval by a factor
measured on reference models played as targets (:func:`activeeval.gp.prior.calibrate`):
the root mean square of their standardised errors z = (R̂ − R) / sd. That is
right only if a pseudo-target's z is distributed as a real target's. Per
dataset (interpolation, the backtest protocol's split and 50 % reference
sample of each draw), this prints the root mean square of z at each of the
calibration's n/N, pooled over draws, for

* ``refit``: the pseudo-targets as ``fold_fit="refit"`` plays them (each fold's
  kernel refitted on its references: 8 pseudo-targets on 150 items);
* ``shared``: as ``fold_fit="shared"`` does (the main fit's kernel);
* ``real``: the split's real targets, played by the main model exactly as a
  run plays them (:func:`activeeval.methods.bayesame._model_based_errors`,
  no calibration), on the same n;

and the count of z in each (a target leaves once it would switch to the
design-based estimate). Datasets whose calibration plays a random subset of
the items (more than 1 000) are skipped: their n/N are not the real runs'.
The real targets are few (10 a draw), so their column is noisy: read it
pooled over n and draws, as the last line does.
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np

import activeeval.gp.prior as prior_module
from activeeval import datasets
from activeeval.experiments.protocol import BacktestConfig, make_split, method_seed, parse_draws, sample_references
from activeeval.methods.bayesame import _model_based_errors

KINDS = ("refit", "shared", "real")


def errors(name: str, draw: int) -> tuple[list[float], dict[str, list[np.ndarray]]] | None:
    """(n/N of the calibration's grid, z by kind at each), or None where the calibration subsamples items."""
    matrix = datasets.load(name)
    config = BacktestConfig(methods=("bayesame",), regime="interpolation", n_seeds=1, split_seed=draw,
                            root_seed=draw)
    split = make_split(matrix, "interpolation", config.n_targets, config.split_seed, config.gap)
    ref = matrix.select_models(sample_references(split.pool, config.ref_fraction, 0, config.root_seed))
    fit = prior_module.fit_hyperparameters(ref)
    out: dict[str, list[np.ndarray]] = {}
    for kind in ("refit", "shared"):  # the errors calibrate() makes its factors of
        grid, by_n, n_sub, _ = prior_module._calibration_errors(ref, fit, fold_fit=kind)
        out[kind] = [np.concatenate(parts) if parts else np.zeros(0) for parts in by_n]
    if n_sub < matrix.n_items:
        return None
    truths = np.stack([np.asarray(matrix.model_scores(t), dtype=float) for t in split.targets])
    out["real"] = _model_based_errors(ref, fit, truths, method_seed(config.root_seed, 0, 0), grid)
    return [n / n_sub for n in grid], out


def rms(z: np.ndarray) -> float:
    return math.sqrt(float(np.mean(z * z))) if z.size else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="ifeval,musr,mmlu,gsm,commonsense,alpacaeval2")
    parser.add_argument("--draws", default="0-2", help="target draws (split and reference seeds), e.g. 0-2")
    parser.add_argument("--smoke", action="store_true", help="smallest run (tests/test_benchmarks.py runs it)")
    args = parser.parse_args()
    names = ["alpacaeval2"] if args.smoke else args.datasets.split(",")
    draws = [0] if args.smoke else parse_draws(args.draws)
    pooled: dict[str, list[np.ndarray]] = {k: [] for k in KINDS}
    for name in names:
        fractions: list[float] = []
        by_kind: dict[str, list[list[np.ndarray]]] = {k: [] for k in KINDS}
        for draw in draws:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the missing-score notes: the documented default policy
                got = errors(name, draw)
            if got is None:
                print(f"{name}: the calibration plays a subset of the items; skipped")
                break
            fractions, out = got
            for k in KINDS:
                by_kind[k].append(out[k])
        if not fractions:
            continue
        print(f"{name} (interpolation, draws {args.draws if not args.smoke else '0'}): RMS of z, refit / shared / "
              "real (count)")
        for j, f in enumerate(fractions):
            zs = {k: np.concatenate([d[j] for d in by_kind[k]]) for k in KINDS}
            for k in KINDS:
                pooled[k].append(zs[k])
            print(f"  n/N {f:.3f}  " + " / ".join(f"{rms(zs[k]):.2f}" for k in KINDS)
                  + "  (" + ", ".join(str(zs[k].size) for k in KINDS) + ")")
    if pooled["real"]:
        z = {k: np.concatenate(pooled[k]) for k in KINDS}
        print("all datasets and n: RMS of z, refit / shared / real: "
              + " / ".join(f"{rms(z[k]):.3f}" for k in KINDS)
              + "  (" + ", ".join(str(z[k].size) for k in KINDS) + ")")


if __name__ == "__main__":
    main()
