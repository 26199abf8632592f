"""BayesAME exactly as the paper gives it, single target (BayesAME paper §3.1, App. A; SPEC.md §1).

``bayesame-paper`` and ``bayesame-paper-rs``: the paper's algorithm, kept so
that its tables can be reproduced. The default ``bayesame``
(:mod:`activeeval.methods.bayesame`) changes the model where this one breaks
(see docs/MATHS.md, "What the default changes").

The posterior over bucket abilities θ ∈ R^B is kept exactly, and updated
incrementally: each observation is a rank-one (Kalman) update, with the
posterior covariance held implicitly as Σ|C = Σ − VᵀV (V has one row per
observation since the last rebuild). What selection and estimation need —
μ|C, diag(Σ|C) and Σ|C u — is updated in O(B) once the new covariance column
k = Σ[:, b] − VᵀV[:, b] is known, so a step costs O(r·B) with r ≤ n rows,
and no B×B matrix is ever formed. After a hyperparameter refit (every F
observations) the posterior is rebuilt once from the bucket form (Eq. 8) with
a Cholesky factor of the observed buckets' Gram matrix. The result equals the
batch formulas Eq. 7 / Eq. 8 to round-off (see tests/test_bayesame_maths.py).
That state is the default's, :class:`~activeeval.gp.posterior.BucketPosterior`,
with the Eq. 1 kernel (:class:`~activeeval.gp.kernels.SquaredExponential`) as
its prior and σ² N_b as the noise of an item of bucket b.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NoReturn

import numpy as np
from scipy.optimize import minimize

from activeeval.data.matrix import ScoreMatrix
from activeeval.exceptions import ConfigurationError, option
from activeeval.gaussian import (
    BucketNLML,
    BucketPosterior,
    bucketize,
    information_gain,
    integer_levels,
    nlml_bucket_form,
    sq_dists,
    var_r,
)
from activeeval.gp.acquisition import BatchSelector, BatchSettings, SelectorOption, pick_item
from activeeval.gp.kernels import SquaredExponential
from activeeval.logit import (
    LOGIT_EPS,
    bernoulli_working_response,
    linearised_information_gain,
    linearised_var_r,
    logit,
    moderated_mean,
    moderated_slope,
    to_unit,
)
from activeeval.methods.base import BaseMethod, SeedLike
from activeeval.methods.capabilities import Capabilities
from activeeval.methods.estimate import Estimate
from activeeval.settings import Integer, Number, OneOf, Settings, setting, takes_settings

Z95 = 1.959963984540054

__all__ = ["BatchSettings", "BayesAMEPaper", "BayesAMEPaperRS", "ModelWeights", "PaperModelSettings",
           "RefitRecord", "weights_from_mapping"]

SIGMA2_UNIQUE = 1e-4  # App. C.1
SIGMA2_NON_UNIQUE = 1e-1  # App. C.1
HYPER_LOWER = 1e-5  # App. A.4: lower bound that keeps Σ positive definite
HYPER_UPPER = 1e5  # not in the paper: keeps L-BFGS-B away from overflow in exp(-β d²/K)


def weights_from_mapping(weights: Mapping[str, float], model_ids: Sequence[str]) -> np.ndarray:
    """The metadata weights (App. B.2) of ``{model id: weight}`` in the order of ``model_ids``, shape (K,).

    Every model of ``model_ids`` must have a weight and every key must be one
    of them; the values must be numbers (their sign and sum are checked by
    the caller). Raises :class:`ConfigurationError` naming what is missing or unknown.
    """
    ids = [str(m) for m in model_ids]
    given = {str(k): v for k, v in weights.items()}
    known = set(ids)
    missing = [m for m in ids if m not in given]
    unknown = [k for k in given if k not in known]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"no weight for {len(missing)} reference model(s): {', '.join(missing[:5])}"
                         + (", ..." if len(missing) > 5 else ""))
        if unknown:
            parts.append(f"{len(unknown)} model(s) that are not reference models: {', '.join(unknown[:5])}"
                         + (", ..." if len(unknown) > 5 else ""))
        raise ConfigurationError(
            f"prior weights: {'; '.join(parts)}; give exactly one weight per reference model "
            f"({len(ids)} models)")
    out = np.empty(len(ids))
    for k, m in enumerate(ids):
        value = given[m]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ConfigurationError(f"prior weights: the weight of {m!r} must be a number, got {value!r}")
        out[k] = float(value)
    return out


class ModelWeights(dict[str, float]):
    """Metadata weights by model id (App. B.2), read-only: how :class:`PaperModelSettings` keeps weights given as
    a mapping. It is a ``dict`` to everything that reads it (it equals the mapping it was made from, and
    ``json.dumps`` writes it as an object, so a session stores it as before); changing it raises TypeError."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("ModelWeights is read-only: make a new one with the weights you want")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __hash__(self) -> int:  # type: ignore[override]  # dict's is None; this one cannot change
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[type[ModelWeights], tuple[dict[str, float]]]:
        return type(self), (dict(self),)  # copy.copy/deepcopy without __setitem__


_WEIGHT_TYPES = (int, float, np.integer, np.floating)  # what weights_from_mapping takes as a number


def _weights(name: str, value: Any) -> tuple[float, ...] | ModelWeights | None:
    """The ``weights`` setting: None; a mapping of model id → number (kept as :class:`ModelWeights`); or one
    number per reference model (a sequence or a 1-D array, kept as a tuple of floats: ``np.asarray(weights,
    dtype=float)`` of it is what the method always read). Their count and signs are checked by the method,
    which knows the reference models."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        out: dict[str, float] = {}
        for key, weight in value.items():
            if isinstance(weight, (bool, np.bool_)) or not isinstance(weight, _WEIGHT_TYPES):
                raise ConfigurationError(f"prior weights: the weight of {str(key)!r} must be a number, got {weight!r}")
            out[str(key)] = float(weight)
        return ModelWeights(out)
    try:
        array = None if isinstance(value, (str, bytes)) else np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        array = None
    if array is None or array.ndim != 1:
        raise ConfigurationError(f"{name} must be one number per reference model (a sequence or a 1-D array), a "
                                 f"mapping of model id to weight, or None; got {value!r}")
    return tuple(array.tolist())


def _logit_eps(name: str, value: Any) -> Any:
    """ε of the logit: a number in (0, 0.5) (kept as given)."""
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
            or not (0 < float(value) < 0.5)):
        raise ConfigurationError(f"{name} must be a number in (0, 0.5), got {value!r}; e.g. 1e-3")
    return value


@dataclass(frozen=True)
class PaperModelSettings(Settings):
    """The paper's Gaussian model and its refits: the regime margin, the Eq. 1 prior and its weights, the noise,
    the refits, the estimator and the likelihood (a :class:`BayesAMEPaper`'s ``model`` group; each field is also
    a flat option, ``bayesame-paper[noise=learned,refit_every=25]``). :class:`BayesAMEPaper`'s docstring says
    what each does."""

    about: ClassVar[str] = "the paper's Gaussian model and its refits"

    n0: int = setting(10, Integer(0, phrase="a non-negative integer"),
                      "margin N0 of the regime switch: unique ⇔ B ≥ N − N0")
    sigma2: float | None = setting(None, Number(0, low_open=True, optional=True, phrase="a positive number"),
                                   "noise scale σ² (default 1e-4 in the unique regime, 1e-1 otherwise)")
    alpha: float = setting(1.0, Number(HYPER_LOWER), "initial α of the Eq. 1 kernel")
    beta: float = setting(1.0, Number(HYPER_LOWER), "initial β of the Eq. 1 kernel")
    refit_every: int | None = setting(50, Integer(0, optional=True, phrase="a non-negative integer"),
                                      "F: refit (α, β) every F observations (None or 0: never)")
    estimator: str = setting("auto", OneOf("auto", "bayes", "cv"),
                             "posterior mean (bayes) or control variate (cv); auto: by the regime")
    weights: tuple[float, ...] | Mapping[str, float] | None = setting(  # a mapping is kept as ModelWeights
        None, _weights, "metadata weights of the reference models (App. B.2): by position or by model id")
    noise: str = setting("fixed", OneOf("fixed", "learned"), "σ² fixed at its regime default, or refitted too")
    likelihood: str = setting("gaussian", OneOf("gaussian", "logit"),
                              "the paper's Gaussian, or the logit-normal variants (App. B.3)")
    logit_eps: float = setting(LOGIT_EPS, _logit_eps, "ε of the logit (likelihood='logit' only)")


#: The checks of BayesAMEPaper's top-level options (its groups' fields declare their own).
_SELECTION = OneOf("auto", "active", "random")
_TOLERANCE = Number(0, optional=True, phrase=">= 0 (0 compares scores exactly)")
_CACHE_MB = Number(0, phrase="a number of megabytes >= 0")


@dataclass(frozen=True)
class RefitRecord:
    """One hyperparameter refit: when, from what, to what, and how it went."""

    n_observed: int
    alpha_before: float
    beta_before: float
    alpha: float
    beta: float
    sigma2: float
    nlml: float
    converged: bool
    message: str


class BayesAMEPaper(BaseMethod):
    """Bayesian active model evaluation for one target model, exactly as in the paper.

    The options come in two settings groups beside a few of their own: ``model``
    (:class:`PaperModelSettings`: the Gaussian model and its refits) and ``batch``
    (:class:`~activeeval.gp.acquisition.BatchSettings`: how a batch is picked). Each group's fields are also
    flat keywords — ``BayesAMEPaper(ref, noise="learned")`` is ``BayesAMEPaper(ref,
    model=PaperModelSettings(noise="learned"))``, and a spec writes them flat too
    (``bayesame-paper[noise=learned,batch_size=2]``). Values are checked when the group is made.

    Parameters
    ----------
    reference : ScoreMatrix
        Reference models' per-item scores (models x items).
    seed, missing
        See :class:`~activeeval.methods.base.BaseMethod`.
    selection : {"auto", "active", "random"}
        "auto" (the paper): information gain (Eq. 6) in the unique regime,
        uniform random otherwise. "random" gives BayesAME-RS.
    tolerance : float, optional
        Rounding tolerance for bucketing continuous scores (default 1e-3;
        binary scores are compared exactly).
    cache_mb : float
        Memory allowed for caching the B×B squared distances (speeds up
        refits); above it the kernel is recomputed block by block. Where it
        holds two B×B arrays, the prior covariance Σ at the current (α, β) is
        kept beside the distances; where it holds three and the distances are
        whole numbers (binary scores), an index of them too (Σ is then
        exponentiated once per distinct distance): the same numbers either way.
    model : PaperModelSettings
        The Gaussian model and its refits; its fields:

        n0 : int
            Margin N0 of the regime switch: unique ⇔ B ≥ N − N0.
        sigma2 : float, optional
            Noise scale σ²; default 1e-4 in the unique regime, 1e-1 otherwise.
        alpha, beta : float
            Initial kernel hyperparameters (α0 = β0 = 1).
        refit_every : int or None
            F: refit (α, β) by L-BFGS-B on the NLML every F observations
            (None or 0 disables refits).
        estimator : {"auto", "bayes", "cv"}
            "auto": posterior mean (w = 1/N, Eq. 3) in the unique regime,
            control variate (w = 1/n, Eq. 4) otherwise.
        weights : array_like of shape (n_models,) or mapping of model id to weight, optional
            Metadata weights w (App. B.2): prior mean φ_bᵀw and distance
            (φ_b−φ_b')ᵀ diag(w) (φ_b−φ_b'). Must be ≥ 0; they are normalised.
            A mapping must name every reference model (after missing-score
            drops) and no other; an array follows ``reference.model_ids``.
            Kept as a tuple of floats, or a read-only :class:`ModelWeights`.
        noise : {"fixed", "learned"}
            "fixed" (the paper's single-target setting): σ² stays at its regime
            default. "learned" (our extension, as the paper's multi-target
            setting does): σ² is refitted with (α, β) on the NLML, starting from
            the regime default; it lets the model account for item-level noise
            that the reference scores do not predict, which widens the interval
            where the fixed σ² makes it too narrow (see docs/BENCHMARKS.md).
        likelihood : {"gaussian", "logit"}
            "gaussian" (the paper's BayesAME). "logit": the logit-normal
            variants of App. B.3 (the paper's BayesAME-Logit; see docs/MATHS.md):
            continuous scores are modelled exactly as Gaussian in logit space;
            binary scores by a Bernoulli likelihood on σ(f_b), linearised around
            the auxiliary Gaussian model's posterior mean. Needs a bounded
            ``score_range``.
        logit_eps : float
            ε of the logit: scores rescaled to [0, 1] and reference points are
            clipped to [ε, 1 − ε] (default 1e-3). Only with likelihood="logit".
    batch : BatchSettings
        How items are picked from the posterior; its fields:

        batch_strategy : {"greedy", "pair", "lars", "dpp", "kmeans"}
            How ``select_batch(k)`` picks k > 1 items in the unique regime (App.
            B.1; :mod:`activeeval.gp.acquisition`): "greedy" (the default)
            conditions on each chosen item and takes the next argmax of Eq. 6.
        batch_size : int
            |A| of the non-myopic selection (``myopic=False``): ``select()`` is a
            random member of the best batch of this many items. 1: single-item Eq. 6.
        myopic : bool
            True (default): ``select()`` is Eq. 6's argmax. False: non-myopic (see ``batch_size``).

    Each field is also this object's attribute of the same name (``method.noise``, ``method.refit_every``, ...).
    """

    name = "bayesame-paper"
    capabilities = Capabilities(ranks=True, batch=True)

    @takes_settings
    def __init__(
        self,
        reference: ScoreMatrix,
        *,
        seed: SeedLike = None,
        missing: str = "models",
        selection: Literal["auto", "active", "random"] = "auto",
        tolerance: float | None = None,
        cache_mb: float = 256.0,
        model: PaperModelSettings = PaperModelSettings(),
        batch: BatchSettings = BatchSettings(),
    ) -> None:
        super().__init__(reference, seed=seed, missing=missing)
        selection = _SELECTION("selection", selection)
        tolerance = _TOLERANCE("tolerance", tolerance)
        cache_mb = _CACHE_MB("cache_mb", cache_mb)
        #: the settings groups as given (each field is also this object's attribute of the same name)
        self.model, self.batch = model, batch
        #: How items are picked from the posterior in the unique regime (:mod:`activeeval.gp.acquisition`).
        self.selector = BatchSelector.of(batch).check_items(self.n_items)
        n0, sigma2, alpha, beta, estimator = model.n0, model.sigma2, model.alpha, model.beta, model.estimator
        likelihood = model.likelihood
        # settings as given; what the method resolves (estimator, noise, tolerance) or learns (alpha, beta and,
        # with noise="learned", sigma2: refitted every refit_every items) carries a trailing underscore
        self.alpha, self.beta, self.sigma2, self.estimator, self.tolerance = alpha, beta, sigma2, estimator, tolerance
        self.cache_mb = cache_mb
        if likelihood == "logit" and self.reference.score_range is None:
            raise ConfigurationError(
                "likelihood='logit' needs bounded scores, but the reference has no score range; load it with "
                f"{option('score_range', '(low, high)', 'LOW HIGH')}")
        if likelihood == "logit" and (batch.batch_strategy != "greedy" or not batch.myopic):
            raise ConfigurationError(
                "likelihood='logit' selects greedily, one item at a time (its batch selection is not implemented); "
                f"drop {option('batch_strategy')}/{option('myopic', 'False')} or use likelihood='gaussian'")
        self.likelihood, self.logit_eps = likelihood, float(model.logit_eps)

        phi_items = self.reference.scores.T  # (N, K)
        n_refs = phi_items.shape[1]
        weights: Sequence[float] | np.ndarray | None = None
        if isinstance(model.weights, Mapping):
            # a model dropped for missing scores (``missing="models"``) is no reference model: its weight goes
            dropped = set(self.dropped.dropped_models)
            weights = weights_from_mapping({m: v for m, v in model.weights.items() if m not in dropped},
                                           self.reference.model_ids)
        else:
            weights = model.weights
        if weights is not None:
            w = np.asarray(weights, dtype=float)
            if w.shape != (n_refs,) or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
                raise ConfigurationError(
                    f"weights must be {n_refs} non-negative numbers (one per reference model) with a positive sum"
                )
            w = w / w.sum()
        else:
            w = None
        if tolerance is None:
            tolerance = 0.0 if self.reference.kind == "binary" else 1e-3
        self.tolerance_ = float(tolerance)
        self.buckets = bucketize(phi_items, self.tolerance_)
        n_buckets = self.buckets.n_buckets
        self.n0 = int(n0)
        self.unique_regime = n_buckets >= self.n_items - self.n0
        self.sigma2_ = float(sigma2) if sigma2 is not None else (
            SIGMA2_UNIQUE if self.unique_regime else SIGMA2_NON_UNIQUE
        )
        self.active = selection == "active" or (selection == "auto" and self.unique_regime)
        self.selection = selection
        use_bayes = estimator == "bayes" or (estimator == "auto" and self.unique_regime)
        self.estimator_ = "bayes" if use_bayes else "cv"
        self.refit_every = model.refit_every if model.refit_every else 0
        self.noise = model.noise
        self.alpha_ = float(alpha)
        self.beta_ = float(beta)
        self.refits: list[RefitRecord] = []
        #: (n, estimate before, after, half-width after) of every refit that moved the estimate by more than
        #: the half-width of its new 95 % interval: the fit is unstable, and ``Estimate.notes`` says so.
        self.refit_jumps: list[tuple[int, float, float, float]] = []

        # Kernel features: with metadata weights the distance Σ_k w_k Δφ_k² equals
        # (1/K)·‖Δψ‖² for ψ = φ·sqrt(K w), so the Eq. 1 code path serves both.
        phi = self.buckets.phi
        self._n_refs = n_refs
        self._feat = phi if w is None else phi * np.sqrt(n_refs * w)[None, :]
        self._feat_sq = (self._feat**2).sum(1)
        self._mu_prior = phi.mean(1) if w is None else phi @ w
        self._counts = self.buckets.counts
        self.logit_model_: str | None = None
        if likelihood == "logit":
            assert self.reference.score_range is not None  # refused above: logit needs a bounded range
            low, high = self.reference.score_range
            self._low, self._width = float(low), float(high - low)
            self.logit_model_ = "bernoulli" if self.reference.kind == "binary" else "logit-normal"
            if self.logit_model_ == "logit-normal":  # the Gaussian state below lives in logit space
                self._mu_prior = logit(to_unit(self._mu_prior, low, high), self.logit_eps)
        self._d2_full = (
            sq_dists(self._feat, self._feat) if n_buckets * n_buckets * 8 <= cache_mb * 2**20 else None
        )
        self._d2_rows: dict[int, np.ndarray] = {}
        # Σ at the current (α, β) while it fits in ``cache_mb`` beside the distances (:meth:`_kernel_matrix`)
        self._k_full_ok = self._d2_full is not None and 2 * n_buckets * n_buckets * 8 <= cache_mb * 2**20
        self._k_key: tuple[float, float] | None = None
        self._k_full: np.ndarray | None = None
        # Integer distances (binary scores, no weights: d² counts the references that disagree) take at most K + 1
        # values: the kernel matrix is then the kernel of each value, read off by index (where that fits too)
        self._d2_levels = integer_levels(self._d2_full) if (
            self._k_full_ok and 3 * n_buckets * n_buckets * 8 <= cache_mb * 2**20) else None

        # The posterior state: it also keeps the observation summaries per bucket (n_b, Σ s, u).
        # Room for the observations until the next refit; V grows by doubling beyond that.
        self._sum_obs = 0.0
        self._post = BucketPosterior(
            self._mu_prior, self._prior_col, self.kernel.diag(n_buckets), self._prior_cov_counts(),
            self._counts, self.sigma2_ * self._counts,
            capacity=max(self.refit_every, 64), auto_compress=False,  # a refit may rebuild first: _after_observe
        )
        self._readout: tuple[BucketPosterior, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float] | None = None
        if self.logit_model_ == "bernoulli":
            self._init_bernoulli(float(alpha), float(beta))
        self._post.prior_cols = self._prior_cols  # blocks of columns for batch selection

    # ------------------------------------------------------------ properties
    @property
    def n_buckets(self) -> int:
        return self.buckets.n_buckets

    @property
    def regime(self) -> str:
        return "unique" if self.unique_regime else "non-unique"

    @property
    def bucket_posterior(self) -> BucketPosterior:
        """The posterior of the bucket abilities, the one the selector is given (read it; do not condition it)."""
        return self._post

    batch_strategy = SelectorOption("strategy", "The selector's strategy (the ``batch_strategy`` option).")
    batch_size = SelectorOption("batch_size", "The selector's |A| of the non-myopic selection (``batch_size``).")
    myopic = SelectorOption("myopic", "Whether ``select()`` is Eq. 6's argmax (the ``myopic`` option).")

    @property
    def kernel(self) -> SquaredExponential:
        """The Eq. 1 kernel at the current (α, β), with the bounds of the refit."""
        bounds = (HYPER_LOWER, HYPER_UPPER)
        return SquaredExponential(self.alpha_, self.beta_, self._n_refs, alpha_bounds=bounds, beta_bounds=bounds)

    def posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean μ|C (B,) and variances diag(Σ|C) (B,) of the bucket abilities."""
        return self._post.mean.copy(), np.maximum(self._post.diag, 0.0)

    def posterior_cov(self) -> np.ndarray:
        """Full posterior covariance Σ|C (B, B). O(B²) memory: for small B and tests."""
        sigma = self.kernel(self._d2_all())
        v = self._post.v
        return sigma - v.T @ v

    def prior(self) -> tuple[np.ndarray, np.ndarray]:
        """Prior mean μ (B,) and covariance Σ (B, B) (Eq. 1) at the current (α, β)."""
        return self._mu_prior.copy(), self.kernel(self._d2_all())

    # ---------------------------------------------------------- kernel rows
    def _d2_all(self) -> np.ndarray:
        return self._d2_full if self._d2_full is not None else sq_dists(self._feat, self._feat)

    def _d2_row(self, b: int) -> np.ndarray:
        if self._d2_full is not None:
            return self._d2_full[b]
        row = self._d2_rows.get(b)
        if row is None:
            feat = self._feat
            row = np.maximum(self._feat_sq + self._feat_sq[b] - 2.0 * (feat @ feat[b]), 0.0)
            row[b] = 0.0
            self._d2_rows[b] = row
        return row

    def _kernel_matrix(self) -> np.ndarray | None:
        """Σ (B, B) at the current (α, β), kept until they change; None where it does not fit in ``cache_mb``.

        The kernel of the cached distances, elementwise: its rows are the numbers that ``kernel(d2 row)`` gives
        (the same operations on the same values), so the prior's columns of every step, the observed buckets'
        rows of a rebuild and Σ N of the refit are read from one exponentiation per (α, β) instead of one each.
        """
        d2 = self._d2_full
        if not self._k_full_ok or d2 is None:
            return None
        key = (self.alpha_, self.beta_)
        if self._k_key != key:
            self._k_full = None  # the old matrix goes before the new one is made: at most one held
            if self._d2_levels is not None:  # the same operations on the same numbers, once per distinct distance
                levels, index = self._d2_levels
                self._k_key, self._k_full = key, np.take(self.kernel(levels), index)
            else:
                self._k_key, self._k_full = key, self.kernel(d2)
        return self._k_full

    def _prior_cov_counts(self) -> np.ndarray:
        """Σ N (B,) at the current (α, β): the kernel matrix times the counts (as ``kernel.matvec`` forms it)."""
        full = self._kernel_matrix()
        if full is not None:
            return full @ self._counts
        return self.kernel.matvec(self._feat, self._counts, self._d2_full)

    def _prior_col(self, b: int) -> np.ndarray:
        """Σ[:, b] at the current (α, β) (a view of the kept kernel matrix where it fits: read it, do not write)."""
        full = self._kernel_matrix()
        return full[b] if full is not None else self.kernel(self._d2_row(b))

    def _prior_cols(self, bs: np.ndarray) -> np.ndarray:
        """Σ[:, bs] (B, len(bs)) at the current (α, β): one kernel call on cached distances when they fit."""
        full = self._kernel_matrix()
        if full is not None:
            return full[bs].T  # rows of the symmetric matrix: contiguous reads
        if self._d2_full is not None:
            return self.kernel(self._d2_full[bs]).T
        return np.column_stack([self._prior_col(int(b)) for b in bs]) if len(bs) else np.zeros((self.n_buckets, 0))

    # ------------------------------------------------------ posterior state
    def _rebuild(self) -> None:
        """Recompute the posterior from the bucket form (Eq. 8) at the current (α, β, σ²)."""
        kernel = self.kernel
        obs = np.flatnonzero(self._post.n_obs > 0)
        full = self._kernel_matrix()
        if full is not None:  # the observed buckets' prior rows read from the kernel matrix (the same numbers)
            rows: np.ndarray | None = full[obs]
        else:  # in one kernel call on the cached distances
            rows = kernel(self._d2_full[obs]) if self._d2_full is not None else None
        self._post.rebuild(
            prior_diag=kernel.diag(self.n_buckets),
            prior_cov_counts=self._prior_cov_counts(),
            noise=self.sigma2_ * self._counts,
            prior_rows=rows,
        )

    def _update(self, item: int, score: float) -> None:
        if self.logit_model_ == "logit-normal":
            self._readout = None
            self._post.observe(int(self.buckets.of_item[item]), float(logit((score - self._low) / self._width,
                                                                             self.logit_eps)))
            self._sum_obs += score
            return
        self._readout = None
        self._post.observe(int(self.buckets.of_item[item]), score)
        self._sum_obs += score

    def _after_observe(self) -> None:
        if self.likelihood == "logit":
            self._after_observe_logit()
            return
        n = self.n_observed
        if self.refit_every and n % self.refit_every == 0 and n < self.n_items:
            before = self._current_estimate()
            if self._refit():
                self._rebuild()
                after = self._current_estimate()
                half = Z95 * math.sqrt(max(after.var, 0.0))
                if abs(after.mean - before.mean) > half:  # said in the notes (the estimate is not changed)
                    self.refit_jumps.append((n, before.mean, after.mean, half))
                return
        # Repeated observations of the same buckets add rows; compress them
        # back to one row per observed bucket when that pays.
        if self._post.crowded:
            self._post.rebuild()

    # ------------------------------------------------------ hyperparameters
    def _nlml_data(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(d2_OO, r, N_b/n_b) over the observed buckets, for Eq. 11."""
        n_b = self._post.n_obs
        obs = np.flatnonzero(n_b > 0)
        if self._d2_full is not None:
            d2 = self._d2_full[np.ix_(obs, obs)]
        else:
            d2 = np.vstack([self._d2_row(int(b))[obs] for b in obs]) if obs.size else np.zeros((0, 0))
        resid = self._post.sum_obs[obs] / n_b[obs] - self._mu_prior[obs]
        return d2, resid, self._counts[obs] / n_b[obs]

    def nlml(
        self, alpha: float | None = None, beta: float | None = None, sigma2: float | None = None
    ) -> tuple[float, np.ndarray]:
        """Eq. 11 (bucket form over the observed buckets) and its gradient in (α, β, σ²)."""
        params = np.array(
            [
                self.alpha_ if alpha is None else alpha,
                self.beta_ if beta is None else beta,
                self.sigma2_ if sigma2 is None else sigma2,
            ]
        )
        return nlml_bucket_form(params, *self._nlml_data(), self._n_refs)

    def _refit(self) -> bool:
        """L-BFGS-B on the NLML from the current values. True if they changed.

        The search runs over log α, log β (and log σ²): the same minimiser
        within the same bounds, but far better conditioned than the raw
        parameters, so it needs about a third fewer NLML evaluations.
        """
        if int((self._post.n_obs > 0).sum()) < 2:
            return False
        nlml = BucketNLML(*self._nlml_data(), self._n_refs)
        learn = self.noise == "learned"
        x0 = np.array([self.alpha_, self.beta_, self.sigma2_] if learn else [self.alpha_, self.beta_])
        cache: dict[bytes, tuple[float, np.ndarray]] = {}

        def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
            key = x.tobytes()
            if key not in cache:
                full = x if learn else np.array([x[0], x[1], self.sigma2_])
                value, grad = nlml(full)
                cache[key] = (value, grad if learn else grad[:2])
            return cache[key]

        def objective_log(y: np.ndarray) -> tuple[float, np.ndarray]:
            x = np.exp(y)
            value, grad = objective(x)
            return value, grad * x

        bound = (np.log(HYPER_LOWER), np.log(HYPER_UPPER))
        y0 = np.log(x0)
        result = minimize(objective_log, y0, jac=True, method="L-BFGS-B", bounds=[bound] * x0.size)
        new = np.clip(np.exp(np.asarray(result.x, dtype=float)), HYPER_LOWER, HYPER_UPPER)
        start = objective(np.exp(y0))[0]  # the first point L-BFGS-B evaluated (cached)
        ok = bool(np.all(np.isfinite(new)) and np.isfinite(result.fun) and result.fun <= start)
        final = new if ok else x0
        self.refits.append(
            RefitRecord(
                self.n_observed, self.alpha_, self.beta_, float(final[0]), float(final[1]),
                float(final[2]) if learn else self.sigma2_,
                float(result.fun), bool(result.success), str(result.message),
            )
        )
        if not ok or np.allclose(new, x0, rtol=1e-12, atol=0.0):
            return False
        self.alpha_, self.beta_ = float(new[0]), float(new[1])
        if learn:
            self.sigma2_ = float(new[2])
        return True

    # ------------------------------------------------ logit-normal variants
    def _f_kernel(self) -> SquaredExponential:
        """The kernel of the Gaussian model of f: Eq. 1 at (α_f, β_f) for Bernoulli scores, else :attr:`kernel`."""
        if self.logit_model_ != "bernoulli":
            return self.kernel
        bounds = (HYPER_LOWER, HYPER_UPPER)
        return SquaredExponential(self.alpha_f_, self.beta_f_, self._n_refs, alpha_bounds=bounds, beta_bounds=bounds)

    def _prior_col_f(self, b: int) -> np.ndarray:
        full = self._f_kernel_matrix()
        return full[b] if full is not None else self._f_kernel()(self._d2_row(b))

    def _f_kernel_matrix(self) -> np.ndarray | None:
        """The prior covariance of f (B, B) while the squared distances are cached; kept until (α, β) change.

        The logit variants multiply it by a new vector at every step (Σ (g∘u)), so
        forming it once per refit instead of exponentiating B² distances per product saves most of a step.
        """
        if self._d2_full is None:
            return None
        if self.logit_model_ != "bernoulli":  # the Gaussian state's own kernel: its kept matrix, not a second one
            full = self._kernel_matrix()
            if full is not None:
                return full
        kernel = self._f_kernel()
        key = (kernel.alpha, kernel.beta)
        if getattr(self, "_kf_key", None) != key:
            self._kf_key, self._kf = key, kernel(self._d2_full)
        return self._kf

    def _init_bernoulli(self, alpha: float, beta: float) -> None:
        """The model of f for binary scores: its own prior (logit of the prior mean, α_f, β_f) and posterior."""
        self.alpha_f_, self.beta_f_ = alpha, beta
        self.refits_f: list[RefitRecord] = []
        self._mu_f = logit(to_unit(self._mu_prior, self._low, self._low + self._width), self.logit_eps)
        kernel = self._f_kernel()
        n_buckets = self.n_buckets
        self._post_f = BucketPosterior(
            self._mu_f, self._prior_col_f, kernel.diag(n_buckets),
            kernel.matvec(self._feat, self._counts, self._d2_full), self._counts, np.ones(n_buckets),
            capacity=max(self.refit_every, 64), auto_compress=False,
        )
        self._relinearise(refit=False)

    def _relinearise(self, refit: bool) -> None:
        """Rebuild the posterior of f from the Bernoulli likelihood linearised at the auxiliary model's mean.

        The reference points σ(f_b,0) are the auxiliary Gaussian model's
        posterior means (``self._post``, the paper's BayesAME model) clipped
        to [ε, 1 − ε]; they move with every observation, so the linearised
        posterior is rebuilt from the bucket form (Eq. 8) at every step,
        O(m² B) for m observed buckets (the paper: "substantial computational overhead").
        """
        aux, post = self._post, self._post_f
        p0 = to_unit(aux.mean, self._low, self._low + self._width)
        sums = (aux.sum_obs - aux.n_obs * self._low) / self._width
        f0, z_sum, noise = bernoulli_working_response(p0, aux.n_obs, sums, self.logit_eps)
        post.n_obs = aux.n_obs.copy()
        post.sum_obs = z_sum
        post.remaining = aux.remaining.copy()
        self.reference_point_ = f0
        if refit and self._refit_f(z_sum, noise):
            kernel = self._f_kernel()
            post.rebuild(kernel.diag(self.n_buckets), kernel.matvec(self._feat, self._counts, self._d2_full), noise)
        else:
            post.rebuild(noise=noise)

    def _refit_f(self, z_sum: np.ndarray, noise: np.ndarray) -> bool:
        """L-BFGS-B on Eq. 11 of the linearised model of f over (α_f, β_f) (its noise 1/σ'(f_b,0) is given)."""
        n_b = self._post.n_obs
        obs = np.flatnonzero(n_b > 0)
        if obs.size < 2:
            return False
        if self._d2_full is not None:  # the observed buckets' distances as one slice (the same numbers)
            d2 = self._d2_full[np.ix_(obs, obs)]
        else:
            d2 = np.vstack([self._d2_row(int(b))[obs] for b in obs])
        nlml = BucketNLML(d2, z_sum[obs] / n_b[obs] - self._mu_f[obs], noise[obs] / n_b[obs], self._n_refs)
        cache: dict[bytes, tuple[float, np.ndarray]] = {}  # the start point is asked for again below

        def objective_log(y: np.ndarray) -> tuple[float, np.ndarray]:
            x = np.exp(y)
            key = y.tobytes()
            if key not in cache:
                cache[key] = nlml(np.array([x[0], x[1], 1.0]))  # σ² = 1: the noise is the linearised Bernoulli's
            value, grad = cache[key]
            return value, grad[:2] * x

        y0 = np.log([self.alpha_f_, self.beta_f_])
        bound = (np.log(HYPER_LOWER), np.log(HYPER_UPPER))
        result = minimize(objective_log, y0, jac=True, method="L-BFGS-B", bounds=[bound] * 2)
        new = np.clip(np.exp(np.asarray(result.x, dtype=float)), HYPER_LOWER, HYPER_UPPER)
        ok = bool(np.all(np.isfinite(new)) and np.isfinite(result.fun) and result.fun <= objective_log(y0)[0])
        final = new if ok else np.exp(y0)
        self.refits_f.append(RefitRecord(self.n_observed, self.alpha_f_, self.beta_f_, float(final[0]),
                                         float(final[1]), 1.0, float(result.fun), bool(result.success),
                                         str(result.message)))
        if not ok or np.allclose(new, np.exp(y0), rtol=1e-12, atol=0.0):
            return False
        self.alpha_f_, self.beta_f_ = float(new[0]), float(new[1])
        return True

    def _after_observe_logit(self) -> None:
        n = self.n_observed
        refit = bool(self.refit_every) and n % self.refit_every == 0 and n < self.n_items
        if refit:
            if self._refit():  # (α, β, σ²) of the Gaussian state: in logit space, or the auxiliary model's
                self._rebuild()
        elif self._post.crowded:
            self._post.rebuild()
        if self.logit_model_ == "bernoulli":
            self._relinearise(refit)
        self._readout = None

    def _cov_times(self, post: BucketPosterior, kernel: SquaredExponential, w: np.ndarray,
                   extra: np.ndarray | None = None) -> np.ndarray:
        """Σ|C w = Σ w − Vᵀ(V w) (− Eᵀ(E w) for fantasy rows E), shape (B,): one kernel matvec, O(B² + rB)."""
        full = self._f_kernel_matrix()
        out = full @ w if full is not None else kernel.matvec(self._feat, w, None)
        v = post.v
        out -= v.T @ (v @ w)
        if extra is not None and extra.shape[0]:
            out -= extra.T @ (extra @ w)
        return out

    def _logit_readout(self) -> tuple[BucketPosterior, np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
        """What estimation and selection read off the posterior of f (cached until the next observation).

        Returns (posterior of f, E[θ_b] (B,), slope g (B,), noise slope a (B,), Σ|C (g∘u) (B,), N² Var(R)).
        """
        if self._readout is None:
            bernoulli = self.logit_model_ == "bernoulli"
            post = self._post_f if bernoulli else self._post
            diag = np.maximum(post.diag, 0.0)
            theta = self._low + self._width * moderated_mean(post.mean, diag)
            slope = self._width * moderated_slope(post.mean, diag)
            # an item's latent noise η moves its score by a η: σ'(f_b,0) η for the working response (Var η =
            # 1/σ'(f_b,0), so a² Var η is the Bernoulli variance at the reference point); g η in logit space
            noise_slope = self._width / post.noise if bernoulli else slope
            cov_su = self._cov_times(post, self._f_kernel(), slope * post.remaining)
            scaled = linearised_var_r(post.remaining, slope, cov_su, noise_slope, post.noise, 1)
            self._readout = (post, theta, slope, noise_slope, cov_su, scaled)
        return self._readout

    def logit_posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variances of the latent f (B,) (likelihood="logit" only)."""
        if self.likelihood != "logit":
            raise ConfigurationError("logit_posterior() needs likelihood='logit'; use posterior() for the Gaussian")
        post = self._logit_readout()[0]
        return post.mean.copy(), np.maximum(post.diag, 0.0)

    def theta_mean(self) -> np.ndarray:
        """E[θ_b | s_C] in score space (B,): μ|C, or with likelihood="logit" its probit approximation."""
        if self.likelihood != "logit":
            return self._post.mean.copy()
        return self._logit_readout()[1].copy()

    def _select_logit(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int]:
        """Greedy batch of the linearised Eq. 6, conditioning f's covariance on pending and chosen items."""
        post, _, slope, noise_slope, _, _ = self._logit_readout()
        kernel = self._f_kernel()
        available = ~self._observed
        available[list(exclude)] = False
        fantasy = post.fantasy()
        for item in exclude:
            if not self._observed[item]:
                fantasy.condition(int(self.buckets.of_item[item]))
        avail_per_bucket = np.bincount(self.buckets.of_item[available], minlength=self.n_buckets).astype(float)
        chosen: list[int] = []
        for step in range(k):
            if step == 0 and fantasy.extra_rows is None:  # nothing pending: the readout's Σ|C (g∘u) and Var(R)
                cov_su, scaled = self._logit_readout()[4:]
            else:
                cov_su = self._cov_times(post, kernel, slope * fantasy.remaining, fantasy.extra_rows)
                scaled = linearised_var_r(fantasy.remaining, slope, cov_su, noise_slope, post.noise, 1)
            ig = linearised_information_gain(cov_su, fantasy.diag, noise_slope, post.noise, scaled)
            ig[avail_per_bucket <= 0] = -np.inf
            item = pick_item(ig, available, self.buckets, rng)
            chosen.append(item)
            available[item] = False
            b_item = int(self.buckets.of_item[item])
            avail_per_bucket[b_item] -= 1.0
            if len(chosen) < k:
                fantasy.condition(b_item)
        return chosen

    # ------------------------------------------------------------ selection
    def information_gains(self) -> np.ndarray:
        """Eq. 6 for one unevaluated item of each bucket, shape (B,) (0 where none is left).

        With likelihood="logit": Eq. 6 through the linearisation (:func:`activeeval.logit.linearised_information_gain`).
        """
        if self.likelihood == "logit":
            post, _, _, noise_slope, cov_su, scaled = self._logit_readout()
            ig = linearised_information_gain(cov_su, post.diag, noise_slope, post.noise, scaled)
            ig[post.remaining <= 0] = 0.0
            return ig
        post = self._post
        ig = information_gain(post.cov_u, post.diag, self._counts, self.sigma2_, self._scaled_var())
        ig[post.remaining <= 0] = 0.0
        return ig

    def _scaled_var(self, remaining: np.ndarray | None = None, cov_u: np.ndarray | None = None) -> float:
        rem = self._post.remaining if remaining is None else remaining
        cu = self._post.cov_u if cov_u is None else cov_u
        return self.n_items**2 * var_r(rem, self._counts, cu, self.sigma2_, self.n_items)

    def _select(self, rng: np.random.Generator, k: int, exclude: Sequence[int]) -> Sequence[int] | np.ndarray:
        if not self.active:
            return self._random_unobserved(rng, k, exclude)
        if self.likelihood == "logit":
            return self._select_logit(rng, k, exclude)
        return self.selector.select(self._post, self.buckets, ~self._observed, exclude, k, rng, self._gain)

    def _gain(self, state) -> np.ndarray:
        """Eq. 6 per bucket for the posterior or its fantasy ``state``, with Var(R) of Eq. 2 (:func:`var_r`)."""
        scaled_var = self._scaled_var(state.remaining, state.cov_u)
        return information_gain(state.cov_u, state.diag, self._counts, self.sigma2_, scaled_var)

    # ------------------------------------------------------------- estimate
    def _estimators(self) -> tuple[float, float]:
        """(R̂ with w = 1/N, R̂ with w = 1/n) — Eq. 3 and Eq. 4 (with likelihood="logit", of E[θ_b | s_C])."""
        n_items = self.n_items
        post = self._post
        theta = post.mean if self.likelihood == "gaussian" else self._logit_readout()[1]
        bayes = (self._sum_obs + float(post.remaining @ theta)) / n_items
        n = self.n_observed
        if n == 0:
            return bayes, bayes
        cv = self._sum_obs / n + float((self._counts / n_items - post.n_obs / n) @ theta)
        return bayes, cv

    def _current_estimate(self) -> Estimate:
        bayes, cv = self._estimators()
        mean = bayes if self.estimator_ == "bayes" else cv
        if self.likelihood == "logit":
            var = self._logit_readout()[5] / (self.n_items * self.n_items)
        else:
            var = var_r(self._post.remaining, self._counts, self._post.cov_u, self.sigma2_, self.n_items)
        notes: tuple[str, ...] = ()
        if getattr(self, "refit_jumps", None):
            n, old_mean, new_mean, half = max(self.refit_jumps, key=lambda j: abs(j[2] - j[1]) / max(j[3], 1e-300))
            notes = (
                f"a hyperparameter refit at n = {n} moved the estimate from {old_mean:.4g} to {new_mean:.4g}, more "
                f"than its interval's half-width {half:.2g}: the fit is unstable and the interval may be too narrow "
                f"(the default method, bayesame, does not refit on the target)",
            )
        return Estimate(mean=mean, var=var, n_observed=self.n_observed, n_items=self.n_items, bounds=self._bounds(),
                        notes=notes)

    def posterior_mse(self) -> float:
        """App. A.3 diagnostic: Var(R | s_C) + (R̂_Bayes − R̂_CV)²."""
        bayes, cv = self._estimators()
        return self.estimate().var + (bayes - cv) ** 2


class BayesAMEPaperRS(BayesAMEPaper):
    """The paper's BayesAME-RS: its posterior and estimator with uniformly random items (paper §5.1)."""

    name = "bayesame-paper-rs"
    capabilities = Capabilities(batch=True)  # random items: not a ranker
    #: The method whose runs this one repeats where :meth:`repeats` says so: a backtest with both, the same
    #: options and the shared item order copies those runs instead of playing them twice.
    same_runs_as = "bayesame-paper"

    def __init__(self, reference: ScoreMatrix, **kwargs: object) -> None:
        if kwargs.get("selection", "random") != "random":
            raise ConfigurationError("BayesAME-RS selects items at random; do not pass selection=")
        kwargs["selection"] = "random"
        super().__init__(reference, **kwargs)  # type: ignore[arg-type]

    @staticmethod
    def repeats(reference: ScoreMatrix, **options: object) -> bool:
        """Whether the paper's BayesAME with ``options`` selects at random on ``reference`` (B < N − N0, paper
        §3.1): then, with the same seed, it plays the same items with the same model as this class (tested)."""
        return not BayesAMEPaper(reference, seed=0, **options).active  # type: ignore[arg-type]
