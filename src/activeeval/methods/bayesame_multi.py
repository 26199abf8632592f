"""BayesAME for several targets at once: the multi-target method (§3.2, App. A.4, C.1; SPEC.md §2).

The targets' bucket abilities are tied by a linear model of coregionalisation
(:mod:`activeeval.gp.lmc`) with L = T latents: θ^t = μ + Σ_l W[t, l] u_l. In the
paper every target is first evaluated on the same random 10 % of the items
(the default starts without: ``warm_start``); then the targets take turns,
each choosing the item of highest information gain about its own R given
every target's scores (or, with ``selection="average"``, the
item of highest information gain averaged over the targets, for a target
drawn at random). The hyperparameters are refitted on the NLML every F
observations.

Two priors:

* ``prior="paper"`` (``bayesame-multi-paper``): exactly SPEC.md §2 — half
  squared-exponential, half Matérn-3/2 latents, (α_l, β_l, W, σ²) learned by
  AdamW from the paper's start (α = β = 1, W ~ N(0, 0.01), σ² 0.1 / 0.01),
  noise N_b σ², the model's variance.
* ``prior="reference"`` (the default, ``bayesame-multi``): what the
  trustworthy single-target default learned, carried over. On the shared
  data the paper's fit is fragile: on binary scores σ² runs into its clip
  within a few hundred observations and the intervals miss the truth
  (docs/multi-target.md). So every latent uses the single-target default's
  kernel, fitted on the *reference* models (:func:`~activeeval.gp.prior.fit_hyperparameters`:
  level, slope, linear and Eq. 1 terms, per-item noise σ²), and only the
  mixing weights W — how the targets co-vary, which only the targets can
  tell — are learned from the targets' scores (L-BFGS-B on the NLML), from
  W = I: the start is independent single-target BayesAME, and the fit adds
  correlation only where the scores support it. The interval is widened by
  the single-target calibration factor (measured on reference
  pseudo-targets) and by each target's own scale, (ν0 + Σ z²)/(ν0 + m) over
  its standardised innovations under the current fit, and the estimate is
  kept in the range R can still take. With one target and W = 1 this is the
  single-target default's model-based estimate (tested).

Refits rebuild the posterior (O(n²·T·B)), so after the first ten a refit
also waits until the observations have grown by ``refit_growth`` (10 %), and
the NLML uses at most ``fit_max`` observations drawn at random;
``refit_growth=0, fit_max=None`` gives the paper's schedule exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError
from activeeval.gaussian import bucketize, sq_dists
from activeeval.gp.kernels import Given
from activeeval.gp.lmc import (
    LATENT_KERNELS,
    FitRecord,
    LMCParams,
    LMCPosterior,
    adamw_fit,
    coupled,
    fit_correlations,
    icm_nlml,
    initial_params,
    nlml,
)
from activeeval.gp.prior import BucketPrior, ReferencePrior
from activeeval.methods.base import SeedLike
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.methods.multi import MultiTargetMethod, Pair
from activeeval.settings import Integer, Number, OneOf, Settings, setting, takes_settings

__all__ = ["BayesAMEMulti", "BayesAMEMultiPaper", "MultiModelSettings", "RefitSettings"]

Z95 = 1.959963984540054
SCALE_PRIOR = 10.0
SCALE_SKIP = 5


@dataclass(frozen=True)
class MultiModelSettings(Settings):
    """The joint model of :class:`BayesAMEMulti` and the estimate it reads off (the method's ``model`` group; each
    field is also a flat option, ``bayesame-multi[coupling=0.8]``): the shared start, the latents and their
    coupling, the buckets, and the estimator and interval. :class:`BayesAMEMulti`'s docstring says what each
    does; None means "the default of the prior (or of the scores' kind)"."""

    about: ClassVar[str] = "the joint model: its start, latents, coupling, buckets and estimate"

    warm_start: float | None = setting(None, Number(0, 1, optional=True, phrase="a fraction of the items in [0, 1]"),
                                       "fraction of the items every target is evaluated on first (default 0, "
                                       "the paper's 0.1 with prior='paper')")
    latents: int | None = setting(None, Integer(1, optional=True),
                                  "L, the number of latent vectors (prior='paper'; default the number of targets)")
    coupling: float = setting(0.5, Number(0, 1, phrase="a number in [0, 1]"),
                              "c, the largest share of a target's prior variance shared with the others")
    level: str = setting("coupled", OneOf("coupled", "separate"),
                         "the kernel's level and slope terms coupled across targets or each target's own")
    sigma2: float | None = setting(None, Number(0, low_open=True, optional=True, phrase="a positive number"),
                                   "prior='paper': the initial σ² (default 0.1 binary, 0.01 continuous)")
    n0: int = setting(10, Integer(0),
                      "margin of the regime: unique ⇔ B ≥ N − N0")
    estimator: str = setting("auto", OneOf("auto", "bayes", "cv"), "the paper's single-target estimator (Eq. 5)")
    interval: str | None = setting(None, OneOf("scaled", "model", None),
                                   "the calibrated, per-target scaled interval or the model's variance (default "
                                   "scaled with prior='reference', model with prior='paper')")
    scale_prior: float = setting(SCALE_PRIOR, Number(0, low_open=True, phrase="a positive number"),
                                 "ν0, the pseudo-count shrinking a target's scale towards 1")
    tolerance: float | None = setting(None, Number(0, optional=True, phrase=">= 0 (0 compares scores exactly)"),
                                      "bucketing tolerance (binary scores exactly; continuous ones to 1e-3)")
    cache_mb: float = setting(512.0, Number(0, phrase="a number of megabytes >= 0"),
                              "memory for cached distances and kernel rows")


@dataclass(frozen=True)
class RefitSettings(Settings):
    """When and how :class:`BayesAMEMulti` refits its hyperparameters on the NLML (the method's ``refit`` group;
    each field is also a flat option, ``bayesame-multi[refit_every=20]``). ``refit_growth=0, fit_max=None`` is
    the paper's schedule."""

    about: ClassVar[str] = "when and how the hyperparameters are refitted"

    refit_every: int | None = setting(50, Integer(0, optional=True),
                                      "F: refit every F observations (of any target); None or 0: never")
    fit_steps: int = setting(500, Integer(1), "optimiser steps of the first fit")
    min_fit_steps: int = setting(50, Integer(1),
                                 "the least steps of a later fit (the k-th takes max(min_fit_steps, fit_steps / k))")
    learning_rate: float | None = setting(None, Number(0, low_open=True, optional=True, phrase="a positive number"),
                                          "AdamW's, prior='paper' (default 0.01 binary, 0.001 continuous)")
    weight_decay: float = setting(0.01, Number(0), "AdamW's decoupled weight decay (PyTorch's default 0.01)")
    fit_max: int | None = setting(400, Integer(2, optional=True),
                                  "at most this many observations, drawn at random, in a fit's NLML (None: all)")
    refit_growth: float = setting(0.1, Number(0), "after the first 10 fits, refit only once the observations "
                                                  "have grown by this fraction")


class BayesAMEMulti(MultiTargetMethod):
    """Multi-target BayesAME: several targets evaluated jointly through a linear model of coregionalisation.

    The options come in two settings groups besides a few top-level ones:
    ``model`` (:class:`MultiModelSettings`: the shared start, the latents and
    their coupling, the buckets, the estimator and interval) and ``refit``
    (:class:`RefitSettings`: when and how the hyperparameters are refitted).
    Each field of a group is also a flat keyword — ``BayesAMEMulti(ref,
    targets, coupling=0.8)`` is ``BayesAMEMulti(ref, targets,
    model=MultiModelSettings(coupling=0.8))``, and a method spec writes it
    ``bayesame-multi[coupling=0.8]`` — and this object's attribute of the same
    name (``method.coupling``).

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' per-item scores.
    targets : int or sequence of str
        The target models (names, or how many).
    seed, missing
        As :class:`~activeeval.methods.multi.MultiTargetMethod`.
    selection : {"round-robin", "average", "random"}
        "round-robin" (the paper): the targets in turn, each taking the item
        of highest information gain about its own R (uniform random in the
        non-unique regime, B < N − N0, as the single-target paper does);
        "average": the item of highest information gain averaged over the
        active targets, for one of them drawn at random; "random": uniform
        random items in turn (BayesAME-RS for several targets).
    prior : {"reference", "paper"}
        The default's reference-fitted kernel with learned mixing weights, or
        the paper's LMC (see the module's docstring).
    hyperparameters : LMCParams or its dict, optional
        Start from these instead of the initial values.
    reference_fit, calibration
        ``prior="reference"``: the single-target default's reference fit and
        calibration (:class:`~activeeval.methods.bayesame.BayesAME`'s
        ``hyperparameters`` and ``calibration``), to reuse stored ones (what
        :meth:`frozen_options` returns).
    reference_prior : ReferencePrior, optional
        ``prior="reference"``: the whole prior (fit, calibration, tolerance;
        :class:`~activeeval.gp.prior.ReferencePrior`), built once and shared
        with other methods on the same reference; without it the method builds
        it from ``reference_fit``, ``calibration`` and ``tolerance`` exactly
        as the single-target default does (those then stay unset), but for
        its calibration's switch test: the 95 % interval's own
        (``switch_z=None``, the single-target default's before stop 46), as
        this method never switches.
    model : MultiModelSettings
        The joint model and its estimate; its fields:

        warm_start : float, optional
            Fraction of the items every target is evaluated on first, at random.
            Default: 0 with the reference prior, the paper's 0.1 with ``prior="paper"``.
            The default needs no shared start: its kernel comes from the references,
            and random items cost more than the correlations they teach (with
            independent targets, no start is single-target BayesAME exactly and a
            10 % start is a third worse: docs/benchmarks/history.md, "warm start").
        latents : int, optional
            L, the number of latent vectors (default: the number of targets).
        coupling : float
            ``prior="reference"``: c, the largest share of a target's prior
            variance that it may share with the other targets (B = c UUᵀ + (1 − c) I;
            see :func:`~activeeval.gp.lmc.fit_correlations`). 0: independent targets
            (with no warm start, exactly single-target BayesAME per target).
            Default 0.5: 0.8 shared too much late in a run and its intervals
            missed more often (coverage at the stop 0.90 against 0.96 on the
            correlated IFEval set, docs/BENCHMARKS.md).
        level : {"coupled", "separate"}
            ``prior="reference"``: whether the kernel's level and slope terms
            (τ0 + τ1 m_b m_b', how far a target sits from the references and how
            steeply it follows item difficulty) are coupled across targets by B
            like the rest of the kernel ("coupled": Σ = B ⊗ K), or kept by each
            target on its own ("separate": Σ = I ⊗ K_level + B ⊗ (K − K_level)),
            so that targets that agree item by item need not agree in level.
            Default "coupled": "separate" covers better early on AlpacaEval 2's
            correlated set (0.92 against 0.82 at 10 % of the items) but loses
            most of the joint gain there and more on a random set
            (docs/benchmarks/history.md, "Ablation: each target its own level and slope").
        sigma2 : float, optional
            ``prior="paper"``: initial σ² (default 0.1 binary, 0.01 continuous).
        n0 : int
            Margin of the regime: unique ⇔ B ≥ N − N0.
        estimator : {"auto", "bayes", "cv"}
            As the paper's single-target estimator (Eq. 5).
        interval : {"scaled", "model"}, optional
            "scaled": Var(R) times the calibration factor² and each target's
            measured scale, the estimate kept in range; "model": the model's
            variance. Default "scaled" with the reference prior, "model" with the paper's.
        scale_prior : float
            ν0, the pseudo-count shrinking a target's scale towards 1.
        tolerance : float, optional
            Bucketing tolerance (binary scores exactly; continuous ones to 1e-3).
        cache_mb : float
            Memory for cached distances and kernel rows (default 512).
    refit : RefitSettings
        When and how the hyperparameters are refitted; its fields:

        refit_every : int or None
            F: refit every F observations (of any target); None or 0: never.
        fit_steps, min_fit_steps : int
            AdamW steps of the first fit, and the least of the later ones (the
            k-th fit takes max(min_fit_steps, fit_steps / k)).
        learning_rate : float, optional
            AdamW's, ``prior="paper"`` (default 0.01 on binary scores, 0.001 on continuous ones).
        weight_decay : float
            AdamW's decoupled weight decay (PyTorch's default 0.01).
        fit_max : int or None
            At most this many observations, drawn at random, in the NLML of a fit
            (its cost is O(fit_max³) per step); None: all of them.
        refit_growth : float
            After the first 10 fits, refit only once the observations have grown by
            this fraction since the last fit (as well as by F).
    """

    name = "bayesame-multi"
    capabilities = Capabilities(multi_target=True, ranks=True)

    @takes_settings
    def __init__(
        self,
        reference: ScoreMatrix,
        targets: int | Sequence[str],
        *,
        seed: SeedLike = None,
        missing: str = "models",
        selection: Literal["round-robin", "average", "random"] = "round-robin",
        prior: Literal["reference", "paper"] = "reference",
        hyperparameters: LMCParams | Mapping[str, Any] | None = None,
        reference_fit: Mapping[str, Any] | None = None,
        calibration: Mapping[str, Any] | Literal["auto"] | None = "auto",
        reference_prior: ReferencePrior | None = None,
        model: MultiModelSettings = MultiModelSettings(),
        refit: RefitSettings = RefitSettings(),
    ) -> None:
        warm_start = model.warm_start
        if warm_start is None:
            warm_start = 0.1 if prior == "paper" else 0.0
        super().__init__(reference, targets, seed=seed, missing=missing, warm_start=warm_start)
        selection = OneOf("round-robin", "average", "random")("selection", selection)
        prior = OneOf("reference", "paper")("prior", prior)
        #: the settings groups as given (each field is also this object's attribute of the same name)
        self.model, self.refit = model, refit
        # settings as given, under the names they always had; resolved or learned values carry a trailing underscore
        self.selection, self.prior, self.hyperparameters = selection, prior, hyperparameters
        self.reference_fit, self.calibration, self.reference_prior = reference_fit, calibration, reference_prior
        # the groups' fields (warm_start: the base class keeps the fraction in use)
        self.latents, self.coupling, self.level, self.sigma2 = model.latents, model.coupling, model.level, model.sigma2
        self.n0, self.estimator, self.interval = model.n0, model.estimator, model.interval
        self.scale_prior, self.tolerance, self.cache_mb = model.scale_prior, model.tolerance, model.cache_mb
        self.refit_every, self.fit_steps, self.min_fit_steps = refit.refit_every, refit.fit_steps, refit.min_fit_steps
        self.learning_rate, self.weight_decay, self.fit_max = refit.learning_rate, refit.weight_decay, refit.fit_max
        self.refit_growth = refit.refit_growth
        latents, sigma2, tolerance, cache_mb = model.latents, model.sigma2, model.tolerance, model.cache_mb
        n0, estimator = model.n0, model.estimator
        if reference_prior is not None:
            _check_reference_prior(reference_prior, prior, reference_fit, calibration, tolerance)
        if model.level == "separate" and prior != "reference":
            raise ConfigurationError("level='separate' splits the reference prior's kernel; it needs "
                                     "prior='reference' (the paper's latents have no level term)")
        interval, learning_rate, refit_every = model.interval, refit.learning_rate, refit.refit_every
        self.interval_ = interval if interval is not None else ("scaled" if prior == "reference" else "model")
        ref = self.reference
        binary = ref.kind == "binary"
        n_lat = int(latents) if latents is not None else self.n_targets
        self.learning_rate_ = float(learning_rate) if learning_rate is not None else (0.01 if binary else 0.001)
        self.refit_every_ = int(refit_every) if refit_every else 0
        self._n_refs = ref.n_models
        self.reference_prior_: ReferencePrior | None = None
        self.bucket_prior_: BucketPrior | None = None
        self._single: Any = None
        fixed_row: Callable[[int], np.ndarray] | None
        level_row: Callable[[int], np.ndarray] | None
        if prior == "reference" and n_lat != self.n_targets:
            raise ConfigurationError("prior='reference' has one latent per target; leave latents unset "
                                     "(latents is for prior='paper')")
        if prior == "reference":
            # the single-target default's prior on this reference: its buckets, reference-fitted kernel, noise,
            # calibration (gp/prior.py; its folds with the main fit's kernel since stop 44), built as BayesAME
            # builds it, or the one given
            # (switch_z=None: the calibration made with the 95 % interval's own switch test, as before stop 46
            # made switch_z=1 the single-target default; this method never switches, and its coverage was
            # measured with this calibration)
            self.reference_prior_ = reference_prior if reference_prior is not None else ReferencePrior.build(
                ref, hyperparameters=reference_fit, calibration=calibration, tolerance=tolerance, switch_z=None)
            self.bucket_prior_ = state = self.reference_prior_.on(ref, cache_mb=cache_mb / 2)
            self.buckets = state.buckets
            self.tolerance_ = self.reference_prior_.tolerance
            self.factor_ = float(self.reference_prior_.calibration.factor)
            noise_unit = np.ones(self.buckets.n_buckets)
            fixed_row, level_row = state.column, None
            if model.level == "separate":  # K − K_level coupled by B, K_level = τ0 + τ1 m mᵀ each target's own
                level_of = state.level_column

                def fixed_of(b: int) -> np.ndarray:
                    return state.column(b) - level_of(b)

                fixed_row, level_row = fixed_of, level_of
            self.unit_rows_ = np.eye(self.n_targets)  # U of B = c UUᵀ + (1 − c) I: B = I, independent targets
            start = self._icm_params(self.unit_rows_, state.sigma2)
        else:
            self.tolerance_ = float(tolerance) if tolerance is not None else (0.0 if binary else 1e-3)
            self.buckets = bucketize(ref.scores.T, self.tolerance_)
            self.factor_ = 1.0
            noise_unit = None  # N_b σ²
            fixed_row = level_row = None
            start = initial_params(self.n_targets, n_lat, sigma2 if sigma2 is not None else (0.1 if binary else 0.01),
                                   int(self.seed_))
        if hyperparameters is not None:
            start = hyperparameters if isinstance(hyperparameters, LMCParams) else LMCParams.from_dict(
                hyperparameters)
            if start.W.shape[0] != self.n_targets:
                raise ConfigurationError(
                    f"hyperparameters have weights for {start.W.shape[0]} targets, not {self.n_targets}")
        n_buckets = self.buckets.n_buckets
        self.unique_regime = n_buckets >= self.n_items - int(n0)
        use_bayes = estimator == "bayes" or (estimator == "auto" and (self.unique_regime or prior == "reference"))
        self.estimator_ = "bayes" if use_bayes else "cv"
        # the default selects by information gain in every regime (its noise is per item, as single-target's)
        self.active_ = selection != "random" and (self.unique_regime or prior == "reference")
        phi = self.buckets.phi
        self._feat = phi
        self._feat_sq = (phi**2).sum(1)
        if self.bucket_prior_ is not None:
            self._d2_full = self.bucket_prior_.distances
        else:
            self._d2_full = sq_dists(phi, phi) if n_buckets * n_buckets * 8 <= cache_mb * 2**20 / 2 else None
        self.posterior = LMCPosterior(start, self.buckets.counts, phi.mean(1), self._d2_row, self._n_refs,
                                      self.n_targets, noise_unit=noise_unit, fixed_row=fixed_row,
                                      level_row=level_row)
        self.fits: list[FitRecord] = []
        self._last_fit = 0
        self._sum_obs = np.zeros(self.n_targets)

    @property
    def single_(self) -> Any:
        """The single-target default on this reference and prior (``prior="reference"``; else None).

        Kept for code that read it: the method itself no longer builds one (it
        takes the prior directly, :attr:`bucket_prior_`); built here when first
        asked for, on the same :class:`~activeeval.gp.prior.ReferencePrior`.
        """
        if self.reference_prior_ is None:
            return None
        if self._single is None:
            from activeeval.methods.bayesame import BayesAME, DesignSettings, FitSettings

            self._single = BayesAME(self.reference, seed=int(self.seed_), selection="active",
                                    design=DesignSettings(extrapolation="off"), prior=self.reference_prior_,
                                    fit=FitSettings(cache_mb=self.cache_mb / 2))
        return self._single

    def frozen_options(self) -> dict:
        """The single-target default's reference fit and calibration (``prior="reference"``), to rebuild
        without deriving them again."""
        if self.reference_prior_ is None:
            return {}
        return {"reference_fit": self.reference_prior_.fit.to_dict(),
                "calibration": self.reference_prior_.calibration.to_dict()}

    def _icm_params(self, unit_rows: np.ndarray, sigma2: float | None = None) -> LMCParams:
        """The LMC parameters of B = c UUᵀ + (1 − c) I over the single-target kernel: W = chol(B), latents on the
        caller's "fixed" kernel (:class:`~activeeval.gp.kernels.Given`).

        With ``level="separate"`` T more latents on the caller's "level" kernel, one per target (W = [chol(B) | I]).
        """
        bmat = coupled(unit_rows, self.coupling)
        w = np.linalg.cholesky(bmat + 1e-12 * np.eye(bmat.shape[0]))
        n = w.shape[0]
        kernels = (LATENT_KERNELS["fixed"],) * n
        if self.level == "separate":
            w = np.hstack([w, np.eye(n)])
            kernels += (LATENT_KERNELS["level"],) * n
        s2 = self.posterior.params.sigma2 if sigma2 is None else sigma2
        return LMCParams((1.0,) * len(kernels), (1.0,) * len(kernels), kernels,
                         tuple(tuple(map(float, r)) for r in w), float(s2))

    def correlations(self) -> np.ndarray:
        """B: the prior correlation of the targets' abilities on the same bucket (T × T), as learned.

        With ``level="separate"``, that of the coupled part of the kernel (the level and slope terms are each
        target's own).
        """
        params = self.posterior.params
        w = params.W[:, [not (isinstance(k, Given) and k.source == "level") for k in params.kernels]]
        b = w @ w.T
        d = np.sqrt(np.diag(b))
        return b / d[:, None] / d[None, :]

    # ---------------------------------------------------------------- properties
    @property
    def params_(self) -> LMCParams:
        """The hyperparameters in use (learned)."""
        return self.posterior.params

    @property
    def n_buckets(self) -> int:
        return self.buckets.n_buckets

    @property
    def regime(self) -> str:
        return "unique" if self.unique_regime else "non-unique"

    def _d2_row(self, b: int) -> np.ndarray:
        if self._d2_full is not None:
            return self._d2_full[b]
        row = np.maximum(self._feat_sq + self._feat_sq[b] - 2.0 * (self._feat @ self._feat[b]), 0.0)
        row[b] = 0.0
        return row

    def scales(self) -> np.ndarray:
        """Each target's interval scale (ν0 + Σ z²)/(ν0 + m) over its standardised innovations under the current fit.

        The first ``SCALE_SKIP`` innovations of each target are left out (they
        mostly measure the prior), as in the single-target default.
        """
        post = self.posterior
        y = post.y.view
        t_obs = np.asarray(post.obs_t, dtype=np.intp)
        out = np.ones(self.n_targets)
        if self.interval_ == "model" or y.size == 0:
            return out
        for t in range(self.n_targets):
            z = y[t_obs == t][SCALE_SKIP:]
            out[t] = (self.scale_prior + float(z @ z)) / (self.scale_prior + z.size)
        return out

    def information_gains(self, target: int | str) -> np.ndarray:
        """Eq. 6 for ``target``, one unobserved item per bucket, given every target's scores (B,)."""
        return self.posterior.information_gain(self.target_index(target))

    # ---------------------------------------------------------------- selection
    def _free_buckets(self, target: int, exclude: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        avail = ~self._observed[target]
        avail[exclude] = False
        return np.bincount(self.buckets.of_item[avail], minlength=self.n_buckets) > 0, avail

    def _item_of_bucket(self, b: int, avail: np.ndarray, rng: np.random.Generator) -> int:
        members = self.buckets.members[b]
        free = members[avail[members]]
        return int(free[rng.integers(free.size)]) if free.size > 1 else int(free[0])

    def _argmax_bucket(self, ig: np.ndarray, ok: np.ndarray, rng: np.random.Generator) -> int | None:
        ig = np.where(ok, ig, -np.inf)
        best = float(ig.max())
        if not np.isfinite(best) or best <= 0.0:
            return None
        ties = np.flatnonzero(ig >= best - 1e-12 * abs(best))
        return int(ties[rng.integers(ties.size)]) if ties.size > 1 else int(ties[0])

    def _select_item(self, target: int, rng: np.random.Generator, exclude: np.ndarray, given: bool) -> int:
        if not self.active_:
            return super()._select_item(target, rng, exclude, given)
        ok, avail = self._free_buckets(target, exclude)
        b = self._argmax_bucket(self.posterior.information_gain(target), ok, rng)
        if b is None:  # nothing left to learn about R: a random item
            return int(rng.choice(np.flatnonzero(avail)))
        return self._item_of_bucket(b, avail, rng)

    def _next_pairs(self, k: int, rng: np.random.Generator, given: bool, free: np.ndarray, taken: np.ndarray,
                    act: Sequence[int]) -> list[Pair]:
        if self.selection != "average" or not self.active_:
            return super()._next_pairs(k, rng, given, free, taken, act)
        out: list[Pair] = []
        while len(out) < k and free.any():
            # the item of highest information gain averaged over the active targets, for one of them at random
            ig = np.zeros(self.n_buckets)
            ok = np.zeros(self.n_buckets, dtype=bool)
            for t in act:
                ok_t, _ = self._free_buckets(t, np.flatnonzero(taken[t]))
                ig += np.where(ok_t, self.posterior.information_gain(t), 0.0)
                ok |= ok_t
            b = self._argmax_bucket(ig / len(act), ok, rng)
            if b is None:
                t = int(act[int(rng.integers(len(act)))]) if free[list(act)].any(1).all() else int(
                    np.flatnonzero(free.any(1))[0])
                item = int(rng.choice(np.flatnonzero(free[t])))
            else:
                members = self.buckets.members[b]
                cands = [(t, int(i)) for t in act for i in members if free[t, i]]
                t, item = cands[rng.integers(len(cands))]
            out.append((t, item))
            free[t, item] = False
            taken[t, item] = True
        return out

    # ---------------------------------------------------------------- updates
    def _update(self, target: int, item: int, score: float) -> None:
        self.posterior.observe(target, int(self.buckets.of_item[item]), score)
        self._sum_obs[target] += score

    def _after_observe(self, target: int) -> None:
        n = self.n_observed
        every = self.refit_every_
        if not every or n - self._last_fit < every:
            return
        if self.prior == "reference" and n < self.warm_items_.size * self.n_targets:
            return  # the default learns the targets' correlations once every target has its warm-start items
        if len(self.fits) >= 10 and n < (1.0 + self.refit_growth) * self._last_fit:
            return
        self._refit()

    def _refit(self) -> None:
        """AdamW on the NLML of (at most ``fit_max`` of) the observations; the posterior rebuilt at the best point."""
        post = self.posterior
        n = post.n_observed
        t_obs = np.asarray(post.obs_t, dtype=np.intp)
        b_obs = np.asarray(post.obs_b, dtype=np.intp)
        s_obs = np.asarray(post.obs_s, dtype=float)
        if self.fit_max is not None and n > self.fit_max:
            rng = np.random.default_rng(np.random.SeedSequence([int(self.seed_), n, 0xF17]))
            pick = np.sort(rng.choice(n, size=int(self.fit_max), replace=False))
            t_obs, b_obs, s_obs = t_obs[pick], b_obs[pick], s_obs[pick]
        distinct, index = np.unique(b_obs, return_inverse=True)
        feat = self._feat[distinct]
        d2 = sq_dists(feat, feat)
        resid = s_obs - post.prior_mean[b_obs]
        units = post.noise_unit[b_obs]
        n_refs = self._n_refs
        k = len(self.fits) + 1
        steps = max(int(self.min_fit_steps), int(self.fit_steps) // k)
        if self.prior == "reference":  # only the targets' correlations are learned
            kfixed = post.kernel_block("fixed", distinct)  # the rows the posterior keeps, not computed again
            klevel = post.kernel_block("level", distinct) if self.level == "separate" else None
            sigma2 = post.params.sigma2

            def icm(bmat: np.ndarray):
                return icm_nlml(bmat, t_obs, index, resid, units, kfixed, sigma2, klevel)

            unit_rows, start, end, failures = fit_correlations(self.unit_rows_, icm, self.coupling, max_iter=steps)
            self.unit_rows_ = unit_rows
            best = self._icm_params(unit_rows)
        else:
            def objective(p: LMCParams):
                return nlml(p, t_obs, index, resid, units, d2, n_refs)

            best, start, end, failures = adamw_fit(post.params, objective, steps, self.learning_rate_,
                                                   weight_decay=float(self.weight_decay))
        self.fits.append(FitRecord(n_observed=n, n_fit=int(resid.size), steps=steps, nlml_start=start, nlml_end=end,
                                   failures=failures))
        self._last_fit = n
        if math.isfinite(end) and end <= start and best != post.params:
            try:
                post.set_params(best)
            except np.linalg.LinAlgError:  # not positive definite on every observation: keep the previous fit
                post.set_params(post.params)

    # ---------------------------------------------------------------- estimates
    def _model(self) -> tuple[np.ndarray, np.ndarray]:
        """(R̂ per target, the T × T covariance of the R's), unscaled, unclipped (the model's)."""
        post = self.posterior
        n_items = float(self.n_items)
        mean_u, mean_n = post.weighted_means()
        n_t = np.array([len(items) for items in self._items], dtype=float)
        if self.estimator_ == "bayes":
            means = (self._sum_obs + mean_u) / n_items
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                means = np.where(n_t > 0, self._sum_obs / np.maximum(n_t, 1.0) + mean_n / n_items
                                 - (mean_n - mean_u) / np.maximum(n_t, 1.0), mean_n / n_items)
        cov = post.sum_cov()
        cov[np.diag_indices(self.n_targets)] += post.noise_var()
        cov /= n_items * n_items
        done = np.array([self._observed[t].all() for t in range(self.n_targets)])
        cov[done, :] = 0.0
        cov[:, done] = 0.0
        return means, cov

    def covariance(self) -> np.ndarray:
        """T × T posterior covariance of the targets' full-benchmark scores (scaled as the intervals are)."""
        _, cov = self._model()
        root = np.sqrt(self.scales()) * (self.factor_ if self.interval_ == "scaled" else 1.0)
        return cov * root[:, None] * root[None, :]

    def _current_estimate(self, target: int) -> Estimate:
        means, cov = self._model()
        t = int(target)
        mean = float(means[t])
        var = max(float(cov[t, t]), 0.0)
        notes: list[str] = []
        bounds = None
        if self.interval_ == "scaled":
            scale = float(self.scales()[t])
            var *= self.factor_**2 * scale
            if self.n_observed_of(t) >= 2 * SCALE_SKIP and scale > 2.0:
                notes.append(
                    f"the joint model predicts this target less well than it expects: its scores vary "
                    f"{math.sqrt(scale):.1f}x more, and the interval is widened by that factor")
            bounds = self._bounds(t)
            if bounds is not None:
                mean = min(max(mean, bounds[0]), bounds[1])
        if self._observed[t].all():
            mean, var = float(self._sum_obs[t]) / self.n_items, 0.0
        return Estimate(mean=mean, var=var, n_observed=self.n_observed_of(t), n_items=self.n_items, bounds=bounds,
                        notes=tuple(notes))

    def _bounds(self, target: int) -> tuple[float, float] | None:
        score_range = self.reference.score_range
        if score_range is None:
            return None
        lo, hi = score_range
        unseen = self.n_items - self.n_observed_of(target)
        total = float(self._sum_obs[target])
        return (total + lo * unseen) / self.n_items, (total + hi * unseen) / self.n_items


def _check_reference_prior(reference_prior: Any, prior: str, reference_fit: Any, calibration: Any,
                           tolerance: Any) -> None:
    """A given ``reference_prior=``: a ReferencePrior, for prior='reference', with what it holds left unset."""
    if not isinstance(reference_prior, ReferencePrior):
        raise ConfigurationError(
            f"reference_prior must be a ReferencePrior (activeeval.gp.prior: ReferencePrior.build makes one) or "
            f"None, got {type(reference_prior).__name__}")
    if prior != "reference":
        raise ConfigurationError("reference_prior is the default's prior; it needs prior='reference'")
    held = (("reference_fit", reference_fit, None), ("calibration", calibration, "auto"),
            ("tolerance", tolerance, None))
    clash = [name for name, value, unset in held if value != unset]
    if clash:
        raise ConfigurationError(
            f"reference_prior holds the fit, the calibration and the tolerance; leave {', '.join(clash)} unset")


class BayesAMEMultiPaper(BayesAMEMulti):
    """The paper's multi-target BayesAME exactly (SPEC.md §2): ``BayesAMEMulti(prior="paper")``, model variance."""

    name = "bayesame-multi-paper"
    capabilities = Capabilities(multi_target=True, ranks=True)

    def __init__(self, reference: ScoreMatrix, targets: int | Sequence[str], **kwargs: Any) -> None:
        if kwargs.get("prior", "paper") != "paper":
            raise ConfigurationError(
                "bayesame-multi-paper is the paper's prior; use bayesame-multi for prior=reference")
        kwargs["prior"] = "paper"
        super().__init__(reference, targets, **kwargs)
