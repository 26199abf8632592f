"""Run a backtest: every (method, seed) task over every target, locally or on a cluster.

One task = one method and one seed: it samples that seed's references (shared
by all targets) and plays the method on each target to the end (n = N),
keeping the whole trajectory; a multi-target method
(:func:`~activeeval.methods.registry.is_multi_target`, only in a multi-target
backtest, :mod:`activeeval.experiments.multi_target`) is built once on all
the targets and played until every target has observed every item.
Fixed-size curves read the trajectory at every n; stopping-rule runs for
each ε2 are read off the same trajectory (no method's selection depends on
ε). Results depend only on the task's
coordinates, so they are identical whatever the backend, the number of
workers or the completion order (tested).

Speed: with the shared item order (``BacktestConfig.shared_order``, the
default) the baselines with a fast replay play all targets of a seed at
once, sharing every fit that does not depend on the target's scores (one
Bayesian-ridge decomposition per n instead of one per n and target, say);
BayesAME-RS is not run where it would repeat BayesAME exactly.

Methods are given as specs, a registry name with optional constructor
options: ``"bayesame-paper[noise=learned]"`` runs the paper's BayesAME with
``noise="learned"`` under that label, next to ``"bayesame-paper"`` if both are listed.

Backends: ``local`` (processes via :mod:`concurrent.futures`; all cores by
default; ``workers=1`` runs in this process), ``ray`` and ``dask``
(optional extras; pass ``address`` to join an existing cluster, otherwise a
local one is started).
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from activeeval._threads import active_limit, fixed_workers, limit_threads
from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, StorageError, option, template_of
from activeeval.experiments.checkpoint import BacktestInterrupted, TaskStore
from activeeval.experiments.protocol import BacktestConfig, Split, make_split, method_seed, sample_references
from activeeval.experiments.simulate import run_batches, run_fixed, run_multi_to_end
from activeeval.methods.registry import (
    capabilities,
    check_method_spec,
    is_multi_target,
    make_method,
    method_spec,
    parse_method_spec,
    resolve_factory,
    resolve_replay,
    sharing_factory,
)

if TYPE_CHECKING:
    from activeeval.experiments.multi_target import MultiTargetConfig
    from activeeval.methods.multi import MultiTargetMethod

__all__ = [
    "BACKENDS", "BacktestInterrupted", "BacktestResult", "backtest_split", "batch_play_size", "check_batch",
    "check_method_options", "check_methods", "check_multi_target", "play_task", "run_backtest", "run_identity",
    "run_task", "takes_batch_options",
]

BACKENDS = ("local", "ray", "dask")


@dataclass
class BacktestResult:
    """Trajectories of every run, with what is needed to compute the metrics.

    Attributes
    ----------
    means, vars : dict of str to ndarray of shape (n_targets, n_seeds, n_items)
        R̂ and Var_R after n = 1..N items (index n − 1), per method.
    shifts : dict of str to ndarray of shape (n_targets, n_seeds, n_items)
        :attr:`~activeeval.methods.estimate.Estimate.shift` of the methods
        whose intervals have two sides of different lengths (absent: 0,
        symmetric; :meth:`shifts_of`).
    truth : ndarray of shape (n_targets,)
        R* of each target.
    """

    dataset: str
    config: BacktestConfig
    split: Split
    n_items: int
    truth: np.ndarray
    means: dict[str, np.ndarray]
    vars: dict[str, np.ndarray]
    wall_time: float = 0.0
    backend: str = "local"
    workers: int = 1
    reference_sizes: list[int] = field(default_factory=list)
    #: Methods played in myopic batches (``--batch-size`` K > 1): label → K. Their stops are read at the
    #: ends of batches (:func:`~activeeval.experiments.metrics.stop_indices` with ``batch_size``).
    batch_sizes: dict[str, int] = field(default_factory=dict)
    shifts: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def methods(self) -> list[str]:
        return list(self.means)

    def shifts_of(self, method: str) -> np.ndarray | None:
        """The interval shifts of ``method`` (shape as its means), None where every interval is symmetric."""
        return self.shifts.get(method)


# Options the backtest protocol sets itself: the seed comes from the task's coordinates, and the
# stopping-rule runs are read off the full trajectories for every ε2 of the sweep.
PROTOCOL_OPTIONS = ("seed", "stopping", "epsilon1", "epsilon2", "window", "max_items", "n_max")
# The batch settings, as a message names them.
_BATCH = "/".join((option("batch_size"), option("batch_strategy"), option("myopic", "False")))
# How a Python user runs a multi-target backtest (the CLI's table says how a command-line user does).
_MULTI = "run it with activeeval.experiments.multi_target.run_multi_target_backtest(..., correlation='low' or 'high')"


def check_methods(methods: Sequence[str]) -> tuple[str, ...]:
    """Validate method specs (``name`` or ``name[key=value,...]``); their canonical labels, duplicates dropped.

    Raises :class:`ConfigurationError` naming an unknown method, an option the
    method does not have (with its options listed) or one the protocol sets.
    Option *values* are checked by :func:`check_method_options`.
    """
    reserved = dict.fromkeys(PROTOCOL_OPTIONS, f"the backtest protocol (seeds come from {option('n_seeds')}; stops "
                                               f"are computed for the whole ε2 sweep, see {option('epsilon2')}); "
                                               "remove it")
    reserved["targets"] = (f"the backtest protocol (the targets are the split's: {option('n_targets')}, "
                           f"{option('correlation')}); remove it")
    out = []
    for spec in methods:
        name, options = check_method_spec(spec, reserved)
        label = method_spec(name, options)
        if label not in out:
            out.append(label)
    return tuple(out)


def takes_batch_options(name: str) -> bool:
    """Whether the method ``name`` has the batch-selection options (batch_strategy, batch_size, myopic):
    its capabilities say so (:attr:`~activeeval.methods.capabilities.Capabilities.batch`)."""
    return capabilities(name).batch


def _batch_options(config: BacktestConfig, name: str) -> dict:
    """The constructor options the backtest's batch settings give method ``name`` (none by default)."""
    if not config.batched or not takes_batch_options(name):
        return {}
    options: dict = {"batch_strategy": config.batch_strategy}
    if not config.myopic and config.batch_size > 1:
        options.update(batch_size=config.batch_size, myopic=False)
    return options


def batch_play_size(config: BacktestConfig, label: str) -> int:
    """K if ``label`` is played in myopic batches of K (``select_batch(K)``, all K observed), else 1."""
    name, _ = parse_method_spec(label)
    return config.batch_size if config.myopic and config.batch_size > 1 and takes_batch_options(name) else 1


def method_and_options(config: BacktestConfig, label: str, reference: ScoreMatrix | None = None) -> tuple[str, dict]:
    """Registry name and constructor options of ``label``: its bracketed options over ``config.method_options``
    over the options of the backtest's batch settings.

    Prior weights given by model id (``{"weights": {model: w}}``, ``--prior-weights``) cover the whole pool;
    with ``reference`` they are restricted to its models (each seed samples its own).
    """
    name, options = parse_method_spec(label)
    options = {**_batch_options(config, name), **config.method_options.get(label, {}), **options}
    weights = options.get("weights")
    if reference is not None and isinstance(weights, Mapping):
        options["weights"] = {m: weights[m] for m in reference.model_ids if m in weights}
    return name, options


def check_batch(config: BacktestConfig, n_items: int) -> None:
    """The batch settings need a method that takes them, and a batch no larger than the benchmark."""
    if not config.batched:
        return
    if config.multi_target:
        raise ConfigurationError(
            f"{_BATCH} are for single-target backtests; drop them from a multi-target one")
    if not any(takes_batch_options(parse_method_spec(label)[0]) for label in config.methods):
        raise ConfigurationError(
            f"{_BATCH} apply to the BayesAME methods (bayesame, bayesame-paper and their -rs versions); add one "
            f"to {option('methods')} or drop them")
    if config.batch_size > n_items:
        raise ConfigurationError(
            f"{option('batch_size', str(config.batch_size))} is larger than the benchmark's {n_items} items; choose "
            f"at most {n_items}")


def check_method_options(config: BacktestConfig, reference: ScoreMatrix, targets: Sequence[str] = ()) -> None:
    """Build every method that has options once on ``reference``, so a bad value fails before any work starts.

    A multi-target method is built on ``targets`` (the split's).
    """
    for label in config.methods:
        name, options = method_and_options(config, label, reference)
        if not options:
            continue
        try:
            if is_multi_target(name):
                resolve_factory(name)(reference, list(targets), seed=0, **options)
            else:
                make_method(name, reference, seed=0, **options)
        except (ConfigurationError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"method {label!r}: {template_of(exc)}") from exc


def _copy_source(config: BacktestConfig, label: str) -> str | None:
    """The label whose runs ``label`` may repeat (its class's ``same_runs_as``, with the same options), if any.

    Only with the shared item order, where both get the same seed; whether it
    does repeat them on a reference sample is the class's ``repeats``.
    """
    name, options = method_and_options(config, label)
    source = getattr(resolve_factory(name), "same_runs_as", None)
    if source is None or not config.shared_order:
        return None
    for other in config.methods:
        if method_and_options(config, other) == (source, options):
            return other
    return None


def _repeats_source(config: BacktestConfig, label: str, reference: ScoreMatrix) -> bool:
    """Whether ``label`` would replay its copy source exactly on ``reference`` (see :func:`_copy_source`)."""
    if _copy_source(config, label) is None:
        return False
    name, options = method_and_options(config, label, reference)
    return bool(cast(Any, resolve_factory(name)).repeats(reference, **options))  # a class with same_runs_as


def check_multi_target(config: BacktestConfig) -> None:
    """A multi-target method runs only in a multi-target backtest; raise naming the fix otherwise."""
    if config.multi_target:
        return
    joint = [label for label in config.methods if is_multi_target(parse_method_spec(label)[0])]
    if joint:
        what = (f"method {joint[0]!r} evaluates" if len(joint) == 1
                else f"methods {', '.join(map(repr, joint))} evaluate")
        raise ConfigurationError(
            f"{what} several targets jointly, which needs a multi-target backtest: {_MULTI}, or remove it from "
            f"{option('methods')}")


def backtest_split(matrix: ScoreMatrix, config: BacktestConfig) -> Split:
    """The targets and reference pool of ``config`` on ``matrix`` (a multi-target config makes its own)."""
    if config.multi_target:
        return cast("MultiTargetConfig", config).make_split(matrix)
    return make_split(matrix, config.regime, config.n_targets, config.split_seed, config.gap)


TaskResult = tuple[str, int, np.ndarray | None, np.ndarray | None, np.ndarray | None]


def _shifts(shifts) -> np.ndarray | None:
    """Interval shifts (T, N) as a float array, None when every interval is symmetric (none given, or all 0)."""
    if shifts is None:
        return None
    shifts = np.asarray(shifts, dtype=float)
    return shifts if shifts.any() else None


def run_task(
    matrix: ScoreMatrix, config: BacktestConfig, split: Split, method: str, seed_index: int
) -> tuple[str, int, np.ndarray | None, np.ndarray | None]:
    """Play ``method`` on every target with seed ``seed_index``; (method, seed, means (T, N), vars (T, N)).

    What :func:`play_task` returns without the intervals' shifts (see there).
    """
    method, seed_index, means, vars_, _ = play_task(matrix, config, split, method, seed_index)
    return method, seed_index, means, vars_


def play_task(
    matrix: ScoreMatrix, config: BacktestConfig, split: Split, method: str, seed_index: int
) -> TaskResult:
    """Play ``method`` on every target with seed ``seed_index``; (method, seed, means (T, N), vars (T, N),
    shifts (T, N) or None where every interval is symmetric: :attr:`~activeeval.methods.estimate.Estimate.shift`).

    With ``config.shared_order`` (the default) every target of the seed gets
    the same method seed, and a method with a fast replay
    (:func:`~activeeval.methods.registry.resolve_replay`) plays all of them at once;
    otherwise each target is played step by step. A multi-target method is
    built once on all the targets (seed as the first target's) and played
    until every target has observed every item; row t is
    ``method.trajectory(t)``. Returns ``None`` arrays for BayesAME-RS when
    it would repeat BayesAME exactly (the caller copies BayesAME's
    trajectories).
    """
    refs = sample_references(split.pool, config.ref_fraction, seed_index, config.root_seed)
    reference = matrix.select_models(refs)
    n_items = matrix.n_items
    n_t = len(split.targets)
    name, options = method_and_options(config, method, reference)
    truths = np.stack([np.asarray(matrix.model_scores(t), dtype=float) for t in split.targets])
    if _repeats_source(config, method, reference):
        return method, seed_index, None, None, None
    seeds = [method_seed(config.root_seed, seed_index, 0 if config.shared_order else t) for t in range(n_t)]
    if is_multi_target(name):
        built = resolve_factory(name)(reference, list(split.targets), seed=seeds[0], **options)
        joint = cast("MultiTargetMethod", built)
        run_multi_to_end(joint, truths)
        trajs = [joint.trajectory(t) for t in range(n_t)]
        return (method, seed_index, np.array([[e.mean for e in tr] for tr in trajs], dtype=float),
                np.array([[e.var for e in tr] for tr in trajs], dtype=float), _shifts([[e.shift for e in tr]
                                                                                       for tr in trajs]))
    batch = batch_play_size(config, method)
    replay = resolve_replay(name) if config.shared_order and batch == 1 else None
    if replay is not None:
        played = replay(reference, truths, seeds[0], **options)  # (means, vars) or (means, vars, shifts)
        return (method, seed_index, np.asarray(played[0], dtype=float), np.asarray(played[1], dtype=float),
                _shifts(played[2] if len(played) > 2 else None))
    means = np.empty((n_t, n_items))
    vars_ = np.empty((n_t, n_items))
    shifts = np.zeros((n_t, n_items))
    make = sharing_factory(name, reference, **options)  # reference-only state derived once, not per target
    for t_idx in range(n_t):
        m = make(seed=seeds[t_idx])
        if batch > 1:
            run_batches(m, truths[t_idx], batch)
        else:
            run_fixed(m, truths[t_idx], n_items)
        traj = m.trajectory
        means[t_idx] = [e.mean for e in traj]
        vars_[t_idx] = [e.var for e in traj]
        shifts[t_idx] = [e.shift for e in traj]
    return method, seed_index, means, vars_, _shifts(shifts)


# ------------------------------------------------------------------ local
_WORKER: dict = {}


def _task(matrix: ScoreMatrix, config: BacktestConfig, split: Split, method: str, seed_index: int, threads: int
          ) -> TaskResult:
    """:func:`play_task` under the BLAS thread limit ``threads``, and as many threads of activeeval's own parallel
    work (the reference fit's): per worker, the parallelism is across tasks."""
    with limit_threads(threads), fixed_workers(threads):
        return play_task(matrix, config, split, method, seed_index)


def _init_worker(matrix: ScoreMatrix, config: BacktestConfig, split: Split, threads: int, parent: int) -> None:
    _WORKER.update(matrix=matrix, config=config, split=split, threads=threads)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A worker whose parent is gone (``kill -9``) exits, instead of waiting for work forever on a queue that
    its sibling workers keep open."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def _worker_task(method: str, seed_index: int) -> TaskResult:
    w = _WORKER
    return _task(w["matrix"], w["config"], w["split"], method, seed_index, w["threads"])


def _run_local(matrix, config, split, tasks, workers, threads, on_done):
    if workers == 1:
        for method, s in tasks:
            on_done(_task(matrix, config, split, method, s, threads))
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed

    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker,
                               initargs=(matrix, config, split, threads, os.getpid()))
    futures = [pool.submit(_worker_task, method, s) for method, s in tasks]
    pending = set(futures)
    try:
        for fut in as_completed(futures):
            pending.discard(fut)
            on_done(fut.result())
    except KeyboardInterrupt:
        # Queued tasks never start; running ones end (on a terminal every worker got the Ctrl-C too) and
        # whatever they finish meanwhile is kept.
        pool.shutdown(wait=True, cancel_futures=True)
        for fut in pending:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                on_done(fut.result())
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _cluster_error(backend: str, address: str | None, exc: Exception) -> ConfigurationError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    where = f"join the {backend} cluster at {option('address')} {address!r}" if address else f"start a local {backend}"
    return ConfigurationError(
        f"{option('backend', repr(backend), backend)}: could not {where}: {type(exc).__name__}: {first}; start the "
        "cluster as docs/backtest.md (\"Parallel and distributed runs\") says and give its address, or drop "
        f"{option('address')} for a local one")


def _run_ray(matrix, config, split, tasks, workers, threads, on_done, address):
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(
            f"{option('backend', repr('ray'), 'ray')} needs Ray: pip install \"activeeval[ray]\" (or pip install "
            '"ray>=2.9")'
        ) from exc
    started = False
    if not ray.is_initialized():
        try:
            # "local": a new local cluster of `workers` CPUs even where one was started with `ray start`
            ray.init(address=address or "local", num_cpus=None if address else workers, include_dashboard=False,
                     log_to_driver=False)
        except Exception as exc:
            raise _cluster_error("ray", address, exc) from exc
        started = True
    try:

        remote_task = ray.remote(num_cpus=1)(_task)
        refs = (ray.put(matrix), ray.put(config), ray.put(split))
        pending = [remote_task.remote(*refs, method, s, threads) for method, s in tasks]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            on_done(ray.get(done[0]))
    finally:
        if started:
            ray.shutdown()


def _run_dask(matrix, config, split, tasks, workers, threads, on_done, address):
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:
        raise ConfigurationError(
            f"{option('backend', repr('dask'), 'dask')} needs Dask distributed: pip install \"activeeval[dask]\" "
            '(or pip install "dask[distributed]")'
        ) from exc
    cluster = None
    if address:
        try:
            client = Client(address, timeout=30)
        except Exception as exc:
            raise _cluster_error("dask", address, exc) from exc
    else:
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    try:
        m_f, c_f, s_f = client.scatter([matrix, config, split], broadcast=True)
        futures = [client.submit(_task, m_f, c_f, s_f, method, s, threads, pure=False) for method, s in tasks]
        for fut in as_completed(futures):
            on_done(fut.result())
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_identity(matrix: ScoreMatrix, config: BacktestConfig) -> dict:
    """What a checkpoint folder's tasks belong to: the data's fingerprint and every setting of ``config``."""
    return {"run": "backtest", "data": matrix.fingerprint(), "config": type(config).__name__,
            "settings": dataclasses.asdict(config)}


def _task_name(methods: Sequence[str], method: str, seed: int) -> str:
    return f"task-{methods.index(method):02d}-{seed:05d}"


def _finished_tasks(store: TaskStore, methods: Sequence[str], n_seeds: int
                    ) -> dict[tuple[str, int], tuple[np.ndarray | None, np.ndarray | None, np.ndarray | None]]:
    """The tasks a checkpoint holds: (method, seed) -> (means, vars, shifts), None arrays for a copied BayesAME-RS
    (and None shifts where every interval is symmetric)."""
    out = {}
    for name in store.names():
        data = store.load_arrays(name)
        method, seed = str(data["method"]), int(data["seed"])
        if method not in methods or not 0 <= seed < n_seeds or name != _task_name(methods, method, seed):
            raise StorageError(f"{store.flag} {str(store.folder)!r}: task file {name} is not a task of this run; "
                               "remove it, or choose a new folder")
        out[(method, seed)] = (data.get("means"), data.get("vars"), data.get("shifts"))
    return out


def run_backtest(
    matrix: ScoreMatrix,
    config: BacktestConfig,
    *,
    workers: int | None = None,
    backend: str = "local",
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    checkpoint: str | os.PathLike[str] | TaskStore | None = None,
) -> BacktestResult:
    """Run every (method, seed) task of ``config`` on ``matrix``.

    Parameters
    ----------
    workers : int, optional
        Worker processes (default: all cores, ``os.cpu_count()``).
    backend : {"local", "ray", "dask"}
    address : str, optional
        Cluster address for ray/dask (default: start a local cluster).
    progress : callable, optional
        Called with (done, total) after each task (the CLI passes a progress bar's update).
    checkpoint : path or TaskStore, optional
        A folder that keeps every finished task as it completes
        (:mod:`activeeval.experiments.checkpoint`): a run stopped by Ctrl-C
        (:class:`BacktestInterrupted`), a crash or ``kill -9`` keeps them, and
        the same call with the same folder computes only the others. The
        result is the uninterrupted run's, bit for bit.
    """
    if backend not in BACKENDS:
        raise ConfigurationError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if workers is None:
        workers = os.cpu_count() or 1
    if int(workers) != workers or workers < 1:
        raise ConfigurationError(f"workers must be a positive integer, got {workers}")
    if progress is not None and not callable(progress):
        raise ConfigurationError(
            f"progress must be a callable (done, total) or None, got {progress!r}; the CLI's bar is "
            "activeeval.cli.common.progress_bar")
    methods = check_methods(config.methods)
    if methods != tuple(config.methods):
        config = dataclasses.replace(config, methods=methods)
    check_multi_target(config)
    check_batch(config, matrix.n_items)
    split = backtest_split(matrix, config)
    first = sample_references(split.pool, config.ref_fraction, 0, config.root_seed)  # validates --refs
    check_method_options(config, matrix.select_models(first), split.targets)
    n_items = matrix.n_items
    n_t, n_s = len(split.targets), config.n_seeds
    means = {m: np.full((n_t, n_s, n_items), np.nan) for m in methods}
    vars_ = {m: np.full((n_t, n_s, n_items), np.nan) for m in methods}
    tasks = [(m, s) for s in range(n_s) for m in methods]
    total = len(tasks)
    done = 0
    copies: list[tuple[str, int]] = []  # (BayesAME-RS label, seed) where it repeats BayesAME
    store = checkpoint if isinstance(checkpoint, TaskStore) or checkpoint is None else TaskStore(checkpoint)
    if store is not None:
        store.check(run_identity(matrix, config))
    kept = _finished_tasks(store, methods, n_s) if store is not None else {}

    shifts: dict[str, np.ndarray] = {}

    def on_done(res: TaskResult) -> None:
        nonlocal done
        method, s, mu, var, shift = res
        if store is not None and (method, s) not in kept:
            store.save_arrays(_task_name(methods, method, s), method=np.array(method), seed=np.array(s),
                              **({} if mu is None or var is None else {"means": mu, "vars": var}),
                              **({} if shift is None else {"shifts": shift}))
        if mu is None:
            copies.append((method, s))
        else:
            means[method][:, s, :] = mu
            vars_[method][:, s, :] = var
            if shift is not None:
                shifts.setdefault(method, np.zeros((n_t, n_s, n_items)))[:, s, :] = shift
        done += 1
        if progress is not None:
            progress(done, total)

    for (method, s), (mu, var, shift) in kept.items():
        on_done((method, s, mu, var, shift))
    todo = [t for t in tasks if t not in kept]
    threads = active_limit()  # the caller's scope, ACTIVEEVAL_THREADS or 1: per worker, passed to remote ones
    start = time.perf_counter()
    try:
        if backend == "local":
            _run_local(matrix, config, split, todo, int(workers), threads, on_done)
        elif backend == "ray":
            _run_ray(matrix, config, split, todo, int(workers), threads, on_done, address)
        else:
            _run_dask(matrix, config, split, todo, int(workers), threads, on_done, address)
    except KeyboardInterrupt:  # the tasks kept: a Ctrl-C may land between keeping a task and counting it
        kept_now = done if store is None else len(store.names())
        raise BacktestInterrupted(kept_now, total, None if store is None else store.folder) from None
    for label, s in copies:
        source = _copy_source(config, label)
        assert source is not None  # copies holds only the labels that have one
        means[label][:, s, :] = means[source][:, s, :]
        vars_[label][:, s, :] = vars_[source][:, s, :]
        if source in shifts:
            shifts.setdefault(label, np.zeros((n_t, n_s, n_items)))[:, s, :] = shifts[source][:, s, :]
    truth = np.array([float(np.mean(matrix.model_scores(t))) for t in split.targets])
    return BacktestResult(
        dataset=matrix.name or "scores",
        config=config,
        split=split,
        n_items=n_items,
        truth=truth,
        means=means,
        vars=vars_,
        wall_time=time.perf_counter() - start,
        backend=backend,
        workers=int(workers),
        reference_sizes=[int(round(config.ref_fraction * len(split.pool)))],
        batch_sizes={m: k for m in methods if (k := batch_play_size(config, m)) > 1},
        shifts=shifts,
    )
