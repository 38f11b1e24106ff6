"""The demo's build-and-find labels: every review row of an artifact a reference builder
wrote is labelled from the pack's `expected_answers.yaml`, which was written by reading that
reference code, so no finder of the run is scored against labels its own answers made."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from metaeval.protocols.buildfind.agents import REFERENCE_PREFIX
from metaeval.protocols.buildfind.config import RunConfig
from metaeval.protocols.buildfind.finalize import LABELS_DIR, REVIEW_CSV
from metaeval.protocols.buildfind.pack.load import load_pack
from metaeval.protocols.buildfind.pack.reference_builders import load_expected_answers
from metaeval.protocols.buildfind.review_csv import read_review_csv, write_review_csv

REVIEWER = "expected_answers.yaml"


def expected_label(expected: str | None, gold: str) -> str:
    """The implementation label of a pair whose artifact supports `expected` (None: none)."""
    if expected is None:
        return "absent_ambiguous"
    return "implemented_gold" if expected == gold else "implemented_non_gold"


def label_from_expected_answers(run_dir: Path, config: RunConfig) -> int:
    """Fill the empty labels of RUN/labels/review.csv whose builder is a reference builder;
    returns how many were filled. Rows of other builders stay for a person."""
    review = run_dir / LABELS_DIR / REVIEW_CSV
    rows = read_review_csv(review)
    pack = load_pack(config.pack)
    reference = {
        b.name: b.agent.removeprefix(REFERENCE_PREFIX)
        for b in config.builders
        if b.agent.startswith(REFERENCE_PREFIX)
    }
    expected = {task_id: load_expected_answers(pack.task(task_id)) for task_id in pack.tasks}
    labels, reviewers = [], []
    for row in rows.iter_rows(named=True):
        ref = reference.get(row["builder"])
        if row["label"] or ref is None:
            labels.append(row["label"])
            reviewers.append(row["reviewer"])
            continue
        answer = expected[row["task"]][ref][row["question_id"]]
        labels.append(expected_label(answer, row["gold"]))
        reviewers.append(REVIEWER)
    filled = sum(1 for a, b in zip(rows.get_column("label"), labels, strict=True) if a != b)
    rows = rows.with_columns(
        pl.Series("label", labels, dtype=pl.Utf8), pl.Series("reviewer", reviewers, dtype=pl.Utf8)
    )
    write_review_csv(rows, review, run_dir)
    return filled
