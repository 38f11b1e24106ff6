"""The scored headline leaves reference finders out; the summary pairs each label with its value."""

from __future__ import annotations

import re

import polars as pl
import pytest

from metaeval.protocols.buildfind.report.headline import headline, reference_finders
from metaeval.protocols.buildfind.report.pages import render_html, summary_items


def run_accuracy() -> pl.DataFrame:
    rows = [
        # finder, slice, compile_pass, accuracy
        ("ref", "formal", True, 1.0),
        ("ref", "formal", True, 1.0),
        ("ref", "question_only", None, 1.0),
        ("model", "formal", True, 0.5),
        ("model", "formal", True, 0.75),
        ("model", "formal", False, 0.0),  # compile-failed artifact: not in formal recovery
        ("model", "formal", True, None),  # empty scoring set: counted nowhere
        ("model", "question_only", None, 0.25),
    ]
    return pl.DataFrame(
        rows, schema=["finder", "slice", "compile_pass", "accuracy"], orient="row"
    ).with_columns(pl.col("accuracy").cast(pl.Float64))


def test_reference_finders_are_left_out_of_the_headline():
    config = {
        "finders": [
            {"name": "ref", "agent": "reference-finder"},
            {"name": "model", "agent": "claude-code"},
        ]
    }
    assert reference_finders(config) == ["ref"]
    calibration = pl.DataFrame(
        {"slice": ["compile_pass"], "task": ["all"], "accuracy": [0.8125]}
    )  # all finders pooled: (1 + 1 + .5 + .75) / 4
    tables = {"run_accuracy": run_accuracy(), "calibration": calibration}
    # only the scored finder: formal (.5 + .75) / 2, question-only .25, no spec-only runs
    assert headline(tables, ["ref"]) == {
        "formal_recovery": pytest.approx(0.625),
        "question_only_accuracy": pytest.approx(0.25),
        "spec_only_accuracy": None,
    }
    assert headline(tables)["formal_recovery"] == pytest.approx(0.8125)  # nothing left out


def test_summary_labels_sit_beside_their_values_in_a_grid():
    meta = {"run_id": "r", "pack": "p", "builders": ["b1", "b2"], "finders": [], "rows": 12}
    page = render_html({}, meta)
    block = re.search(r'<dl class="summary">(.*?)</dl>', page, re.S).group(1)
    pairs = re.findall(r"<dt>(.*?)</dt><dd>(.*?)</dd>", block)
    assert pairs == [(label, text) for label, text in summary_items(meta)]
    assert "display: grid" in page and "dl.summary dt { float: none" in page
