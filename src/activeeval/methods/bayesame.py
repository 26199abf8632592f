"""BayesAME, the default: the paper's Gaussian model, made robust (docs/MATHS.md, "What the default changes").

The paper's algorithm (``bayesame-paper``, :mod:`activeeval.methods.bayesame_paper`)
refits its kernel on the target's first scores. On continuous scores and on
targets unlike the references that fit is fragile: the lengthscale collapses,
the fixed noise is far too small, and the interval misses the truth while
claiming precision. The default keeps the paper's bucket model, its exact
posterior, Var(R) (Eq. 2) and information-gain selection (Eq. 6), and changes
what made it fragile:

1. **The kernel is fitted on the references, not on the target**
   (:func:`fit_hyperparameters`): reference models act as pseudo-targets, each
   predicted from the others (:class:`~activeeval.gaussian.LeaveOneOutNLML`),
   once, before the first item. No collapse, and a noise level learned from data.
2. **Terms for how a new model differs from the references**
   (:class:`~activeeval.gp.kernels.LevelKernel`): a level and a slope (it may sit
   above or below every reference, and follow item difficulty more or less
   steeply) and a linear term (it may follow a combination of references).
3. **Noise per item, not per bucket**: a large bucket of identical reference
   vectors no longer widens the interval N_b times.
4. **The interval's scale is the target's own and calibrated**: Var(R) is
   multiplied by the maximum-likelihood scale of the target's innovations and
   by a factor measured on the references as pseudo-targets (:func:`calibrate`).
5. **Targets the references cannot vouch for get a design-based estimate**:
   when the target is found outside the references' range, or its scores vary
   far more than the model expects, items are drawn at random from then on and
   R̂ is the prequential difference estimator (:class:`~activeeval.design.Prequential`):
   unbiased whatever the model, never much worse than the plain mean.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np

from activeeval.data.matrix import ScoreMatrix
from activeeval.design import INTERVALS as INTERVALS  # the design-based interval's shapes (``interval``)
from activeeval.design import Z95 as Z95
from activeeval.design import Prequential, RidgeControl, sampling_side_floors, sampling_var_floor, two_sided
from activeeval.exceptions import ConfigurationError
from activeeval.gaussian import BucketPosterior
from activeeval.gp.acquisition import BatchSelector, BatchSettings, SelectorOption
from activeeval.gp.prior import (
    CALIBRATION_MAX,
    INTERVAL_ONLY,
    WARMUP,
    BucketPrior,
    Calibration,
    FitSettings,
    ReferenceFit,
    ReferencePrior,
    _range_width,
    calibrate,
    fit_hyperparameters,
)

# the reference-fitted prior lives in gp/prior.py (issue 29): these names of it stay importable from here too
from activeeval.gp.prior import CALIBRATION_MIN as CALIBRATION_MIN
from activeeval.gp.prior import CALIBRATION_MIN_Z as CALIBRATION_MIN_Z
from activeeval.gp.prior import SIGMA2_MIN as SIGMA2_MIN
from activeeval.gp.prior import SWITCH_Z as SWITCH_Z  # BayesAME's default switch_z (defined beside WARMUP)
from activeeval.methods.base import BaseMethod, SeedLike, random_order
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.settings import Integer, Number, OneOf, Settings, setting, takes_settings

__all__ = ["BatchSettings", "BayesAME", "BayesAMERS", "Calibration", "DesignSettings", "FitSettings", "ReferenceFit",
           "ReferencePrior", "calibrate", "fit_hyperparameters"]

#: Pseudo-count of the target's scale: the interval scale is (ν0 + Σ z²) / (ν0 + n).
SCALE_PRIOR = 10.0
#: Innovations left out of the scale: the first ones mostly measure the wide level and slope prior.
SCALE_SKIP = 5
#: Above this interval scale (the target's scores vary that much more than the model expects) the
#: model is taken not to describe the target: switch to the design-based estimate (see ``extrapolation``).
SCALE_SWITCH = 4.0
#: Share of the uniform draw in ``selection="sampled"``'s probabilities (the rest follows the predictive sd):
#: no item's weight 1/(N q) exceeds U/(N λ), however confident the model.
SAMPLED_UNIFORM = 0.5
#: ``selection="hybrid"``: after a switch, the design-based estimate's weight of each item drawn before it
#: (:meth:`activeeval.design.Prequential.estimate`'s ``earlier_weight``): the switch fired because those items
#: looked extreme, so given that it fired they are biased outwards.
SWITCH_WEIGHT = 0.5
#: Largest variance reduction by which ``floor="effective"`` lowers the design-based interval's floor.
FLOOR_GAIN_MAX = 4.0


def _parse_controls(controls: str | None) -> tuple[str, ...]:
    """``"model+near"`` → ("model", "near"); "none" or None → ()."""
    known = ("model", "near", "ridge")
    parts = ["none"] if controls is None else [c.strip() for c in str(controls).split("+")]
    out = () if parts == ["none"] else tuple(parts)
    if any(c not in known for c in out) or len(set(out)) != len(out):
        raise ConfigurationError(
            f"controls must be 'none' or some of {', '.join(known)} joined by '+', e.g. 'model+near'; "
            f"got {controls!r}"
        )
    return out


def _controls(name: str, value: Any) -> Any:
    _parse_controls(value)
    return value


@dataclass(frozen=True)
class DesignSettings(Settings):
    """BayesAME's switch to the design-based estimate and that estimate (a method's ``design`` group; each
    field is also a flat option, ``bayesame[warmup=10]``). :class:`BayesAME`'s docstring says what each does."""

    about: ClassVar[str] = "the switch to the design-based estimate"

    extrapolation: str = setting("auto", OneOf("auto", "off"), "switch when the references cannot vouch (off: never)")
    switch_until: int | None = setting(None, Integer(0, optional=True, phrase="a non-negative integer"),
                                       "last n at which the switch can happen (default max(50, N / 10))")
    warmup: int = setting(WARMUP, Integer(0, phrase="a non-negative integer"), "items drawn at random first")
    scale_prior: float = setting(SCALE_PRIOR, Number(0, low_open=True, phrase="a positive number"),
                                 "ν0, the pseudo-count shrinking the interval scale towards 1")
    controls: str | None = setting("model+near", _controls, "the design-based estimate's control variates")
    floor: str = setting("effective", OneOf("wilson", "effective", "split"), "the design-based interval's floor")
    interval: str = setting("sides", OneOf(*INTERVALS),
                            "the design-based interval's shape (sides: each side floored on its own; wilson: "
                            "the floor's interval as a whole)")
    design_variance: str = setting("residuals", OneOf("residuals", "increments"),
                                   "how the design-based estimate's residual variance is estimated")
    switch_z: float = setting(SWITCH_Z, Number(0, phrase="a non-negative number"),
                              "switch when the estimate ± this many sd is beyond every reference (from n = 10)")
    sample_by: str = setting("sd", OneOf("sd", "gain"),
                             "sampled/hybrid selection: draw in proportion to the predictive sd, or to Eq. 6's gain")
    switch_draw: str = setting("sampled", OneOf("sampled", "uniform"),
                               "hybrid selection: after a switch, keep drawing by sample_by, or uniformly")
    sample_uniform: float = setting(SAMPLED_UNIFORM, Number(0, 1, low_open=True, phrase="a number in (0, 1]"),
                                    "sampled/hybrid selection: the uniform share of each draw's probabilities")
    switch_weight: float = setting(SWITCH_WEIGHT, Number(0, 1, low_open=True, phrase="a number in (0, 1]"),
                                   "hybrid selection: after a switch, the weight of each item drawn before it")


class BayesAME(BaseMethod):
    """Bayesian active model evaluation for one target model (the default, robust version).

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' per-item scores (models x items).
    fit : FitSettings
        How the reference prior is built and read (:class:`~activeeval.gp.prior.FitSettings`):
        ``fit_items``, ``fit_seed``, ``n_pseudo``, ``level_prior``, ``linear``,
        ``tolerance``, ``calibrate_by``, ``cache_mb`` below.
    design : DesignSettings
        The switch to the design-based estimate and that estimate (:class:`DesignSettings`):
        ``extrapolation``, ``switch_until``, ``warmup``, ``scale_prior``,
        ``controls``, ``floor``, ``design_variance``, ``switch_z``, ``sample_by``,
        ``switch_draw``, ``sample_uniform`` below.
    batch : BatchSettings
        Batch selection (:class:`~activeeval.gp.acquisition.BatchSettings`):
        ``batch_strategy``, ``batch_size``, ``myopic`` below.

        Every field of a group is also a keyword of its own
        (``BayesAME(ref, warmup=10)`` is ``BayesAME(ref,
        design=DesignSettings(warmup=10))``), and an option of a method spec
        (``bayesame[warmup=10]``).
    seed, missing
        See :class:`~activeeval.methods.base.BaseMethod`.
    selection : {"auto", "active", "random", "sampled", "hybrid"}
        "auto": information gain (Eq. 6) while the model describes the target,
        uniform random once the target is found outside the references' range
        (see ``extrapolation``). "active": information gain always (no
        design-based switch). "random": uniform random throughout
        (``bayesame-rs``); every item then enters the design-based estimate
        should the target be found outside the range. "sampled" (validity by
        design, issue 25): every item drawn at random with a known probability
        that follows the model's predictive sd of its score (half of it
        uniform, ``SAMPLED_UNIFORM``), and the estimate is always the
        design-based one with inverse-probability weights around the controls'
        prediction — unbiased whatever the model, with the martingale CLT's
        interval; no calibration and no switch. A batch, or an item asked while
        others are pending, is drawn one item after another, each with the
        earlier ones pending (:meth:`note_drawn`), and the estimate takes the
        draws in the order drawn, whatever order their scores come back in.
        "hybrid" (issue 25):
        the items are drawn as "sampled" draws them, but the estimate is the
        model's, calibrated on pseudo-targets drawn the same way, until the
        switch of "auto"; after a switch it is the design-based estimate over
        *every* item, those before the switch included (each was drawn with a
        known probability). Once no switch can come (n > ``switch_until``),
        Eq. 6 chooses. Batches as "sampled".
    sample_by : {"sd", "gain"}
        How "sampled" and "hybrid" weight an item's probability: by the
        model's predictive sd of its score, or by the variance of R one item of
        its bucket would remove (c_b² / v_b; its largest is Eq. 6's choice).
    switch_draw : {"sampled", "uniform"}
        How "hybrid" draws after a switch: as before it (``sample_by``), or
        uniformly (equal weights from there on: the model no longer guides the draw).
    sample_uniform : float
        λ in (0, 1]: the uniform share of each draw's probabilities
        (``SAMPLED_UNIFORM`` = 0.5: no item's weight exceeds 2U/N).
    switch_weight : float
        γ in (0, 1]: after a "hybrid" switch, each item drawn before it counts
        γ times in the design-based estimate, and its variance as if those
        items were 1/γ times as noisy (``SWITCH_WEIGHT`` = 0.5). The switch
        fired because those items looked extreme, so given that it fired they
        are biased outwards; the bias is counted as variance and fades as
        fresh items come (docs/MATHS.md).
    extrapolation : {"auto", "off"}
        "auto": switch to random items and the design-based estimate when the
        references do not describe the target, at any n up to ``switch_until``:
        its 95 % interval lies wholly outside the range of the reference
        models' full-benchmark scores, or (from n = 10 on) it scores
        significantly above (or below) every reference model on the items
        scored so far — pseudo-targets drawn from the references cannot vouch
        for the model there — or (from n = 10 on) its interval scale exceeds
        4, i.e. its scores vary twice as much as the model expects.
        "off": never.
    switch_until : int, optional
        Last n at which the switch can happen (default max(50, N / 10)); a
        later switch would rest the estimate on too few random items.
    switch_z : float
        A further switch (from n = 10 on): the model-based estimate ± this
        many standard deviations lies wholly outside the range of the
        references' full-benchmark scores. At 1.96 (the default before stop
        46) it adds nothing to the 95 % interval's own test; 0 switches as
        soon as the point estimate is beyond every reference; the default,
        1, once it is a standard deviation beyond (``SWITCH_Z``; a session
        stored before stop 46 replays with 1.96). The model pulls a target
        better than every reference towards the best of them, and its
        interval can stay inside the range while the truth is not: such runs
        stay model-based and miss (docs/benchmarks/history.md, "Issue 25
        (stop 37)"). The calibration's pseudo-targets switch by the same rule.
    prior : ReferencePrior, optional
        The reference-fitted prior (fit, calibration, bucketing tolerance;
        :class:`~activeeval.gp.prior.ReferencePrior`), built once and shared
        by several methods on the same reference, which then derive nothing
        from the references. Without it the method builds it from the
        reference and the options below exactly as
        ``ReferencePrior.build(reference, hyperparameters=..., calibration=...,
        n_pseudo=..., fit_items=..., fit_seed=..., level_prior=...,
        linear=..., warmup=..., tolerance=...)``; with it those options keep
        their defaults (a different value is refused: the prior holds them).
    hyperparameters : ReferenceFit or mapping, optional
        Use these instead of fitting them (a session stores its fit).
    calibration : "auto", Calibration, mapping or None
        "auto": measure the model-based interval on reference pseudo-targets
        (:func:`calibrate`, once per reference matrix) and scale it by the
        factor found; a Calibration (or its dict) to reuse one (a session
        stores it); None: no calibration (factor 1).
    calibrate_by : {"pooled", "budget", "capped", "capped1"}
        "pooled" (default): one factor for every n, never below 1. "budget":
        the factor measured at the current n/N, which may narrow the interval
        where the pseudo-targets show it too wide (:attr:`Calibration.factors`;
        docs/MATHS.md and docs/BENCHMARKS.md, "Issue 25", for what it does).
        "capped": the factor at n/N, never above the pooled one, for the
        interval only; the switch tests read the pooled factor, so a run
        switches exactly where "pooled" switches it. "capped1": the same, never
        below 1. Neither is the default: each puts more coverage cells below
        the band (docs/benchmarks/history.md, "Issue 25, item 1 (stop 49)").
    fold_fit : {"shared", "refit"}
        The calibration's fold models: "shared" (default) play with the main
        fit's kernel, the real target's; "refit" (the earlier default) fits
        each fold's kernel on its references (five more fits, smaller and
        noisier than the main one: :func:`calibrate`).
    n_pseudo, fit_items, fit_seed : int
        The reference fit (:func:`fit_hyperparameters`).
    level_prior : bool
        Include the target's level and slope terms in the kernel.
    linear : bool
        Include the linear term (the target as a combination of references).
    scale_prior : float
        ν0, the pseudo-count that shrinks the target's interval scale towards 1.
    controls : str
        Control variates of the design-based estimate, joined by "+":
        "model" (the posterior mean of each item, clipped to the score range)
        "near" (each item's mean score over the 10 % of references whose
        full score is nearest the current estimate) and "ridge" (AIPW's ridge
        regression of the target's scores on the references' scores of the same
        items, fitted on every item scored so far, those chosen before a switch
        included; :class:`~activeeval.design.RidgeControl`); "none" (or None) for the plain mean.
        With "ridge", each control taken as it is is also a candidate coefficient
        (:class:`~activeeval.design.Prequential`'s ``b_prior``).
    warmup : int
        Draw the first ``warmup`` items at random (default 0): they enter the
        design-based estimate if the target is found outside the references
        (most such targets are found within 10 items, and their first items
        then count instead of being set aside); docs/MATHS.md.
    floor : {"wilson", "effective", "split"}
        The design-based interval's floor: "wilson" that of the plain mean of
        the random items (:func:`~activeeval.design.sampling_var_floor`, for
        the pool they were drawn from): the symmetric interval as wide as the
        longer side of Wilson's; "effective" (default since stop 39) the
        "wilson" floor divided by the variance reduction the control variates
        achieved on the random items, out of sample
        (:attr:`~activeeval.design.Prequential.variance_reduction`, at most
        ``FLOOR_GAIN_MAX``): a floor a plain mean needs does not cap what the
        controls buy, and a run of equal scores (no reduction) keeps Wilson's;
        "split" the "wilson" floor with α split between the two sides where it
        is narrowest (``split=True`` of that function: near 0 or 1 the misses
        are on the long side; docs/MATHS.md). A session stores its floor; one
        stored before stop 39 replays with "wilson".
    interval : {"symmetric", "sides", "wilson"}
        The design-based interval's shape: "symmetric" (the default before
        stop 46) the estimate ± z·max(sd, floor's sd); the other two keep the
        floor's two sides
        (:func:`~activeeval.design.sampling_side_floors`: Wilson's bounds for
        0/1 scores, each divided by the same variance reduction under
        ``floor="effective"``) and report the estimate's
        :attr:`~activeeval.methods.estimate.Estimate.shift`
        (:func:`~activeeval.design.two_sided`): "sides" floors each side on
        its own against the estimate's sd (default since stop 46: near 0 or 1
        the short side no longer takes the long side's length, so the interval
        is narrower where the floor binds at the same coverage; a session
        stored before stop 45 replays with "symmetric", one stored since with
        the shape it stored); "wilson" takes the floor's
        interval as a whole for 0/1 scores (Wilson's) wherever its longer side
        is longer than z·sd, the short side too ("sides" for continuous
        scores) (narrower still, and in extrapolation short on the side
        the controls' bias is: docs/benchmarks/history.md, "Issue 25 (stop
        45)"). Neither with ``floor="split"`` (which splits α because the
        interval is symmetric: give ``interval="symmetric"`` with it).
    design_variance : {"residuals", "increments"}
        How the design-based estimate's residual variance is estimated
        (:meth:`~activeeval.design.Prequential.estimate`): "residuals"
        (default), the mean squared prediction error; "increments", the spread
        of the prequential steps (the martingale CLT's), which leaves out the
        early predictions' bias that the estimate itself cancels. With items
        drawn with unequal probabilities (``selection="sampled"`` or
        ``"hybrid"``), "residuals" weights each squared residual by its
        inverse probability.
    tolerance : float, optional
        Rounding tolerance for bucketing continuous scores (default 1e-3 of the range).
    cache_mb : float
        Memory allowed for caching the B×B squared distances.
    batch_strategy : {"greedy", "pair", "lars", "dpp", "kmeans"}
        How ``select_batch(k)`` picks k > 1 items while the selection is
        model-based (App. B.1; :mod:`activeeval.gp.acquisition`): "greedy"
        (the default) conditions on each chosen item and takes the next argmax of Eq. 6.
    batch_size : int
        |A| of the non-myopic selection (``myopic=False``): ``select()`` is a
        random member of the best batch of this many items. 1: single-item Eq. 6.
    myopic : bool
        True (default): ``select()`` is Eq. 6's argmax. False: non-myopic (see ``batch_size``).
    """

    name = "bayesame"
    capabilities = Capabilities(ranks=True, batch=True)

    @takes_settings
    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        seed: SeedLike = None,
        missing: str = "models",
        selection: Literal["auto", "active", "random", "sampled", "hybrid"] = "auto",
        prior: ReferencePrior | None = None,
        hyperparameters: ReferenceFit | Mapping[str, Any] | None = None,
        calibration: Calibration | Mapping[str, Any] | Literal["auto"] | None = "auto",
        fit: FitSettings = FitSettings(),
        design: DesignSettings = DesignSettings(),
        batch: BatchSettings = BatchSettings(),
    ) -> None:
        super().__init__(reference, seed=seed, missing=missing)
        selection = OneOf("auto", "active", "random", "sampled", "hybrid")("selection", selection)
        #: the settings groups as given (each field is also this object's attribute of the same name)
        self.fit, self.design, self.batch = fit, design, batch
        #: How items are picked from the posterior while selection is model-based (:mod:`activeeval.gp.acquisition`).
        self.selector = BatchSelector.of(batch).check_items(self.n_items)
        # settings as given; resolved or learned values carry a trailing underscore
        self.switch_until, self.tolerance, self.controls = design.switch_until, fit.tolerance, design.controls
        warmup, tolerance = design.warmup, fit.tolerance
        self.warmup = warmup
        ref = self.reference
        width = _range_width(ref)
        self.prior = prior
        if prior is None:
            prior = ReferencePrior.build(ref, hyperparameters=hyperparameters, calibration=calibration,
                                         n_pseudo=fit.n_pseudo, fit_items=fit.fit_items, fit_seed=fit.fit_seed,
                                         level_prior=fit.level_prior, linear=fit.linear, warmup=self.warmup,
                                         tolerance=tolerance,
                                         switch_z=float(design.switch_z),
                                         sampled=(design.sample_by, float(design.sample_uniform))
                                         if selection == "hybrid" else None, fold_fit=fit.fold_fit)
        else:
            _check_prior(prior, ref, hyperparameters=hyperparameters, calibration=calibration, fit=fit)
        self.prior_ = prior
        self.fit_ = prior.fit
        self.calibration_ = prior.calibration
        self.calibrate_by = fit.calibrate_by
        self.selection = selection
        self.extrapolation = design.extrapolation
        self.switch_until_ = design.switch_until if design.switch_until is not None else max(50, self.n_items // 10)
        self.scale_prior = float(design.scale_prior)
        self.floor, self.design_variance = design.floor, design.design_variance
        self.interval = design.interval
        if self.interval != "symmetric" and self.floor == "split":
            raise ConfigurationError(
                f"the method options interval={self.interval} and floor=split do not go together: the first keeps "
                "the interval's two sides apart (interval=sides is the default), the second splits α between the "
                "sides of a symmetric one; add interval=symmetric to use floor=split (e.g. "
                "'bayesame[floor=split,interval=symmetric]'), or drop floor=split")
        self.switch_z = float(design.switch_z)
        self.tolerance_ = prior.tolerance
        # the reference-only prior state (buckets, then Σ·N): once per process (methods built on one reference,
        # e.g. rank's, one per model, share it, read-only), and in the user cache on large references
        state = self.bucket_prior_ = BucketPrior(prior, ref, cache_mb=fit.cache_mb)
        self.buckets = state.buckets
        # the prior's arrays under the names this class (and its benchmarks) always used
        self._n_refs = state.n_refs
        self._feat, self._feat_sq, self._d2_full = state.features, state.features_sq, state.distances
        self._m, self._psi, self._phi_c, self._cc = state.level, state.psi, state.phi_c, state.cc
        self.kernel = state.kernel
        self.sigma2_ = state.sigma2
        self.posterior = state.posterior()
        full = ref.mean_scores()
        self.reference_range = (float(full.min()), float(full.max()))
        self.mode = "model"
        self.switched_at: int | None = None
        #: Which test switched: "interval" (the 95 % interval wholly outside the references' range), "paired"
        #: (significantly beyond every reference on the items so far), "switch_z" (the estimate ± ``switch_z`` sd
        #: outside the range), "misfit" (the interval scale above ``SCALE_SWITCH``), "sampled"; None before a switch.
        self.switch_test: str | None = None
        if selection == "sampled":  # design-based from the first item
            self.mode, self.switched_at, self.switch_test = "design", 0, "sampled"
        self.controls_ = _parse_controls(design.controls)
        # with the ridge (issue 25), each control taken as it is (AIPW's b = 1) is a candidate from the first
        # random item on; without it, the plain mean and the least-squares fit only, as before
        b_prior = np.eye(len(self.controls_)) if "ridge" in self.controls_ else None
        self._design = Prequential(self.n_items, n_controls=len(self.controls_), b_prior=b_prior)
        self._ridge: RidgeControl | None = None
        self._order: np.ndarray | None = None
        # selection="sampled"/"hybrid" (drawn items enter the design-based estimate in the order they were drawn,
        # each with what was known when it was drawn: see note_drawn): the draws not yet folded in, oldest first;
        # each one's (probability or None for a uniform draw, predictions of the drawn item, their sums over the
        # items then free); the scores recorded for them; the sum and number of items folded in so far; and the
        # number of folded items at which a switch set the earlier block apart
        self._queue: list[int] = []
        self._draws: dict[int, tuple[float | None, np.ndarray, np.ndarray] | None] = {}
        self._known: dict[int, float] = {}
        self._folded_sum = 0.0
        self._folded = 0
        self._block_at: int | None = None
        self._ref_full = full
        self._n_near = max(3, int(round(0.1 * ref.n_models)))
        self._z2 = 0.0
        self._sum_obs = 0.0
        self._sum_sq = 0.0
        # per reference model: Σ s_j and Σ s·s_j, Σ s_j² over the observed items (the paired comparison)
        self._ref_sum = np.zeros(ref.n_models)
        self._ref_cross = np.zeros(ref.n_models)
        self._ref_sq = np.zeros(ref.n_models)
        self._worst_var = (width / 2.0) ** 2

    # ------------------------------------------------------------ kernel rows
    def _d2_rows_of(self, bs: np.ndarray) -> np.ndarray:
        """Squared distances of the buckets ``bs`` to every bucket (:meth:`BucketPrior.d2_rows`)."""
        return self.bucket_prior_.d2_rows(bs)

    def _prior_col(self, b: int) -> np.ndarray:
        """Σ[:, b] (:meth:`BucketPrior.column`)."""
        return self.bucket_prior_.column(b)

    def _prior_cols(self, bs: np.ndarray) -> np.ndarray:
        """Σ[:, bs] (B, len(bs)) of the :class:`LevelKernel`, in one block (:meth:`BucketPrior.columns`)."""
        return self.bucket_prior_.columns(bs)

    # ------------------------------------------------------------ properties
    @property
    def n_buckets(self) -> int:
        return self.buckets.n_buckets

    @property
    def bucket_posterior(self) -> BucketPosterior:
        """The posterior of the bucket abilities, the one the selector is given (read it; do not condition it)."""
        return self.posterior

    batch_strategy = SelectorOption("strategy", "The selector's strategy (the ``batch_strategy`` option).")
    batch_size = SelectorOption("batch_size", "The selector's |A| of the non-myopic selection (``batch_size``).")
    myopic = SelectorOption("myopic", "Whether ``select()`` is Eq. 6's argmax (the ``myopic`` option).")

    @property
    def regime(self) -> str:
        """"model-based" (the estimate is the model's posterior) or "design-based" (switched: random items)."""
        return "design-based" if self.mode == "design" else "model-based"

    @property
    def scale(self) -> float:
        """The target's interval scale: (ν0 + Σ z²) / (ν0 + m) over its m standardised innovations z.

        The first ``SCALE_SKIP`` innovations are left out: their variance is
        mostly the wide prior of the target's level and slope, so they would
        pull the scale below 1 whatever the model's fit (the diffuse start of a
        Kalman filter, whose first innovations are not used for the scale either).
        """
        used = max(self.n_observed - SCALE_SKIP, 0)
        return (self.scale_prior + self._z2) / (self.scale_prior + used)

    @property
    def random_items(self) -> bool:
        """Whether the next item is drawn uniformly at random."""
        return self.mode == "design" or self.selection == "random" or self.n_observed < self.warmup

    def frozen_options(self) -> dict:
        """The reference fit and the calibration, to rebuild this method without computing them again; and the
        options whose defaults have changed (a stored session replays with the ones it was made with)."""
        return {"hyperparameters": self.fit_.to_dict(), "calibration": self.calibration_.to_dict(),
                "calibrate_by": self.calibrate_by, "warmup": self.warmup, "floor": self.floor,
                "interval": self.interval, "switch_z": self.switch_z}

    def information_gains(self) -> np.ndarray:
        """Eq. 6 for one unobserved item of each bucket, shape (B,) (0 where none is left)."""
        ig = self.posterior.information_gain()
        ig[~np.isfinite(ig)] = 0.0
        return ig

    # ------------------------------------------------------------ selection
    def _random_items(self, k: int, exclude: Sequence[int]) -> list[int]:
        """The first ``k`` unobserved items not in ``exclude`` of the method's random order.

        The order is :func:`~activeeval.methods.base.random_order` of the seed,
        the order RS-Mean plays, so that a backtest compares the two on the same
        items. It is drawn independently of everything the method has observed,
        so its first unobserved item is a uniform draw from the unobserved items.
        """
        if self._order is None:
            self._order = random_order(int(self.seed_), self.n_items)
        skip = self._observed.copy()
        skip[list(exclude)] = True
        free = self._order[~skip[self._order]]
        return [int(i) for i in free[:k]]

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        if self._randomised_draw:
            pending = [int(i) for i in exclude if not self._observed[i]]
            self._forget_unkept(set(pending))
            chosen, probabilities = self._draw(rng, k, pending)
            predictions = self._control_predictions()  # the same for every item of the batch
            for m, item in enumerate(chosen):
                self._register_draw(item, pending + chosen[:m], probabilities[m], predictions)
            return chosen
        if self.random_items:
            return self._random_items(k, exclude)
        return self._model_based_items(rng, k, exclude)

    def _draw(self, rng: np.random.Generator, k: int, pending: Sequence[int]
              ) -> tuple[list[int], list[np.ndarray | None]]:
        """``selection="sampled"``/``"hybrid"``'s draw of ``k`` items, one after another, each with ``pending``
        and the earlier ones excluded: the items, and the probabilities each was drawn with (None: uniformly,
        the random order's next item). Registers nothing (:meth:`_select` does; the cost forecast does not)."""
        if not self._weighted_draw:
            return self._random_items(k, pending), [None] * k
        chosen: list[int] = []
        probabilities: list[np.ndarray | None] = []
        for _ in range(k):
            q = self._sampling_probabilities([*pending, *chosen])
            chosen.append(int(rng.choice(self.n_items, p=q)))
            probabilities.append(q)
        return chosen, probabilities

    def note_drawn(self, item: int | str, pending: Sequence[int | str] = (), probabilities: np.ndarray | None = None
                   ) -> None:
        """Register ``item`` as drawn now, with ``pending`` (other items handed out and not yet scored) already
        drawn before it: what it will enter the design-based estimate with, fixed now.

        For ``selection="sampled"`` and ``"hybrid"`` (no-op otherwise, and for an item Eq. 6 chose). The
        selection calls it for each item it draws; a session replaying its journal calls it for each item
        handed out, in the same order and with the same items pending, so the draws are registered again
        exactly as they were made. The item's probability and the control variates' predictions depend on
        the items scored before the draw and on those pending only, so a draw handed out in a batch, or
        while others are pending, keeps a known probability whatever order the scores come back in: the
        estimate takes the draws in the order they were made, each once every draw before it is scored
        (Prequential's E[T | past] = R holds with "past" = the draws before it and their scores).
        """
        if not self._randomised_draw:
            return
        idx = self.reference.item_index(item)
        if not self._observed[idx]:
            self._register_draw(idx, [self.reference.item_index(i) for i in pending], probabilities)

    def _forget_unkept(self, held: set[int]) -> None:
        """Forget the draws handed out and then neither recorded nor kept pending (``held``): never used."""
        kept = [i for i in self._queue if i in self._known or i in held]
        if len(kept) == len(self._queue):
            return
        if self._block_at is not None and self._block_at > self._folded:
            gone = [i for i in self._queue[: self._block_at - self._folded] if i not in kept]
            self._block_at -= len(gone)
        for i in set(self._queue) - set(kept):
            self._draws.pop(i, None)
        self._queue = kept

    def _register_draw(self, idx: int, held: Sequence[int], probabilities: np.ndarray | None = None,
                       predictions: list[np.ndarray] | None = None) -> None:
        """:meth:`note_drawn` for an unscored item index ``idx``, ``held`` the pending indices; ``probabilities``
        and ``predictions`` (the controls', fixed before the draw) when the caller has them already."""
        for i in held:  # pending without a draw of its own here (handed out otherwise): it comes first, as a score
            if i != idx and i not in self._queue and not self._observed[i]:
                self._queue.append(i)
                self._draws[i] = None
        free = ~self._observed
        free[held] = False
        free[idx] = True
        if self._weighted_draw:
            q = self._sampling_probabilities(held) if probabilities is None else probabilities
            prob: float | None = float(q[idx])
        else:
            prob = None  # uniform over the U items free: 1/U
        preds = self._control_predictions() if predictions is None else predictions
        self._draws[idx] = (prob, np.array([p[idx] for p in preds]), np.array([float(p[free].sum()) for p in preds]))
        if idx not in self._queue:
            self._queue.append(idx)

    @property
    def _hybrid_draw(self) -> bool:
        """Whether ``selection="hybrid"`` draws the next item at random: while a switch may still come (n up to
        ``switch_until``) and after one; once the estimate can only stay the model's, Eq. 6 chooses."""
        return self.selection == "hybrid" and (self.mode == "design" or self.n_observed < self.switch_until_)

    @property
    def _randomised_draw(self) -> bool:
        """Whether the next item is drawn at random by ``selection="sampled"`` or ``"hybrid"`` (with
        :meth:`_sampling_probabilities`, or uniformly), and so enters the design-based estimate as a draw."""
        return self.selection == "sampled" or self._hybrid_draw

    @property
    def _uniform_draw(self) -> bool:
        """Whether ``selection="hybrid"``'s next draw is uniform: its ``warmup`` first items, and with
        ``switch_draw="uniform"`` every item after a switch."""
        return self.selection == "hybrid" and (
            self.n_observed < self.warmup or (self.mode == "design" and self.design.switch_draw == "uniform"))

    @property
    def _weighted_draw(self) -> bool:
        """Whether the next item is drawn with :meth:`_sampling_probabilities` (and enters the design-based estimate
        with that probability's weight), not uniformly or by Eq. 6."""
        return self.selection == "sampled" or (self._hybrid_draw and not self._uniform_draw)

    def _sampling_probabilities(self, pending: Sequence[int] = ()) -> np.ndarray:
        """Each item's probability of being drawn next (N,): 0 if observed or ``pending``, else
        λ/U + (1 − λ) w_i / Σ_U w, λ = ``sample_uniform`` (default ``SAMPLED_UNIFORM``) and w_i the model's
        predictive sd of item i's score (``sample_by="sd"``) or c_b² / v_b of its bucket (``"gain"``).

        A function of the observed items alone (the posterior's covariance does
        not depend on the scores), so the probability of an item is known again
        when its score is recorded, and when a session replays its journal.
        """
        post = self.posterior
        if self.design.sample_by == "gain":  # the variance of R one item of the bucket would remove, c_b² / v_b
            v = np.maximum(post.diag, 0.0) + post.noise
            c = post.cov_u + post.noise
            weight = np.where(v > 0, c * c / np.where(v > 0, v, 1.0), 0.0)[self.buckets.of_item]
        else:
            weight = np.sqrt(np.maximum(post.diag, 0.0) + post.noise)[self.buckets.of_item]
        free = ~self._observed
        free[list(pending)] = False
        weight[~free] = 0.0
        n_free = int(free.sum())
        total = float(weight.sum())
        lam = float(self.design.sample_uniform)
        q = np.where(free, lam / n_free, 0.0)
        if total > 0.0:
            q += (1.0 - lam) * weight / total
        else:
            q = np.where(free, 1.0 / n_free, 0.0)
        return q / q.sum()

    def _model_based_items(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> list[int]:
        """k items by the selector (Eq. 6 greedily, or the batch strategy) from the posterior; ``exclude`` pending."""
        return self.selector.select(self.posterior, self.buckets, ~self._observed, exclude, k, rng)

    # ------------------------------------------------------------ updates
    def _update(self, item: int, score: float) -> None:
        b = int(self.buckets.of_item[item])
        post = self.posterior
        if self.selection in ("sampled", "hybrid"):
            if item not in self._queue:  # scored without being drawn here (a replay of an older journal, say)
                if not self._queue:
                    self.note_drawn(item)  # as drawn now, with nothing pending: what it would have been
                if item not in self._queue:  # an item Eq. 6 chose, or one scored while draws are pending
                    self._queue.append(item)
                    self._draws[item] = None  # in S from here on, not a draw
            self._known[item] = score
            self._fold()
        elif self.random_items:  # a random draw: design-based
            n = self.n_observed
            ybar = self._sum_obs / n if n else float(self._ref_full.mean())
            preds = self._control_predictions()
            unobserved = ~self._observed
            self._design.add(
                score, self._sum_obs, self.n_items - n, ybar,
                np.array([p[item] for p in preds]), np.array([float(p[unobserved].sum()) for p in preds]),
            )
        if self._ridge is not None:
            self._ridge.add(item, score)
        col = self.reference.scores[:, item]
        self._ref_sum += col
        self._ref_cross += score * col
        self._ref_sq += col * col
        self._sum_sq += score * score
        innovation, d = post.observe(b, score)
        if self.n_observed >= SCALE_SKIP:  # n_observed still counts the items before this one
            self._z2 += innovation * innovation / d
        self._sum_obs += score

    def _fold(self) -> None:
        """Fold the oldest draws whose scores are known into the design-based estimate, in the order drawn."""
        while self._queue and self._queue[0] in self._known:
            item = self._queue.pop(0)
            score = self._known.pop(item)
            draw = self._draws.pop(item, None)
            if self._folded == self._block_at:
                self._design.start_block()
            if draw is not None:
                prob, pred_item, pred_sum = draw
                n = self._folded
                ybar = self._folded_sum / n if n else float(self._ref_full.mean())
                self._design.add(score, self._folded_sum, self.n_items - n, ybar, pred_item, pred_sum, prob)
            self._folded_sum += score
            self._folded += 1

    def _control_predictions(self) -> list[np.ndarray]:
        """Each control variate's prediction for every item (N,), fixed before the next draw."""
        out = []
        for name in self.controls_:
            if name == "model":
                pred = self.posterior.mean[self.buckets.of_item]
                if self.reference.score_range is not None:
                    pred = np.clip(pred, *self.reference.score_range)
                out.append(pred)
            elif name == "ridge":
                out.append(self._ridge_control().predict())
            else:
                out.append(self._near_reference_mean())
        return out

    def _ridge_control(self) -> RidgeControl:
        """The AIPW ridge control, made when first needed from every item scored so far (chosen or random)."""
        if self._ridge is None:
            self._ridge = RidgeControl(self.reference.scores.T, score_range=self.reference.score_range)
            for item, score in zip(self.observed_items, self.observed_scores, strict=True):
                self._ridge.add(item, score)
        return self._ridge

    def _near_reference_mean(self) -> np.ndarray:
        """Per item, the mean score of the references whose full score is nearest the current estimate (N,).

        A second control variate of the design-based estimate: a target found
        above every reference is best predicted by the strongest ones.
        """
        level = self.estimate().mean
        nearest = np.argsort(np.abs(self._ref_full - level), kind="stable")[: self._n_near]
        return self.reference.scores[nearest].mean(0)

    def _after_observe(self) -> None:
        if self.mode != "model" or self.extrapolation == "off" or self.selection in ("active", "sampled"):
            return
        if self.n_observed > self.switch_until_ or self.n_observed >= self.n_items:
            return
        test = self.switch_test_now(self.switch_z)
        if test is None:
            return
        self.switch_test = test
        self.mode = "design"
        self.switched_at = self.n_observed
        if self.selection == "hybrid":
            self._block_at = self._folded + len(self._queue)  # every draw made so far is the earlier block
            if not self._queue:
                self._design.start_block()

    @property
    def switch_reason(self) -> str | None:
        """Why the run switched, from :attr:`switch_test`: "outside" (the interval, paired and ``switch_z`` tests),
        "misfit", "sampled"; None before a switch."""
        if self.switch_test is None or self.switch_test in ("misfit", "sampled"):
            return self.switch_test
        return "outside"

    def switch_test_now(self, switch_z: float) -> str | None:
        """The first of the switch tests that fires on the items scored so far, with this ``switch_z`` (or None).

        In order: "interval" (the model-based 95 % interval wholly outside the
        references' range), "paired" (:meth:`_beyond_every_reference`),
        "switch_z" (:func:`estimate_beyond`), "misfit" (the interval scale
        above ``SCALE_SWITCH``, from n = 10). What the switch reads after each
        score while it can still happen; also a way to ask what another
        ``switch_z`` would do at the same point (``benchmarks/switch_rules.py``).
        """
        mean, var = self._model_estimate(switching=True)
        lo, hi = self.reference_range
        half = Z95 * math.sqrt(var)
        if mean - half > hi or mean + half < lo:
            return "interval"
        if self._beyond_every_reference():
            return "paired"
        if estimate_beyond(self.n_observed, mean, math.sqrt(var), lo, hi, switch_z):
            return "switch_z"
        if self.n_observed >= 2 * SCALE_SKIP and self.scale > SCALE_SWITCH:
            return "misfit"
        return None

    def _beyond_every_reference(self) -> bool:
        """Whether, on the items scored so far, the target is significantly above (or below) every reference.

        A paired comparison, free of the model: for each reference j the mean
        difference d̄_j of the target's and j's scores on the same items, with
        its standard error; "above every reference" when every d̄_j − 1.96 se_j
        is positive (from n = 10 on). A target better than every reference
        model on the items so far is outside the range the references span,
        even while the model's estimate, pulled towards the references, is not.
        """
        n = self.n_observed
        if n < 2 * SCALE_SKIP:
            return False
        return bool(
            beyond_every_reference(n, self._sum_obs, self._sum_sq, self._ref_sum, self._ref_sq, self._ref_cross)
        )

    # ------------------------------------------------------------ estimate
    def _model_estimate(self, switching: bool = False) -> tuple[float, float]:
        """The model-based (mean, variance); ``switching``: with the factor the switch tests read
        (:attr:`switch_factor`: the pooled one under ``calibrate_by="capped"`` / ``"capped1"``)."""
        post = self.posterior
        mean = (self._sum_obs + float(post.remaining @ post.mean)) / self.n_items
        factor = self.switch_factor if switching else self.calibration_factor
        var = factor**2 * self.scale * post.var_r_scaled() / self.n_items**2
        return mean, var

    @property
    def calibration_factor(self) -> float:
        """The calibration factor applied to the model-based standard deviation at the current n."""
        return self.calibration_.factor_at(max(self.n_observed, 1) / self.n_items, self.calibrate_by)

    @property
    def switch_factor(self) -> float:
        """The calibration factor the switch tests read: the interval's (:attr:`calibration_factor`), but the
        pooled one under ``calibrate_by="capped"`` / ``"capped1"`` (which narrow the interval alone)."""
        if self.calibrate_by in INTERVAL_ONLY:
            return self.calibration_.factor
        return self.calibration_factor

    def _current_estimate(self) -> Estimate:
        n_items = self.n_items
        notes: list[str] = []
        floored = False
        shift = 0.0
        if self.mode == "design" and self._design.count > 0:
            variance = self.design_variance
            if variance == "residuals" and self.selection in ("sampled", "hybrid"):
                variance = "weighted"  # the residuals' variance for unequal probabilities
            weight = self.design.switch_weight if self.selection == "hybrid" else 1.0
            mean, var = self._design.estimate(fallback_var=self._worst_var, variance=variance, earlier_weight=weight)
            # the random items were drawn from a pool of P items (those not yet observed when the first was drawn):
            # R's error is P/N times the pool mean's, whose floor is that of `count` items drawn from P
            folded = self._folded if self.selection in ("sampled", "hybrid") else self.n_observed
            pool = n_items - folded + self._design.count
            seen = (self._design.mean_score, self._design.low_seen, self._design.high_seen,
                    self._design.effective_count(weight), pool, self.reference.score_range,
                    self.reference.kind == "binary")
            fpc = (pool / n_items) ** 2 if self.n_observed < n_items else 0.0  # (γ-weighted counts stay below P)
            gain = min(max(self._design.variance_reduction, 1.0), FLOOR_GAIN_MAX)

            def scaled(v: Any) -> float:  # in the order the floor was always scaled: bit for bit as before
                out = float(v) * fpc
                if self.floor == "effective":
                    out /= gain
                return out

            if self.interval != "symmetric":
                low, high = (scaled(v) for v in sampling_side_floors(*seen))
                floored = max(low, high) > var
                var_sym, shift_sym = two_sided(var, low, high, whole=self.interval == "wilson" and seen[-1])
                var, shift = float(var_sym), float(shift_sym)
            else:
                floor = scaled(sampling_var_floor(*seen, split=self.floor == "split"))
                floored = floor > var
                var = max(var, floor)
        elif self.mode == "design":
            mean, var = self._model_estimate()
            u_frac = (n_items - self.n_observed) / n_items
            var = max(var, self._worst_var * u_frac * u_frac)  # no random item yet
        else:
            mean, var = self._model_estimate()
        if self.switch_reason == "sampled":
            notes.append(
                f"design-based by design: items are drawn at random with known probabilities (following the "
                f"model's predictive spread), and the interval rests on those {self._design.count} item(s), "
                "weighted by the inverse of their probabilities, not on the references' calibration"
            )
        elif self.mode == "design":
            lo, hi = self.reference_range
            plural = "" if self.switch_z == 1 else "s"
            how = {"interval": " (its model-based 95 % interval lay wholly outside it)",
                   "paired": " (on the same items it scored significantly beyond every reference)",
                   "switch_z": " (its model-based estimate lay beyond it)" if self.switch_z <= 0 else
                   f" (its model-based estimate lay more than {self.switch_z:g} standard deviation{plural} beyond it)"}
            why = (
                f"the target looks to be outside the references' score range [{lo:.3g}, {hi:.3g}]"
                + how.get(self.switch_test or "", "")
                if self.switch_reason == "outside"
                else "the references predict the target poorly (its scores vary "
                f"{math.sqrt(SCALE_SWITCH):.0f}x more than the model expects)"
            )
            notes.append(
                f"design-based: {why}, found at n = {self.switched_at}; the interval rests on all "
                f"{self._design.count} item(s), each drawn at random with a known probability, not on the references"
                if self.selection == "hybrid" else
                f"design-based: {why}, found at n = {self.switched_at}; since then items are drawn at random and "
                f"the interval rests on those {self._design.count} random item(s), not on the references"
            )
        if self.mode == "design" and self._design.count > 0 and floored:
            wilson = ("the interval's sides are Wilson's" if self.interval != "symmetric"
                      else "the interval is as wide as Wilson's")
            notes.append(
                f"{wilson} for the random items' 0/1 scores (few failures or successes)"
                if self.reference.kind == "binary"
                else "the interval is widened for the part of the score range no random item has reached yet"
            )
        cal, factor = self.calibration_, self.calibration_factor
        if self.mode == "model" and factor >= CALIBRATION_NOTE:
            measured = cal.rms if self.calibrate_by == "pooled" or not cal.factors else factor
            capped = np.isfinite(measured) and measured >= CALIBRATION_MAX
            notes.append(
                f"calibrated on the references: with reference models playing the target, the model's errors were "
                f"{measured:.1f}x its own standard deviation, so its interval is widened {factor:.1f}x"
                + (f" (capped at {CALIBRATION_MAX:.0f}x: the references predict each other poorly here)"
                   if capped else "")
            )
        if self.mode == "model" and self.n_observed >= 2 * SCALE_SKIP and self.scale > 2.0:
            notes.append(
                f"the references predict this target less well than each other: its scores vary "
                f"{math.sqrt(self.scale):.1f}x more than the model expects, and the interval is widened by that factor"
            )
        bounds = self._bounds()
        if bounds is not None:
            mean = min(max(mean, bounds[0]), bounds[1])  # nearer the truth, wherever it is in the range
        return Estimate(
            mean=mean, var=var, n_observed=self.n_observed, n_items=n_items, bounds=bounds, notes=tuple(notes),
            shift=shift,
        )

    def _bounds(self) -> tuple[float, float] | None:
        """The range R can still take: the scores seen, and the score range for the items not seen.

        The model's posterior mean can leave it (a wide level prior after one
        or two scores: 1.1 on a 0/1 benchmark); the estimate is projected back
        into it, which can only bring it nearer the truth.
        """
        score_range = self.reference.score_range
        if score_range is None:
            return None
        lo, hi = score_range
        unseen = self.n_items - self.n_observed
        return (self._sum_obs + lo * unseen) / self.n_items, (self._sum_obs + hi * unseen) / self.n_items


def _check_prior(prior: Any, ref: ScoreMatrix, *, hyperparameters: Any, calibration: Any, fit: FitSettings) -> None:
    """A given ``prior=``: a ReferencePrior of this reference, with none of the options it holds set otherwise."""
    if not isinstance(prior, ReferencePrior):
        raise ConfigurationError(
            f"prior must be a ReferencePrior (activeeval.gp.prior: ReferencePrior.build makes one) or None, "
            f"got {type(prior).__name__}")
    changed = fit.changed()
    clash = ([name for name, value, default in (("hyperparameters", hyperparameters, None),
                                                ("calibration", calibration, "auto"))
              if not (type(value) is type(default) and value == default)]
             + [name for name in FitSettings.PRIOR_FIELDS if name in changed])
    if clash:
        raise ConfigurationError(
            f"prior= holds the fit, the calibration and the tolerance; leave {', '.join(clash)} unset "
            "(or build the prior with them: ReferencePrior.build)")
    prior.check_reference(ref)


class BayesAMERS(BayesAME):
    """BayesAME-RS with the default's model: uniformly random items throughout (paper §5.1's baseline)."""

    name = "bayesame-rs"
    capabilities = Capabilities(batch=True)  # random items: not a ranker

    def __init__(self, reference: ScoreMatrix, **kwargs: object) -> None:
        if kwargs.get("selection", "random") != "random":
            raise ConfigurationError("BayesAME-RS selects items at random; do not pass selection=")
        kwargs["selection"] = "random"
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]


def _model_based_errors(
    reference: ScoreMatrix, fit: ReferenceFit, truths: np.ndarray, seed: int, grid: Sequence[int],
    warmup: int = WARMUP, switch_z: float | None = None, sampled: tuple[str, float] | None = None,
) -> list[np.ndarray]:
    """Standardised errors (R̂ − R) / sd of the model-based estimate of several targets at n in ``grid``.

    Exactly what :class:`BayesAME` (``calibration=None``) reports for each
    target played alone with ``seed``, computed for all targets at once
    (:func:`_model_based_runs`; tests/test_bayesame_default.py checks the
    equality). A target stops contributing once it would switch to the
    design-based estimate.
    """
    true_scores = truths.mean(1)
    out: list[np.ndarray] = []
    for _, mean, sd, active in _model_based_runs(reference, fit, truths, seed, grid, warmup, switch_z, sampled):
        ok = active & (sd > 0)
        out.append((mean[ok] - true_scores[ok]) / sd[ok])
    return out


def _model_based_runs(
    reference: ScoreMatrix, fit: ReferenceFit, truths: np.ndarray, seed: int, grid: Sequence[int],
    warmup: int = WARMUP, switch_z: float | None = None, sampled: tuple[str, float] | None = None,
) -> Iterator[tuple[list[int], np.ndarray, np.ndarray, np.ndarray]]:
    """The default BayesAME (``calibration=None``) played on several targets at once, up to max(``grid``) items.

    While the estimate is model-based, selection does not depend on the
    scores, so the targets share the items and the posterior covariance. At
    each n in ``grid``: (the items so far, in order; each target's estimate;
    its model-based sd, scale included; whether it is still model-based — a
    target that would switch to the design-based estimate is no longer, by
    the method's tests with ``switch_z``, None for 1.96: the 95 % interval's own test). ``sampled``:
    (``sample_by``, ``sample_uniform``) to draw the items as
    ``selection="hybrid"`` draws them (None: by Eq. 6).
    """
    switch_z = Z95 if switch_z is None else float(switch_z)
    by, uniform = sampled if sampled is not None else ("sd", SAMPLED_UNIFORM)
    method = BayesAME(reference, hyperparameters=fit, calibration=None, seed=seed,
                      design=DesignSettings(warmup=warmup, switch_z=switch_z, sample_by=by, sample_uniform=uniform))
    one = method.posterior
    n_targets = truths.shape[0]
    post = BucketPosterior(one.prior_mean, one.prior_col, one.prior_diag, one.prior_cov_counts, one.counts,
                           one.noise, n_targets=n_targets)
    method.posterior = post  # the shared covariance drives the information-gain selection
    n_items = method.n_items
    lo, hi = method.reference_range
    z2 = np.zeros(n_targets)
    total = np.zeros(n_targets)
    total_sq = np.zeros(n_targets)
    ref_scores = reference.scores
    ref_sum = np.zeros(ref_scores.shape[0])
    ref_sq = np.zeros(ref_scores.shape[0])
    cross = np.zeros((n_targets, ref_scores.shape[0]))
    active = np.ones(n_targets, dtype=bool)
    items: list[int] = []
    for n in range(1, max(grid) + 1):
        # as a single run selects: its random start, then Eq. 6 (the shared pass observes nothing through the
        # method, whose own count, and so its `random_items`, stays at 0)
        rng = np.random.default_rng([method.seed_, n - 1])
        if n <= method.warmup:
            (item,) = method._random_items(1, ())
        elif sampled is not None and n - 1 < method.switch_until_:  # selection="hybrid": drawn with the model's
            # sampling probabilities (the scores play no part), while a switch may come
            item = int(rng.choice(n_items, p=method._sampling_probabilities()))
        else:
            (item,) = method._model_based_items(rng, 1, ())
        items.append(int(item))
        b = int(method.buckets.of_item[item])
        innovation, d = post.observe(b, truths[:, item])
        if n - 1 >= SCALE_SKIP:
            z2 += innovation**2 / d
        total += truths[:, item]
        total_sq += truths[:, item] ** 2
        col = ref_scores[:, item]
        ref_sum += col
        ref_sq += col * col
        cross += np.outer(truths[:, item], col)
        method._observed[item] = True
        scale = (method.scale_prior + z2) / (method.scale_prior + max(n - SCALE_SKIP, 0))
        mean = (total + post.remaining @ post.mean) / n_items
        sd = np.sqrt(scale * post.var_r_scaled() / n_items**2)
        if n < n_items and n <= method.switch_until_:
            outside = (mean - Z95 * sd > hi) | (mean + Z95 * sd < lo)
            misfit = (n >= 2 * SCALE_SKIP) & (scale > SCALE_SWITCH)
            if n >= 2 * SCALE_SKIP:  # the paired comparison with every reference, as a run makes it
                outside |= beyond_every_reference(n, total[:, None], total_sq[:, None], ref_sum, ref_sq, cross)
            outside |= estimate_beyond(n, mean, sd, lo, hi, switch_z)
            active &= ~(outside | misfit)
        if n in grid:
            yield list(items), mean, sd, active.copy()


def estimate_beyond(n: int, mean, sd, lo: float, hi: float, switch_z: float):
    """Whether the model-based estimate ± ``switch_z`` sd lies wholly outside [lo, hi] (the references' range).

    BayesAME's ``switch_z`` test, from n = 10 on (False before, and at
    ``switch_z`` ≥ 1.96, where the 95 % interval's own test already holds
    whenever this one does). ``mean`` and ``sd`` broadcast: one answer per target.
    """
    if switch_z >= Z95 or n < 2 * SCALE_SKIP:
        return np.zeros(np.shape(mean), dtype=bool)
    half = switch_z * np.asarray(sd)
    return (np.asarray(mean) - half > hi) | (np.asarray(mean) + half < lo)


def beyond_every_reference(
    n: int, total, total_sq, ref_sum: np.ndarray, ref_sq: np.ndarray, cross: np.ndarray,
):
    """Whether a target scores significantly above (or below) every reference on the n items scored so far.

    A paired comparison, free of the model: with the target's sum and sum of
    squares ``total``, ``total_sq``, each reference's ``ref_sum``, ``ref_sq``
    (shape (K,)) and the cross sums ``cross`` = Σ s·s_j, the mean difference
    d̄_j and its standard error; True where every d̄_j − 1.96 se_j > 0 (or every
    d̄_j + 1.96 se_j < 0). Targets broadcast along a leading axis: ``total`` of
    shape (T, 1) with ``cross`` (T, K) gives one answer per target (shape (T,)).
    """
    diff_mean = (total - ref_sum) / n
    diff_sq = (total_sq - 2.0 * cross + ref_sq) / n
    se = np.sqrt(np.maximum(diff_sq - diff_mean**2, 0.0) / (n - 1))
    return np.all(diff_mean - Z95 * se > 0, axis=-1) | np.all(diff_mean + Z95 * se < 0, axis=-1)


#: Calibration factors from this one on are said in ``Estimate.notes``.
CALIBRATION_NOTE = 1.5
