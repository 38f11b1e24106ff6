"""The audit's typed records write byte-for-byte what the code before them wrote.

The reference is the old-format fixture (tests/fixtures/old_format/audit: a run written by an
older metaeval, never regenerated): every line of it reads into its model and dumps back to
the same bytes, and a run of the same benchmark by today's writers records the same keys and
the same values (but ids, times and the hashes of logs that hold timings)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from metaeval.engine.cells import Cell, CellResult
from metaeval.models.scripted import ScriptedModel
from metaeval.protocols.audit.records import (
    AgentRunRecord,
    FailedCell,
    FindingRecord,
    ModelCell,
    StaticCell,
    parse_cell,
)
from metaeval.protocols.audit.run import AuditRun, write_cell
from metaeval.protocols.audit.settings import AuditSettings
from metaeval.protocols.audit.summary import final_cells, summarize_run
from metaeval.records import RunDir
from metaeval.records.jsonl import iter_jsonl

OLD = Path(__file__).parent / "fixtures" / "old_format" / "audit"


def _line(record: dict[str, Any]) -> str:
    """A record as `RunDir` writes it (the JSON-lines writer's own settings)."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_old_record_reads_into_its_model_and_dumps_to_the_same_bytes() -> None:
    cells = _lines(OLD / "run" / "audits.jsonl")
    kinds = [type(parse_cell(json.loads(line))) for line in cells]
    assert kinds == [StaticCell, ModelCell, StaticCell, ModelCell]
    for line in cells:
        assert _line(parse_cell(json.loads(line)).as_record()) == line
    findings = _lines(OLD / "run" / "findings.jsonl")
    assert len(findings) == 2
    for line in findings:
        assert _line(FindingRecord.model_validate_json(line).as_record()) == line


def test_an_old_record_without_newer_fields_reads_with_defaults() -> None:
    static, model = (json.loads(line) for line in _lines(OLD / "run" / "audits.jsonl")[:2])
    for key in ("cuts", "skipped_files", "config_error", "execution"):
        del static[key]
    for key in ("cuts", "notes", "dropped", "prompt_tokens", "model_calls_blob"):
        del model[key]
    old_static = parse_cell(static)
    assert isinstance(old_static, StaticCell)
    assert old_static.cuts == [] and old_static.execution is None and old_static.is_final
    old_model = parse_cell(model)
    assert isinstance(old_model, ModelCell)
    assert old_model.notes == [] and old_model.prompt_tokens is None
    assert old_model.input_tokens == 3318


def test_a_renamed_field_is_refused_where_it_is_read() -> None:
    record = json.loads(_lines(OLD / "run" / "audits.jsonl")[1])
    record["n_finding"] = record.pop("n_findings")
    with pytest.raises(ValueError, match="n_finding"):
        ModelCell.model_validate(record)


UNSTABLE = {"attempt", "created_at"}


def _stable(value: Any) -> Any:
    """`value` without ids, times, and the logs (and their hashes) whose text holds timings."""
    if isinstance(value, dict) and str(value.get("file", "")).startswith("logs/"):
        return {**value, "snippet": "<log>"}
    if isinstance(value, dict):
        return {
            k: ("<blob>" if k.endswith("_blob") and v else _stable(v))
            for k, v in value.items()
            if k not in UNSTABLE
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


ISSUE_37_EXECUTION = ("outputs_removed", "removed_files")
ISSUE_37_PHASE = ("tests_source", "tests_passed", "tests_failed", "tests_note")


def _without_issue_37_execution(new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """`new` without what the execution checks record since issue 37 (the rerun without the
    oracle's outputs, the per-test outcomes of each phase) when the old record lacks it."""
    execution = new.get("execution")
    if not isinstance(execution, dict) or "outputs_removed" in (old.get("execution") or {}):
        return new
    trimmed = {k: v for k, v in execution.items() if k not in ISSUE_37_EXECUTION}
    for name in ("oracle", "null_agent"):
        if isinstance(trimmed.get(name), dict):
            trimmed[name] = {k: v for k, v in trimmed[name].items() if k not in ISSUE_37_PHASE}
    return {**new, "execution": trimmed}


def test_todays_writers_record_what_the_old_run_recorded(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    shutil.copytree(OLD / "bench", bench)
    # the old run's model answered nothing; a scripted model under its name does the same
    model = ScriptedModel(lambda request: "[]", name="local/smollm2")
    settings = AuditSettings(bench_dir=bench, run_dir=tmp_path / "run", models=["local/smollm2"])
    AuditRun(settings, models={"local/smollm2": model}).run()
    old_cells = {(r["task_id"], r["source"]): r for r in iter_jsonl(OLD / "run" / "audits.jsonl")}
    new_cells = {
        (r["task_id"], r["source"]): r for r in iter_jsonl(tmp_path / "run" / "audits.jsonl")
    }
    assert sorted(new_cells) == sorted(old_cells) and len(new_cells) == 4
    for key, old in old_cells.items():
        new = new_cells[key]
        assert list(new) == list(old), key  # the same keys, in the same (sorted) order
        if key[1] == "static":
            # added since (issue 43): the image id a trial ran, so a moved tag shows
            execution = new.get("execution")
            if isinstance(execution, dict) and "image_id" not in (old.get("execution") or {}):
                new = {**new, "execution": {k: v for k, v in execution.items() if k != "image_id"}}
            new = _without_issue_37_execution(new, old)
            assert _stable(new) == _stable(old), key
        else:  # the scripted model's usage and prompt notes differ; the rest does not
            for name in ("status", "audit_failure", "error", "protocol", "attempts", "n_findings"):
                assert new[name] == old[name], (key, name)
            assert sorted(new["usage"]) == sorted(old["usage"])
    old_findings = list(iter_jsonl(OLD / "run" / "findings.jsonl"))
    new_findings = list(iter_jsonl(tmp_path / "run" / "findings.jsonl"))
    # fields added since (issue 37: the claim a static finding makes and why its tier) are
    # the only difference
    added = {"claim", "tier_reason"}
    assert all(set(n) - set(o) <= added for n, o in zip(new_findings, old_findings, strict=True))
    assert [_stable({k: v for k, v in f.items() if k not in added}) for f in new_findings] == [
        _stable(f) for f in old_findings
    ]
    for finding in new_findings:
        assert finding["attempt"] == new_cells[(finding["task_id"], "static")]["attempt"]


def _result(kind: str, error: str) -> CellResult:
    return CellResult(cell=Cell(key=("t1", "local/m"), fn=lambda: None), kind=kind, error=error)


def test_failed_cells_are_written_as_before() -> None:
    [[(name, final)]] = write_cell(_result("final", "ValueError: bad toml"))
    assert name == "audits"
    assert len(final.pop("attempt")) == 12
    assert final == {  # the dict the writer spelled out before the models
        "task_id": "t1",
        "source": "local/m",
        "status": "error",
        "infra_error": False,
        "audit_failure": True,
        "error": "deterministic failure, not retried: ValueError: bad toml",
    }
    [[(_, infra)]] = write_cell(_result("transient", "x" * 5000))
    assert infra == {
        "task_id": "t1",
        "source": "local/m",
        "status": "error",
        "infra_error": True,
        "error": "x" * 4000,
    }
    assert isinstance(parse_cell(infra), FailedCell) and not parse_cell(infra).is_final
    assert parse_cell(final).is_final


def test_an_agent_run_failure_record_keeps_only_its_fields() -> None:
    record = AgentRunRecord(
        task_id="t1",
        agent="codex:replay/x",
        status="error",
        classification="infra_error",
        infra_error=True,
        error="gateway down",
    ).as_record()
    assert record == {
        "task_id": "t1",
        "agent": "codex:replay/x",
        "status": "error",
        "classification": "infra_error",
        "infra_error": True,
        "error": "gateway down",
    }


def test_the_old_run_summarizes_through_the_models_as_it_did(tmp_path: Path) -> None:
    """summary.json of the old run, written by the old code, against today's readers."""
    shutil.copytree(OLD / "run", tmp_path / "run")
    old = json.loads((tmp_path / "run" / "summary.json").read_text())
    run = RunDir.open_existing(tmp_path / "run", "audit")
    try:
        summary = summarize_run(run)
        cells = final_cells(run)
    finally:
        run.close()
    for key, value in old.items():
        if key not in ("ran", "skipped_completed"):  # added by `audit run`, not the summary
            assert summary[key] == value, key
    assert summary["findings_by_evidence"] == {"executed": 1, "self-contained": 1}
    static = cells[("row-count", "static")]
    assert isinstance(static, StaticCell) and static.execution is not None
    assert static.execution.oracle is not None and static.execution.oracle.passed is False
