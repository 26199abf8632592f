"""CAT's IRT fits on every shared dataset: time of `joint_fit` and `fit_item_slopes`, against another version's code.

Usage::

    mkdir /tmp/base && git archive fd80d44 src | tar -x -C /tmp/base
    python benchmarks/irt_fit_speed.py --base-src /tmp/base/src      # this code against fd80d44's, same process
    python benchmarks/irt_fit_speed.py                               # this code alone
    python benchmarks/irt_fit_speed.py --smoke                       # MMLU alone, one repeat (CI)

For each dataset (every complete model a reference; scores outside [0, 1]
min-max scaled per item, as CAT's calibration does) the two fits of
`activeeval.irt.continuous` are run on the same inputs: `joint_fit` (abilities
and difficulties on one scale) and `fit_item_slopes` (each item's slope and
difficulty on those abilities, with the noise k the calibration uses). With
``--base-src`` the module of that folder is loaded beside this one and run
on the same inputs in the same process, alternating which goes first; the
table gives the median seconds over ``--repeats``, the ratio base / this,
and the largest absolute difference between the two versions' results.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np

DATASETS = ("ifeval", "musr", "arc_challenge", "gsm", "math", "mmlu", "commonsense", "alpacaeval2", "mmlu_pro",
            "wmt21_en-zh_chrf", "wmt21_zh-en_chrf")


def _load_base(src: str) -> ModuleType:
    path = Path(src) / "activeeval" / "irt" / "continuous.py"
    spec = importlib.util.spec_from_file_location("_base_irt_continuous", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no activeeval/irt/continuous.py under {src}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    spec.loader.exec_module(module)
    return module


def _timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main(argv: list[str] | None = None) -> int:
    from activeeval import datasets
    from activeeval.irt import continuous as this

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base-src", default=None)
    parser.add_argument("--smoke", action="store_true", help="MMLU alone, one repeat")
    args = parser.parse_args(argv)
    if args.smoke:
        args.datasets, args.repeats = "mmlu", 1
    base = _load_base(args.base_src) if args.base_src else None
    versions = {"this": this, **({"base": base} if base is not None else {})}
    print(f"{'dataset':18s} {'models x items':>15s} {'fit':16s} {'this s':>8s}"
          + (f" {'base s':>8s} {'base/this':>9s} {'max |diff|':>11s}" if base is not None else ""))
    for name in args.datasets.split(","):
        try:
            matrix = datasets.load(name)
        except Exception as exc:  # a shared dataset not on this machine
            print(f"{name:18s} skipped: {exc}")
            continue
        x, _ = matrix.dropna("models")
        y = x.scores
        if y.min() < 0.0 or y.max() > 1.0:
            y = this.minmax_apply(y, *this.minmax_params(y))
        theta, b, _ = this.joint_fit(y)
        k = this.noise_factor(y, theta, b, 1)
        fits = {"joint_fit": lambda m, y=y: m.joint_fit(y)[:2],
                "fit_item_slopes": lambda m, y=y, theta=theta, b=b, k=k: m.fit_item_slopes(y, theta, b, k)}
        for fit, call in fits.items():
            times: dict[str, list[float]] = {v: [] for v in versions}
            results: dict[str, tuple] = {}
            for r in range(args.repeats):
                order = list(versions) if r % 2 == 0 else list(reversed(versions))
                for v in order:
                    seconds, results[v] = _timed(call, versions[v])
                    times[v].append(seconds)
            line = f"{name:18s} {f'{y.shape[0]} x {y.shape[1]}':>15s} {fit:16s} {statistics.median(times['this']):8.3f}"
            if base is not None:
                diff = max(float(np.max(np.abs(a - c))) for a, c in zip(results["this"], results["base"], strict=True))
                line += (f" {statistics.median(times['base']):8.3f}"
                         f" {statistics.median(times['base']) / statistics.median(times['this']):9.2f} {diff:11.1e}")
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
