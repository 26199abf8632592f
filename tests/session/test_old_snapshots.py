"""Snapshots written by an earlier activeeval still read back, into exactly the state a replay gives.

A snapshot stores the classes of the objects it holds by qualified name (``module:qualname``, the modules of
:data:`activeeval.session.journal.snapshot.ALLOWED_MODULES`), so moving a class breaks every snapshot that
holds it. The files in fixtures/old_snapshots/ were written by main before session/ was split into rooms
(fixtures/make_old_snapshots.py, run once with that code); the session kinds and the ranking's per-model
method table (``activeeval.session.ranking:_Methods``) must stay where those files say they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from activeeval.data.matrix import ScoreMatrix
from activeeval.session.journal import snapshot as snap
from activeeval.session.multi import MultiSession
from activeeval.session.ranking import RankSession
from activeeval.session.session import Session

OLD = Path(__file__).resolve().parent / "fixtures" / "old_snapshots"


def build_reference() -> tuple[ScoreMatrix, dict[str, float]]:
    """A small continuous reference (30 models x 40 items) and one more model's scores, all from a fixed seed."""
    rng = np.random.default_rng(11)
    ability, difficulty = rng.normal(size=(31, 1)), rng.normal(size=(1, 40))
    scores = np.round(1 / (1 + np.exp(-(ability - difficulty + 0.3 * rng.normal(size=(31, 40))))), 4)
    m = ScoreMatrix(scores, [f"m{j}" for j in range(31)], [f"q{i:02d}" for i in range(40)], name="synth")
    return m.drop_models(["m0"]), dict(zip(m.item_ids, map(float, m.scores[0])))


def record(kind: str, s: Any, target: dict[str, float]) -> None:
    """The journal both the old code (writing the fixtures) and this test write: asks and tells, in order."""
    if kind == "single":
        for _ in range(8):
            (a,) = s.ask(1)
            s.tell(a.item_id, target[a.item_id])
    elif kind == "multi":
        for _ in range(5):
            for p in s.ask(2):
                s.tell(p.target, p.item_id, round(target[p.item_id] * (0.9 if p.target == "b" else 1.0), 4))
    else:
        for _ in range(9):
            a = s.ask()
            s.tell(a.model, a.item_id, round(min(1.0, target[a.item_id] + 0.05 * int(a.model[1:])), 4))


def _create(kind: str, tmp: Path, ref: ScoreMatrix) -> Any:
    if kind == "single":
        return Session.create(tmp / "single.aeval", ref, method="bayesame", seed=4, cache=False)
    if kind == "multi":
        return MultiSession.create(tmp / "multi.aeval", ref, targets=["a", "b"], seed=5, cache=False)
    return RankSession.create(tmp / "rank.aeval", ref, ["x1", "x2", "x3"], seed=3, cache=False)


def _behaviour(kind: str, s: Any) -> Any:
    """What a session does next from its state: its estimates, then the next items it asks for."""
    if kind == "single":
        return s.estimate().to_dict(), [a.item_id for a in s.ask(3)]
    if kind == "multi":
        return {t: e.to_dict() for t, e in s.estimates().items()}, [tuple(p) for p in s.ask(3)]
    return s.status().to_dict(), s.lookahead(4)


@pytest.mark.parametrize("kind", ["single", "multi", "rank"])
def test_a_snapshot_written_before_the_rooms_decodes_to_the_replayed_state(tmp_path, kind) -> None:
    graph = json.loads((OLD / f"{kind}.json").read_text())
    with np.load(OLD / f"{kind}.npz", allow_pickle=False) as z:
        arrays = tuple(z[f"arr_{i}"] for i in range(len(z.files)))
    ref, target = build_reference()
    (tmp_path / "replayed").mkdir()
    (tmp_path / "loaded").mkdir()
    with _create(kind, tmp_path / "replayed", ref) as replayed, _create(kind, tmp_path / "loaded", ref) as loaded:
        record(kind, replayed, target)
        record(kind, loaded, target)
        externals = loaded._externals()
        old = snap.decode_state(graph, arrays, externals)  # raises if a stored class path no longer resolves
        assert type(old) is type(replayed._state)
        # the same objects and values as the state replayed today (arrays aside: a method's scratch buffers,
        # np.empty rows not yet written, hold whatever memory held)
        assert snap.encode_state(old, externals)[0] == snap.encode_state(replayed._state, externals)[0] == graph
        loaded._state = old
        assert _behaviour(kind, loaded) == _behaviour(kind, replayed)
    if kind == "rank":  # the ranking's method table is stored under its module path: it must stay importable there
        assert '"activeeval.session.ranking:_Methods"' in (OLD / "rank.json").read_text()
