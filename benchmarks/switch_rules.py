"""Which switch rule tells targets beyond the references from those inside them: each rule's first firing, offline.

BayesAME's default switches to random items and the design-based estimate when the references do not describe
the target (``BayesAME.switch_test``: the 95 % interval wholly outside the references' range of full-benchmark
scores; the paired test; the model-based estimate ± ``switch_z`` sd outside the range; the misfit test). A
switch of a target inside the range is waste (its estimate then rests on the few random items drawn since: the
efficiency table's median ESS of such runs is below 1), a late switch of one beyond it is risk (the model pulls
it towards the references, and its model-based interval misses). This script plays the default with the switch
turned off (``extrapolation="off"``: up to a rule's first firing, the default's run under that rule is this
one, item for item) on the efficiency protocol's runs (50 % references sampled per seed, ``--targets`` targets x
``--seeds`` seeds, split seed 0; ``--ref-fraction``), up to the last n a switch can happen (``switch_until``), and
records at each n whether each candidate rule would fire. Every rule includes the default's three other tests (the
95 % interval wholly outside the range, the paired test, the misfit test), as the default does; the candidates:

* ``interval`` ("tests alone" in the table): none more (``switch_z=1.96``, the default before stop 46);
* ``z1``, ``z0.5``, ``z0``: the estimate ± z sd wholly outside the range (from n = 10; ``z1`` is the default's);
* ``strict``: on the items so far, the target's mean strictly beyond every reference's mean on the same items
  (above every one when the estimate is in the range's upper half, below every one otherwise; from n = 10);
* ``z1&strict``, ``z0.5&strict``, ``z0&strict``: both.

Per rule it prints, for the targets inside the references' range, above it and below it, how many the rule
switches within ``switch_until`` and the median n at which it does. The model-based interval is the default's,
calibrated with ``switch_z=1`` (the calibration's pseudo-targets switch by the default's rule): a method run with
another rule has its own calibration factor, so rows other than ``z1`` are close to, not exactly, that method's
switches (on MuSR interpolation ``bayesame[switch_z=1.96]`` switches 11 runs where the ``interval`` row says 13).

Usage (repository root, package installed)::

    OPENBLAS_NUM_THREADS=1 python benchmarks/switch_rules.py --dataset musr --regime interpolation
    OPENBLAS_NUM_THREADS=1 python benchmarks/switch_rules.py --dataset musr,arc_challenge --regime extrapolation
    python benchmarks/switch_rules.py --smoke                    # mmlu, 2 targets x 1 seed, n up to 12: seconds
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from activeeval import datasets
from activeeval.experiments.protocol import make_split, method_seed, sample_references
from activeeval.methods.bayesame import SCALE_SKIP, Z95
from activeeval.methods.registry import make_method

RULES = ("interval", "z1", "z0.5", "z0", "strict", "z1&strict", "z0.5&strict", "z0&strict")
SIDES = ("inside", "above", "below")


def first_firings(dataset: str, regime: str, targets: int, seeds: int, last_n: int | None = None,
                  ref_fraction: float = 0.5) -> list[tuple[str, dict[str, int]]]:
    """Per run: (the target's side of the references' range, {rule: the first n at which it fires})."""
    matrix = datasets.load(dataset)
    split = make_split(matrix, regime, n_targets=targets, split_seed=0)
    out = []
    for s in range(seeds):
        ref = matrix.select_models(list(sample_references(split.pool, ref_fraction, s, 0)))
        full = ref.mean_scores()
        for target in split.targets[:targets]:
            truth = matrix.model_scores(target).astype(float)
            side = "below" if truth.mean() < full.min() else "above" if truth.mean() > full.max() else "inside"
            method = make_method("bayesame", ref, seed=method_seed(0, s, 0), extrapolation="off")
            lo, hi = method.reference_range
            until = method.switch_until_ if last_n is None else min(last_n, method.switch_until_)
            first: dict[str, int] = {}
            for n in range(1, until + 1):
                item = method.select()
                method.observe(item, float(truth[item]))
                # the method's own tests (BayesAME.switch_test_now): at switch_z = 1.96 the three that are part of
                # every rule (interval, paired, misfit), then each switch_z alone
                fired = {"interval": method.switch_test_now(Z95) is not None}
                if n >= 2 * SCALE_SKIP:
                    mean, _ = method._model_estimate()
                    diff = (method._sum_obs - method._ref_sum) / n  # the target's mean minus each reference's
                    strict = bool(np.all(diff > 0)) if mean > (lo + hi) / 2 else bool(np.all(diff < 0))
                    for z, name in ((1.0, "z1"), (0.5, "z0.5"), (0.0, "z0")):
                        fired[name] = method.switch_test_now(z) == "switch_z"
                        fired[f"{name}&strict"] = fired[name] and strict
                    fired["strict"] = strict
                for rule, hit in fired.items():
                    if hit and rule not in first:
                        first[rule] = n
            out.append((side, first))
    return out


def report(name: str, runs: list[tuple[str, dict[str, int]]]) -> str:
    counts = {side: sum(r[0] == side for r in runs) for side in SIDES}
    lines = [f"{name}: {len(runs)} runs, targets " + ", ".join(f"{counts[s]} {s}" for s in SIDES if counts[s])]
    for rule in RULES:
        parts = []
        for side in SIDES:
            sel = [r for r in runs if r[0] == side]
            if not sel:
                continue
            ns = [min(r[1][k] for k in {"interval", rule} if k in r[1]) for r in sel
                  if "interval" in r[1] or rule in r[1]]
            median = f"{np.median(ns):>5g}" if ns else "    -"
            parts.append(f"{side}: {len(ns):>3} of {len(sel):>3} switched, median n {median}")
        label = "tests alone" if rule == "interval" else f"tests or {rule}"
        lines.append(f"  {label:<20} " + ";  ".join(parts))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="musr", help="one or more, comma-separated")
    parser.add_argument("--regime", default="interpolation",
                        help="interpolation, extrapolation or both (comma-separated)")
    parser.add_argument("--ref-fraction", type=float, default=0.5,
                        help="share of the pool drawn as references per seed (1: every non-target model)")
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="mmlu, 2 targets x 1 seed, n up to 12: seconds")
    args = parser.parse_args(argv)
    last_n = None
    if args.smoke:
        args.dataset, args.regime, args.targets, args.seeds, last_n = "mmlu", "extrapolation", 2, 1, 12
    start = time.perf_counter()
    for dataset in args.dataset.split(","):
        for regime in args.regime.split(","):
            runs = first_firings(dataset, regime, args.targets, args.seeds, last_n, args.ref_fraction)
            print(report(f"{dataset} {regime}", runs), flush=True)
    print(f"wall {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
