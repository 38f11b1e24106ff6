"""improve/records.py: the typed records write byte-for-byte the JSON a bundle holds.

The bundle under tests/fixtures/old_format/improve was written by the code before the
records were typed (3607b50); every record it holds is read into its model and written
back with the bundle's own encodings, and must come out as the same bytes.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from metaeval.protocols.improve.records import (
    BASELINE_EVAL,
    CANDIDATE_EVAL,
    FEEDBACK,
    LEDGER,
    SELECTION,
    TRIAL_RESULT,
    FeedbackPacket,
    LedgerEntry,
    NodeEval,
    SelectionDecision,
    trial_path,
)
from metaeval.records.jsonl import dumps_line

BUNDLE = Path(__file__).parent / "fixtures" / "old_format" / "improve" / "runs" / "improve-demo"
TRIALS = sorted(int(p.name) for p in (BUNDLE / "trials").iterdir())


def _document(model: BaseModel) -> bytes:
    """How BundleFiles.json writes a document: indented, sorted keys, trailing newline
    (fields added since the fixture was written, such as the target's usage, are left out
    as the old record has them: not at all)."""
    data = model.model_dump(exclude_unset=True)
    return (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()


def test_the_fixture_has_trials_of_every_outcome() -> None:
    decisions = {
        json.loads(line)["decision"] for line in (BUNDLE / LEDGER).read_text().splitlines()
    }
    assert len(TRIALS) >= 2 and {"promoted", "rejected"} <= decisions


def test_ledger_lines_round_trip_byte_for_byte() -> None:
    for line in (BUNDLE / LEDGER).read_bytes().splitlines(keepends=True):
        entry = LedgerEntry.model_validate_json(line)
        assert dumps_line(entry.model_dump(exclude_unset=True)) == line


@pytest.mark.parametrize("trial", TRIALS)
def test_trial_documents_round_trip_byte_for_byte(trial: int) -> None:
    folder = trial_path(BUNDLE, trial)
    for name, model in (
        (TRIAL_RESULT, LedgerEntry),
        (SELECTION, SelectionDecision),
        (FEEDBACK, FeedbackPacket),
        (CANDIDATE_EVAL, NodeEval),
    ):
        path = folder / name
        if not path.exists():  # an invalid candidate has no evaluation
            assert name == CANDIDATE_EVAL
            continue
        raw = path.read_bytes()
        assert _document(model.model_validate_json(raw)) == raw, path


def test_baseline_evaluation_round_trips_and_scores_read_by_name() -> None:
    raw = (BUNDLE / BASELINE_EVAL).read_bytes()
    node = NodeEval.model_validate_json(raw)
    assert _document(node) == raw
    data = json.loads(raw)
    assert node.optimize_score == data["optimize"]["score"]
    assert node.held_out_score == data["held_out"]["score"]


def test_an_integer_score_stays_an_integer() -> None:
    """JSON keeps 1 and 1.0 apart; a typed record must not turn one into the other."""
    entry = LedgerEntry(trial=1, parent_id="baseline", candidate_id="trial-001", optimize_score=1)
    assert b'"optimize_score":1,' in dumps_line(entry.model_dump())
    entry = LedgerEntry(trial=1, parent_id="baseline", candidate_id="trial-001", optimize_score=0.5)
    assert b'"optimize_score":0.5,' in dumps_line(entry.model_dump())


def test_a_record_missing_its_key_fields_is_refused() -> None:
    with pytest.raises(ValidationError, match="candidate_id"):
        LedgerEntry.model_validate({"trial": 1, "parent_id": "baseline"})
    with pytest.raises(ValidationError, match="status"):
        NodeEval.model_validate({"x": 1})


def test_improve_report_reads_the_ledger_through_its_model(tmp_path: Path) -> None:
    """A ledger line that lacks a field is refused naming the file, the line and the field;
    the bundle's reports are not rewritten from it."""
    from metaeval.errors import ConfigError
    from metaeval.protocols.improve.run import rerender

    bundle = tmp_path / "improve-demo"
    shutil.copytree(BUNDLE, bundle)
    assert rerender(bundle)  # the intact bundle re-renders
    lines = (bundle / LEDGER).read_text().splitlines()
    broken = json.loads(lines[1])
    del broken["candidate_id"]
    (bundle / LEDGER).write_text("\n".join([lines[0], json.dumps(broken), *lines[2:]]) + "\n")
    report = (bundle / "report.md").read_bytes()
    with pytest.raises(ConfigError, match="line 2: required field is missing") as error:
        rerender(bundle)
    assert error.value.field == "candidate_id"
    assert error.value.file == str(bundle / LEDGER)
    assert (bundle / "report.md").read_bytes() == report


def test_trial_views_read_the_selection_and_evaluation_through_their_models(
    tmp_path: Path,
) -> None:
    """The report's trial views read the decision through `SelectionDecision`: the fixture's
    trial 1 shows its gate in words and its parent's scores; a decision file without its
    `parent` is named in the evidence (field and file) instead of being half-read."""
    from metaeval.protocols.improve.report import trial_views

    bundle = tmp_path / "improve-demo"
    shutil.copytree(BUNDLE, bundle)
    baseline = NodeEval.model_validate_json((bundle / BASELINE_EVAL).read_bytes())
    lines = (bundle / LEDGER).read_text().splitlines()
    first = json.loads(lines[0])
    view = trial_views(bundle, [first], baseline)[0]
    # the fixture's gate: optimize 0.2 over the parent's 0.0, held-out 0.0 vs 0.0 passes
    assert view["reason"] == (
        "promoted: optimize 0.200 is above the parent's 0.000; held-out gate "
        "'must not regress' passed (candidate 0.000, parent 0.000)"
    )
    assert [row["parent"] for row in view["suites"]] == ["0.000", "0.000"]
    assert not any("not read" in line for line in view["evidence"])
    # typed entries and raw ledger lines give the same view
    assert trial_views(bundle, [LedgerEntry.model_validate(first)], baseline) == [view]

    selection = trial_path(bundle, 1) / SELECTION
    data = json.loads(selection.read_text())
    del data["parent"]
    selection.write_text(json.dumps(data))
    broken = trial_views(bundle, [first], baseline)[0]
    assert "trials/001/selection_decision.json not read: field 'parent'" in broken["evidence"][0]
    assert [row["parent"] for row in broken["suites"]] == ["n/a", "n/a"]


def test_fields_the_harness_writes_only_when_set_stay_out_of_the_json() -> None:
    """A baseline parent has no `trial`, a gate without the noise rule no `noise_margin`, a
    record without a merge no second parent, a task row without kept logs no log paths,
    a proposal reason no `path` (a boundary reason keeps its given null); with them set,
    each is written, and every record reads back to the same JSON."""
    from metaeval.protocols.improve.patch_verdict import Reason
    from metaeval.protocols.improve.records import (
        CandidateRef,
        Gate,
        OptimizeGate,
        ParentRef,
        SuiteSummary,
        TaskRow,
    )

    plain = SelectionDecision(
        trial=1,
        parent=ParentRef(id="baseline", commit="c0", optimize_score=0.5),
        candidate=CandidateRef(id="trial-001"),
        reasons=[
            Reason(code="meta_agent_error", detail="no output"),
            Reason(code="outside_boundary", path=None, detail="a file outside"),
        ],
        gate=Gate(optimize=OptimizeGate(parent=0.5, candidate=0.6), decision="promoted"),
    ).model_dump()
    assert "trial" not in plain["parent"] and "second_parent" not in plain
    assert "noise_margin" not in plain["gate"]["optimize"]
    assert plain["reasons"] == [
        {"code": "meta_agent_error", "detail": "no output"},
        {"code": "outside_boundary", "path": None, "detail": "a file outside"},
    ]
    merged = SelectionDecision(
        trial=3,
        parent=ParentRef(id="trial-001", commit="c1", trial=1),
        candidate=CandidateRef(id="trial-003"),
        gate=Gate(optimize=OptimizeGate(noise_margin=0.25), decision="rejected"),
        second_parent=ParentRef(id="trial-002", commit="c2", trial=2),
    ).model_dump()
    assert merged["parent"]["trial"] == 1 and merged["second_parent"]["trial"] == 2
    assert merged["gate"]["optimize"]["noise_margin"] == 0.25
    for data in (plain, merged):
        assert SelectionDecision.model_validate(data).model_dump() == data
    entry = LedgerEntry(trial=1, parent_id="baseline", candidate_id="trial-001")
    assert "second_parent_id" not in entry.model_dump()
    entry.second_parent_id = "trial-002"
    assert entry.model_dump()["second_parent_id"] == "trial-002"
    suite = SuiteSummary(tasks=[TaskRow(task_id="a", status="failed")])
    assert "test_log" not in suite.model_dump()["tasks"][0]
    suite.tasks[0].test_log, suite.tasks[0].test_log_bytes = "logs/a.test.log", 12
    row = suite.model_dump()["tasks"][0]
    assert (row["test_log"], row["test_log_bytes"]) == ("logs/a.test.log", 12)
    assert "trace" not in row
