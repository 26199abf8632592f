"""The default BayesAME's reference fit and calibration: cost and result under other settings (issue 26, item 2).

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_reference_fit.py --dataset ifeval --regime interpolation --seeds 0,1
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_reference_fit.py --dataset musr --fold-ftol 1e-6
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_reference_fit.py --reference ref.csv --fold-ftol 1e-6
    python benchmarks/bench_reference_fit.py --smoke

For each seed's references (the backtest's 50 % sample of the split's pool,
or the whole ``--reference`` file), each fit setting of ``--fits`` is fitted
(:func:`~activeeval.gp.prior.fit_hyperparameters`) and calibrated
(:func:`~activeeval.gp.prior.calibrate`), with no cache: CPU seconds,
NLML evaluations, the fitted (α, β, σ², γ) and the pooled calibration factor.
``--fold-ftol`` also calibrates the default fit with that L-BFGS-B ``ftol``
for the calibration's fold fits (SciPy's default is 2.2e-9): what a looser
tolerance would save, and how far it moves the calibration.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

from activeeval import datasets, gaussian
from activeeval._cache import clear_caches
from activeeval.data.io import read_scores
from activeeval.experiments.protocol import BacktestConfig, make_split, sample_references
from activeeval.gp import prior as bayesame_prior


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="ifeval")
    ap.add_argument("--regime", default="interpolation")
    ap.add_argument("--reference", help="a reference file instead (all of its models)")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--fits", default="20x300,10x300,20x200", help="n_pseudo x fit_items, comma-separated")
    ap.add_argument("--fold-ftol", type=float, help="also calibrate with this ftol for the fold fits")
    ap.add_argument("--smoke", action="store_true", help="math, one seed, 12 models x 80 items, a small fit")
    a = ap.parse_args()
    if a.smoke:
        a.dataset, a.seeds, a.fits, a.fold_ftol = "math", "0", "8x60", 1e-6
    if a.reference:
        refsets = [("file", read_scores(a.reference))]
    else:
        matrix = datasets.load(a.dataset)
        config = BacktestConfig(methods=("bayesame",), regime=a.regime)
        split = make_split(matrix, a.regime, config.n_targets, config.split_seed, config.gap)
        refsets = [(f"seed {s}", matrix.select_models(sample_references(split.pool, config.ref_fraction, int(s))))
                   for s in a.seeds.split(",")]
    if a.smoke:  # 12 models x 80 items: seconds
        refsets = [(label, refs.select_models(refs.model_ids[:12]).select_items(list(range(80))))
                   for label, refs in refsets]
    evals = [0]
    real = gaussian.LeaveOneOutNLML.__call__

    def counted(self, y):
        evals[0] += 1
        return real(self, y)

    print(f"{'references':<12} {'K':>4} {'fit':<12} {'fit CPU s':>9} {'evals':>5} {'alpha':>8} {'beta':>8} "
          f"{'sigma2':>8} {'gamma':>8} {'cal CPU s':>9} {'evals':>5} {'factor':>7}")
    with mock.patch.object(gaussian.LeaveOneOutNLML, "__call__", counted):
        for label, refs in refsets:
            rows = [(spec, int(spec.split("x")[0]), int(spec.split("x")[1]), None) for spec in a.fits.split(",")]
            if a.fold_ftol is not None:
                spec = a.fits.split(",")[0]
                rows.append((f"{spec} folds ftol {a.fold_ftol:g}", *rows[0][1:3], a.fold_ftol))
            for name, n_pseudo, n_items, ftol in rows:
                clear_caches()
                evals[0], t = 0, time.process_time()
                fit = bayesame_prior.fit_hyperparameters(refs, n_pseudo=n_pseudo, n_items=n_items)
                fit_cpu, fit_evals = time.process_time() - t, evals[0]
                evals[0], t = 0, time.process_time()
                with _fold_ftol(ftol):
                    cal = bayesame_prior.calibrate(refs, fit)
                print(f"{label:<12} {refs.n_models:>4} {name:<12} {fit_cpu:>9.2f} {fit_evals:>5} {fit.alpha:>8.4g} "
                      f"{fit.beta:>8.4g} {fit.sigma2:>8.3g} {fit.gamma:>8.3g} {time.process_time() - t:>9.2f} "
                      f"{evals[0]:>5} {cal.factor:>7.4f}", flush=True)


def _fold_ftol(ftol: float | None):
    """SciPy's minimize with ``ftol`` (the calibration's fold fits are the only fits inside ``calibrate``)."""
    import contextlib

    import scipy.optimize

    if ftol is None:
        return contextlib.nullcontext()
    real = scipy.optimize.minimize
    return mock.patch.object(scipy.optimize, "minimize",
                             lambda *args, **kw: real(*args, **{**kw, "options": {"ftol": ftol}}))


if __name__ == "__main__":
    main()
