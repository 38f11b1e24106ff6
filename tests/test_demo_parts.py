"""The demo's build-and-find part: no finder is scored against labels it made. The review
rows of the reference builders' artifacts are labelled from the pack's expected answers, so
the run ends without the self-labelling warning and with no row waiting for a person; the
model finder's own step cap binds only it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from metaeval.demo.labels import expected_label, label_from_expected_answers
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.finalize import finalize_run, run_and_finalize
from metaeval.protocols.buildfind.rows.table import read_rows
from metaeval.protocols.buildfind.run import open_existing

ROOT = Path(__file__).resolve().parents[1]


def test_expected_label() -> None:
    assert expected_label("C", "C") == "implemented_gold"
    assert expected_label("A", "C") == "implemented_non_gold"
    assert expected_label(None, "C") == "absent_ambiguous"


@pytest.mark.bwrap
def test_demo_buildfind_labels_come_from_no_finder(tmp_path: Path) -> None:
    config = load_config(ROOT / "examples" / "buildfind-local.yaml")
    assert config.base_finders == []
    model_finder = next(f for f in config.finders if f.model is not None)
    assert model_finder.max_steps == 3
    # Stand-in for the slow model: another reference finder, capped at 2 steps, too few for
    # it to read the artifact, so it stops on its cap while ref-finder does not.
    model_finder.agent, model_finder.model, model_finder.max_steps = "reference-finder", None, 2
    run_dir = tmp_path / "run"
    _, summary = run_and_finalize(config, run_dir)
    assert summary["unlabeled_review_rows"] == 30  # 2 builders x 15 questions, nobody labelled
    assert label_from_expected_answers(run_dir, config) == 30
    run = open_existing(run_dir)
    try:
        summary = finalize_run(run)
    finally:
        run.close()
    assert summary["self_labelled_finders"] == [] and summary["unlabeled_review_rows"] == 0
    rows = read_rows(run_dir / "question_rows.parquet")
    formal = rows.filter(pl.col("slice") == "formal")
    assert set(formal.get_column("label_source").unique()) == {"manual_review"}
    pairs = formal.unique(["builder", "question_id"])
    counts = dict(pairs.group_by("label").len().rows())
    # documented implements all 15; divergent answers q08 and q09 otherwise (A, gold C and D)
    # and leaves q12 and q13 out (kvstore-wal's README table)
    assert counts == {"implemented_gold": 26, "implemented_non_gold": 2, "absent_ambiguous": 2}
    divergent = dict(
        pairs.filter(pl.col("builder") == "divergent").select("question_id", "label").rows()
    )
    assert divergent["q08"] == divergent["q09"] == "implemented_non_gold"
    assert divergent["q12"] == divergent["q13"] == "absent_ambiguous"
    finds = [json.loads(x) for x in (run_dir / "finds.jsonl").read_text().splitlines()]
    ref = [f for f in finds if f["finder"] == "ref-finder"]
    capped = [f for f in finds if f["finder"] == "smollm2" and f["slice"] == "formal"]
    assert ref and all(f["status"] == "ok" for f in ref)
    assert capped and all(f["steps"] <= 2 and f["status"] != "ok" for f in capped)
    calibration = pl.read_csv(run_dir / "tables" / "finder_calibration.csv")
    assert not any(calibration.get_column("labels_from_self").to_list())
