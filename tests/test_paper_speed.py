"""The paper's method made cheaper without changing a number (issue 26, item 4): each shortcut against the way
it was computed before, bit for bit.

* :class:`~activeeval.gaussian.BucketNLML` exponentiates only the lower triangle (row blocks), or once per distinct
  integer distance (binary scores), into work arrays it keeps between calls; :func:`whole_matrix_nlml` below is the
  former code, which exponentiated and formed every m × m array anew at every call.
* :class:`~activeeval.methods.bayesame_paper.BayesAMEPaper` keeps Σ at the current (α, β) (from a table of the
  distinct integer distances, binary scores) and reads the prior's columns, a rebuild's rows and Σ N from it; with
  ``cache_mb`` too small for the table, or for Σ (the distances still cached), it computes them as before, so the
  runs must agree to the last bit.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import lapack
from test_bayesame_maths import binary_reference  # the paper's maths tests' binary reference

from activeeval import ScoreMatrix
from activeeval.experiments.simulate import run_fixed
from activeeval.gaussian import BucketNLML, sq_dists
from activeeval.methods.bayesame_paper import BayesAMEPaper


def whole_matrix_nlml(d2: np.ndarray, resid: np.ndarray, scale: np.ndarray, n_refs: int,
                      params: np.ndarray) -> tuple[float, np.ndarray]:
    """BucketNLML's value and gradient as computed before: the whole m × m matrices, made anew at every call."""
    alpha, beta, sigma2 = (float(p) for p in params)
    m, r = resid.size, resid
    if m == 0:
        return 0.0, np.zeros(3)
    scaled = np.tril(d2 / n_refs, -1)
    e = np.exp(scaled * -beta)
    gram = e * alpha
    noise = sigma2 * scale
    gram.flat[:: m + 1] = alpha + noise
    factor, info = lapack.dpotrf(gram, lower=1, clean=0, overwrite_a=1)
    if info != 0:
        return np.inf, np.zeros(3)
    a, _ = lapack.dpotrs(factor, r, lower=1)
    value = 0.5 * float(r @ a) + float(np.log(np.diagonal(factor)).sum()) + 0.5 * m * np.log(2 * np.pi)
    inv, _ = lapack.dpotri(factor, lower=1, overwrite_c=1)
    inv_diag = np.diagonal(inv).copy()
    tr_e = (m - float(noise @ inv_diag)) / alpha
    a_e_a = (float(a @ r) - float(noise @ (a * a))) / alpha
    es = e
    es *= scaled
    tr_es = 2.0 * float(np.dot(inv.ravel(), es.ravel()))
    a_es_a = 2.0 * float(a @ (es @ a))
    return value, np.array([0.5 * (tr_e - a_e_a), -0.5 * alpha * (tr_es - a_es_a),
                            0.5 * (float(scale @ inv_diag) - float(scale @ (a * a)))])


@pytest.mark.parametrize("m", [0, 1, 2, 3, BucketNLML.ROWS - 1, BucketNLML.ROWS, BucketNLML.ROWS + 1,
                               2 * BucketNLML.ROWS + 5, 300])
def test_the_nlml_is_the_whole_matrix_formula_bit_for_bit(m: int) -> None:
    rng = np.random.default_rng(m)
    n_refs = 37
    binary = m % 2 == 0
    phi = (rng.random((m, n_refs)) < 0.4).astype(float) if binary else rng.random((m, n_refs))
    d2 = sq_dists(phi, phi)
    resid = rng.standard_normal(m)
    scale = rng.integers(1, 6, m) / rng.integers(1, 3, m)
    nlml = BucketNLML(d2, resid, scale, n_refs)
    # binary scores: integer distances, exponentiated once per value (a table); continuous: entry by entry
    if m >= 50:  # (fewer entries than distinct distances: entry by entry)
        assert (nlml._table is not None) == binary
    # many points on one object: the work arrays it keeps between calls must not carry anything over
    points = [np.exp(rng.uniform(-5, 5, 3)) for _ in range(12)] + [np.array([1.0, 1e-5, 1e-12])]
    failures = 0
    for params in points:
        value, grad = nlml(params)
        want_value, want_grad = whole_matrix_nlml(d2, resid, scale, n_refs, params)
        failures += not np.isfinite(want_value)
        assert np.array([value]).tobytes() == np.array([want_value]).tobytes()
        assert grad.tobytes() == want_grad.tobytes()  # also the sign of every zero
    assert nlml.failures == failures


def continuous_reference(n_models: int, n_items: int, seed: int) -> ScoreMatrix:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n_models, 1)) - rng.normal(size=(1, n_items)) + 0.5 * rng.normal(size=(n_models, n_items))
    return ScoreMatrix(1 / (1 + np.exp(-z)), kind="continuous", score_range=(0.0, 1.0))


def _run(ref: ScoreMatrix, truth: np.ndarray, cache_mb: float | None, batch: int, **options: object
         ) -> BayesAMEPaper:
    method = BayesAMEPaper(ref, seed=3, **({} if cache_mb is None else {"cache_mb": cache_mb}), **options)
    if batch == 1:
        run_fixed(method, truth, method.n_items)
    else:
        while method.n_observed < method.n_items:
            for item in method.select_batch(min(batch, method.n_items - method.n_observed)):
                method.observe(item, float(truth[item]))
    return method


@pytest.mark.parametrize(("case", "options", "batch"), [
    ("binary, active, refits", {"refit_every": 9, "selection": "active"}, 1),
    ("binary, active, refits with σ² learned", {"refit_every": 9, "noise": "learned", "selection": "active"}, 1),
    ("binary, active batches of 4 (columns in blocks)", {"refit_every": 9, "selection": "active"}, 4),
    ("binary, random items (the non-unique regime)", {"refit_every": 9}, 1),
    ("continuous, logit-normal", {"refit_every": 9, "likelihood": "logit", "selection": "active"}, 1),
])
def test_keeping_the_kernel_matrix_changes_no_number(case: str, options: dict, batch: int) -> None:
    continuous = options.get("likelihood") == "logit"
    ref = continuous_reference(9, 70, 1) if continuous else binary_reference(9, 70, 1)
    truth = ref.scores.mean(0) if continuous else ref.scores[0]
    kept = _run(ref, truth, None, batch, **options)
    n_b = kept.n_buckets
    matrix_mb = n_b * n_b * 8 / 2**20
    assert kept._kernel_matrix() is not None, case
    # binary scores: integer distances, the kernel matrix read off a table of K + 1 values
    assert (kept._d2_levels is not None) == (not continuous), case
    # the kernel matrix kept, but no room for the table's index: exponentiated entry by entry
    untabled = _run(ref, truth, 2.5 * matrix_mb, batch, **options)
    assert untabled._kernel_matrix() is not None and untabled._d2_levels is None, case
    # the distances still cached (B² · 8 bytes fit), the kernel matrix beside them not: the former code's path
    former = _run(ref, truth, 1.5 * matrix_mb, batch, **options)
    assert former._d2_full is not None and former._kernel_matrix() is None, case
    for other in (untabled, former):
        assert len(kept.refits) > 3 and [r.alpha for r in kept.refits] == [r.alpha for r in other.refits], case
        assert (kept.alpha_, kept.beta_, kept.sigma2_) == (other.alpha_, other.beta_, other.sigma2_)
        assert kept.observed_items == other.observed_items
        for field in ("mean", "var"):
            assert (np.array([getattr(e, field) for e in kept.trajectory]).tobytes()
                    == np.array([getattr(e, field) for e in other.trajectory]).tobytes()), (case, field)
    # the kept matrix is the kernel of the distances at the final (α, β), not a stale one
    assert kept._kernel_matrix().tobytes() == kept.kernel(kept._d2_full).tobytes()


@pytest.mark.parametrize("likelihood", ["gaussian", "logit"])
def test_a_refit_evaluates_the_nlml_once_per_point_the_optimiser_asks_for(monkeypatch, likelihood: str) -> None:
    """The start point, asked for again after L-BFGS-B to check that the fit did not get worse, is not evaluated
    twice (Eq. 11 costs a Cholesky factorisation and an inverse): evaluations = the optimiser's own count."""
    import activeeval.methods.bayesame_paper as paper

    evaluations, asked = [0], [0]
    call = BucketNLML.__call__

    def counting(self: BucketNLML, params: np.ndarray) -> tuple[float, np.ndarray]:
        evaluations[0] += 1
        return call(self, params)

    def minimize(*args: object, **kwargs: object):
        result = paper_minimize(*args, **kwargs)
        asked[0] += int(result.nfev)
        return result

    paper_minimize = paper.minimize
    monkeypatch.setattr(BucketNLML, "__call__", counting)
    monkeypatch.setattr(paper, "minimize", minimize)
    ref = binary_reference(9, 70, 2)
    method = BayesAMEPaper(ref, seed=0, refit_every=10, selection="active", likelihood=likelihood)
    run_fixed(method, ref.scores[1], 40)
    n_refits = len(method.refits) + len(getattr(method, "refits_f", []))
    assert n_refits >= 3 + 3 * (likelihood == "logit")
    assert evaluations[0] == asked[0] > 0
