"""The BayesAME paper's backtest protocol (§5, SPEC.md §5): splits, reference samples, seeds.

* **interpolation** — ``n_targets`` models drawn uniformly (once, from
  ``split_seed``) are the targets; every other model is the reference pool.
* **extrapolation** — the ``n_targets`` best models by full-benchmark score
  are the targets, the next ``gap`` (20 %) of all models are discarded, the
  rest is the pool.
* each seed samples ``ref_fraction`` of the pool (without replacement) as the
  reference models, shared by every target and method of that seed.

**Exact twins.** Some model ids have identical score rows (aliases of one
model, see the bundled catalog notes). A twin of a target left in the pool
would let reference-based methods read the target's answers. We drop from
the pool every model whose score row equals a target's row exactly, and
report them in :attr:`Split.dropped_twins`.

Seeding: everything random is derived from ``(root_seed, seed index[, target
index])`` with :class:`numpy.random.SeedSequence`, so a run's result depends
on its coordinates only, never on the worker that ran it or the order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from activeeval.batch import check_strategy
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, option
from activeeval.stopping import DEFAULT_EPSILON1, DEFAULT_WINDOW

__all__ = [
    "EPSILON2_SWEEP",
    "REGIMES",
    "BacktestConfig",
    "Split",
    "drop_twins",
    "make_split",
    "method_seed",
    "parse_draws",
    "sample_references",
]

REGIMES = ("interpolation", "extrapolation")
EPSILON2_SWEEP = (0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03)


@dataclass(frozen=True)
class Split:
    """Targets, reference pool and what was left out, for one regime."""

    regime: str
    targets: tuple[str, ...]
    pool: tuple[str, ...]
    discarded: tuple[str, ...] = ()
    dropped_twins: tuple[str, ...] = ()


@dataclass(frozen=True)
class BacktestConfig:
    """Everything that defines a backtest (SPEC §5).

    Parameters
    ----------
    methods : tuple of str
        Registry names.
    regime : {"interpolation", "extrapolation"}
    ref_fraction : float in (0, 1]
        Fraction of the pool sampled as references at each seed.
    n_targets : int
    n_seeds : int
    split_seed, root_seed : int
        Seed of the interpolation targets; root of every other random draw.
    epsilon2 : tuple of float
        The ε2 sweep for the stopping-rule runs.
    epsilon1, window, level : stopping rule of Algorithm 1.
    gap : float
        Extrapolation: fraction of all models discarded below the targets.
    batch_size, batch_strategy, myopic
        Batch selection (App. B.1) of the methods that take these options
        (the BayesAME ones): with ``myopic`` (default) and ``batch_size`` K > 1
        each step asks ``select_batch(K)`` by ``batch_strategy`` and observes
        all K items; the trajectory still has one estimate per item, and the
        stopping rule is read only at the ends of batches with the window
        scaled to ⌈W / K⌉ batches (App. C.1's W = 30/|A|). ``myopic=False``:
        one random member of the best batch of K per step
        (:mod:`activeeval.methods._batch`). Defaults: one item at a time.
    shared_order : bool
        True (default): every target of a seed gets the same method seed, so
        the randomly selecting methods play the same item order on all
        targets of the seed (common random numbers across targets as well as
        methods). Each target's RMSE over seeds is unchanged in expectation,
        and the methods' fast replays can share their per-n fits across the
        targets. False: an independent seed per (seed, target), every run
        played step by step (the slow reference path).
    """

    methods: tuple[str, ...]
    regime: str = "interpolation"
    ref_fraction: float = 0.5
    n_targets: int = 10
    n_seeds: int = 200
    split_seed: int = 0
    root_seed: int = 0
    epsilon2: tuple[float, ...] = EPSILON2_SWEEP
    epsilon1: float = DEFAULT_EPSILON1
    window: int = DEFAULT_WINDOW
    level: float = 0.95
    gap: float = 0.2
    method_options: dict = field(default_factory=dict)
    shared_order: bool = True
    batch_size: int = 1
    batch_strategy: str = "greedy"
    myopic: bool = True
    #: Whether the targets are evaluated jointly (a multi-target backtest, see ``experiments.multi_target``).
    multi_target: ClassVar[bool] = False

    def __post_init__(self) -> None:
        self._check_regime()
        if not (isinstance(self.ref_fraction, (int, float)) and 0 < self.ref_fraction <= 1):
            raise ConfigurationError(
                f"{option('ref_fraction')} must be in (0, 1], got {self.ref_fraction}; e.g. 0.5 for half the pool"
            )
        if int(self.n_targets) != self.n_targets or self.n_targets < 2:
            raise ConfigurationError(f"{option('n_targets')} must be an integer >= 2, got {self.n_targets}")
        if int(self.n_seeds) != self.n_seeds or self.n_seeds < 1:
            raise ConfigurationError(f"{option('n_seeds')} must be a positive integer, got {self.n_seeds}")
        if not self.methods:
            raise ConfigurationError("methods must name at least one method, e.g. rs-mean,bayesame")
        if not 0 <= self.gap < 1:
            raise ConfigurationError(f"gap must be in [0, 1), got {self.gap}")
        if isinstance(self.batch_size, bool) or int(self.batch_size) != self.batch_size or self.batch_size < 1:
            raise ConfigurationError(
                f"{option('batch_size')} must be a positive integer, got {self.batch_size!r}; 1 selects one "
                "item at a time")
        check_strategy(self.batch_strategy)
        if not isinstance(self.myopic, bool):
            raise ConfigurationError(f"{option('myopic')} must be True or False, got {self.myopic!r}")
        object.__setattr__(self, "method_options", _flat_method_options(self.method_options))

    @property
    def batched(self) -> bool:
        """Whether the batch options differ from one item at a time (they apply to the methods that take them)."""
        return self.batch_size != 1 or self.batch_strategy != "greedy" or not self.myopic

    def _check_regime(self) -> None:
        if self.regime not in REGIMES:
            raise ConfigurationError(f"regime must be 'interpolation' or 'extrapolation', got {self.regime!r}")


def _flat_method_options(method_options: Mapping[str, Any]) -> dict:
    """``method_options`` with any settings group given as an object (``{"bayesame": {"design":
    DesignSettings(warmup=10)}}``) written flat (``{"warmup": 10}``), as a spec writes it: one form for the
    runs, the checkpoint's identity and the results."""
    from activeeval.methods.registry import flatten_options, parse_method_spec
    from activeeval.settings import Settings

    out: dict = {}
    for label, options in method_options.items():
        grouped = isinstance(options, Mapping) and any(isinstance(v, Settings) for v in options.values())
        out[label] = flatten_options(parse_method_spec(label)[0], options) if grouped else options
    return out


def make_split(
    matrix: ScoreMatrix, regime: str, n_targets: int = 10, split_seed: int = 0, gap: float = 0.2
) -> Split:
    """Targets and reference pool for ``regime`` (see the module docstring).

    Raises
    ------
    ConfigurationError
        More targets than models, or a pool too small for 2 references.
    """
    if regime not in REGIMES:
        raise ConfigurationError(f"regime must be 'interpolation' or 'extrapolation', got {regime!r}")
    complete = ~np.isnan(matrix.scores).any(axis=1)
    ids = [m for m, ok in zip(matrix.model_ids, complete, strict=True) if ok]
    if n_targets >= len(ids):
        raise ConfigurationError(
            f"{option('n_targets', str(n_targets))} is too many: {matrix.name or 'the dataset'} has {len(ids)} "
            f"models with complete scores and at least 2 must remain as references; lower {option('n_targets')}"
        )
    discarded: list[str] = []
    if regime == "interpolation":
        rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0x1A7E]))
        targets = [ids[i] for i in sorted(rng.choice(len(ids), n_targets, replace=False))]
        pool = [m for m in ids if m not in set(targets)]
    else:
        full = np.array([float(np.mean(matrix.model_scores(m))) for m in ids])
        order = sorted(range(len(ids)), key=lambda j: (-full[j], ids[j]))  # best first, ties by id
        n_gap = int(round(gap * matrix.n_models))
        targets = [ids[j] for j in order[:n_targets]]
        discarded = [ids[j] for j in order[n_targets : n_targets + n_gap]]
        pool = [ids[j] for j in order[n_targets + n_gap :]]
    pool, twins = drop_twins(matrix, targets, pool)
    if len(pool) < 2:
        raise ConfigurationError(
            f"the {regime} split of {matrix.name or 'the dataset'} ({matrix.n_models} models, {n_targets} targets"
            + (f", {len(discarded)} discarded" if regime == "extrapolation" else "")
            + f") leaves {len(pool)} reference model(s); at least 2 are needed: use fewer "
            + f"{option('n_targets')} or more models"
        )
    return Split(regime, tuple(targets), tuple(pool), tuple(discarded), tuple(twins))


def drop_twins(matrix: ScoreMatrix, targets, pool) -> tuple[list[str], list[str]]:
    """The pool without the exact twins of a target (models whose score row equals a target's), and the twins."""
    target_rows = {matrix.model_scores(t).tobytes() for t in targets}
    twins = [m for m in pool if matrix.model_scores(m).tobytes() in target_rows]
    return [m for m in pool if m not in set(twins)], twins


def sample_references(pool: tuple[str, ...], fraction: float, seed_index: int, root_seed: int = 0) -> tuple[str, ...]:
    """The reference models of seed ``seed_index``: ``round(fraction · |pool|)`` of the pool, in pool order."""
    k = int(round(fraction * len(pool)))
    if k < 2:
        raise ConfigurationError(
            f"{option('ref_fraction', f'{fraction}')} of a pool of {len(pool)} models gives {k} reference model(s); "
            f"at least 2 are needed: raise {option('ref_fraction')}"
        )
    rng = np.random.default_rng(np.random.SeedSequence([root_seed, seed_index, 0x5EF]))
    return tuple(pool[i] for i in sorted(rng.choice(len(pool), k, replace=False)))


def method_seed(root_seed: int, seed_index: int, target_index: int) -> int:
    """The ``seed`` given to every method for (seed, target): common random numbers across methods."""
    seq = np.random.SeedSequence([root_seed, seed_index, target_index, 0x7A6])
    return int(seq.generate_state(1, np.uint64)[0] >> 1)  # a non-negative int64


def parse_draws(text: str) -> list[int]:
    """Draw (or seed) ids written as the benchmarks take them: ``"0-4"``, ``"0,3,7"`` or both, ``"0-2,5"``."""
    draws: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        try:
            draws.extend(range(int(lo), int(hi or lo) + 1))
        except ValueError:
            raise ConfigurationError(
                f"cannot read the draws {text!r}: write ids and ranges, e.g. 0-4 or 0,3,7") from None
    return draws
