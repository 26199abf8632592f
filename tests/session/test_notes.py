"""Users see when to doubt: the estimate's notes reach the session status, its JSON, the CLI and the report."""

from __future__ import annotations

import json

import numpy as np
from typer.testing import CliRunner

from activeeval import ScoreMatrix, write_scores
from activeeval.cli import app
from activeeval.session import Session
from activeeval.session.report import render_report


def test_a_target_outside_the_references_is_flagged_everywhere(tmp_path) -> None:
    rng = np.random.default_rng(0)
    ref = ScoreMatrix((rng.random((12, 300)) < 0.3).astype(float), item_ids=[f"q{i}" for i in range(300)],
                      model_ids=[f"m{j}" for j in range(12)], kind="binary", name="weak")
    ref_file = tmp_path / "weak.csv"
    write_scores(ref, ref_file)
    truth = dict(zip(ref.item_ids, (rng.random(300) < 0.9).astype(float)))  # the target: ~0.9, refs ~0.3
    path = tmp_path / "s.aeval"
    with Session.create(path, ref_file, seed=0) as s:
        for _ in range(40):
            (a,) = s.ask(1)
            s.tell(a.item_id, truth[a.item_id])
        st = s.status()
        assert st.estimate.notes and st.estimate.notes[0].startswith("design-based: the target looks to be outside")
        assert st.to_dict()["notes"] == list(st.estimate.notes)
        page = render_report(s)
    assert '<p class="note">Note: design-based: the target looks to be outside' in page
    out = CliRunner().invoke(app, ["session", "status", str(path)])
    assert out.exit_code == 0, out.output
    assert "note: design-based: the target looks to be outside the references' score range" in out.stdout
    as_json = CliRunner().invoke(app, ["session", "status", str(path), "--json"])
    assert json.loads(as_json.stdout)["notes"][0].startswith("design-based")


def test_no_note_for_a_target_the_references_describe(tmp_path) -> None:
    rng = np.random.default_rng(1)
    ability = rng.normal(size=(21, 1))
    difficulty = rng.normal(size=(1, 200))
    scores = (rng.random((21, 200)) < 1 / (1 + np.exp(-(ability - difficulty)))).astype(float)
    ref = ScoreMatrix(scores[1:], kind="binary", name="ok")
    truth = scores[0]
    with Session.create(tmp_path / "t.aeval", ref, seed=0) as s:
        for _ in range(20):
            (a,) = s.ask(1)
            s.tell(a.item_id, float(truth[a.index]))
        assert s.status().estimate.notes == ()
