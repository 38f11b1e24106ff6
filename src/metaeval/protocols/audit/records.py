"""Every record kind an audit run writes, and the files they go to.

An audit run directory (`RunDir`, protocol ``audit``) holds:

* ``audits.jsonl`` -- one cell record per (task, source) attempt: a `StaticCell` (static and
  execution checks, with the oracle and null-agent runs in `ExecutionSummary`), a
  `ModelCell` (one model's LLM protocol), or a `FailedCell` (the cell raised: a final
  failure with an attempt id, or an infrastructure error without one, retried on resume);
* ``findings.jsonl`` -- one `FindingRecord` per finding, tagged with its cell's attempt;
* derived files, rewritten on demand: ``summary.json`` (`summary.summarize_run`),
  ``report.md`` and ``report.html`` (`report.AuditReportData`), ``score.json`` and
  ``score.md`` (`score_report.ScoreReport`), ``review.csv`` (one `review.ReviewRow` per
  reported finding) and the judge's cache (``judge_cache/``);
* with ``--agent``, an agent-run directory (protocol ``audit-agent``, under
  ``agent_results/``) whose ``agent_runs.jsonl`` holds one `AgentRunRecord` per task.

`RunDir` adds ``created_at`` and ``layer`` and writes every record with sorted keys, so a model
dumped with `as_record` (only the fields that were set) writes byte-for-byte what the plain
dicts of earlier versions wrote. The models refuse unknown fields, so a renamed field is an
error where it is written and a type error where it is read; fields a record of an older
metaeval may lack have defaults. Nested values copied from elsewhere (token usage, the
dropped items of a malformed answer, an agent's effort counters) stay plain mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from metaeval.protocols.audit.findings import Finding
from metaeval.records.record_model import Number, RunRecord
from metaeval.records.run import FINAL_STATUSES

# record kinds (file stems under the run directory) and the fields that key a cell
CELLS = "audits"
FINDINGS = "findings"
CELL_KEY = ("task_id", "source")
STATIC_SOURCE = "static"  # the source name of the static and execution checks
AGENT_RUNS = "agent_runs"  # in the agent-run directory (protocol audit-agent)
AGENT_RUN_KEY = ("task_id",)

# derived files of the run directory
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
SCORE_FILE = "score.json"
SCORE_MD = "score.md"
REVIEW_FILE = "review.csv"
JUDGE_CACHE = "judge_cache"


class _Part(BaseModel):
    """A nested part of a record (no stamps of its own)."""

    model_config = ConfigDict(extra="forbid")


class _Cell(RunRecord):
    task_id: str
    source: str
    status: str  # ok | error
    infra_error: bool = False
    error: str | None = None

    @property
    def is_final(self) -> bool:
        """A final outcome (`records.run.is_final`): retried on resume when not."""
        return not self.infra_error and self.status in FINAL_STATUSES

    @property
    def findings_written(self) -> bool:
        """The cell ran to its end, so every finding of its attempt is recorded (a static cell
        whose execution checks could not run here is infra_error, yet its static findings
        stand until a rerun replaces them)."""
        return self.is_final or self.status == "ok"

    @property
    def failed_audit(self) -> bool:
        """A final audit failure: a malformed answer, or a cell that raised (not transient)."""
        return False

    @property
    def cut(self) -> list[str]:
        """What the auditors' view of the task left out (size caps)."""
        return []


class PhaseOutcome(_Part):
    """One execution-check run (oracle or null agent) as the cell records it; the full log
    is a blob."""

    ran: bool | None = None
    note: str = ""
    reward: Number | None = None
    reward_source: str | None = None
    reward_error: str | None = None
    passed: bool | None = None
    timed_out: bool = False
    env_notes: list[str] | None = None  # only when task.toml's env tables gave notes
    log_blob: str | None = None
    # per-test outcomes of the verifier (only when its output or reports name tests)
    tests_source: str | None = None  # "ctrf.json", "junit.xml", "pytest output"
    tests_passed: list[str] | None = None
    tests_failed: list[str] | None = None
    tests_note: str | None = None  # why no per-test outcomes were read


class ExecutionSummary(_Part):
    """What the execution checks did on a task (``{"skipped": "disabled"}`` when off)."""

    skipped: str | None = None
    backend: str | None = None
    approximate: bool = False
    stand_in: list[str] = Field(default_factory=list)
    mismatch: str | None = None
    build_log_blob: str | None = None
    image_id: str | None = None  # the image id both phases ran in (containers only)
    oracle: PhaseOutcome | None = None
    null_agent: PhaseOutcome | None = None
    # the oracle's tests rerun after the files it created were removed (issue 37)
    outputs_removed: PhaseOutcome | None = None
    removed_files: list[str] | None = None


class StaticCell(_Cell):
    """The static source's cell of a task: its checks, execution checks and what the
    auditors' view of the task left out."""

    attempt: str
    n_findings: int
    n_files: int | None = None
    execution: ExecutionSummary | None = None
    config_error: str | None = None
    skipped_files: list[str] = Field(default_factory=list)
    cuts: list[str] = Field(default_factory=list)
    check_errors: dict[str, str] | None = None  # only when a check failed on the task's input

    @property
    def cut(self) -> list[str]:
        return self.cuts


class ModelCell(_Cell):
    """One model's cell: the LLM protocol on a task (``audit_failure``: its answer stayed
    malformed, a final failure)."""

    attempt: str
    audit_failure: bool = False
    protocol: str | None = None
    call: dict[str, Any] | None = None  # its models-file settings (models_file.py)
    attempts: int = 1
    usage: dict[str, Any] = Field(default_factory=dict)
    cost_usd: Number | None = None
    prompt_tokens: int | None = None
    n_findings: int
    dropped: list[dict[str, Any]] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    cuts: list[str] = Field(default_factory=list)
    raw_outputs_blob: str | None = None
    model_calls_blob: str | None = None

    @property
    def failed_audit(self) -> bool:
        return self.audit_failure

    @property
    def cut(self) -> list[str]:
        return self.cuts

    @property
    def input_tokens(self) -> int:
        return int(self.usage.get("input_tokens", 0))

    @property
    def output_tokens(self) -> int:
        return int(self.usage.get("output_tokens", 0))


class FailedCell(_Cell):
    """A cell that raised: final (its own attempt id, ``audit_failure``) unless the cause
    was transient (an infrastructure error, no attempt, retried on resume)."""

    status: Literal["error"] = "error"
    attempt: str | None = None
    audit_failure: bool | None = None

    @property
    def failed_audit(self) -> bool:
        return bool(self.audit_failure)


CellRecord = StaticCell | ModelCell | FailedCell
Cells = dict[tuple[str, str], CellRecord]  # the latest cell record per (task_id, source)


def parse_cell(data: Mapping[str, Any]) -> CellRecord:
    """A written cell record as its model."""
    if "n_findings" not in data:
        return FailedCell.model_validate(data)
    if data.get("source") == STATIC_SOURCE:
        return StaticCell.model_validate(data)
    return ModelCell.model_validate(data)


def read_cells(latest: Mapping[tuple, Mapping[str, Any]]) -> Cells:
    """The latest cell records (`RunDir.latest_records(CELLS, CELL_KEY)`) as models."""
    return {(str(key[0]), str(key[1])): parse_cell(record) for key, record in latest.items()}


class FindingRecord(Finding):
    """A finding as ``findings.jsonl`` holds it: the cell's attempt and the run's stamps."""

    model_config = ConfigDict(extra="forbid")

    attempt: str | None = None
    created_at: str | None = None
    layer: str | None = None

    def as_record(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def finding(self) -> Finding:
        """The finding itself, without the record's attempt and stamps."""
        return Finding.model_validate(
            self.model_dump(exclude={"attempt", "created_at", "layer"}, exclude_unset=True)
        )


def finding_record(finding: Mapping[str, Any], attempt: str) -> dict[str, Any]:
    """The line of ``findings.jsonl`` of a finding (a dumped `Finding`) of cell `attempt`."""
    return FindingRecord.model_validate({**finding, "attempt": attempt}).as_record()


class VerifierRun(_Part):
    """The task's tests on the /app an agent left."""

    returncode: int | None = None
    timed_out: bool = False
    duration_s: Number | None = None


class AgentRunRecord(RunRecord):
    """One task of an agent-run: the agent's outcome and its tests' reward; the diff, the
    transcript and the tests' log are blobs. A task the agent did not run on (or that failed
    before it could) has only the first fields."""

    task_id: str
    agent: str
    attempt: str | None = None  # none on an infrastructure error (retried on resume)
    status: str
    classification: str
    infra_error: bool = False
    error: str | None = None
    stop_reason: str | None = None
    reward: Number | None = None
    reward_source: str | None = None
    reward_error: str | None = None
    passed: bool | None = None
    tests: VerifierRun | None = None
    time_limit_s: Number | None = None
    usage: dict[str, Any] | None = None
    cli_usage: dict[str, Any] | None = None
    cost_usd: Number | None = None
    steps: int | None = None
    wall_clock_s: Number | None = None
    files_produced: list[str] | None = None
    effort: dict[str, Any] | None = None
    model_calls: int | None = None
    diff_blob: str | None = None
    transcript_blob: str | None = None
    tests_log_blob: str | None = None
